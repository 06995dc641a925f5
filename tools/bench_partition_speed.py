"""Throughput and peak memory of the streaming partitioners on an R-MAT graph (one JSON object).

    flock /tmp/graphstream-bench.lock .venv/bin/python tools/bench_partition_speed.py \
        [--scale 22] [--edge-factor 16] [-k 32] [--algos spring,2ps-l,hdrf,dbh,hash,hash-edge]

Each algorithm runs in a fresh subprocess (so its peak RSS is its own): the
kernels are first compiled on a tiny graph, then the timed run partitions the
R-MAT store with the metrics pass included. Reported per algorithm: total
seconds, seconds of each phase, edges/s of its main per-edge pass, peak RSS
and the memory target 64 bytes x num_nodes + 256 MB. The baseline measured in
the same run is one plain streaming pass over the store (the degree pass):
the I/O + decompression ceiling every pass shares.
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


def child(algo: str, store_path: str, k: int, work: str) -> None:
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
        t = time.perf_counter()
        cpu = time.process_time()
        plan = partition(store_path, k, name, work_dir=Path(tmp) / "w1", **params)
        seconds = time.perf_counter() - t
        cpu = time.process_time() - cpu
    m = plan.metrics
    print(json.dumps({
        "seconds_with_metrics": seconds, "cpu_seconds_with_metrics": cpu, "seconds": m["seconds"], "phase_seconds": m.get("phase_seconds", {}),
        "passes": m.get("passes"), "peak_rss_bytes": m["peak_rss_bytes"], "rss_after_warmup": rss_before,
        "replication_factor": m["replication_factor"], "vertex_cut_rf": m.get("vertex_cut_rf"),
        "node_balance": m["node_balance"], "edge_balance": m["edge_balance"],
    }))


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


def _shared_graphs(work: Path) -> dict:
    """Stores of the shared real graphs: Cora, Citeseer, MUSAE facebook, web-NotreDame (undirected,
    self-loops and duplicate pairs dropped, file order kept)."""
    import gzip
    import pickle
    import numpy as np
    from graphstream.store import GraphWriter, open_store
    root = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    out = {}

    def store(name, load):
        path = work / f"{name}.zarr"
        try:
            out[name] = open_store(path)
            return
        except Exception:
            pass
        src, dst = load()
        a, b = np.minimum(src, dst), np.maximum(src, dst)
        keep = a != b
        src, dst, a, b = src[keep], dst[keep], a[keep], b[keep]
        _, first = np.unique(a * (1 << 32) + b, return_index=True)
        first.sort()
        with GraphWriter(path, directed=False, overwrite=True) as w:
            w.append(src[first], dst[first])
        out[name] = open_store(path)

    def planetoid(name):
        with open(root / "planetoid" / f"ind.{name}.graph", "rb") as f:
            g = pickle.load(f, encoding="latin1")
        pairs = [(u, v) for u in sorted(g) for v in g[u]]
        return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])

    def facebook():
        e = np.loadtxt(root / "musae-facebook" / "facebook_edges.csv", delimiter=",", skiprows=1, dtype=np.int64)
        return e[:, 0], e[:, 1]

    def notredame():
        e = np.loadtxt(gzip.open(root / "snap" / "web-NotreDame.txt.gz"), comments="#", dtype=np.int64)
        return e[:, 0], e[:, 1]

    for name, load in (("cora", lambda: planetoid("cora")), ("citeseer", lambda: planetoid("citeseer")),
                       ("facebook", facebook), ("web-NotreDame", notredame)):
        store(name, load)
    return out


def tau_scan(work: Path) -> dict:
    """SPRING's replication factor for tau = f * |E| / k over the shared graphs, k in 4..32."""
    from graphstream.partition import partition
    factors = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
    table = {}
    for name, store in _shared_graphs(work).items():
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("-k", type=int, default=32)
    ap.add_argument("--algos", default="spring,2ps-l,hdrf,dbh,hash,hash-edge")
    ap.add_argument("--work", default="/tmp/graphstream-bench-partition")
    ap.add_argument("--tau-scan", action="store_true",
                    help="instead: SPRING replication factor vs tau on the shared real graphs")
    ap.add_argument("--child", nargs=4, metavar=("ALGO", "STORE", "K", "WORK"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        algo, store, k, work = args.child
        child(algo, store, int(k), work)
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.tau_scan:
        print(json.dumps(tau_scan(work), indent=1))
        return
    t = time.perf_counter()
    store_path = ensure_store(work, args.scale, args.edge_factor)
    gen_seconds = time.perf_counter() - t
    from graphstream.store import open_store
    store = open_store(store_path)
    n, m = store.num_nodes, store.num_edges
    budget = 64 * n + 256 * 2**20
    result = {"graph": {"path": store_path, "scale": args.scale, "edge_factor": args.edge_factor,
                        "num_nodes": n, "num_edges": m, "generate_or_open_seconds": gen_seconds},
              "k": args.k, "cpu_count": os.cpu_count(), "baseline_stream_pass": baseline_pass(store_path),
              "memory_budget_bytes": budget, "algorithms": {}}
    for algo in args.algos.split(","):
        proc = subprocess.run([sys.executable, __file__, "--child", algo, store_path, str(args.k), str(work)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            result["algorithms"][algo] = {"error": proc.stderr.strip().splitlines()[-1:]}
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        phase = MAIN_PHASE.get(algo)
        ps = r["phase_seconds"].get(phase)
        if ps:
            r["main_phase"] = phase
            r["main_phase_edges_per_s"] = (n if algo == "hash" else m) / ps
        r["edges_per_s_overall"] = m / r["seconds"]
        r["within_memory_budget"] = r["peak_rss_bytes"] <= budget
        if algo in GOALS:
            r["goal_edges_per_s"] = GOALS[algo]
            r["meets_goal"] = bool(ps) and m / ps >= GOALS[algo]
        result["algorithms"][algo] = r
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
