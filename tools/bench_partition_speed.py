"""Throughput and peak memory of the streaming partitioners on an R-MAT graph (one JSON object).

    flock /tmp/graphstream-bench.lock .venv/bin/python tools/bench_partition_speed.py \
        [--scale 22] [--edge-factor 16] [-k 32] [--algos spring,2ps-l,hdrf,dbh,hash,hash-edge] \
        [--no-metrics] [--twops-bin /tmp/2ps/src/build/twophasepartitioner] [--ref-scale 21]

Each algorithm runs in a fresh subprocess (so its peak RSS is its own; the
children run with MALLOC_ARENA_MAX=1 unless --malloc-arenas is given): the
kernels are first compiled on a tiny graph, then the timed run partitions the
R-MAT store. Reported per algorithm: edges/s of its main per-edge pass
(pass level), edges/s end to end (the algorithm with its degree and owner
passes; the quality-metric passes are timed apart, or skipped with
--no-metrics), seconds of each phase, and peak RSS against the documented
model of the partition's process (``graphstream.estimate.partition_peak_bytes``,
docs/estimate.md; hash-edge has none). The baseline measured in the same run is one
plain streaming pass over the store (the degree pass): the I/O +
decompression ceiling every pass shares.

--compare: coarse-refine (the default partitioner) against KaMinPar (PyPI
``kaminpar``, in memory, default context, 2 threads) and METIS (pymetis, in
memory, k-way, ufactor 50) side by side on R-MAT and the shared graphs, each
run in a fresh subprocess; the in-memory solvers' time counts the partitioner
call, their graph loading (stream, dedup, CSR) is reported apart, and all
three are judged by the same metrics pass (GNN replication factor, node
balance) and their memory: ``peak_rss_bytes`` is the child's own peak,
``peak_tree_rss_bytes`` the sampled peak of the RSS of the child and the
processes it starts (coarse-refine's trial children) summed; the plain streaming pass over the graph's store
(``baseline_stream_pass``, as above) is timed once a graph before them: the
machine's own speed in that run. coarse-refine's time is its phases; its
kernels are first loaded from numba's cache by a run on a scale-10 R-MAT
graph (``warmup_seconds``, apart), as the solvers' libraries are loaded by
their import before their clock starts (figures before 2026-11-28 counted
that loading, 0.9-2.0 s):

    .venv/bin/python tools/bench_partition_speed.py --compare \
        [--graphs rmat20,rmat21,web-NotreDame,facebook] [--ks 8,32] \
        [--solvers coarse-refine,coarse-refine+metis,coarse-refine+kaminpar,coarse-refine+both,kaminpar,metis] \
        [--repeat N]

A solver ``coarse-refine:edge-balance=F`` runs coarse-refine with that edge
balance (its parts' edges capped too), ``coarse-refine:preset=fast`` its
fast preset, ``coarse-refine:lp_passes=3`` a parameter of
``CoarseRefineParams`` set, ``coarse-refine:kept-stream`` with its vertex stream kept from
an earlier run in a work folder beside the CSR cache (``--work-dir``'s reuse:
the like of KaMinPar's graph file made beforehand; the timed run still reads
and checksums the kept files), and ``spring`` the streaming
partitioner whose parts are balanced on edges as well: every row reports the
``edge_balance`` of the shared metrics pass.

Reference: when the authors' 2PS-L binary exists, our 2ps-l (fresh
subprocess, no metrics) and the reference run on the same R-MAT graph
(--ref-scale, the stream as stored; the text edge list for the reference is
written once next to it) and their edges/s are compared; else the entry is
null with the reason.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAIN_PHASE = {"spring": "clustering", "2ps-l": "partitioning", "hdrf": "partitioning",
              "dbh": "partitioning", "hash-edge": "partitioning", "hash": "owner"}
GOALS = {"spring": 20e6, "hdrf": 3e6, "dbh": 30e6, "hash-edge": 30e6}


def child(algo: str, store_path: str, k: int, work: str, metrics: bool = True) -> None:
    """Runs in the subprocess: warm up the kernels, then one timed, measured run."""
    import numpy as np

    from graphstream._resources import peak_rss_bytes
    from graphstream.partition import partition
    from graphstream.store import GraphWriter
    name, params = (("hash", {"mode": "edge"}) if algo == "hash-edge" else (algo, {}))
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        rng = np.random.default_rng(0)
        with GraphWriter(Path(tmp) / "warm.zarr", num_nodes=200, directed=False, chunk_size=256) as w:
            w.append(rng.integers(0, 200, 1000), rng.integers(0, 200, 1000))
        partition(str(Path(tmp) / "warm.zarr"), 4, name, work_dir=Path(tmp) / "w0", **params)
        rss_before = peak_rss_bytes()
        reset_peak_rss()   # the timed run's peak, not the warm-up's (which compiles after a change)
        t = time.perf_counter()
        cpu = time.process_time()
        plan = partition(store_path, k, name, work_dir=Path(tmp) / "w1", metrics=metrics, **params)
        seconds = time.perf_counter() - t
        cpu = time.process_time() - cpu
    m = plan.metrics
    print(json.dumps({
        "seconds_with_metrics": seconds, "cpu_seconds_with_metrics": cpu, "seconds": m["seconds"],
        "phase_seconds": m.get("phase_seconds", {}),
        "metrics_seconds": m.get("metrics_seconds"),
        "passes": m.get("passes"), "peak_rss_bytes": m["peak_rss_bytes"], "rss_after_warmup": rss_before,
        "replication_factor": m.get("replication_factor"), "vertex_cut_rf": m.get("vertex_cut_rf"),
        "node_balance": m.get("node_balance"), "edge_balance": m.get("edge_balance"),
    }))


def simple_csr(store):
    """The store's undirected simple graph (no self-loops, no duplicates) as CSR (xadj, adjncy), in memory.

    Both orientations of every edge as one key ``u * n + v`` each, sorted in place, deduplicated, the
    rows found by binary search and the keys turned into columns in place: about two arrays of 16 bytes
    an edge at the peak (R-MAT s23: about 4.3 GB; np.unique's sorted copy and the temporaries of the
    key arithmetic and bincount came on top of that before)."""
    import numpy as np
    n, m = store.num_nodes, store.num_edges
    keys = np.empty(2 * m, dtype=np.int64)
    at = 0
    for b in store.stream():
        u, v = b.src.astype(np.int64), b.dst.astype(np.int64)
        np.multiply(u, n, out=keys[at:at + len(u)])
        keys[at:at + len(u)] += v
        np.multiply(v, n, out=keys[m + at:m + at + len(u)])
        keys[m + at:m + at + len(u)] += u
        at += len(u)
    keys.sort()
    keep = np.empty(len(keys), dtype=bool)
    keep[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    keep &= keys // n != keys % n   # self-loops out
    keys = keys[keep]
    del keep
    xadj = np.searchsorted(keys, np.arange(n + 1, dtype=np.int64) * n).astype(np.int64)
    np.remainder(keys, n, out=keys)
    return xadj, keys


# coarse-refine's coarse solvers: "+metis" METIS at every k (the default before 2026-11-27, when KaMinPar
# became the solver from k = 16); "+kaminpar" KaMinPar at every k; "+both" a KaMinPar trial beside METIS's
COARSE_SOLVER_VARIANTS = {"": {}, "+metis": {"coarse_solver": "metis"}, "+kaminpar": {"coarse_solver": "kaminpar"},
                          "+both": {"coarse_solver": "metis+kaminpar", "coarse_trials": 4}}


def child_compare(solver: str, store_path: str, k: int, work: str) -> None:
    """Runs in the subprocess of --compare: one partitioner on one graph, judged by the shared metrics pass."""
    import numpy as np

    from graphstream._resources import peak_rss_bytes
    from graphstream.partition.metrics import vertex_partition_metrics
    from graphstream.store import open_store
    store = open_store(store_path)
    out: dict = {}
    with TreePeak() as tree:
        owner = _solve(solver, store, k, work, out, tree)
        out["peak_rss_bytes"] = peak_rss_bytes()
    # a sample can miss the process's own peak, which its VmHWM holds exactly (when it was reset after
    # the warm-up: else it holds the warm-up's)
    out["peak_tree_rss_bytes"] = max(tree.peak, out["peak_rss_bytes"] if out.get("peak_rss_reset", True) else 0)
    m = vertex_partition_metrics(store, owner, k)
    out["replication_factor"] = m["replication_factor"]
    out["edge_balance"] = m["edge_balance"]
    out["node_balance"] = float(np.bincount(owner, minlength=k).max() / (store.num_nodes / k))
    print(json.dumps(out))


def _solve(solver: str, store, k: int, work: str, out: dict, tree: TreePeak):
    """One solver's owner (its figures into ``out``)."""
    import numpy as np
    if solver.startswith("coarse-refine"):
        from graphstream.partition import coarse_refine
        # "coarse-refine:edge-balance=1.1", "coarse-refine:preset=fast", a parameter ("lp_passes=3"), ":"-separated
        solver, *options = solver.split(":")
        params = dict(COARSE_SOLVER_VARIANTS[solver.removeprefix("coarse-refine")])
        kept_stream = False
        for option in options:
            name, _, value = option.partition("=")
            if name == "edge-balance":
                params["edge_balance"] = float(value)
            elif name == "preset":
                params["preset"] = value
            elif name == "kept-stream":
                kept_stream = True
            elif name in coarse_refine.CoarseRefineParams.__dataclass_fields__ and value:
                try:   # "coarse-refine:lp_passes=3:coarse_trials=1"
                    params[name] = json.loads(value)
                except json.JSONDecodeError:   # a word: "coarse-refine:refine_order=tight-first"
                    params[name] = value
            else:
                raise SystemExit(f"bench_partition_speed: unknown coarse-refine option {option!r}")
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            # timed apart: the in-memory solvers' libraries are loaded by their import, before their clock starts
            out["warmup_seconds"] = load_coarse_refine_kernels(Path(tmp), k, params)
            run_dir = tmp
            if kept_stream:   # the vertex stream of an earlier run kept, as KaMinPar's graph file is
                run_dir = _kept_stream_folder(store, Path(work), params, out)
            out["peak_rss_reset"] = reset_peak_rss()
            tree.reset()
            plan = coarse_refine.run(store, k, seed=0, work_dir=run_dir, **params)
        out["vertex_stream_reused"] = plan.metrics["vertex_stream_reused"]
        owner = plan.owner
        out["seconds"] = sum(plan.metrics["phase_seconds"].values())   # its phases; not its closing metrics pass
        out["phase_seconds"] = plan.metrics["phase_seconds"]
        out["num_clusters"] = plan.metrics["num_clusters"]
        out["coarse_edges_dropped_weight"] = plan.metrics["coarse_edges_dropped_weight"]
        out["replication_factor_before_refine"] = plan.metrics["replication_factor_before_refine"]
        out["preset"] = plan.params["preset"]
        out["coarse_trials"] = len(plan.metrics["coarse_trials"])
    elif solver == "spring":   # the streaming partitioner that balances edges too, for --edge-balance rows
        from graphstream.partition import partition
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            t = time.perf_counter()
            owner = partition(store, k, algo="spring", work_dir=tmp, metrics=False).owner
            out["seconds"] = time.perf_counter() - t
    else:
        t = time.perf_counter()
        cache = _csr_cache(store, Path(work))
        parhip = cache / "g.parhip"
        if solver == "kaminpar" and parhip.exists():
            cached = True   # KaMinPar's own file: no CSR of ours in this process, so its peak RSS is KaMinPar's
        else:
            xadj, adj, cached = _cached_csr(store, cache)
        out["load_seconds"] = time.perf_counter() - t
        out["csr_read_from_cache"] = cached   # load_seconds then times the read, not the CSR's making
        if solver == "metis":
            import pymetis
            t = time.perf_counter()
            _, parts = pymetis.part_graph(k, adjacency=pymetis.CSRAdjacency(xadj, adj),
                                          options=pymetis.Options(ufactor=50, seed=0))
            out["seconds"] = time.perf_counter() - t
            owner = np.asarray(parts, dtype=np.int32)
        else:
            import importlib.metadata

            from graphstream.partition import kaminpar_solver
            if not parhip.exists():
                tmp = parhip.with_name(f"g.{os.getpid()}.tmp")
                kaminpar_solver.write_parhip(tmp, xadj, adj)
                os.replace(tmp, parhip)
                del xadj, adj
            t = time.perf_counter()
            owner = kaminpar_solver.partition(parhip, k, 1.05, 0, threads=os.cpu_count() or 1)
            out["seconds"] = time.perf_counter() - t   # its loading of the ParHiP file included
            out["version"] = importlib.metadata.version("kaminpar")
            out["threads"] = os.cpu_count()
    return owner


