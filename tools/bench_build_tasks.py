"""Where a build on a dask cluster spends its time: every task's seconds, by stage (one JSON object).

    .venv/bin/python tools/bench_build_tasks.py STORE -k 8 [--edge-balance 1.1] [--workers 1 2] [--pin-workers]
        [--owner OWNER.npy | --save-owner OWNER.npy] [--whole] [--repeat N] [--in-process 2 8]

The store is partitioned in-process with coarse-refine (seed 0; with
``--edge-balance F`` its parts' edges capped too; ``--owner`` takes a plan's
owner saved by ``--save-owner`` instead), then built on a LocalCluster of N
single-threaded workers for every N given (pinned to a core each with
``--pin-workers``), under dask's task stream. For each stage of the build
(route, degrees, parts, and the parts' kinds of task: a whole part, or the
layout, bucket, fill and finish steps of a part cut into tasks) it reports the
number of tasks, when the first started and the last ended (seconds from the
build's start), and every task's compute seconds; with each part's share of
the edges, it shows whether a stage waits on one task (R-MAT's node-balanced
parts: one part with most of the edges). Outputs of every run are checked to
be identical.

``--whole`` also builds every N with ``BuildConfig(cut_parts=False)`` (every
part one task, as before parts were cut), the two alternating (which goes
first changes every repeat); ``--repeat N`` runs everything N times;
``--in-process T ...`` adds in-process builds with T threads (cut, and whole
with ``--whole``), timed with their passes.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_distributed import _digest, _pin_workers  # noqa: E402  (that benchmark's digest, timings excluded)


def build_on_cluster(store, plan, out: Path, workers: int, pin: bool, config=None) -> dict:
    from distributed import get_task_stream

    from graphstream.assemble import BuildConfig, build_partitions
    from graphstream.cluster import ClusterConfig, open_client

    config = config or BuildConfig()
    # the commands' own cluster (one numba thread a worker, progress off), as bench_distributed starts it
    cluster = ClusterConfig(workers=workers, threads_per_worker=1)
    with open_client(cluster, local_directory=out.parent / "dask") as client:
        if pin:
            _pin_workers(client)
        t0 = time.time()
        with get_task_stream(client) as stream:
            build_partitions(store, plan, out, client=client, config=config)
        wall = time.time() - t0
    stages: dict[str, list[tuple[float, float]]] = {}
    for task in stream.data:
        key = str(task["key"][0] if isinstance(task["key"], tuple) else task["key"])
        spans = [s for s in task["startstops"] if s["action"] == "compute"]
        if spans:   # "build: parts-<token>-<job>": the stage is the key's name before the token
            span = (min(s["start"] for s in spans) - t0, max(s["stop"] for s in spans) - t0)
            stage = re.sub(r"-[0-9a-f]{8}-.*$", "", key)
            stages.setdefault(stage, []).append(span)
            kind = re.match(r".*-[0-9a-f]{8}-([a-z]+)-", key)   # a part's job: whole, or a step of a cut part
            if kind:
                stages.setdefault(f"{stage}: {kind.group(1)}", []).append(span)
    return {"mode": "cluster", "workers": workers, "cut": config.cut_parts, "seconds": wall, "stages": {
        name: {"tasks": len(spans), "first_start": min(a for a, _ in spans), "last_stop": max(b for _, b in spans),
               "task_seconds": sorted(round(b - a, 3) for a, b in spans)}
        for name, spans in stages.items()}}


def build_in_process(store, plan, out: Path, threads: int, config) -> dict:
    from dataclasses import replace

    from graphstream.assemble import build_partitions

    t0 = time.time()
    manifest = build_partitions(store, plan, out, config=replace(config, workers=threads))
    return {"mode": "in-process", "workers": threads, "cut": config.cut_parts, "seconds": time.time() - t0,
            "passes": manifest["metrics"]["build_passes"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("-k", type=int, default=8)
    ap.add_argument("--edge-balance", type=float, default=0.0)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--pin-workers", action="store_true")
    ap.add_argument("--work", default=None, help="folder for the outputs (default: a temporary one)")
    ap.add_argument("--owner", default=None, help="the plan's owner (.npy, from --save-owner): no partition")
    ap.add_argument("--save-owner", default=None, help="save the plan's owner here (.npy)")
    ap.add_argument("--whole", action="store_true", help="also build every part whole, alternating with the cut")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--in-process", type=int, nargs="*", default=[], metavar="THREADS",
                    help="also build in-process with these thread counts")
    ap.add_argument("--bucket-bytes", type=int, default=None,
                    help="BuildConfig.bucket_bytes (smaller: smaller parts are bucketed, so cut)")
    args = ap.parse_args()

    import numpy as np

    from graphstream.assemble import BuildConfig
    from graphstream.partition import partition
    from graphstream.partition.metrics import vertex_partition_metrics
    from graphstream.partition.plan import PartitionPlan
    from graphstream.store import open_store
    store = open_store(args.store)
    if args.owner:
        owner = np.load(args.owner)
        k = int(owner.max()) + 1
        plan = PartitionPlan("coarse-refine", k, owner)
        edges = np.asarray(vertex_partition_metrics(store, owner, k)["part_edges"], dtype=np.float64)
    else:
        k = args.k
        plan = partition(store, k, "coarse-refine", seed=0,
                         **({"edge_balance": args.edge_balance} if args.edge_balance else {}))
        edges = np.asarray(plan.metrics["part_edges"], dtype=np.float64)
    if args.save_owner:
        np.save(args.save_owner, np.asarray(plan.owner))
    result = {"store": str(args.store), "num_edges": store.num_edges, "k": k, "edge_balance": args.edge_balance,
              "part_edge_shares": [round(float(x), 4) for x in edges / edges.sum()], "runs": []}
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-build-tasks-"))
    modes = [(build_on_cluster, n, args.pin_workers) for n in args.workers]
    modes += [(build_in_process, t, None) for t in args.in_process]
    digests = []
    try:
        for rep in range(args.repeat):
            for build, n, pin in modes:
                cuts = [True, False] if args.whole else [True]
                for cut in cuts if rep % 2 == 0 else cuts[::-1]:
                    # the same name "parts" in each: manifests hold their folder's path
                    mode = work / f"{build.__name__}-{n}-{'cut' if cut else 'whole'}"
                    shutil.rmtree(mode, ignore_errors=True)
                    mode.mkdir(parents=True)
                    config = BuildConfig(cut_parts=cut, **({"bucket_bytes": args.bucket_bytes}
                                                           if args.bucket_bytes else {}))
                    run = (build(store, plan, mode / "parts", n, pin, config) if pin is not None
                           else build(store, plan, mode / "parts", n, config))
                    result["runs"].append({"repeat": rep, **run})
                    digests.append(_digest(mode / "parts", mode))
                    shutil.rmtree(mode, ignore_errors=True)
                    print(json.dumps(result["runs"][-1]), file=sys.stderr, flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    result["identical"] = len(set(digests)) == 1
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
