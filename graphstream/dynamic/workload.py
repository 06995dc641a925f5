"""The workload model of dynamic partitioning, shared by PGC and the baselines.

An instance (v, t) costs ``instance_cost + edge_cost * spatial_degree``; the
costs may be fitted from measured timings (:func:`fit_cost_model`).
:func:`evaluate` measures any instance -> part assignment with that model:
balance, cut spatial and temporal edges.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from .config import PGCConfig
from .instances import InstanceGraph

# -- evaluation (shared with the baselines) --------------------------------------------------

@njit(cache=True)
def _cut_spatial(src, dst, local_of, base, inst_part):
    cut = 0
    total = 0
    for e in range(src.shape[0]):
        if src[e] == dst[e]:
            continue
        total += 1
        if inst_part[base + local_of[src[e]]] != inst_part[base + local_of[dst[e]]]:
            cut += 1
    return cut, total


def evaluate(graph: InstanceGraph, inst_part: np.ndarray, config: PGCConfig) -> dict[str, Any]:
    """Workload balance lambda and cut spatial / temporal edges of an instance -> part map."""
    k = config.num_parts
    num = graph.num_instances
    step = 1 << 22
    loads = np.zeros(k, dtype=np.float64)
    instances = np.zeros(k, dtype=np.int64)
    cut_t = total_t = 0
    for lo in range(0, num, step):
        hi = min(num, lo + step)
        p = inst_part[lo:hi]
        loads += np.bincount(p, weights=graph.workload(config.instance_cost, config.edge_cost, lo, hi),
                             minlength=k)
        instances += np.bincount(p, minlength=k)
        prev = graph.prev[lo:hi]
        has = prev >= 0
        total_t += int(has.sum())
        cut_t += int((inst_part[prev[has]] != p[has]).sum())
    cut_s = total_s = 0
    for s in graph.snapshots("evaluate"):
        c, t = _cut_spatial(s.src, s.dst, graph.local_of, s.base, inst_part)
        cut_s += int(c)
        total_s += int(t)
    lo_load = float(loads.min())
    return {
        "balance_lambda": float(loads.max() / lo_load) if lo_load > 0 else None,
        "max_over_mean": float(loads.max() / loads.mean()) if loads.mean() > 0 else None,
        "part_workloads": loads.tolist(), "part_instances": instances.tolist(),
        "cut_spatial_edges": cut_s, "total_spatial_edges": total_s,
        "cut_temporal_edges": cut_t, "total_temporal_edges": total_t,
        "cut_spatial_weight": cut_s * float(config.spatial_weight),
        "cut_temporal_weight": cut_t * float(config.temporal_weight),
        "cut_weight": cut_s * float(config.spatial_weight) + cut_t * float(config.temporal_weight),
    }



@dataclass
class DynamicPartitionResult:
    """instance -> part (``inst_part``), its graph, and the report."""
    algorithm: str
    config: PGCConfig
    graph: InstanceGraph
    inst_part: np.ndarray
    metrics: dict[str, Any] = field(default_factory=dict)
    chunk_of: np.ndarray | None = None   # PGC only: chunk id of every instance
    num_chunks: int | None = None


# -- the workload model, fitted -----------------------------------------------------------

def fit_cost_model(feature_dim: int = 64, hidden: int = 64, sizes: tuple[int, ...] = (2000, 6000, 16000),
                   degrees: tuple[int, ...] = (2, 6, 16), seed: int = 0) -> tuple[float, float]:
    """(instance_cost, edge_cost) from a least-squares fit of measured timings.

    Times one GCN-style layer in numpy (gather + segment sum over edges,
    then a dense transform per instance) on random graphs of every size and
    degree given, fits ``seconds = a * instances + b * edges + c`` and
    returns (a, b) scaled so that a = 1. Only the ratio matters: caps and
    loads are relative to the total workload.
    """
    import time
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((feature_dim, hidden)).astype(np.float32)
    rows, times = [], []
    for n in sizes:
        x = rng.standard_normal((n, feature_dim)).astype(np.float32)
        for d in degrees:
            e = n * d
            indices = rng.integers(0, n, e)
            indptr = np.arange(0, e + 1, d)
            best = np.inf
            for _ in range(3):
                a = time.perf_counter()
                agg = np.add.reduceat(x[indices], indptr[:-1], axis=0)
                _ = agg @ w
                best = min(best, time.perf_counter() - a)
            rows.append((n, e, 1.0))
            times.append(best)
    coef, *_ = np.linalg.lstsq(np.asarray(rows, dtype=np.float64), np.asarray(times), rcond=None)
    a, b = max(float(coef[0]), 1e-12), max(float(coef[1]), 0.0)
    return 1.0, b / a
