"""Benchmark of the partition builder on Graph500 R-MAT graphs; prints one JSON object.

    flock /tmp/graphstream-bench.lock .venv/bin/python tools/bench_build.py \
        --scale 24 --edge-factor 16 -k 16 --algos spring --dim 128 --work /tmp/bench_build

Stages, each in its own child process so that every peak RSS is that
stage's own: generate the R-MAT store (undirected, Graph500 semantics, unless
--directed), write an N x dim float32 feature file chunk by chunk, two
baselines (a bare streaming pass over the store: edges/s; a sequential read of
the feature file: GB/s), then for every algorithm: partition, then build the
partitioned dataset with the features (``coarse-refine:edge-balance=F``: coarse-refine
with its parts' edges capped too, ``--edge-balance F``). Outputs are deleted after each build
and the work folder at the end (unless --keep).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _peak() -> int:
    from graphstream._resources import peak_rss_bytes
    return peak_rss_bytes()


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# ---------------------------------------------------------------------------
# child stages: each prints one JSON object
# ---------------------------------------------------------------------------

def stage_generate(a) -> dict:
    from graphstream.ingest.rmat import generate_rmat
    t = time.perf_counter()
    store = generate_rmat(a.store, scale=a.scale, edge_factor=a.edge_factor, seed=a.seed,
                          undirected=not a.directed, overwrite=True)
    s = time.perf_counter() - t
    return {"seconds": s, "edges_per_s": store.num_edges / s, "num_nodes": store.num_nodes,
            "num_edges": store.num_edges, "store_bytes": _dir_bytes(Path(a.store)), "peak_rss_bytes": _peak()}


def stage_features(a) -> dict:
    """N x dim float32, written sequentially in 64 MiB blocks (cheap deterministic values)."""
    from graphstream.assemble.features import NpyWriter
    from graphstream.store import open_store
    n = open_store(a.store).num_nodes
    Path(a.nodes).mkdir(parents=True, exist_ok=True)
    rows = max(1, (64 << 20) // (4 * a.dim))
    col = np.arange(a.dim, dtype=np.float32)
    t = time.perf_counter()
    with NpyWriter(Path(a.nodes) / "features.npy", np.float32, (n, a.dim)) as w:
        for lo in range(0, n, rows):
            ids = np.arange(lo, min(n, lo + rows), dtype=np.float32)
            w.write(ids[:, None] * 1e-3 + col)    # row i, column j = i/1000 + j: checkable
    s = time.perf_counter() - t
    nbytes = n * a.dim * 4
    return {"seconds": s, "bytes": nbytes, "gb_per_s": nbytes / s / 1e9, "peak_rss_bytes": _peak()}


def stage_baseline(a) -> dict:
    """A bare pass over the store, and a sequential read of the feature file."""
    from graphstream.store import open_store
    store = open_store(a.store)
    t = time.perf_counter()
    total = 0
    for batch in store.stream():
        total += len(batch)
    s_stream = time.perf_counter() - t
    out = {"stream_seconds": s_stream, "stream_edges_per_s": total / s_stream}
    feats = Path(a.nodes) / "features.npy"
    if feats.exists():
        buf = bytearray(64 << 20)
        t = time.perf_counter()
        nbytes = 0
        with open(feats, "rb", buffering=0) as f:
            while (got := f.readinto(buf)):
                nbytes += got
        s = time.perf_counter() - t
        out.update({"feature_read_seconds": s, "feature_read_gb_per_s": nbytes / s / 1e9})
    out["peak_rss_bytes"] = _peak()
    return out


def stage_partition(a) -> dict:
    from graphstream.partition import partition
    from graphstream.store import open_store
    store = open_store(a.store)
    # coarse-refine's work folder holds only its scratch (the vertex stream: 8 bytes an edge), which
    # would otherwise sit beside the build's spill; edge partitioners leave part[e] there for the build
    scratch = Path(a.work) / "partition-scratch"
    algo, _, edge_balance = a.algo.partition(":edge-balance=")   # "coarse-refine:edge-balance=1.1"
    params = {"edge_balance": float(edge_balance)} if edge_balance else {}
    t = time.perf_counter()
    plan = partition(store, a.k, algo, work_dir=scratch if algo == "coarse-refine" else a.work,
                     metrics=not a.no_partition_metrics, **params)
    s = time.perf_counter() - t
    shutil.rmtree(scratch, ignore_errors=True)
    np.save(a.owner, np.asarray(plan.owner))
    with open(a.owner + ".json", "w") as f:
        json.dump({"algorithm": plan.algorithm, "params": plan.params, "metrics": plan.metrics}, f,
                  default=lambda o: o.item() if hasattr(o, "item") else str(o))
    m = plan.metrics
    return {"seconds": s, "edges_per_s": store.num_edges / s, "peak_rss_bytes": _peak(),
            "replication_factor": m.get("replication_factor"), "node_balance": m.get("node_balance"),
            "edge_balance": m.get("edge_balance"), "entries_balance": m.get("entries_balance"),
            "passes": m.get("passes")}


def stage_build(a) -> dict:
    from graphstream.assemble import BuildConfig, build_partitions
    from graphstream.partition.plan import PartitionPlan
    from graphstream.store import open_store
    store = open_store(a.store)
    with open(a.owner + ".json") as f:
        meta = json.load(f)
    plan = PartitionPlan(algorithm=meta["algorithm"], num_parts=a.k, owner=np.load(a.owner),
                         params=meta["params"], metrics={"seconds": meta["metrics"].get("seconds", 0.0)})
    nodes = a.nodes if Path(a.nodes, "features.npy").exists() and not a.graph_only else None
    config = BuildConfig(bucket_min_blocks=int(a.bucket_min_blocks or BuildConfig().bucket_min_blocks))
    t = time.perf_counter()
    manifest = build_partitions(store, plan, a.out, nodes=nodes, overwrite=True, config=config)
    s = time.perf_counter() - t
    m = manifest["metrics"]
    largest = max(p["num_edges"] for p in manifest["parts"])
    passes = m["build_passes"]
    n_local = sum(p["num_inner"] + p["num_halo"] for p in manifest["parts"])
    out_feature_bytes = n_local * a.dim * 4 if nodes else 0
    result = {
        "seconds": s,
        "edges_per_s": store.num_edges / s,
        "route_seconds": passes["route_seconds"],
        "route_edges_per_s": store.num_edges / passes["route_seconds"],
        "csr_seconds": passes["csr_seconds"],
        "csr_entries_per_s": sum(p["num_edges"] for p in manifest["parts"]) / passes["csr_seconds"],
        # the largest part's columns (int32 local ids) in blocks of the sort buffer: the spill re-reads it
        # would cost unbucketed; and whether it was bucketed, judged as the builder judges it, in blocks of
        # min(sort_bytes, bucket_bytes) against bucket_min_blocks
        "largest_part_blocks": -(-largest * 4 // config.sort_bytes),
        "largest_part_bucketed": -(-largest * 4 // min(config.sort_bytes, config.bucket_bytes))
        >= config.bucket_min_blocks,
        "bucket_min_blocks": config.bucket_min_blocks,
        "node_data_seconds": passes["node_data_seconds"],
        "feature_out_bytes": out_feature_bytes,
        "feature_gb_per_s": (out_feature_bytes / passes["node_data_seconds"] / 1e9
                             if passes["node_data_seconds"] else None),
        "replication_factor": m["replication_factor"],
        "node_balance": m["node_balance"],
        "edge_balance": m["edge_balance"],
        "spill_bytes": m["spill_bytes"],
        "output_bytes": _dir_bytes(Path(a.out)),
        "peak_rss_bytes": _peak(),
    }
    return result


def stage_split(a) -> dict:
    """The feature split alone, part by part, each part's output deleted at once (bounded disk).

    Used when the whole split output (replication factor x the feature file)
    does not fit the free disk: the same code path as the build's node data
    pass, over every part of the graph-only dataset built before.
    """
    from graphstream import open_partitions
    from graphstream.assemble.builder import BuildConfig
    from graphstream.assemble.features import gather_node_data
    from graphstream.store import open_store
    from graphstream.store.nodedata import open_node_data
    store = open_store(a.store)
    data = open_node_data(a.nodes, store.num_nodes)
    ds = open_partitions(a.out)
    scratch = Path(a.work) / "split-scratch"
    window = BuildConfig().gather_bytes
    seconds = 0.0
    nbytes = 0
    for part in ds:
        scratch.mkdir(exist_ok=True)
        ids = np.array(part.global_ids)
        t = time.perf_counter()
        gather_node_data(data, ids, scratch, window)
        seconds += time.perf_counter() - t
        nbytes += len(ids) * data.row_bytes
        shutil.rmtree(scratch)
    return {"seconds": seconds, "bytes": nbytes, "gb_per_s": nbytes / seconds / 1e9, "parts": len(ds),
            "peak_rss_bytes": _peak()}


STAGES = {"split": stage_split, "generate": stage_generate, "features": stage_features, "baseline": stage_baseline,
          "partition": stage_partition, "build": stage_build}


# ---------------------------------------------------------------------------
# parent
# ---------------------------------------------------------------------------

def _save_partial(args: argparse.Namespace, report: dict) -> None:
    """The report so far, for long runs that may not finish (--partial FILE)."""
    if args.partial:
        Path(args.partial).write_text(json.dumps(report))


def _child(stage: str, args: argparse.Namespace, **extra) -> dict:
    cmd = [sys.executable, __file__, "--child", stage]
    for key, value in {**vars(args), **extra}.items():
        if key in ("child", "algos", "keep", "skip_features", "disk_margin", "partial") or value is None \
                or value is False:
            continue
        cmd += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    if proc.returncode != 0:
        return {"error": f"stage {stage} exited with {proc.returncode}", "wall_seconds": time.perf_counter() - t}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_seconds"] = time.perf_counter() - t
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=24)
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("-k", "--k", dest="k", type=int, default=16)
    p.add_argument("--algos", default="spring", help="comma-separated partitioners (graphstream.partition)")
    p.add_argument("--dim", type=int, default=128, help="feature columns (float32)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--directed", action="store_true", help="directed R-MAT store (default undirected)")
    p.add_argument("--skip-features", action="store_true", help="no feature file (graph only)")
    p.add_argument("--work", default="/tmp/bench_build")
    p.add_argument("--keep", action="store_true", help="keep the store and features afterwards")
    p.add_argument("--disk-margin", type=float, default=15.0,
                   help="GB of disk to leave free; a split that would not fit is measured part by part")
    p.add_argument("--partial", default=None, help="rewrite the report to this file after every stage")
    p.add_argument("--no-partition-metrics", action="store_true",
                   help="skip the partitioner's own metrics pass (the build measures the same figures)")
    p.add_argument("--rescan-baseline", action="store_true",
                   help="build every partition a second time re-reading each part's spill file for every row "
                        "block (no bucketing): csr_vs_rescan is the ratio of their CSR seconds")
    p.add_argument("--graph-only", action="store_true", help=argparse.SUPPRESS)
    # child-only
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    for name in ("store", "nodes", "owner", "out", "algo", "bucket_min_blocks"):
        p.add_argument(f"--{name.replace('_', '-')}", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()

    if a.child:
        print(json.dumps(STAGES[a.child](a)))
        return

    os.environ.setdefault("GRAPHSTREAM_PROGRESS", "0")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    store = str(work / f"rmat-s{a.scale}-ef{a.edge_factor}.zarr")
    nodes = str(work / "nodes")
    common = {"store": store, "nodes": nodes}
    report: dict = {"scale": a.scale, "edge_factor": a.edge_factor, "k": a.k, "dim": a.dim,
                    "directed": a.directed, "machine": {"cpus": os.cpu_count(),
                                                        "ram_bytes": os.sysconf("SC_PAGE_SIZE")
                                                        * os.sysconf("SC_PHYS_PAGES")}}
    t0 = time.perf_counter()
    try:
        report["generate"] = _child("generate", a, **common)
        _save_partial(a, report)
        if not a.skip_features:
            report["features"] = _child("features", a, **common)
        report["baseline"] = _child("baseline", a, **common)
        _save_partial(a, report)
        report["runs"] = {}
        for algo in [s.strip() for s in a.algos.split(",") if s.strip()]:
            owner = str(work / f"owner-{algo}.npy")
            run = {"partition": _child("partition", a, algo=algo, owner=owner, **common)}
            report["runs"][algo] = run
            _save_partial(a, report)
            if "error" not in run["partition"]:
                out = str(work / f"parts-{algo}")
                rf = run["partition"].get("replication_factor") or a.k
                n = report["generate"]["num_nodes"]
                need = (0 if a.skip_features else rf * n * a.dim * 4) + 24 * report["generate"]["num_edges"]
                free = shutil.disk_usage(work).free
                graph_only = not a.skip_features and need > free - a.disk_margin * 1e9
                run["features_in_build"] = not (a.skip_features or graph_only)
                if graph_only:
                    run["disk_note"] = (f"split output ~{need / 1e9:.1f} GB > free {free / 1e9:.1f} GB - margin: "
                                        "graph-only build, then the feature split measured part by part")
                run["build"] = _child("build", a, owner=owner, out=out, graph_only=graph_only, **common)
                if a.rescan_baseline and "error" not in run["build"]:
                    shutil.rmtree(out, ignore_errors=True)
                    rescan = _child("build", a, owner=owner, out=out, graph_only=True, bucket_min_blocks=2**62,
                                    **common)
                    run["build_rescan"] = rescan
                    if "error" not in rescan:
                        run["build"]["csr_vs_rescan"] = run["build"]["csr_seconds"] / rescan["csr_seconds"]
                if graph_only and "error" not in run["build"]:
                    run["split"] = _child("split", a, out=out, **common)
                    run["build"]["feature_gb_per_s"] = run["split"].get("gb_per_s")
                    run["build"]["node_data_seconds"] = run["split"].get("seconds")
                shutil.rmtree(out, ignore_errors=True)
                b, base = run["build"], report["baseline"]
                if "error" not in b:
                    run["build"]["route_vs_bare_stream"] = b["route_edges_per_s"] / base["stream_edges_per_s"]
                    if b.get("feature_gb_per_s") and base.get("feature_read_gb_per_s"):
                        run["build"]["feature_vs_sequential_read"] = (b["feature_gb_per_s"]
                                                                      / base["feature_read_gb_per_s"])
                    part_s = run["partition"]["seconds"]
                    # what a user runs for this partitioner: generate, partition, build
                    run["end_to_end_seconds"] = report["generate"]["seconds"] + part_s + b["seconds"]
                    run["peak_rss_bytes"] = max(run["partition"]["peak_rss_bytes"], b["peak_rss_bytes"],
                                                run.get("split", {}).get("peak_rss_bytes", 0))
            report["runs"][algo] = run
            _save_partial(a, report)
    finally:
        report["total_seconds"] = time.perf_counter() - t0
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        _save_partial(a, report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
