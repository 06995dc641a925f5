"""SPRING: streaming partitioning by richest neighbours (CATGNN), a vertex partitioner.

Pass 1, degrees. Pass 2, streaming clustering after Hollocou et al. (2017),
for each edge (u, v):
  1. an unseen endpoint opens a cluster of its own (id = its node id) with
     volume = its degree;
  2. if vol(c_u) <= tau and vol(c_v) <= tau, the endpoint in the cluster of
     smaller volume moves to the other cluster (ties: u moves to c_v);
  3. richest neighbour: if deg(v) > deg(rich[u]) then rich[u] = v, and
     symmetrically (the first neighbour seen is always taken).
Cluster merging, in memory, O(num_nodes):
  4. representative r(c) = the member whose richest neighbour has the
     largest degree (ties: the smallest node id);
  5. clusters visited by size (node count) ascending, ties by id; for
     cluster i, t = rich[r(i)]: if c_t != i and |C_i| + |C_{c_t}| <=
     beta * num_nodes / k, merge i into c_t. The grown cluster re-enters the
     size order with its new size and keeps the better representative;
  6. clusters (and never-seen, isolated nodes as singletons) largest first,
     each to the part with the fewest nodes (ties: lowest part id).
Pass 3 is the builder.

Time O(|E| + |V| log |V|), memory about 48 bytes a node. ``tau`` defaults to
``tau_factor * |E| / k`` with ``tau_factor`` = DEFAULT_TAU_FACTOR, chosen by
measurement on the shared datasets (docs/partitioners.md).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numba import njit

from .._report import phase_logger
from .._resources import Stopwatch
from ..kernels.packing import heap_pop, heap_push, pack_least_loaded
from ..kernels.prefetch import prefetch_ends
from ..store import GraphStore, total_degree
from .plan import PartitionPlan

DEFAULT_TAU_FACTOR = 0.5


@dataclass(frozen=True, slots=True)
class SpringConfig:
    """tau: volume cap (edges); None means tau_factor * |E| / k. beta: merge cap factor."""
    tau: float | None = None
    tau_factor: float = DEFAULT_TAU_FACTOR
    beta: float = 1.05

    def resolve_tau(self, num_edges: int, k: int) -> float:
        return float(self.tau) if self.tau is not None else self.tau_factor * num_edges / k


# -- pass 2: streaming clustering (steps 1-3) ---------------------------------------------------

# Per-node state sits in one record per node, [degree, cluster, rich, deg(rich)], so an
# endpoint costs one cache line instead of four scattered ones (the pass is bound by
# random memory accesses, not by arithmetic).
DEG, CLUSTER, RICH, RICH_DEG = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def cluster_edges(src, dst, node, vol, tau):
    for i in range(src.shape[0]):
        prefetch_ends(src, dst, i, node)
        u = src[i]
        v = dst[i]
        du = node[u, DEG]
        dv = node[v, DEG]
        # 1. unseen endpoints open their own cluster
        if node[u, CLUSTER] < 0:
            node[u, CLUSTER] = u
            vol[u] = du
        if node[v, CLUSTER] < 0:
            node[v, CLUSTER] = v
            vol[v] = dv
        # 2. the endpoint in the lighter cluster joins the other one
        cu = node[u, CLUSTER]
        cv = node[v, CLUSTER]
        if cu != cv and vol[cu] <= tau and vol[cv] <= tau:
            if vol[cu] <= vol[cv]:
                vol[cu] -= du
                vol[cv] += du
                node[u, CLUSTER] = cv
            else:
                vol[cv] -= dv
                vol[cu] += dv
                node[v, CLUSTER] = cu
        # 3. richest neighbours
        if node[u, RICH] < 0 or dv > node[u, RICH_DEG]:
            node[u, RICH] = v
            node[u, RICH_DEG] = dv
        if node[v, RICH] < 0 or du > node[v, RICH_DEG]:
            node[v, RICH] = u
            node[v, RICH_DEG] = du


# -- steps 4-6: merging and packing -------------------------------------------------------------

@njit(cache=True, nogil=True)
def _find(parent, c):
    root = c
    while parent[root] != root:
        root = parent[root]
    while parent[c] != root:          # path compression
        nxt = parent[c]
        parent[c] = root
        c = nxt
    return root


@njit(cache=True, nogil=True)
def _better_rep(a, b, deg, rich):
    """The representative of two: richer richest neighbour, ties the smaller id."""
    da = deg[rich[a]]
    db = deg[rich[b]]
    if da > db or (da == db and a < b):
        return a
    return b


@njit(cache=True, nogil=True)
def merge_clusters(cluster, deg, rich, cap):
    """Steps 4 and 5; returns each node's final cluster (a root id), -1 for unseen nodes."""
    n = cluster.shape[0]
    size = np.zeros(n, dtype=np.int64)
    rep = np.full(n, -1, dtype=cluster.dtype)
    # 4. sizes and representatives (ascending ids, so strict '>' keeps the smallest on ties)
    for m in range(n):
        c = cluster[m]
        if c < 0:
            continue
        size[c] += 1
        if rep[c] < 0 or deg[rich[m]] > deg[rich[rep[c]]]:
            rep[c] = m
    # 5. a min-heap of size * 2**32 + id; a popped key whose size is stale is skipped.
    # Each step pops one key before pushing at most one, so nclusters slots suffice.
    nclusters = 0
    for c in range(n):
        if size[c] > 0:
            nclusters += 1
    heap = np.empty(nclusters, dtype=np.int64)
    hsize = 0
    for c in range(n):
        if size[c] > 0:
            heap[hsize] = (size[c] << 32) + c
            hsize += 1
    heap.sort()                        # a sorted array is a valid min-heap
    parent = np.arange(n).astype(cluster.dtype)
    while hsize > 0:
        key, hsize = heap_pop(heap, hsize)
        i = key & 0xFFFFFFFF
        if parent[i] != i or size[i] != (key >> 32):
            continue
        t = rich[rep[i]]
        ct = _find(parent, cluster[t])
        if ct != i and size[i] + size[ct] <= cap:
            parent[i] = ct
            size[ct] += size[i]
            rep[ct] = _better_rep(rep[i], rep[ct], deg, rich)
            hsize = heap_push(heap, hsize, (size[ct] << 32) + ct)
    final = np.full(n, -1, dtype=cluster.dtype)
    for m in range(n):
        if cluster[m] >= 0:
            final[m] = _find(parent, cluster[m])
    return final, size


