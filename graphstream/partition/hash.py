"""Hash partitioning: the baselines every other partitioner must beat.

- mode "vertex" (default): ``owner[v] = hash(v) mod k``; an edge follows its
  source, ``part(u, v) = owner[u]``. No pass over the edges is needed.
- mode "edge": ``part(u, v) = hash(min(u, v), max(u, v)) mod k`` (the same
  for both directions of an undirected pair); ``owner[v]`` is then the part
  holding most of v's edges.

The hash is seeded splitmix64 (``_shared.hash_node``), so a seed gives a
different but reproducible partition. Time O(|E|), memory O(num_nodes).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numba import njit

from .._resources import Stopwatch
from ..kernels.hashing import hash_node, mix64
from ..store import GraphStore
from ._driver import assign_edges, edge_plan
from .plan import PartitionPlan


@dataclass(frozen=True, slots=True)
class HashConfig:
    mode: str = "vertex"


@njit(cache=True, nogil=True)
def hash_owner(n, k, seed):
    out = np.empty(n, dtype=np.int32)
    for v in range(n):
        out[v] = hash_node(v, seed) % np.uint64(k)
    return out


@njit(cache=True, nogil=True)
def hash_edges(src, dst, k, seed, loads):
    """part = hash(min, max) mod k: hash the smaller id, mix in the larger."""
    out = np.empty(src.shape[0], dtype=np.int16)
    for i in range(src.shape[0]):
        a = src[i]
        b = dst[i]
        if b < a:
            a, b = b, a
        p = mix64(hash_node(a, seed) ^ np.uint64(b)) % np.uint64(k)
        out[i] = p
        loads[p] += 1
    return out


def run(store: GraphStore, k: int, *, seed: int = 0, balance: float = 1.05, work_dir=None,
        owner_pass: bool = True, **params) -> PartitionPlan:
    cfg = HashConfig(**params)
    watch = Stopwatch()
    if cfg.mode == "vertex":
        owner = hash_owner(store.num_nodes, k, seed)
        watch.lap("owner")
        return PartitionPlan(algorithm="hash", num_parts=k, owner=owner, params={"seed": seed, **asdict(cfg)},
                             metrics={"passes": 0, "phase_seconds": watch.laps})
    loads = np.zeros(k, dtype=np.int64)
    path = assign_edges(store, k, "hash", work_dir, lambda b: hash_edges(b.src, b.dst, k, seed, loads))
    watch.lap("partitioning")
    plan = edge_plan(store, k, "hash", path, loads, {"seed": seed, **asdict(cfg)}, passes=1,
                     owner_pass=owner_pass)
    watch.lap("owner")
    plan.metrics["phase_seconds"] = watch.laps
    return plan