def _kept_stream_folder(store, work: Path, params: dict, out: dict) -> Path:
    """A work folder beside the graph's CSR cache holding its vertex stream, kept between runs (built here,
    untimed, when missing: ``out["kept_stream_made_seconds"]``), for ``coarse-refine:kept-stream``."""
    from graphstream.partition.vertex_stream import build_vertex_stream
    folder = _csr_cache(store, work) / "coarse-refine-work"
    t = time.perf_counter()
    vs = build_vertex_stream(store, folder / "vertex_stream", keep=True,
                             hubs_first=params.get("node_order", "hubs-first") == "hubs-first")
    if not vs.reused:
        out["kept_stream_made_seconds"] = time.perf_counter() - t
    del vs
    return folder


def load_coarse_refine_kernels(folder: Path, k: int, params: dict) -> float:
    """Seconds of a coarse-refine run (``k``, ``params``) on R-MAT scale 10 (its store in ``folder``, made when
    missing): the kernels, whose compiled variants depend on k and the parameters (the counters' width), loaded
    from numba's cache, or compiled, before a timed run."""
    t = time.perf_counter()
    from graphstream.partition import coarse_refine
    from graphstream.store import open_store
    store = open_store(ensure_store(folder, 10, 16))
    coarse_refine.run(store, k, seed=0, **params)
    # and the paths a large graph takes that this one does not: the vertex stream's spill files (more
    # entries than a bucket) and the coarse graph's bound (without this run their kernels were compiled
    # in the first timed run after a change: R-MAT s21, k = 8, 13.4 s and 644 MiB against 11.7 s and 444)
    coarse_refine.run(store, k, seed=0, **{"bucket_entries": 1 << 12, "max_coarse_edges": 1 << 6, **params})
    return time.perf_counter() - t


