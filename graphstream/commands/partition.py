"""graphstream partition STORE -k K [--algo A] ...: partition a graph store, print the metrics.

With ``--out`` the partitioned dataset is built too (graphstream.assemble); a
snapshot store (format "graphstream.snapshots") is handed whole to
graphstream.dynamic (``--algo pgc``).
"""
from __future__ import annotations

import functools
import importlib
from pathlib import Path

from .._report import log
from ..errors import GraphStreamError, ParameterError, StoreError, path_argument
from .flags import add_cluster, add_overwrite, cluster_config

SNAPSHOT_FORMAT = "graphstream.snapshots"


def SUMMARY(result: dict) -> tuple[str, ...] | None:  # noqa: N802 - the name graphstream.cli looks up
    """The figures a user chooses an algorithm by; settings, phases and per-part lists only with --verbose.

    A snapshot store's result (--algo pgc) has its own keys: every plain value is shown.
    """
    if "replication_factor" not in result:
        return None
    return ("algorithm", "k", "num_nodes", "num_edges", "replication_factor", "vertex_cut_rf", "node_balance",
            "edge_balance", "edge_load_balance", "seconds", "peak_rss_bytes", "out", "build_seconds")


def configure(p) -> None:
    from ..partition import ALGORITHMS, DEFAULT_ALGORITHM, MAX_PARTS
    p.description = ("Partition a graph store into K parts; print replication factor, "
                     "balance, time and memory.")
    p.add_argument("store", help="graph store (.zarr), or snapshot store (graphstream snapshots)")
    p.add_argument("-k", "--parts", dest="k", type=int, default=None,
                   help=f"number of parts, 1..{MAX_PARTS} (or leave it out and give --gpus and --gpu-memory)")
    p.add_argument("--algo", default=None,
                   help=f"graph stores: {', '.join(ALGORITHMS)} (default {DEFAULT_ALGORITHM}); snapshot stores: "
                        "pgc (default), snapshot or sequence (see docs/partitioners.md, docs/dynamic.md)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    p.add_argument("--balance", type=float, default=None,
                   help="largest part allowed, as a multiple of the mean part size (default 1.05): "
                        "coarse-refine's nodes, 2ps-l's edges, spring's cluster merge cap (beta, nodes), pgc's "
                        "workload (1 + spatial degree an instance); hdrf, dbh, hash and the snapshot and "
                        "sequence baselines balance by their own rules and refuse it")
    p.add_argument("--edge-balance", type=float, default=None, metavar="F",
                   help="coarse-refine only: also cap each part's edges (the sum of its nodes' degrees) at F "
                        "times the mean, F >= 1 (default: nodes only; on power-law graphs the nodes alone "
                        "leave a part with 5-13x the mean edges, which a trainer with a part a GPU waits on)")
    p.add_argument("--preset", choices=("default", "fast"), default=None,
                   help="coarse-refine only: fast takes about 0.7-0.9x the time for about 1%% more replicas "
                        "on average (fewer label-propagation sweeps, one coarse trial, fewer whole-cluster "
                        "passes; docs/partition-quality.md, \"The fast preset\"); options given beside it "
                        "override its settings (default: default)")
    p.add_argument("--tau", type=float, default=None,
                   help="spring only: cluster volume cap in edges (default 0.5 x edges / K)")
    p.add_argument("--passes", type=int, default=None,
                   help="2ps-l: streaming clustering passes (default 1); coarse-refine: refinement sweeps "
                        "under the balance cap after the METIS step: before the loose phase, or, where nearly "
                        "every node has a neighbour in another part (R-MAT), only when the loose phase run "
                        "first does not end with fewer replicas (default 2; stops early when a sweep moves "
                        "no node)")
    p.add_argument("--lambda", dest="lam", type=float, default=None,
                   help="hdrf only: weight of the balance term (default 10; the paper's 1 puts ordered "
                        "streams into one part)")
    p.add_argument("--hash-mode", dest="hash_mode", choices=("vertex", "edge"), default=None,
                   help="hash only: vertex (owner = hash(v), default) or edge (part = hash(u, v))")
    p.add_argument("--work-dir", default=None, metavar="DIR",
                   help="scratch folder: coarse-refine's vertex stream (2 x edges ids; 6 x while it is "
                        "sorted), and the part[e] file of the edge partitioners (2ps-l, hdrf, dbh, "
                        "hash --hash-mode edge), kept there "
                        "(default: a temporary folder, removed at the end); a vertex stream kept there from "
                        "the same store's data is reused, so a graph partitioned at several K is sorted once")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="also build the partitioned dataset (manifest.json + part-NNNNN/) in this new folder")
    p.add_argument("--nodes", default=None, metavar="NODE_DIR",
                   help="with --out: node data folder to split into the parts (features.npy, and any of "
                        "labels.npy and *_mask.npy)")
    p.add_argument("--halo-hops", type=int, default=1, metavar="H",
                   help="with --out: every node within H-1 hops of a part's inner nodes gets its complete "
                        "aggregation row in the part (default 1: the inner nodes only; 2 for a 2-layer model to "
                        "see the whole graph's neighbourhood; one more pass over the edges per extra hop)")
    add_overwrite(p, "an existing --out folder")
    p.add_argument("--gpus", type=int, default=None, metavar="Q",
                   help="with --gpu-memory and no -k: choose K so that each part fits in a third of one GPU's "
                        "memory (K >= Q; one hop of halo; coarse-refine then caps the parts' edges too)")
    p.add_argument("--gpu-memory", type=int, default=None, metavar="BYTES", help="memory of one GPU, in bytes")
    p.add_argument("--memory-budget", type=int, default=None, metavar="BYTES",
                   help="snapshot stores only: bytes of the per-instance arrays kept in memory; past it they are "
                        "memory-mapped files in --work-dir (default: a quarter of the memory this process may "
                        "still use, its cgroup's limit counted)")
    add_cluster(p)
    p.set_defaults(run=run)


