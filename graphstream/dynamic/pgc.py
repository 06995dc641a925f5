"""PGC: partitioning a dynamic graph by graph chunks (Chen et al., DGC, spec dynamic.md).

Input: the spatio-temporal graph of node instances (v, t), one per node with
at least one edge in snapshot t. Its edges are the spatial edges of each
snapshot (weight w_s) and temporal edges between consecutive instances of
the same node, i.e. (v, t) and (v, t') with t' the next snapshot where v is
active (weight w_t). It is never materialised: instance ids come from the
per-snapshot prefix counts (``node_counts``) and the rank of v among the
active nodes of t; spatial edges are read snapshot by snapshot from the
snapshot store; temporal edges are two O(instances) arrays ``prev``/``next``
filled by one forward pass.

1. Chunking: weighted label propagation over instances with a size cap.
2. Chunk statistics and the chunk graph h(a, b), by a streaming pass.
3. Chunk assignment: chunks by workload g_a descending; each goes to the part
   m maximising (gbar - load_m) * (1 + sum_{b on m} h(a, b)), ties to the
   least loaded part, under a hard per-part cap.

Workload model (linear, the spec's "linear fit to start"): an instance
costs ``instance_cost + edge_cost * spatial_degree``.

Memory: O(num_nodes) + O(instances) + one snapshot. The O(instances)
arrays are memory-mapped files when they exceed ``memory_budget`` bytes.
Never O(events): events were folded into snapshots by the snapshot builder.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from .._report import phase_logger
from .._resources import Stopwatch, peak_rss_bytes
from ..kernels.merge import KeyCounter
from ..kernels.pairs import pair_key, pairs_to_csr
from ..store.snapshots import SnapshotStore
from .config import PGCConfig  # noqa: F401 (importable here, as before)
from .instances import InstanceGraph, build_instance_graph, snapshot_adjacency
from .workload import DynamicPartitionResult, evaluate, fit_cost_model  # noqa: F401 (importable here)

# -- 1. chunking by weighted label propagation -------------------------------------------

@njit(cache=True)
def _label_weight(labs, wts, m, lab):
    for r in range(m):
        if labs[r] == lab:
            return r
    return -1


@njit(cache=True)
def _mark_dirty(q, dirty, offsets, dirty_count):
    """Flag instance q for a revisit (and count it in its snapshot)."""
    if not dirty[q]:
        dirty[q] = True
        t = np.searchsorted(offsets, q, side="right") - 1
        dirty_count[t] += 1


class InstanceLinks(NamedTuple):
    """What a sweep reads of the instance graph (arrays over instances; ``offsets`` over snapshots)."""
    deg: np.ndarray
    prev: np.ndarray
    nxt: np.ndarray
    offsets: np.ndarray


class LPWeights(NamedTuple):
    """Edge weights, the workload model and the label size cap."""
    spatial: float
    temporal: float
    instance_cost: float
    edge_cost: float
    by_volume: bool
    cap: float


class LPState(NamedTuple):
    """Labels, label sizes and the revisit flags, changed in place; ``labs``/``wts`` are scratch."""
    labels: np.ndarray
    sizes: np.ndarray
    dirty: np.ndarray
    dirty_count: np.ndarray
    labs: np.ndarray
    wts: np.ndarray


@njit(cache=True)
def _lp_snapshot(indptr, indices, base, order, t, links, state, weights):
    """One sweep of label propagation over the instances of snapshot t.

    Each instance takes the label of largest total edge weight among its
    spatial and temporal neighbours, keeping its own on ties; a label may
    not grow past ``cap``. Only instances flagged ``dirty`` are visited (all
    at first; afterwards those with a neighbour that moved), since the
    others would choose as before. Returns the number of instances that moved.
    """
    deg, prev, nxt, offsets = links.deg, links.prev, links.nxt, links.offsets
    labels, sizes, dirty, dirty_count = state.labels, state.sizes, state.dirty, state.dirty_count
    labs, wts = state.labs, state.wts
    ws, wt, cap = weights.spatial, weights.temporal, weights.cap
    ic, ec, by_volume = weights.instance_cost, weights.edge_cost, weights.by_volume
    moved = 0
    for jj in range(order.shape[0]):
        j = order[jj]
        i = base + j
        if not dirty[i]:
            continue
        dirty[i] = False
        dirty_count[t] -= 1
        a = indptr[j]
        b = indptr[j + 1]
        ms = b - a
        for e in range(ms):
            labs[e] = labels[base + indices[a + e]]
        if ms > 1:
            labs[:ms].sort()
        # collapse runs of equal labels: (label, weight)
        m = 0
        for e in range(ms):
            if m > 0 and labs[m - 1] == labs[e]:
                wts[m - 1] += ws
            else:
                labs[m] = labs[e]
                wts[m] = ws
                m += 1
        for q in (prev[i], nxt[i]):
            if q >= 0:
                lq = labels[q]
                r = _label_weight(labs, wts, m, lq)
                if r >= 0:
                    wts[r] += wt
                else:
                    labs[m] = lq
                    wts[m] = wt
                    m += 1
        if m == 0:
            continue
        own = labels[i]
        r = _label_weight(labs, wts, m, own)
        best = own
        best_w = wts[r] if r >= 0 else 0.0
        vol = ic + ec * deg[i] if by_volume else 1.0
        for r in range(m):
            c = labs[r]
            if c != own and wts[r] > best_w and sizes[c] + vol <= cap:
                best = c
                best_w = wts[r]
        if best != own:
            sizes[own] -= vol
            sizes[best] += vol
            labels[i] = best
            moved += 1
            for e in range(a, b):
                _mark_dirty(base + indices[e], dirty, offsets, dirty_count)
            for q in (prev[i], nxt[i]):
                if q >= 0:
                    _mark_dirty(q, dirty, offsets, dirty_count)
    return moved


@njit(cache=True)
def _init_labels(labels, sizes, deg, ic, ec, by_volume):
    for i in range(labels.shape[0]):
        labels[i] = i
        sizes[i] = ic + ec * deg[i] if by_volume else 1.0


def label_propagation(graph: InstanceGraph, config: PGCConfig, cap: float) -> tuple[np.ndarray, list[int]]:
    """Step 1: labels (one per instance) after at most ``config.rounds`` rounds.

    Rounds visit the snapshots in time order (each is rebuilt from its
    keyframe and deltas once per round) and the instances of a snapshot in
    a seeded random order. After the first round only instances with a
    neighbour that moved are revisited (a move blocked only by the cap is
    retried when a neighbour moves); a round ends the loop when nothing moved.
    """
    num = graph.num_instances
    labels = graph.arrays.alloc(num, graph.inst_dtype)
    sizes = graph.arrays.alloc(num, np.float64)
    by_volume = config.cap_by == "volume"
    ic, ec = float(config.instance_cost), float(config.edge_cost)
    _init_labels(labels, sizes, graph.deg, ic, ec, by_volume)
    rng = np.random.default_rng(config.seed)
    moved_per_round = []
    max_deg = int(graph.deg.max()) if num else 0
    labs = np.empty(max_deg + 2, dtype=graph.inst_dtype)
    wts = np.empty(max_deg + 2, dtype=np.float64)
    dirty = graph.arrays.alloc(num, np.bool_, fill=True)
    dirty_count = np.diff(graph.offsets)
    links = InstanceLinks(graph.deg, graph.prev, graph.next, graph.offsets)
    state = LPState(labels, sizes, dirty, dirty_count, labs, wts)
    weights = LPWeights(float(config.spatial_weight), float(config.temporal_weight), ic, ec, by_volume, float(cap))
    for _round in range(config.rounds):
        moved = 0
        # snapshots without a dirty instance are skipped whole (not even rebuilt)
        todo = np.flatnonzero(dirty_count > 0)
        for s in graph.snapshots("label propagation", only=todo):
            indptr, indices = snapshot_adjacency(s.src, s.dst, graph.local_of, len(s.active))
            order = rng.permutation(len(s.active))
            moved += _lp_snapshot(indptr, indices, s.base, order, s.t, links, state, weights)
        moved_per_round.append(int(moved))
        if moved == 0:
            break
    del sizes, dirty
    return labels, moved_per_round


# -- 2. chunk statistics and the chunk graph -------------------------------------------------

@njit(cache=True)
def _mark_used(labels, used):
    for i in range(labels.shape[0]):
        used[labels[i]] = True


@njit(cache=True)
def _relabel(labels, new_id):
    for i in range(labels.shape[0]):
        labels[i] = new_id[labels[i]]


@njit(cache=True)
def _spatial_pairs(src, dst, local_of, base, chunk, num_chunks, out):
    """Chunk pair key min*C+max of every spatial edge between two chunks."""
    m = 0
    for e in range(src.shape[0]):
        if src[e] == dst[e]:
            continue
        a = chunk[base + local_of[src[e]]]
        b = chunk[base + local_of[dst[e]]]
        if a != b:
            out[m] = pair_key(a, b, num_chunks)
            m += 1
    return m


@njit(cache=True)
def _temporal_pairs(prev, chunk, lo, hi, num_chunks, out):
    m = 0
    for i in range(lo, hi):
        p = prev[i]
        if p >= 0:
            a = chunk[p]
            b = chunk[i]
            if a != b:
                out[m] = pair_key(a, b, num_chunks)
                m += 1
    return m


@dataclass
class ChunkGraph:
    """Per chunk: instances, edge endpoints, workload; the chunk graph h(a, b) in CSR."""
    num_chunks: int
    instances: np.ndarray
    endpoints: np.ndarray
    workload: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    largest: float  # largest chunk size in cap units


def chunk_statistics(graph: InstanceGraph, labels: np.ndarray, config: PGCConfig) -> ChunkGraph:
    """Step 2: compact labels into chunk ids 0..C-1 (in place) and stream the chunk graph."""
    num = graph.num_instances
    used = np.zeros(num, dtype=np.bool_)
    _mark_used(labels, used)
    new_id = np.cumsum(used, dtype=np.int32 if num < 2**31 else np.int64) - 1
    c = int(new_id[-1] + 1) if num else 0
    del used
    _relabel(labels, new_id)
    del new_id
    chunk = labels
    step = 1 << 22
    inst = np.zeros(c, dtype=np.int64)
    endpoints = np.zeros(c, dtype=np.int64)
    work = np.zeros(c, dtype=np.float64)
    ic, ec = float(config.instance_cost), float(config.edge_cost)
    for lo in range(0, num, step):
        ch = chunk[lo:lo + step]
        d = graph.deg[lo:lo + step]
        inst += np.bincount(ch, minlength=c)
        endpoints += np.bincount(ch, weights=d, minlength=c).astype(np.int64)
        work += np.bincount(ch, weights=ic + ec * d.astype(np.float64), minlength=c)
    spatial, temporal = KeyCounter(), KeyCounter()
    for s in graph.snapshots("chunk graph"):
        out = np.empty(len(s.src), dtype=np.int64)
        m = _spatial_pairs(s.src, s.dst, graph.local_of, s.base, chunk, c, out)
        spatial.add(out[:m].copy())
    for lo in range(0, num, step):
        hi = min(num, lo + step)
        out = np.empty(hi - lo, dtype=np.int64)
        m = _temporal_pairs(graph.prev, chunk, lo, hi, c, out)
        temporal.add(out[:m].copy())
    sk, sc = spatial.result()
    tk, tc = temporal.result()
    keys = np.union1d(sk, tk)
    h = np.zeros(len(keys), dtype=np.float64)
    h[np.searchsorted(keys, sk)] += config.spatial_weight * sc
    h[np.searchsorted(keys, tk)] += config.temporal_weight * tc
    del sk, sc, tk, tc
    indptr = np.zeros(c + 1, dtype=np.int64)
    indices = np.empty(2 * len(keys), dtype=np.int32 if c < 2**31 else np.int64)
    weights = np.empty(2 * len(keys), dtype=np.float64)
    pairs_to_csr(keys, h, c, indptr, indices, weights)
    largest = float(work.max() if config.cap_by == "volume" else inst.max()) if c else 0.0
    return ChunkGraph(c, inst, endpoints, work, indptr, indices, weights, largest)


# -- 3. chunk assignment --------------------------------------------------------------

@njit(cache=True)
def _assign_chunks(order, g, indptr, indices, hw, k, gbar, part_cap):
    """Greedy assignment by (gbar - load_m) * (1 + affinity to m), ties least loaded."""
    c = g.shape[0]
    part = np.full(c, -1, dtype=np.int32)
    load = np.zeros(k, dtype=np.float64)
    aff = np.zeros(k, dtype=np.float64)
    over = 0
    for x in range(order.shape[0]):
        a = order[x]
        for e in range(indptr[a], indptr[a + 1]):
            pb = part[indices[e]]
            if pb >= 0:
                aff[pb] += hw[e]
        best = -1
        best_s = 0.0
        for m in range(k):
            if load[m] + g[a] > part_cap:
                continue
            s = (gbar - load[m]) * (1.0 + aff[m])
            if best < 0 or s > best_s or (s == best_s and load[m] < load[best]):
                best = m
                best_s = s
        if best < 0:  # nothing fits under the cap: the least loaded part takes it
            best = 0
            for m in range(1, k):
                if load[m] < load[best]:
                    best = m
            over += 1
        part[a] = best
        load[best] += g[a]
        for m in range(k):
            aff[m] = 0.0
    return part, load, over


def assign_chunks(cg: ChunkGraph, config: PGCConfig) -> tuple[np.ndarray, np.ndarray, int]:
    """Step 3: part of every chunk, part loads, and how many chunks broke the cap."""
    k = config.num_parts
    total = float(cg.workload.sum())
    gbar = total / k
    order = np.argsort(-cg.workload, kind="stable")
    return _assign_chunks(order, cg.workload, cg.indptr, cg.indices, cg.weights, k, gbar,
                          config.balance * gbar + 1e-9)


# -- the whole algorithm ------------------------------------------------------------------

def pgc(snaps: SnapshotStore, config: PGCConfig) -> DynamicPartitionResult:
    """Partition the node instances of a snapshot store by graph chunks."""
    watch = Stopwatch(on_lap=phase_logger("pgc"))
    graph = build_instance_graph(snaps, config)
    watch.lap("instances")
    ic, ec = config.instance_cost, config.edge_cost
    if config.chunk_cap is not None:
        cap = float(config.chunk_cap)
    else:
        total = (ic * graph.num_instances + ec * float(graph.deg.sum(dtype=np.int64))
                 if config.cap_by == "volume" else float(graph.num_instances))
        cap = max(1.0, total / (config.num_parts * config.chunks_per_part))
    # 1. chunking
    labels, moved = label_propagation(graph, config, cap)
    watch.lap("label_propagation")
    # 2. chunk statistics and chunk graph (labels become chunk ids in place)
    cg = chunk_statistics(graph, labels, config)
    watch.lap("chunk_graph")
    # 3. chunk assignment
    part_of_chunk, _loads, over = assign_chunks(cg, config)
    inst_part = graph.arrays.alloc(graph.num_instances, np.int32)
    step = 1 << 22
    for lo in range(0, graph.num_instances, step):
        inst_part[lo:lo + step] = part_of_chunk[labels[lo:lo + step]]
    watch.lap("assignment")
    metrics = evaluate(graph, inst_part, config)
    watch.lap("evaluate")
    metrics.update({
        "num_instances": graph.num_instances, "num_chunks": cg.num_chunks, "chunk_cap": cap,
        "largest_chunk": cg.largest, "lp_rounds": len(moved), "lp_moved": moved,
        "chunks_over_part_cap": int(over), "chunk_graph_edges": int(len(cg.indices) // 2),
        "labels_memory_mapped": graph.arrays.mapped,
        "seconds": watch.seconds, "phases": dict(watch.laps), "peak_rss_bytes": peak_rss_bytes(),
    })
    return DynamicPartitionResult("pgc", config, graph, inst_part, metrics, labels, cg.num_chunks)