def _csr_cache(store, work: Path) -> Path:
    """The folder (created) where the in-memory solvers' inputs for ``store`` are kept between the runs
    of a ``--repeat``: the simple CSR as ``.npy`` and KaMinPar's ParHiP file (compare() removes it)."""
    cache = work / "csr-cache" / f"{Path(store.path).name}-{store.num_nodes}-{store.num_edges}"
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def _cached_csr(store, cache: Path):
    """The simple CSR of ``store`` and whether it was read back: built once (``simple_csr``, minutes
    at scale 21), then read from ``cache``."""
    import numpy as np
    try:
        return np.load(cache / "xadj.npy"), np.load(cache / "adj.npy"), True
    except OSError:
        pass
    xadj, adj = simple_csr(store)
    for name, a in (("xadj", xadj), ("adj", adj)):   # each whole or absent: a killed run leaves no half file
        tmp = cache / f"{name}.{os.getpid()}.tmp.npy"
        np.save(tmp, a)
        os.replace(tmp, cache / f"{name}.npy")
    return xadj, adj, False


def compare(args, work: Path) -> dict:
    """--compare: every solver on every graph and k, each in a fresh subprocess; with ``--repeat N``,
    the solvers alternate N times (the first solver of a round moving one place each time) and each
    row gives the median seconds, every run's seconds, replication factor, peak RSS and peak memory of
    the run's processes together (``peak_tree_rss_bytes``: :class:`TreePeak`), and the ratio
    of every solver's median to coarse-refine's; its other figures are its last run's. The in-memory
    solvers' CSR (and KaMinPar's ParHiP file) is made once a graph: ``load_seconds`` is that of the
    solver's run that made it, if one did, and the later KaMinPar runs hold no CSR of ours, so their
    peak RSS is KaMinPar's own (the first one's also counts the making of the CSR in Python)."""
    import shutil
    import statistics

    from graphstream.store import open_store
    shutil.rmtree(work / "csr-cache", ignore_errors=True)   # a killed run's: its store may have been made again
    shared = None
    result = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "cpu_count": os.cpu_count(),
              "load_average_before": os.getloadavg(), "graphs": {}}
    env = {**os.environ, "MALLOC_ARENA_MAX": "1", "GRAPHSTREAM_PROGRESS": "0"}
    warm_store = ensure_store(work, 10, 16)   # where a throwaway process compiles coarse-refine's kernels
    for name in args.graphs.split(","):
        if name.startswith("rmat"):
            path = ensure_store(work, int(name[4:]), 16)
        else:
            shared = shared or _shared_graphs(work, args.datasets)
            path = shared[name].path
        store = open_store(path)
        # the machine's speed in the same run: the same VM kind has run every solver 1.6-3x faster or slower
        # from one hour to the next, so a figure compared across runs needs this yardstick beside it
        g = result["graphs"][name] = {"path": str(path), "num_nodes": store.num_nodes, "num_edges": store.num_edges,
                                      "baseline_stream_pass": baseline_pass(str(path))}
        for k in (int(x) for x in args.ks.split(",")):
            row = g[f"k={k}"] = {}
            solvers = args.solvers.split(",")
            runs: dict[str, list[dict]] = {s: [] for s in solvers}
            # kernels compiled after a change stay in the process that compiled them (LLVM's memory: R-MAT
            # s21, k = 8, a peak of 681 MiB against 434-442 MiB), so a throwaway process compiles them first
            for solver in solvers:
                if solver.startswith("coarse-refine"):
                    subprocess.run([sys.executable, __file__, "--compare-child", solver, warm_store, str(k),
                                    str(work)], capture_output=True, env=env)
            for rep in range(args.repeat):
                for solver in solvers[rep % len(solvers):] + solvers[:rep % len(solvers)]:
                    cmd = [sys.executable, __file__, "--compare-child", solver, str(path), str(k), str(work)]
                    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    r = (json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0
                         else {"error": proc.stderr.strip().splitlines()[-3:]})
                    runs[solver].append(r)
                    print(name, k, solver, json.dumps(r), file=sys.stderr, flush=True)
            for solver, rs in runs.items():
                ok = [r for r in rs if "error" not in r]
                row[solver] = dict(ok[-1] if ok else rs[0])
                if args.repeat > 1 and ok:
                    row[solver].update({"runs": len(ok), "seconds": statistics.median(r["seconds"] for r in ok),
                                        "seconds_each": [round(r["seconds"], 2) for r in ok],
                                        "replication_factor_each": [r["replication_factor"] for r in ok],
                                        "peak_rss_bytes_each": [r["peak_rss_bytes"] for r in ok],
                                        "peak_tree_rss_bytes_each": [r["peak_tree_rss_bytes"] for r in ok]})
                    made = [r for r in ok if r.get("csr_read_from_cache") is False]
                    if made:   # the run that made the CSR (another solver's may have, when both need it)
                        row[solver].update(load_seconds=made[0]["load_seconds"], csr_read_from_cache=False)
            base = row.get("coarse-refine", {}).get("seconds")
            for r in row.values():
                if base and "seconds" in r:
                    r["seconds_vs_coarse_refine"] = r["seconds"] / base
            if "metis" in row and "replication_factor" in row["metis"]:
                for r in row.values():
                    if "replication_factor" in r:
                        r["rf_vs_metis"] = r["replication_factor"] / row["metis"]["replication_factor"] - 1
    result["load_average_after"] = os.getloadavg()
    shutil.rmtree(work / "csr-cache", ignore_errors=True)
    return result