def _is_snapshot_store(path: str) -> bool:
    if not Path(path).exists():
        return False
    try:
        import zarr
        group = zarr.open_group(path, mode="r")
    except Exception:
        return False
    return dict(group.attrs).get("format") == SNAPSHOT_FORMAT


def _import(module: str, what: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name):
            raise GraphStreamError(f"{what} is not available in this build (module {module} missing)") from exc
        raise


def _algo_params(args) -> dict:
    given = {"tau": args.tau, "passes": args.passes, "lam": args.lam, "mode": args.hash_mode,
             "edge_balance": args.edge_balance, "preset": args.preset}
    return {name: value for name, value in given.items() if value is not None}


SNAPSHOT_ALGORITHMS = ("pgc", "snapshot", "sequence")   # graphstream.dynamic.partition's; pgc the default
# (flag, attribute) of the options a snapshot store's partitioners do not take
GRAPH_STORE_FLAGS = (("--tau", "tau"), ("--passes", "passes"), ("--lambda", "lam"), ("--hash-mode", "hash_mode"),
                     ("--edge-balance", "edge_balance"), ("--preset", "preset"), ("--nodes", "nodes"),
                     ("--gpus", "gpus"), ("--gpu-memory", "gpu_memory"))


def preflight(args, pending: dict[str, str] | None = None) -> None:
    """What is refused before anything is opened (the service checks a job's arguments with it too): k's
    range and the algorithm's name for the store's kind; ``args.algo`` left None becomes that kind's
    default (pgc for a snapshot store, else coarse-refine). ``pending``: the kind ("snapshots" or
    other) of the stores an earlier step of a service pipeline will write, which are not there yet."""
    from ..partition import ALGORITHMS, DEFAULT_ALGORITHM, check_arguments, check_num_parts
    pending = pending or {}
    args.store = path_argument(args.store, "STORE")   # a file:/// URL is a local path here too
    if args.store in pending:   # what the earlier step writes there, whatever is there now
        snapshots = pending[args.store] == "snapshots"
    else:
        snapshots = _is_snapshot_store(args.store)
    if args.algo is None:
        args.algo = "pgc" if snapshots else DEFAULT_ALGORITHM
    if args.k is not None:
        check_num_parts(args.k)
    if args.k is not None and (args.gpus is not None or args.gpu_memory is not None):
        raise ParameterError("give -k K, or --gpus Q and --gpu-memory BYTES to derive it; not both")
    if snapshots:   # they were ignored without a word (a --halo-hops 2 dataset that is not one)
        graph_only = [flag for flag, name in GRAPH_STORE_FLAGS if getattr(args, name, None) is not None]
        graph_only += ["--halo-hops"] if getattr(args, "halo_hops", 1) != 1 else []
        if graph_only:
            raise ParameterError(f"{', '.join(graph_only)}: for graph stores only; a snapshot store is "
                                 "partitioned with -k, --algo, --seed, --balance, --memory-budget, --work-dir and "
                                 "--out (docs/dynamic.md)")
    if snapshots and args.algo in ("snapshot", "sequence") and args.balance is not None:
        raise ParameterError(f"--balance: --algo {args.algo} balances by its own rule and takes no --balance "
                             "(pgc does)")
    if snapshots and args.algo not in SNAPSHOT_ALGORITHMS:
        raise ParameterError(f"--algo {args.algo!r} does not apply to snapshot stores; "
                             f"use one of {', '.join(SNAPSHOT_ALGORITHMS)}")
    if not snapshots and getattr(args, "memory_budget", None) is not None:
        raise ParameterError("--memory-budget: for snapshot stores only (a graph store's partitioners keep "
                             "O(num_nodes) state; see graphstream estimate)")
    if not snapshots and args.algo in SNAPSHOT_ALGORITHMS:
        raise StoreError(f"{args.store}: --algo {args.algo} needs a snapshot store (graphstream snapshots)")
    if not snapshots and args.algo not in ALGORITHMS:
        raise ParameterError(f"unknown algorithm {args.algo!r}; choose one of {', '.join(ALGORITHMS)}")
    if not snapshots:   # the seed, the balance and the algorithm's parameters, before the store is opened
        _check_flags_apply(args)
        check_arguments(args.k, args.algo, args.seed, args.balance, _algo_params(args))


