"""Where coarse-refine's rounds on a dask cluster spend their time: waves of tasks, by stage (one JSON object).

    .venv/bin/python tools/bench_rounds_tasks.py STORE -k 8 [--workers 1 2] [--pin-workers] [--work DIR]

For every N given, the store is partitioned with coarse-refine (seed 0) on a
LocalCluster of N single-threaded workers (pinned to a core each with
``--pin-workers``), under dask's task stream, after a warm-up partition of a
small R-MAT graph (numba's cache loaded in every process). A round of label
propagation or refinement is one wave of tasks, and the client accepts the
moves between waves. For each stage (label propagation, refine summary,
refine, rebalance, the closing metrics passes) it reports the waves, the
tasks, their compute seconds in all, and, summed over the waves, the span
(first start to last stop), the longest task and the mean task. So:

- compute at N workers against 1: what the tasks cost more when they share
  the machine;
- span - mean: what a wave waits on its slowest task (imbalance);
- the phases' seconds minus the spans: the client's part (accepting the
  moves, updating the moved nodes' neighbours, starting the next wave),
  which more workers do not shorten.

Plans of every N are checked to be identical. The task stream's times are
each worker's clock shifted by its estimate of the offset to the scheduler
(from its heartbeats), so with several workers a wave's span can be off by
the difference of two estimates (milliseconds on a quiet machine, 0.2 s seen
under load); durations (longest, mean, compute) are exact.
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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_distributed import _pin_workers  # noqa: E402


def rounds_on_cluster(store, k: int, workers: int, pin: bool, work: Path) -> tuple[dict, np.ndarray]:
    from distributed import get_task_stream

    from graphstream.cluster import ClusterConfig, open_client
    from graphstream.ingest.rmat import generate_rmat
    from graphstream.partition import partition

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with open_client(ClusterConfig(workers=workers, threads_per_worker=1), local_directory=work / "dask") as client:
        if pin:
            _pin_workers(client)
        warm = generate_rmat(work / "warm.zarr", scale=10, edge_factor=16, seed=1, client=client)
        partition(warm, k, "coarse-refine", seed=0, work_dir=work, client=client, metrics=False)
        t0 = time.perf_counter()
        with get_task_stream(client) as stream:
            plan = partition(store, k, "coarse-refine", seed=0, work_dir=work, client=client, metrics=False)
        wall = time.perf_counter() - t0
    waves: dict[str, list[tuple[float, float]]] = {}
    for task in stream.data:
        key = str(task["key"][0] if isinstance(task["key"], tuple) else task["key"])
        spans = [(s["start"], s["stop"]) for s in task["startstops"] if s["action"] == "compute"]
        if spans:   # "<stage>-<run id>-<task>": a wave is one run id
            waves.setdefault(re.sub(r"-\d+$", "", key), []).extend(spans)
    stages: dict[str, dict] = {}
    for wave, spans in waves.items():
        stage = re.sub(r"-[0-9a-f]{8}$", "", wave)
        seconds = [b - a for a, b in spans]
        entry = stages.setdefault(stage, {"waves": 0, "tasks": 0, "compute": 0.0, "span": 0.0, "longest": 0.0,
                                          "mean": 0.0})
        entry["waves"] += 1
        entry["tasks"] += len(seconds)
        entry["compute"] += sum(seconds)
        entry["span"] += max(b for _, b in spans) - min(a for a, _ in spans)
        entry["longest"] += max(seconds)
        entry["mean"] += sum(seconds) / len(seconds)
    metrics = plan.metrics
    return {"workers": workers, "seconds": wall, "phase_seconds": metrics["phase_seconds"],
            "accept_seconds": metrics.get("rounds_accept_seconds"),
            "stages": {name: {key: round(v, 3) if isinstance(v, float) else v for key, v in entry.items()}
                       for name, entry in stages.items()}}, plan.owner


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("-k", type=int, default=8)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--pin-workers", action="store_true", help="each worker process on a core of its own")
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one, removed)")
    args = ap.parse_args(argv)

    import os
    os.environ.setdefault("GRAPHSTREAM_PROGRESS", "0")
    from graphstream.store import open_store
    store = open_store(args.store)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        runs, owners = [], []
        for n in args.workers:
            run, owner = rounds_on_cluster(store, args.k, n, args.pin_workers, work / f"w{n}")
            runs.append(run)
            owners.append(owner)
    print(json.dumps({"store": args.store, "k": args.k, "num_nodes": store.num_nodes, "num_edges": store.num_edges,
                      "pinned": args.pin_workers, "identical": all(np.array_equal(o, owners[0]) for o in owners),
                      "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