def _rss_bytes(pid: int) -> int:
    """The resident set size of one process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (Linux /proc; ``pid`` alone elsewhere)."""
    tree, i = [pid], 0
    while i < len(tree):
        try:
            for task in os.listdir(f"/proc/{tree[i]}/task"):
                with open(f"/proc/{tree[i]}/task/{task}/children", encoding="ascii") as f:
                    tree += [int(c) for c in f.read().split()]
        except OSError:
            pass
        i += 1
    return tree


class TreePeak:
    """The peak, sampled every ``interval`` s in a thread while the block runs, of the resident set sizes
    summed over this process and every process below it, in bytes (0 where there is no /proc).

    coarse-refine's trial children solve the coarse graph beside the partition: its own peak RSS
    leaves them out, this does not. Pages shared between the processes (the interpreter's, numpy's)
    count once a process, so the sum is an upper bound of the memory they held together.
    :meth:`reset` starts the peak again (after a warm-up).
    """

    def __init__(self, interval: float = 0.02):
        import threading
        self.peak = 0
        self._interval = interval
        self._lock = threading.Lock()
        self._epoch = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreePeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def reset(self) -> None:
        with self._lock:
            self._epoch += 1
            self.peak = 0

    def _sample(self) -> None:
        while True:
            epoch = self._epoch
            total = sum(_rss_bytes(p) for p in _descendants(os.getpid()))
            with self._lock:
                if epoch == self._epoch:   # a sample begun before a reset is the warm-up's
                    self.peak = max(self.peak, total)
            if self._done.wait(self._interval):
                return