# (flag, the algorithms' parameter) of the flags that set one algorithm's parameter
ALGORITHM_FLAGS = (("--tau", "tau"), ("--passes", "passes"), ("--lambda", "lam"), ("--hash-mode", "mode"),
                   ("--edge-balance", "edge_balance"), ("--preset", "preset"))


def _check_flags_apply(args) -> None:
    """A flag of another algorithm is refused by its own name (it said "unknown parameter(s) ['lam']", or
    named parameters that have no flag), with the flags the algorithm does take."""
    from ..partition import PARAMS
    from ..partition.coarse_refine import CoarseRefineParams

    if args.algo == "coarse-refine":
        takes = {"passes", "preset", *CoarseRefineParams.__dataclass_fields__}
    else:
        takes = set(PARAMS[args.algo])
    given = _algo_params(args)
    for flag, name in ALGORITHM_FLAGS:
        if name in given and name not in takes:
            its = [f for f, n in ALGORITHM_FLAGS if n in takes]
            raise ParameterError(f"{flag} does not apply to --algo {args.algo} (its own flags: "
                                 f"{', '.join(its) or 'none'}; docs/partitioners.md)")
        if name in given and name in PARAMS.get(args.algo, {}) and not PARAMS[args.algo][name].check(given[name]):
            raise ParameterError(f"{flag} {given[name]}: expected {PARAMS[args.algo][name].expect} "
                                 f"(--algo {args.algo})")
    if args.algo == "coarse-refine":   # its ranges, said by the flag's name
        from ..partition.coarse_refine import PARAM_RANGES
        for flag, name, param in (("--edge-balance", "edge_balance", "edge_balance"),
                                  ("--passes", "passes", "refine_passes")):
            ok, expect = PARAM_RANGES[param]
            if name in given and not ok(given[name]):
                raise ParameterError(f"{flag} {given[name]}: expected {expect} (--algo coarse-refine)")