@njit(cache=True, nogil=True)
def _owner_from_clusters(final, cluster_part, singleton_part):
    n = final.shape[0]
    owner = np.empty(n, dtype=np.int32)
    j = 0
    for m in range(n):
        if final[m] >= 0:
            owner[m] = cluster_part[final[m]]
        else:
            owner[m] = singleton_part[j]
            j += 1
    return owner


def cluster_roots(final: np.ndarray) -> np.ndarray:
    """Ids of the clusters that survived merging (ascending)."""
    is_root = np.zeros(len(final), dtype=np.bool_)
    is_root[final[final >= 0]] = True
    return np.flatnonzero(is_root)


def pack_clusters(final: np.ndarray, size: np.ndarray, k: int) -> np.ndarray:
    """6. largest cluster first to the part with the fewest nodes; unseen nodes are singletons."""
    n = len(final)
    roots = cluster_roots(final)
    unseen = np.flatnonzero(final < 0)
    # order: size descending, then id ascending (roots and singletons share one order)
    ids = np.concatenate([roots, unseen])
    sizes = np.concatenate([size[roots], np.ones(len(unseen), dtype=np.int64)])
    order = np.lexsort((ids, -sizes))
    parts = np.empty(len(ids), dtype=np.int32)
    parts[order] = pack_least_loaded(sizes[order], np.zeros(k, dtype=np.int64))
    cluster_part = np.full(n, -1, dtype=np.int32)
    cluster_part[roots] = parts[:len(roots)]
    return _owner_from_clusters(final, cluster_part, parts[len(roots):])


def run(store: GraphStore, k: int, *, seed: int = 0, balance: float = 1.05, work_dir=None,
        batch_size: int | None = None, degree: np.ndarray | None = None, **params) -> PartitionPlan:
    """SPRING is deterministic: ``seed`` is accepted for the common interface and unused. ``balance`` is its
    merge cap ``beta`` (specs/partitioners.md), unless ``beta`` is given. ``degree``: the total degrees if
    already counted (on a cluster, by tasks over edge chunks)."""
    cfg = SpringConfig(**{"beta": balance, **params})
    watch = Stopwatch(on_lap=phase_logger("spring"))  # one progress line per phase
    n = store.num_nodes
    tau = cfg.resolve_tau(store.num_edges, k)
    deg = total_degree(store, batch_size) if degree is None else degree   # pass 1
    big = n >= 2**31 - 1 or 2 * store.num_edges >= 2**31 - 1
    dtype = np.int64 if big else np.int32
    node = np.full((n, 4), -1, dtype=dtype)
    node[:, DEG] = deg
    del deg
    vol = np.zeros(n, dtype=dtype)
    watch.lap("degrees")
    for batch in store.stream(batch_size):                                 # pass 2
        cluster_edges(batch.src, batch.dst, node, vol, tau)
    watch.lap("clustering")
    del vol
    final, size = merge_clusters(node[:, CLUSTER], node[:, DEG], node[:, RICH],
                                 cfg.beta * n / k)                         # 4-5
    del node
    watch.lap("merging")
    owner = pack_clusters(final, size, k)                                  # 6
    watch.lap("packing")
    nclusters = len(cluster_roots(final))
    return PartitionPlan(algorithm="spring", num_parts=k, owner=owner,
                         params={**asdict(cfg), "tau": tau, "seed": seed},
                         metrics={"passes": 2, "clusters": nclusters, "phase_seconds": watch.laps})
