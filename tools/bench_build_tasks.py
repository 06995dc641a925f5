"""Where a build on a dask cluster spends its time: every task's seconds, by stage (one JSON object).

    .venv/bin/python tools/bench_build_tasks.py STORE -k 8 [--edge-balance 1.1] [--workers 1 2] [--pin-workers]

The store is partitioned in-process with coarse-refine (seed 0; with
``--edge-balance F`` its parts' edges capped too), then built on a
LocalCluster of N single-threaded workers for every N given (pinned to a
core each with ``--pin-workers``), under dask's task stream. For each stage
of the build (route, degrees, parts, and the parts' kinds of task: a whole
part, or the layout, bucket, fill and finish steps of a part cut into
tasks) it reports the number of tasks, when
the first started and the last ended (seconds from the build's start), and
every task's compute seconds; with each part's share of the edges, it shows
whether a stage waits on one task (R-MAT's node-balanced parts: one part with
most of the edges). Outputs of every N are checked to be identical.
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


def build_on_cluster(store, plan, out: Path, workers: int, pin: bool) -> dict:
    from distributed import get_task_stream

    from graphstream.assemble import build_partitions
    from graphstream.cluster import ClusterConfig, open_client

    # the commands' own cluster (one numba thread a worker, progress off), as bench_distributed starts it
    config = ClusterConfig(workers=workers, threads_per_worker=1)
    with open_client(config, local_directory=out.parent / "dask") as client:
        if pin:
            _pin_workers(client)
        t0 = time.time()
        with get_task_stream(client) as stream:
            build_partitions(store, plan, out, client=client)
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
    return {"workers": workers, "seconds": wall, "stages": {
        name: {"tasks": len(spans), "first_start": min(a for a, _ in spans), "last_stop": max(b for _, b in spans),
               "task_seconds": sorted(round(b - a, 3) for a, b in spans)}
        for name, spans in stages.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("-k", type=int, default=8)
    ap.add_argument("--edge-balance", type=float, default=0.0)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--pin-workers", action="store_true")
    ap.add_argument("--work", default=None, help="folder for the outputs (default: a temporary one)")
    args = ap.parse_args()

    import numpy as np

    from graphstream.partition import partition
    from graphstream.store import open_store
    store = open_store(args.store)
    plan = partition(store, args.k, "coarse-refine", seed=0,
                     **({"edge_balance": args.edge_balance} if args.edge_balance else {}))
    edges = np.asarray(plan.metrics["part_edges"], dtype=np.float64)
    result = {"store": str(args.store), "num_edges": store.num_edges, "k": args.k, "edge_balance": args.edge_balance,
              "part_edge_shares": [round(float(x), 4) for x in edges / edges.sum()], "runs": []}
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-build-tasks-"))
    digests = []
    try:
        for n in args.workers:
            mode = work / f"workers-{n}"   # the same name "parts" in each: manifests hold their folder's path
            shutil.rmtree(mode, ignore_errors=True)
            mode.mkdir(parents=True)
            result["runs"].append(build_on_cluster(store, plan, mode / "parts", n, args.pin_workers))
            digests.append(_digest(mode / "parts", mode))
            print(json.dumps(result["runs"][-1]), file=sys.stderr, flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    result["identical"] = len(set(digests)) == 1
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