def reset_peak_rss() -> bool:
    """This process's peak RSS (VmHWM) set back to its current RSS, so that the peak after a warm-up is
    the timed run's (Linux 4.0 on: ``/proc/self/clear_refs``); False where that cannot be done. (A
    warm-up that compiles leaves LLVM's memory in the process: :func:`compare` has the kernels compiled
    by a process of their own first.)"""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def baseline_pass(store_path: str) -> dict:
    from graphstream.store import degree_pass, open_store
    store = open_store(store_path)
    degree_pass(store)                      # warm the page cache
    t = time.perf_counter()
    degree_pass(store)
    s = time.perf_counter() - t
    return {"seconds": s, "edges_per_s": store.num_edges / s}


def ensure_store(work: Path, scale: int, edge_factor: int) -> str:
    path = work / f"rmat-s{scale}-ef{edge_factor}.zarr"
    from graphstream.store import open_store
    try:
        open_store(path)
        return str(path)
    except Exception:
        pass
    from graphstream.ingest.rmat import generate_rmat
    generate_rmat(path, scale=scale, edge_factor=edge_factor, seed=1, undirected=True, overwrite=True)
    return str(path)


DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"   # ../shared/datasets


def _shared_graphs(work: Path, root: Path | None = None) -> dict:
    """Stores of the shared real graphs: Cora, Citeseer, MUSAE facebook, web-NotreDame, made in ``work``
    from the files in ``root`` (default: ../shared/datasets beside the checkout) unless ``work`` has them
    already: the stores of tools/bench_partition.py (undirected, self-loops and duplicate pairs dropped,
    sorted), so that its quality tables, METIS's figures and the runs here read the same graphs (until
    2026-12-01 this kept the files' order, and web-NotreDame at k = 16 gave RF 1.0856 here against 1.0862
    there at the same settings)."""
    from bench_partition import shared_store
    root = Path(root) if root is not None else DATASETS
    out = {}
    for name, file_name in (("cora", "cora"), ("citeseer", "citeseer"), ("facebook", "facebook"),
                            ("web-NotreDame", "notredame")):
        if not (work / f"{file_name}.zarr").exists() and not root.is_dir():   # a checkout without ../shared
            raise SystemExit(f"bench_partition_speed: the shared datasets are not at {root} (pass --datasets DIR)")
        out[name] = shared_store(file_name, root, work)
    return out


