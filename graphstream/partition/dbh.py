"""DBH: degree-based hashing (Xie et al., NIPS 2014).

Pass 1: exact degrees (both endpoints). Pass 2: each edge goes to
``hash(the endpoint with the smaller degree) mod k`` (ties: the smaller id).
Cutting high-degree nodes first is what keeps the vertex-cut low on
power-law graphs. Seeded splitmix64 hash. Time O(|E|), memory: one int64
degree per node.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .._report import phase_logger
from .._resources import Stopwatch
from ..kernels.hashing import hash_node
from ..kernels.prefetch import prefetch_ends
from ..store import GraphStore, total_degree
from ._driver import assign_edges, edge_plan
from .plan import PartitionPlan


@njit(cache=True, nogil=True)
def dbh_edges(src, dst, deg, k, seed, loads):
    out = np.empty(src.shape[0], dtype=np.int16)
    for i in range(src.shape[0]):
        prefetch_ends(src, dst, i, deg)
        u = src[i]
        v = dst[i]
        # the lower-degree endpoint decides; equal degrees: the smaller id
        x = u if (deg[u] < deg[v] or (deg[u] == deg[v] and u < v)) else v
        p = hash_node(x, seed) % np.uint64(k)
        out[i] = p
        loads[p] += 1
    return out


def run(store: GraphStore, k: int, *, seed: int = 0, balance: float = 1.05, work_dir=None,
        degree: np.ndarray | None = None, owner_pass: bool = True, **params) -> PartitionPlan:
    """``degree``: the total degrees if already counted (on a cluster, by tasks over edge chunks)."""
    if params:
        raise TypeError(f"dbh takes no parameters, got {sorted(params)}")
    watch = Stopwatch(on_lap=phase_logger("dbh"))  # one progress line per phase
    deg = total_degree(store) if degree is None else degree     # pass 1
    watch.lap("degrees")
    loads = np.zeros(k, dtype=np.int64)
    path = assign_edges(store, k, "dbh", work_dir,              # pass 2
                        lambda b, deg=deg: dbh_edges(b.src, b.dst, deg, k, seed, loads))  # bound: `del deg` frees it
    watch.lap("partitioning")
    max_deg = int(deg.max())
    del deg
    plan = edge_plan(store, k, "dbh", path, loads, {"seed": seed}, passes=2,
                     max_degree=max_deg, owner_pass=owner_pass)
    watch.lap("owner")
    plan.metrics["phase_seconds"] = watch.laps
    return plan
