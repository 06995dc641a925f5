"""The two trivial baselines of the DGC paper, on the same instance graph and
workload model as PGC (graphstream.dynamic.pgc).

- Snapshot partitioning: contiguous time ranges. Snapshots in time order are
  cut into k ranges of about equal workload; every instance of a snapshot
  goes with it. No spatial edge is cut; temporal edges are cut at the k-1
  range boundaries.
- Temporal-sequence partitioning: all instances of a node together. Nodes,
  heaviest first, go to the least loaded part (LPT), which balances the
  nodes' summed workload. No temporal edge is cut.
"""
from __future__ import annotations

import numpy as np

from .._resources import Stopwatch, peak_rss_bytes
from ..kernels.packing import pack_least_loaded
from ..store.snapshots import SnapshotStore
from .config import PGCConfig
from .instances import build_instance_graph
from .workload import DynamicPartitionResult, evaluate

WORK_SCALE = 1000  # LPT packs integer loads: workloads in thousandths


def snapshot_ranges(snapshot_work: np.ndarray, k: int) -> np.ndarray:
    """Part of each snapshot: snapshot t goes to the range holding the middle
    of its workload on the cumulative axis, cut into k equal pieces."""
    total = float(snapshot_work.sum())
    if total <= 0:
        return np.minimum(np.arange(len(snapshot_work)) * k // max(len(snapshot_work), 1), k - 1)
    mid = np.cumsum(snapshot_work) - snapshot_work / 2.0
    return np.minimum((mid * k / total).astype(np.int64), k - 1)


def snapshot_partition(snaps: SnapshotStore, config: PGCConfig) -> DynamicPartitionResult:
    watch = Stopwatch()
    graph = build_instance_graph(snaps, config)
    work_t = np.zeros(graph.num_snapshots, dtype=np.float64)
    for t in range(graph.num_snapshots):
        a, b = int(graph.offsets[t]), int(graph.offsets[t + 1])
        work_t[t] = graph.workload(config.instance_cost, config.edge_cost, a, b).sum()
    part_t = snapshot_ranges(work_t, config.num_parts)
    inst_part = graph.arrays.alloc(graph.num_instances, np.int32)
    for t in range(graph.num_snapshots):
        inst_part[graph.offsets[t]:graph.offsets[t + 1]] = part_t[t]
    metrics = evaluate(graph, inst_part, config)
    metrics.update({"num_instances": graph.num_instances, "snapshot_parts": part_t.tolist(),
                    "labels_memory_mapped": graph.arrays.mapped, "seconds": watch.seconds,
                    "peak_rss_bytes": peak_rss_bytes()})
    return DynamicPartitionResult("snapshot", config, graph, inst_part, metrics)


def sequence_partition(snaps: SnapshotStore, config: PGCConfig) -> DynamicPartitionResult:
    watch = Stopwatch()
    graph = build_instance_graph(snaps, config)
    weights = np.rint(graph.node_work * WORK_SCALE).astype(np.int64)
    order = np.argsort(-weights, kind="stable")
    loads = np.zeros(config.num_parts, dtype=np.int64)
    part_of_node = np.empty(len(weights), dtype=np.int32)
    part_of_node[order] = pack_least_loaded(weights[order], loads)
    inst_part = graph.arrays.alloc(graph.num_instances, np.int32)
    for s in graph.snapshots("sequence"):
        inst_part[s.base:s.base + len(s.active)] = part_of_node[s.active]
    metrics = evaluate(graph, inst_part, config)
    metrics.update({"num_instances": graph.num_instances, "labels_memory_mapped": graph.arrays.mapped,
                    "seconds": watch.seconds, "peak_rss_bytes": peak_rss_bytes()})
    return DynamicPartitionResult("sequence", config, graph, inst_part, metrics)