def run(args) -> dict:
    from .._atomic import claim_outputs
    from ..cluster import cluster_report, open_client

    preflight(args)

    cluster = cluster_config(args, "store", "out", "nodes", "work_dir")
    # Before anything is touched: --out apart from every input (--overwrite must not delete them),
    # locked for the whole run, leftovers of killed runs cleared, refused if it exists; --work-dir
    # (written into: the vertex stream, part[e]) neither in an input nor overlapping --out.
    inputs = {"input store": args.store, "--nodes folder": args.nodes}
    with claim_outputs({"--out": args.out}, inputs, args.overwrite, {"--work-dir": args.work_dir}), \
            open_client(cluster) as client:
        result = _run(args, client)
        result.update(cluster_report(cluster, client))
    return result


def _scratch_parent(args, client) -> str | None:
    """Where the run's scratch folder goes: the system's temporary folder in-process; on a cluster
    --work-dir, else a folder every worker sees beside --out (or the store) when it is writable
    (:func:`~graphstream.cluster.shared_scratch_parent`)."""
    if client is None:
        return None
    if args.work_dir is not None and "://" not in str(args.work_dir):
        from .._atomic import prepare_work_dir
        prepare_work_dir(args.work_dir, "--work-dir")   # its parent exists: claim_outputs checked it
        return str(args.work_dir)
    from ..cluster import shared_scratch_parent
    return shared_scratch_parent(args.out if args.out is not None else args.store)


