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

import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from .._report import progress
from .._resources import Stopwatch, peak_rss_bytes
from ..errors import ParameterError
from ..kernels.merge import KeyCounter
from ..kernels.pairs import pair_key, pairs_to_csr
from ..store.delta import decode_keys
from ..store.snapshots import SnapshotStore

EMPTY = np.empty(0, dtype=np.int64)


# -- configuration ---------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PGCConfig:
    """Parameters of PGC (and of the workload model shared with the baselines)."""
    num_parts: int
    spatial_weight: float = 1.0
    temporal_weight: float = 2.0
    rounds: int = 30
    cap_by: str = "volume"          # "volume" (workload units) or "instances"
    chunk_cap: float | None = None  # default: total / (num_parts * chunks_per_part)
    chunks_per_part: int = 2
    balance: float = 1.05           # hard per-part cap: balance * total / num_parts
    instance_cost: float = 1.0
    edge_cost: float = 1.0
    seed: int = 0
    memory_budget: int | None = None  # bytes of O(instances) arrays kept in RAM
    scratch_dir: str | None = None

    def __post_init__(self) -> None:
        if self.num_parts is None:
            raise ParameterError("give -k K (number of parts) to partition a snapshot store")
        checks = [
            (self.num_parts >= 1, f"-k must be >= 1, got {self.num_parts}"),
            (self.spatial_weight >= 0 and self.temporal_weight >= 0,
             f"edge weights must be >= 0, got w_s={self.spatial_weight}, w_t={self.temporal_weight}"),
            (self.rounds >= 0, f"rounds must be >= 0, got {self.rounds}"),
            (self.cap_by in ("volume", "instances"), f"cap_by must be volume or instances, got {self.cap_by!r}"),
            (self.chunk_cap is None or self.chunk_cap > 0, f"chunk cap must be > 0, got {self.chunk_cap}"),
            (self.chunks_per_part >= 1, f"chunks_per_part must be >= 1, got {self.chunks_per_part}"),
            (self.balance >= 1.0, f"balance must be >= 1.0, got {self.balance}"),
            (self.instance_cost >= 0 and self.edge_cost >= 0 and self.instance_cost + self.edge_cost > 0,
             "instance_cost and edge_cost must be >= 0 and not both 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ParameterError(message)


# -- O(instances) arrays, in RAM or memory-mapped -------------------------------------

class InstanceArrays:
    """Allocates the O(instances) arrays: plain arrays within ``budget``
    bytes, otherwise memory-mapped files in a private temporary folder."""

    def __init__(self, expected_bytes: int, budget: int | None, scratch_dir: str | None):
        if budget is None:
            import psutil
            budget = psutil.virtual_memory().available // 4
        self.mapped = expected_bytes > budget
        self._stack = ExitStack()
        self._dir = None
        if self.mapped:
            self._dir = Path(self._stack.enter_context(
                tempfile.TemporaryDirectory(dir=scratch_dir, prefix="graphstream-pgc-")))
        self._n = 0

    def alloc(self, n: int, dtype, fill=None) -> np.ndarray:
        if self.mapped:
            self._n += 1
            mm = np.memmap(self._dir / f"a{self._n}.bin", dtype=dtype, mode="w+", shape=(max(n, 1),))[:n]
            arr = mm.view(np.ndarray)  # numba sees a plain array over the mapping
        else:
            arr = np.empty(n, dtype=dtype)
        if fill is not None:
            arr[...] = fill
        return arr

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> "InstanceArrays":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- per-snapshot kernels ------------------------------------------------------------

@njit(cache=True)
def _active_sorted(src, dst, local_of):
    """Sorted distinct nodes of a snapshot; sets local_of[v] to v's rank.

    ``local_of`` (int64[N], all -1) must be reset with :func:`_reset_local`.
    """
    buf = np.empty(src.shape[0] + dst.shape[0], dtype=np.int64)
    n = 0
    for arr in (src, dst):
        for i in range(arr.shape[0]):
            v = arr[i]
            if local_of[v] == -1:
                local_of[v] = -2
                buf[n] = v
                n += 1
    active = np.sort(buf[:n])
    for j in range(n):
        local_of[active[j]] = j
    return active


@njit(cache=True)
def _reset_local(active, local_of):
    for j in range(active.shape[0]):
        local_of[active[j]] = -1


@njit(cache=True)
def _adjacency(src, dst, local_of, na):
    """Undirected CSR over local ids (both directions, self-loops skipped)."""
    indptr = np.zeros(na + 1, dtype=np.int64)
    for e in range(src.shape[0]):
        if src[e] != dst[e]:
            indptr[local_of[src[e]] + 1] += 1
            indptr[local_of[dst[e]] + 1] += 1
    for j in range(na):
        indptr[j + 1] += indptr[j]
    fill = indptr[:-1].copy()
    indices = np.empty(indptr[na], dtype=np.int64)
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        if s != d:
            a = local_of[s]
            b = local_of[d]
            indices[fill[a]] = b
            fill[a] += 1
            indices[fill[b]] = a
            fill[b] += 1
    return indptr, indices


@njit(cache=True)
def _link_instances(active, indptr, base, last_inst, prev, nxt, deg, node_work, ic, ec):
    """Temporal links to each node's previous instance; degrees; node workloads."""
    for j in range(active.shape[0]):
        v = active[j]
        i = base + j
        p = last_inst[v]
        prev[i] = p
        nxt[i] = -1
        if p >= 0:
            nxt[p] = i
        last_inst[v] = i
        d = indptr[j + 1] - indptr[j]
        deg[i] = d
        node_work[v] += ic + ec * d


class Snapshot:
    """One snapshot's edges and its active nodes (local ids set in ``local_of``)."""

    def __init__(self, t: int, base: int, src: np.ndarray, dst: np.ndarray, counts: np.ndarray,
                 active: np.ndarray):
        self.t, self.base, self.src, self.dst, self.counts, self.active = t, base, src, dst, counts, active


@dataclass
class InstanceGraph:
    """The implicit spatio-temporal graph: per-snapshot instance offsets plus
    per-instance temporal links and spatial degrees."""
    snaps: SnapshotStore
    offsets: np.ndarray      # (T+1,) first instance id of each snapshot
    prev: np.ndarray         # (I,) previous instance of the same node, -1 if none
    next: np.ndarray         # (I,) next instance of the same node, -1 if none
    deg: np.ndarray          # (I,) undirected spatial degree (self-loops skipped)
    node_work: np.ndarray    # (N,) summed workload of each node's instances
    local_of: np.ndarray     # (N,) scratch, all -1 between snapshots
    inst_dtype: np.dtype
    arrays: InstanceArrays

    @property
    def num_instances(self) -> int:
        return int(self.offsets[-1])

    @property
    def num_snapshots(self) -> int:
        return len(self.offsets) - 1

    def snapshots(self, desc: str = "snapshots", only: np.ndarray | None = None):
        """Yield each snapshot (or those in ``only``, ascending) with its active
        nodes' local ids set in ``local_of`` (reset after)."""
        ts = range(self.num_snapshots) if only is None else [int(t) for t in only]
        with progress(len(ts), desc, unit="snapshot") as bar:
            for t in ts:
                keys, counts = self.snaps.snapshot_keys(t)
                src, dst = decode_keys(keys, self.snaps.num_nodes)
                active = _active_sorted(src, dst, self.local_of)
                try:
                    yield Snapshot(t, int(self.offsets[t]), src, dst, counts, active)
                finally:
                    _reset_local(active, self.local_of)
                bar.update(1)

    def workload(self, ic: float, ec: float, lo: int = 0, hi: int | None = None) -> np.ndarray:
        hi = self.num_instances if hi is None else hi
        return ic + ec * self.deg[lo:hi].astype(np.float64)


def instance_bytes(num_instances: int) -> int:
    """What the O(instances) arrays of PGC take (labels, prev, next, degree, label sizes, part)."""
    idt = 4 if num_instances < 2**31 else 8
    return num_instances * (4 * idt + 8 + 4)


def build_instance_graph(snaps: SnapshotStore, config: PGCConfig) -> InstanceGraph:
    """Pass 0: instance offsets from the stored node counts, then one forward
    pass linking each instance to its node's previous instance."""
    offsets = np.zeros(snaps.num_snapshots + 1, dtype=np.int64)
    np.cumsum(snaps.node_counts, out=offsets[1:])
    num = int(offsets[-1])
    idt = np.dtype(np.int32) if num < 2**31 else np.dtype(np.int64)
    arrays = InstanceArrays(instance_bytes(num), config.memory_budget, config.scratch_dir)
    prev = arrays.alloc(num, idt)
    nxt = arrays.alloc(num, idt)
    deg = arrays.alloc(num, np.int32)
    n = snaps.num_nodes
    last_inst = np.full(n, -1, dtype=np.int64)
    node_work = np.zeros(n, dtype=np.float64)
    local_of = np.full(n, -1, dtype=np.int64)
    graph = InstanceGraph(snaps, offsets, prev, nxt, deg, node_work, local_of, idt, arrays)
    for s in graph.snapshots("instances"):
        if len(s.active) != snaps.node_counts[s.t]:
            raise ParameterError(f"{snaps.path}: snapshot {s.t} has {len(s.active)} active nodes, "
                                 f"node_counts says {snaps.node_counts[s.t]}")
        indptr, _ = _adjacency(s.src, s.dst, local_of, len(s.active))
        _link_instances(s.active, indptr, s.base, last_inst, prev, nxt, deg, node_work,
                        config.instance_cost, config.edge_cost)
    return graph


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


@njit(cache=True)
def _lp_snapshot(indptr, indices, base, order, labels, sizes, deg, prev, nxt, ws, wt,
                 ic, ec, by_volume, cap, labs, wts, dirty, offsets, dirty_count, t):
    """One sweep of label propagation over the instances of one snapshot.

    Each instance takes the label of largest total edge weight among its
    spatial and temporal neighbours, keeping its own on ties; a label may
    not grow past ``cap``. Only instances flagged ``dirty`` are visited (all
    at first; afterwards those with a neighbour that moved), since the
    others would choose as before. Returns the number of instances that moved.
    """
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
    for _round in range(config.rounds):
        moved = 0
        # snapshots without a dirty instance are skipped whole (not even rebuilt)
        todo = np.flatnonzero(dirty_count > 0)
        for s in graph.snapshots("label propagation", only=todo):
            indptr, indices = _adjacency(s.src, s.dst, graph.local_of, len(s.active))
            order = rng.permutation(len(s.active))
            moved += _lp_snapshot(indptr, indices, s.base, order, labels, sizes, graph.deg, graph.prev,
                                  graph.next, float(config.spatial_weight), float(config.temporal_weight),
                                  ic, ec, by_volume, float(cap), labs, wts, dirty, graph.offsets,
                                  dirty_count, s.t)
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


# -- the whole algorithm ------------------------------------------------------------------

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


def pgc(snaps: SnapshotStore, config: PGCConfig) -> DynamicPartitionResult:
    """Partition the node instances of a snapshot store by graph chunks."""
    watch = Stopwatch()
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
