"""graphstream partition STORE -k K [--algo A] ...: partition a graph store, print the metrics.

With ``--out`` the partitioned dataset is built too (graphstream.assemble); a
snapshot store (format "graphstream.snapshots") is handed whole to
graphstream.dynamic (``--algo pgc``).
"""
from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import GraphStreamError, ParameterError, StoreError
from .flags import add_overwrite

SNAPSHOT_FORMAT = "graphstream.snapshots"


def configure(p) -> None:
    from ..partition import ALGORITHMS, DEFAULT_ALGORITHM, MAX_PARTS
    p.description = ("Partition a graph store into K parts; print replication factor, "
                     "balance, time and memory.")
    p.add_argument("store", help="graph store (.zarr) or snapshot store")
    p.add_argument("-k", "--parts", dest="k", type=int, default=None,
                   help=f"number of parts, 1..{MAX_PARTS} (or derive it from --gpus/--gpu-memory)")
    p.add_argument("--algo", default=DEFAULT_ALGORITHM,
                   help=f"algorithm: {', '.join(ALGORITHMS)}, or pgc for snapshot stores "
                        f"(default {DEFAULT_ALGORITHM})")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    p.add_argument("--balance", type=float, default=1.05, help="capacity over the mean part size (1.05)")
    p.add_argument("--tau", type=float, default=None, help="SPRING: cluster volume cap (edges)")
    p.add_argument("--passes", type=int, default=None,
                   help="2PS-L: streaming clustering passes (1); coarse-refine: its passes")
    p.add_argument("--lambda", dest="lam", type=float, default=None,
                   help="HDRF: balance weight (default 10; the paper's 1 collapses on ordered streams)")
    p.add_argument("--hash-mode", dest="hash_mode", choices=("vertex", "edge"), default=None,
                   help="hash: vertex (owner = hash(v), default) or edge (part = hash(u, v))")
    p.add_argument("--work-dir", default=None, help="where edge partitioners write part[e] (temp folder)")
    p.add_argument("--out", default=None, help="also build the partitioned dataset in this folder")
    p.add_argument("--nodes", default=None, help="node data folder (features.npy, labels.npy, masks)")
    add_overwrite(p, "an existing --out folder")
    p.add_argument("--gpus", type=int, default=None, help="with --gpu-memory and no -k: choose K to fit")
    p.add_argument("--gpu-memory", type=int, default=None, help="bytes of memory per GPU")
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
    given = {"tau": args.tau, "passes": args.passes, "lam": args.lam, "mode": args.hash_mode}
    return {name: value for name, value in given.items() if value is not None}


def run(args) -> dict:
    from .._atomic import claim_outputs

    # Before anything is touched: --out apart from every input (--overwrite must not delete them),
    # locked for the whole run, leftovers of killed runs cleared, refused if it exists.
    inputs = {"input store": args.store, "--nodes folder": args.nodes, "--work-dir": args.work_dir}
    with claim_outputs({"--out": args.out}, inputs, args.overwrite):
        return _run(args)


def _run(args) -> dict:
    from .. import _resources
    from .._atomic import scratch_dir
    from ..partition import partition
    from ..store import open_store

    if _is_snapshot_store(args.store):
        dyn = _import("graphstream.dynamic.partition", "partitioning snapshot stores")
        config = dyn.PGCConfig(num_parts=args.k, seed=args.seed, balance=args.balance, scratch_dir=args.work_dir)
        return dyn.partition_snapshot_store(args.store, config, algo=args.algo, out=args.out,
                                            overwrite=args.overwrite)
    if args.algo == "pgc":
        raise StoreError(f"{args.store}: --algo pgc needs a snapshot store (graphstream snapshots)")
    store = open_store(args.store)
    _resources.check_node_state_fits(store.num_nodes, _resources.PARTITION_BYTES_PER_NODE, "partition", args.store)
    if args.nodes is not None:
        if args.out is None:
            raise ParameterError(f"--nodes {args.nodes}: node data is split into parts only with --out DIR")
        from ..store.nodedata import open_node_data
        open_node_data(args.nodes, store.num_nodes)  # headers only: bad node data fails before partitioning
    k = args.k
    if k is None:
        if args.gpus is None or args.gpu_memory is None:
            raise ParameterError("give -k K, or --gpus Q and --gpu-memory BYTES to derive it")
        build = _import("graphstream.assemble", "choosing k from --gpus/--gpu-memory")
        k = int(build.auto_num_parts(store, args.nodes, gpus=args.gpus, gpu_memory=args.gpu_memory))
    # part[e] of an edge partitioner is scratch unless --work-dir asks to keep it; the folder names
    # its pid, so one left by a killed run is removed by the next (scratch_dir)
    with scratch_dir("graphstream-parts-") as tmp:
        work_dir = args.work_dir if args.work_dir is not None else tmp
        plan = partition(store, k, args.algo, seed=args.seed, balance=args.balance, work_dir=work_dir,
                         **_algo_params(args))
        result = dict(plan.metrics)
        result["params"] = plan.params
        if plan.edge_parts_path is not None and args.work_dir is not None:
            result["edge_parts_path"] = plan.edge_parts_path
        if args.out is not None:
            build = _import("graphstream.assemble", "building partitions (--out)")
            manifest = build.build_partitions(store, plan, args.out, nodes=args.nodes, overwrite=args.overwrite)
            if isinstance(manifest, dict):
                result.update(manifest.get("metrics", {}))
            result["out"] = str(args.out)
    return result