def _run(args, client) -> dict:
    from .. import _resources
    from .._atomic import scratch_dir
    from ..partition import partition
    from ..store import open_store

    if args.algo in SNAPSHOT_ALGORITHMS:   # preflight matched the algorithm to the store's kind
        return _snapshot_store(args, client)
    store = open_store(args.store)
    _resources.check_node_state_fits(store.num_nodes, _resources.PARTITION_BYTES_PER_NODE, "partition", args.store)
    if args.nodes is not None:
        if args.out is None:
            raise ParameterError(f"--nodes {args.nodes}: node data is split into parts only with --out DIR")
        from ..store.nodedata import open_node_data
        # before partitioning: bad headers, and damaged bytes where node_data.json records checksums (the
        # builder then takes the checked folder as it is)
        args.nodes = open_node_data(args.nodes, store.num_nodes, checksums=True)
        if client is not None:   # the build's tasks read it: a worker that cannot see it fails now, not then
            from ..cluster import check_visible
            check_visible(client, args.nodes.path)
    if args.halo_hops < 1:   # before the partitioning's time
        raise ParameterError(f"--halo-hops {args.halo_hops}: expected a whole number >= 1")
    if args.halo_hops != 1 and args.out is None:
        raise ParameterError(f"--halo-hops {args.halo_hops} shapes the dataset that --out DIR builds; "
                             "give --out DIR, or leave --halo-hops out")
    k = args.k
    params = _algo_params(args)
    gpu_fit = None
    if k is None:
        if args.gpus is None or args.gpu_memory is None:
            raise ParameterError("give -k K, or --gpus Q and --gpu-memory BYTES to derive it")
        if args.halo_hops != 1:   # the bound is of one-hop parts: deeper halos are not bounded before the cut
            raise ParameterError(f"--gpus/--gpu-memory choose K from a bound on parts with one hop of halo; with "
                                 f"--halo-hops {args.halo_hops} give -k K")
        from ..partition import DEFAULT_BALANCE
        sizing = _import("graphstream.assemble.sizing", "choosing k from --gpus/--gpu-memory")
        balance = DEFAULT_BALANCE if args.balance is None else args.balance
        k = int(sizing.auto_num_parts(store, args.nodes, gpus=args.gpus, gpu_memory=args.gpu_memory,
                                      balance=balance))
        if args.algo == "coarse-refine" and "edge_balance" not in params:
            # the bound counts on the parts' entries within the balance: coarse-refine caps them when asked
            params["edge_balance"] = balance
        gpu_fit = (sizing.data_size(store, args.nodes), sizing.gpu_share(args.gpu_memory))
    # part[e] of an edge partitioner is scratch unless --work-dir asks to keep it; the folder names
    # its pid, so one left by a killed run is removed by the next (scratch_dir)
    with scratch_dir("graphstream-parts-", _scratch_parent(args, client)) as tmp:
        cut = functools.partial(partition, store, algo=args.algo, seed=args.seed, balance=args.balance,
                                work_dir=args.work_dir if args.work_dir is not None else tmp, client=client,
                                **params)
        plan = cut(k)
        for _ in range(GPU_FIT_TRIES if gpu_fit is not None else 0):
            # the bound holds for parts within the balance on entries, which hash, hdrf and dbh do not keep:
            # the plan's own counts bound its parts (before the build), and k grows until they fit
            size, share = gpu_fit
            largest = sizing.largest_planned_part_bytes(size, plan.metrics)
            if largest <= share:
                break
            k = min(store.num_nodes, max(k + 1, -(-k * largest // share)))
            log(f"partition: the parts of k = {plan.num_parts} need up to {largest} bytes on a GPU, more than its "
                f"{share}; partitioning again with k = {k}")
            plan = cut(k)
        result = dict(plan.metrics)
        result["params"] = plan.params
        if plan.edge_parts_path is not None and args.work_dir is not None:
            result["edge_parts_path"] = plan.edge_parts_path
        if args.out is not None:
            build = _import("graphstream.assemble", "building partitions (--out)")
            manifest = build.build_partitions(store, plan, args.out, nodes=args.nodes, overwrite=args.overwrite,
                                              halo_hops=args.halo_hops, client=client)
            if isinstance(manifest, dict):
                result.update(manifest.get("metrics", {}))
                if gpu_fit is not None:
                    _check_gpu_fit(result, manifest, *gpu_fit)
            result["out"] = str(args.out)
    return result


GPU_FIT_TRIES = 6   # partitionings at most, k growing, until the plan's parts fit the GPU share


def _check_gpu_fit(result: dict, manifest: dict, size, share: int) -> None:
    """The built parts against the GPU share they were sized for: the bound holds for parts within the
    balance on entries too, which a partition can miss; a part above the share is said, not hidden."""
    from .._report import warn
    from ..assemble.sizing import largest_part_bytes
    index, largest = largest_part_bytes(size, manifest["parts"])
    result["gpu_share_bytes"] = share
    result["largest_part_bytes"] = largest
    if largest > share:
        warn(f"part {index} needs {largest} bytes on a GPU, more than the {share} bytes each GPU keeps for data: "
             f"give -k above {len(manifest['parts'])} instead of --gpus")


def _snapshot_store(args, client) -> dict:
    """A snapshot store goes whole to graphstream.dynamic; on a cluster, its entry takes the client
    when it has a ``client`` parameter, else it runs as one task on one worker (without --out: an
    --out folder is locked by this process for the whole run, so it is then written here)."""
    import inspect

    from ..cluster import run_task
    from ..partition import DEFAULT_BALANCE

    dyn = _import("graphstream.dynamic.partition", "partitioning snapshot stores")
    balance = DEFAULT_BALANCE if args.balance is None else args.balance
    config = dyn.PGCConfig(num_parts=args.k, seed=args.seed, balance=balance, scratch_dir=args.work_dir,
                           memory_budget=args.memory_budget)
    kwargs = {"algo": args.algo, "out": args.out, "overwrite": args.overwrite}
    if client is not None and "client" in inspect.signature(dyn.partition_snapshot_store).parameters:
        kwargs["client"] = client
    elif client is not None and args.out is None:
        return run_task(client, f"{args.algo}: partition (one worker)", dyn.partition_snapshot_store,
                        str(Path(args.store).resolve()) if "://" not in args.store else args.store, config,
                        **kwargs)
    return dyn.partition_snapshot_store(args.store, config, **kwargs)