def tau_scan(work: Path, root: Path | None = None) -> dict:
    """SPRING's replication factor for tau = f * |E| / k over the shared graphs, k in 4..32."""
    from graphstream.partition import partition
    factors = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
    table = {}
    for name, store in _shared_graphs(work, root).items():
        for f in factors:
            for k in (4, 8, 16, 32):
                m = partition(store, k, "spring", tau_factor=f).metrics
                table.setdefault(name, {}).setdefault(str(f), {})[k] = {
                    "replication_factor": round(m["replication_factor"], 4),
                    "node_balance": round(m["node_balance"], 3)}
    mean = {str(f): sum(table[g][str(f)][k]["replication_factor"] for g in table for k in (4, 8, 16, 32))
            / (4 * len(table)) for f in factors}
    return {"tau_scan": table, "mean_replication_factor_by_factor": mean,
            "best_factor": min(mean, key=mean.get)}

TWOPS_BIN = "/tmp/2ps/src/build/twophasepartitioner"


def run_child(algo: str, store_path: str, k: int, work: Path, metrics: bool, env: dict) -> dict:
    cmd = [sys.executable, __file__, "--child", algo, store_path, str(k), str(work)]
    if not metrics:
        cmd.append("--no-metrics")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-3:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def reference_twops(binary: str, scale: int, k: int, work: Path, env: dict) -> dict:
    """Our 2ps-l against the authors' C++ on R-MAT ``scale`` (same graph, same k, balance 1.05)."""
    if not Path(binary).exists():
        return {"reference": None, "reason": f"{binary} not found (build mayerrn/two_phase_streaming there)"}
    import numpy as np
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_partition import run_twops  # the same invocation and log parsing as the quality bench

    from graphstream.ingest.rmat import generate_rmat
    from graphstream.store import open_store
    path = work / f"rmat{scale}.zarr"
    try:
        store = open_store(path)
    except Exception:
        store = generate_rmat(path, scale=scale, edge_factor=16, seed=1, overwrite=True)
    edge_file = work / f"rmat{scale}.txt"
    if not edge_file.exists():
        tmp = edge_file.with_suffix(".tmp")
        with open(tmp, "w") as f:
            for b in store.stream():
                np.savetxt(f, np.stack([b.src, b.dst], axis=1), fmt="%d", delimiter="\t")
        tmp.rename(edge_file)
    ours = run_child("2ps-l", str(path), k, work, False, env)
    if "error" in ours:
        return {"ours": ours}
    if not Path(str(edge_file) + ".binedgelist").exists():
        run_twops(binary, edge_file, k, 1.05, None)          # first run converts the text to binary
    ref = run_twops(binary, edge_file, k, 1.05, None)
    m = store.num_edges
    ph = ours["phase_seconds"]
    no_owner = ours["seconds"] - ph.get("owner", 0.0)
    ref_eps = m / ref["partitioning_seconds"]
    return {"graph": f"rmat scale {scale} edge factor 16 seed 1 (the stream as stored)", "num_edges": m,
            "k": k, "reference": {**ref, "edges_per_s": ref_eps},
            "ours": {"seconds": ours["seconds"], "edges_per_s": m / ours["seconds"],
                     "seconds_without_owner_pass": no_owner, "edges_per_s_without_owner_pass": m / no_owner,
                     "phase_seconds": ph, "peak_rss_bytes": ours["peak_rss_bytes"],
                     "vertex_cut_rf": ours["vertex_cut_rf"]},
            "speed_ratio": (m / ours["seconds"]) / ref_eps,
            "speed_ratio_without_owner_pass": (m / no_owner) / ref_eps,
            "rf_ratio": ours["vertex_cut_rf"] / ref["vertex_cut_rf"] if ref["vertex_cut_rf"] else None,
            "note": "ours: the whole 2ps-l run (degree pass, clustering, phases 2a/2b, part[e] to disk, owner "
                    "pass); the reference's logged partitioning time (binary edge list already converted, "
                    "no owner)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("-k", type=int, default=32)
    ap.add_argument("--algos", default="spring,2ps-l,hdrf,dbh,hash,hash-edge")
    ap.add_argument("--work", default="/tmp/graphstream-bench-partition")
    ap.add_argument("--datasets", type=Path, default=None,
                    help="the shared datasets folder, for the shared graphs' stores (default ../shared/datasets "
                         "beside the checkout)")
    ap.add_argument("--tau-scan", action="store_true",
                    help="instead: SPRING replication factor vs tau on the shared real graphs")
    ap.add_argument("--no-metrics", action="store_true", help="skip the quality-metric passes")
    ap.add_argument("--malloc-arenas", action="store_true", help="leave glibc's malloc arenas at the default")
    ap.add_argument("--twops-bin", default=TWOPS_BIN, help="the authors' 2PS-L binary")
    ap.add_argument("--ref-scale", type=int, default=21, help="R-MAT scale of the 2PS-L comparison (0: skip)")
    ap.add_argument("--ref-work", default="/tmp/bench_partition",
                    help="where the comparison's store and text edge list live (reused when present)")
    ap.add_argument("--compare", action="store_true",
                    help="instead: coarse-refine vs KaMinPar vs METIS (time, RF, balance, peak RSS)")
    ap.add_argument("--graphs", default="rmat20,rmat21,web-NotreDame,facebook",
                    help="--compare: rmatS (R-MAT scale S, edge factor 16, undirected) or shared graph names")
    ap.add_argument("--ks", default="8,32", help="--compare: part counts")
    ap.add_argument("--solvers", default="coarse-refine,kaminpar,metis", help="--compare: partitioners")
    ap.add_argument("--repeat", type=int, default=1,
                    help="--compare: runs of every solver, alternating; seconds are the median")
    ap.add_argument("--child", nargs=4, metavar=("ALGO", "STORE", "K", "WORK"), help=argparse.SUPPRESS)
    ap.add_argument("--compare-child", nargs=4, metavar=("SOLVER", "STORE", "K", "WORK"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        algo, store, k, work = args.child
        child(algo, store, int(k), work, not args.no_metrics)
        return
    if args.compare_child:
        solver, store, k, work = args.compare_child
        child_compare(solver, store, int(k), work)
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.compare:
        print(json.dumps(compare(args, work), indent=1))
        return
    if args.tau_scan:
        print(json.dumps(tau_scan(work, args.datasets), indent=1))
        return
    t = time.perf_counter()
    store_path = ensure_store(work, args.scale, args.edge_factor)
    gen_seconds = time.perf_counter() - t
    from graphstream.estimate import PARTITION_BYTES_PER_NODE, GraphSize, partition_peak_bytes
    from graphstream.store import open_store
    store = open_store(store_path)
    n, m = store.num_nodes, store.num_edges
    result = {"graph": {"path": store_path, "scale": args.scale, "edge_factor": args.edge_factor,
                        "num_nodes": n, "num_edges": m, "generate_or_open_seconds": gen_seconds},
              "k": args.k, "cpu_count": os.cpu_count(), "baseline_stream_pass": baseline_pass(store_path),
              "algorithms": {}}
    env = dict(os.environ)
    if not args.malloc_arenas:
        env["MALLOC_ARENA_MAX"] = "1"      # glibc arenas per thread inflate RSS over many chunks
    result.update({"metrics_included": not args.no_metrics, "load_average_before": os.getloadavg(),
                   "child_env": {"MALLOC_ARENA_MAX": env.get("MALLOC_ARENA_MAX")},
                   "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())})
    for algo in args.algos.split(","):
        r = run_child(algo, store_path, args.k, work, not args.no_metrics, env)
        if "error" in r:
            result["algorithms"][algo] = r
            continue
        phase = MAIN_PHASE.get(algo)
        ps = r["phase_seconds"].get(phase)
        if ps:
            r["main_phase"] = phase
            r["main_phase_edges_per_s"] = (n if algo == "hash" else m) / ps
        r["edges_per_s_end_to_end"] = m / r["seconds"]
        if algo in PARTITION_BYTES_PER_NODE:   # the documented model (docs/estimate.md), the process alone
            model = partition_peak_bytes(GraphSize(n, m), args.k, algo, children=False)
            r["model_peak_rss_bytes"] = model
            r["peak_rss_over_model"] = r["peak_rss_bytes"] / model
            r["within_model"] = r["peak_rss_bytes"] <= model
        if algo in GOALS:
            r["goal_edges_per_s"] = GOALS[algo]
            r["meets_goal"] = bool(ps) and m / ps >= GOALS[algo]
        result["algorithms"][algo] = r
    if args.ref_scale:
        ref_work = Path(args.ref_work)
        ref_work.mkdir(parents=True, exist_ok=True)
        result["twops_reference"] = reference_twops(args.twops_bin, args.ref_scale, args.k, ref_work, env)
    else:
        result["twops_reference"] = {"reference": None, "reason": "--ref-scale 0"}
    result["load_average_after"] = os.getloadavg()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
