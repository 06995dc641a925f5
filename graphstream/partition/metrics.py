"""Partition quality, computed by streaming (specs/partitioners.md, "Shared output and metrics").

- ``replication_factor``: the builder gives part p its owned ("inner") nodes
  plus the halo: the nodes that feed their aggregation without being inner
  (docs/format.md). Undirected store: every neighbour, so node v is present in
  {owner[v]} ∪ {owner[u] : u ~ v}. Directed store: in-neighbours only (row v
  lists the sources u of u -> v), so node u is present in {owner[u]} ∪
  {owner[v] : u -> v}. RF = sum over nodes of that set's size / num_nodes =
  sum over parts of (inner + halo) / num_nodes, exactly what the builder
  writes (``part_inner``, ``part_halo`` are the per-part terms). One pass
  marks, for each edge (u, v), "u is needed by owner[v]" and, undirected only,
  "v is needed by owner[u]" in a k-bit set per node.
- ``node_balance``: max inner count / mean.
- ``edge_balance``: max part edge count / mean, a part's edge count being the
  entries of its CSR as the builder writes it (its manifest's ``num_edges``):
  undirected, every edge with an owned endpoint twice (the inner row and the
  other end's row, inner or halo) and a self-loop once; directed, the
  in-edges of its owned nodes.
- ``vertex_cut_rf`` (edge partitioners): sum over parts of distinct endpoints
  of its edges / number of non-isolated nodes.

A partitioner that holds a vertex stream of an undirected store (coarse-refine)
gets the same figures from one read of it (:func:`vertex_stream_metrics`; on a
cluster, node ranges of it as tasks): a node's list is its neighbour
multiset, so its parts are counted from its own list, with no k-bit set a
node and no pass over the compressed store.

Memory: the k-bit sets (rows of ceil(k / 8) bytes) are built for a group of
parts at a time, as many as fit ``group_budget_bytes`` (32 bytes a node, at
least 64 MiB), so any k up to MAX_PARTS costs O(num_nodes) memory and
ceil(k / group) passes.

On a dask cluster (``client=``), a group's pass is two stages of tasks: edge
ranges mark their k-bit sets into shards in a work folder (and count part
edges), then node ranges OR the shards' rows, mark the owned bits and count
the columns. The counts are integers summed on the client: the same figures.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numba
import numpy as np
from numba import njit, prange

from .._atomic import scratch_dir
from ..cluster import check_visible, run_tasks, save_shard, shared_scratch_parent, split_range, task_count
from ..kernels.bitsets import count_bits, count_byte_columns, new_byte_bitsets, set_byte_bit
from ..kernels.prefetch import PREFETCH_DISTANCE, prefetch_row
from ..store import GraphStore, open_store
from .edge_parts import open_edge_parts, part_groups, stream_with_parts
from .vertex_stream import DEFAULT_BLOCK_ENTRIES, VertexStream, open_vertex_stream

if TYPE_CHECKING:
    from distributed import Client


@njit(cache=True, nogil=True)
def _mark_halo_lane(src, dst, owner, bits, p_lo, p_hi, edge_count, directed, a, b):
    """Bits for parts [p_lo, p_hi) of the nodes in [a, b): u needed by owner[v]; v needed by owner[u]
    unless ``directed`` (a directed part holds the in-edges of its inner nodes only, as the builder
    writes it); ``edge_count`` += the CSR entries of the edges whose source is in [a, b) in the parts
    holding them (undirected: two in each part holding a non-loop edge, one for a self-loop; directed: one
    in the part of the edge's target, whose row lists its source)."""
    n_edges = src.shape[0]
    for i in range(n_edges):
        j = i + PREFETCH_DISTANCE
        if j < n_edges:
            x = src[j]
            y = dst[j]
            if a <= x < b:
                prefetch_row(owner, y)
                prefetch_row(bits, x)
            if not directed and a <= y < b:
                prefetch_row(owner, x)
                prefetch_row(bits, y)
        u = src[i]
        v = dst[i]
        if a <= u < b:
            pv = owner[v]
            if p_lo <= pv < p_hi:
                set_byte_bit(bits, u, pv - p_lo)
            if p_lo == 0:
                pu = owner[u]
                if directed:
                    edge_count[pv] += 1
                elif u == v:
                    edge_count[pu] += 1
                else:   # u's row and v's in owner[u]'s part, and in owner[v]'s (once if equal)
                    edge_count[pu] += 2
                    if pv != pu:
                        edge_count[pv] += 2
        if not directed and a <= v < b:
            pu = owner[u]
            if p_lo <= pu < p_hi:
                set_byte_bit(bits, v, pu - p_lo)


@njit(cache=True, nogil=True, parallel=True)
def _mark_halo(src, dst, owner, bits, p_lo, p_hi, edge_count, directed, lanes):
    """:func:`_mark_halo_lane` for the node lanes ``lanes[t, 0]:lanes[t, 1]`` (inner bounds multiples
    of 64 nodes, so no two lanes' bit rows share a cache line) in parallel: every lane reads the whole
    batch but writes the bits of its own nodes only (no two threads write one byte, so no bit is
    lost) and counts its edges in ``edge_count[t]`` (the caller sums the rows: integers, the same
    figures). At R-MAT scale 21 the marking was 1.0 s of the pass's 1.2-1.5 s in one thread."""
    for t in prange(lanes.shape[0]):
        _mark_halo_lane(src, dst, owner, bits, p_lo, p_hi, edge_count[t], directed, lanes[t, 0], lanes[t, 1])


@njit(cache=True, nogil=True)
def _mark_owned(owner, bits, p_lo, p_hi):
    for v in range(owner.shape[0]):
        p = owner[v]
        if p_lo <= p < p_hi:
            set_byte_bit(bits, v, p - p_lo)


@njit(cache=True, nogil=True)
def _mark_cut(src, dst, part, bits, p_lo, p_hi):
    for i in range(src.shape[0]):
        p = part[i]
        if p_lo <= p < p_hi:
            j = p - p_lo
            m = np.uint64(1) << np.uint64(j & 63)
            bits[src[i], j >> 6] |= m
            bits[dst[i], j >> 6] |= m


def _ratio_max_mean(counts: np.ndarray) -> float:
    mean = float(counts.mean()) if len(counts) else 0.0
    return float(counts.max()) / mean if mean > 0 else 0.0


def check_owner(owner: np.ndarray, num_nodes: int, k: int) -> np.ndarray:
    owner = np.asarray(owner)
    if owner.shape != (num_nodes,):
        raise ValueError(f"owner has shape {owner.shape}, expected ({num_nodes},)")
    if num_nodes and (owner.min() < 0 or owner.max() >= k):
        raise ValueError(f"owner values must lie in [0, {k}), got [{owner.min()}, {owner.max()}]")
    return owner


def narrow_parts(owner: np.ndarray, k: int) -> np.ndarray:
    """``owner`` in the narrowest unsigned type that holds its k parts (a copy unless it is that already).

    The passes read a node's part at random, once or twice an edge: at R-MAT s22 an int32 owner is
    16.8 MB, an uint8 one 4.2 MB, which stays in the last-level cache beside the bitsets, also when two
    worker processes each hold their own copy on one socket."""
    return owner.astype(np.uint8 if k <= 1 << 8 else np.uint16 if k <= 1 << 16 else np.int32, copy=False)


def part_sizes(owner: np.ndarray, k: int, block: int = 1 << 22) -> np.ndarray:
    """Nodes a part (int64), counted a block at a time: ``np.bincount`` copies its input to int64 first, 8
    bytes a node at once (1 GiB at 2^27 nodes, the allocation that failed under a memory limit)."""
    sizes = np.zeros(k, dtype=np.int64)
    for a in range(0, len(owner), block):
        sizes += np.bincount(owner[a:a + block], minlength=k)
    return sizes


def vertex_partition_metrics(store: GraphStore, owner: np.ndarray, k: int,
                             batch_size: int | None = None, *, client: Client | None = None,
                             work_dir: str | os.PathLike | None = None) -> dict:
    """``replication_factor``, ``node_balance``, ``edge_balance`` of ``owner`` (by streaming).

    Also returns ``part_inner``, ``part_halo``, ``part_edges`` (lists of k ints: the builder's
    ``num_inner``, ``num_halo`` and ``num_edges`` of every part, with one hop) and ``metrics_passes``.

    ``client``: run the passes as tasks on its dask cluster, their shards in a
    scratch folder inside ``work_dir`` (a folder every worker sees; default:
    beside the store).
    """
    n = store.num_nodes
    owner = narrow_parts(check_owner(owner, n, k), k)
    inner = part_sizes(owner, k)
    groups = part_groups(n, k, 1 / 8, align=64)
    if client is not None:
        edge_count, present = _counts_on_cluster(client, store, owner, k, groups, batch_size, work_dir)
    else:
        lanes = np.array(split_range(n, numba.get_num_threads(), align=64), dtype=np.int64).reshape(-1, 2)
        edge_counts = np.zeros((len(lanes), k), dtype=np.int64)
        present = np.zeros(k, dtype=np.int64)       # |inner ∪ halo| per part
        for lo, hi in groups:
            bits = new_byte_bitsets(n, hi - lo)
            _mark_owned(owner, bits, lo, hi)
            for batch in store.stream(batch_size):
                _mark_halo(batch.src, batch.dst, owner, bits, lo, hi, edge_counts, store.directed, lanes)
            present[lo:hi] = _column_counts(bits, hi - lo)
            del bits
        edge_count = edge_counts.sum(axis=0)
    return _figures(inner, present, edge_count, len(groups))


def _figures(inner: np.ndarray, present: np.ndarray, edge_count: np.ndarray, passes: int) -> dict:
    """The metrics from the per-part counts: owned nodes, |inner ∪ halo|, CSR entries."""
    n = int(inner.sum())
    return {
        "replication_factor": int(present.sum()) / n if n else 0.0,
        "node_balance": _ratio_max_mean(inner),
        "edge_balance": _ratio_max_mean(edge_count),
        "part_inner": inner.tolist(),
        "part_halo": (present - inner).tolist(),
        "part_edges": edge_count.tolist(),
        "metrics_passes": passes,
    }


def vertex_stream_metrics(vs: VertexStream, owner: np.ndarray, k: int,
                          block_entries: int = DEFAULT_BLOCK_ENTRIES, *, client: Client | None = None) -> dict:
    """The figures of :func:`vertex_partition_metrics` for the store ``vs`` was built from (``owner``
    indexed by the stream's node ids), from one read of the stream.

    A node's list holds every stored edge's other end, a self-loop twice and duplicates as stored, so
    a part's CSR entries are, undirected, twice its nodes' entries that leave it plus those that stay,
    less one a self-loop (the builder writes it once); directed, its nodes' in-entries (their lists past
    the out-neighbours): the builder's counts exactly. R-MAT s21, k = 32: 0.35-0.38 s against 1.50-1.59 s for the
    store's pass (docs/partition-experiments.md, "The closing figures from the vertex stream"). Directed, a
    part holds the in-edges of its inner nodes, so a node is in the halo of its out-neighbours' parts:
    those come first in its list (``VertexStream.out_degree``), and only they mark its parts.

    ``client``: node ranges of the stream as tasks (one wave; each returns its k-int counts), the
    owner saved beside the stream for them: the same integers summed.
    """
    n = vs.num_nodes
    owner = narrow_parts(check_owner(owner, n, k), k)
    inner = part_sizes(owner, k)
    if client is None:
        counts = _stream_counts(vs, owner, k, 0, n, block_entries)
    else:
        with scratch_dir("graphstream-metrics-", vs.path.parent) as work:
            check_visible(client, vs.path, work)
            owner_path = str(save_shard(Path(work) / "owner.npy", owner))
            per_task = -(-vs.num_entries // task_count(client))
            ranges = vs.block_bounds(max(per_task, 1))   # any cut gives the same counts
            counts = np.zeros((5, k), dtype=np.int64)
            for part in run_tasks(client, "metrics: vertex stream", stream_counts_range, ranges, unit="node",
                                  size=lambda t: t[1] - t[0], vs_dir=str(vs.path), owner_path=owner_path, k=k,
                                  block_entries=block_entries):
                counts += part
    present, staying, leaving, loops, inward = counts
    entries = inward if vs.out_degree(mmap=True) is not None else 2 * leaving + staying - loops // 2
    return _figures(inner, present, entries, 0)   # no store pass


def stream_counts_range(a: int, b: int, *, vs_dir: str, owner_path: str, k: int, block_entries: int
                        ) -> np.ndarray:
    """Task: :func:`_stream_counts` of the nodes ``[a, b)`` (the owner read into memory: at random)."""
    vs = open_vertex_stream(vs_dir, mmap=True)
    return _stream_counts(vs, np.load(owner_path), k, a, b, block_entries)


def _stream_counts(vs: VertexStream, owner: np.ndarray, k: int, a: int, b: int, block_entries: int
                   ) -> np.ndarray:
    """(5, k) int64 for the nodes ``[a, b)``: per part, the nodes it holds (inner or halo), its nodes'
    entries that stay in it (both ends its own), those that leave it, its self-loops' entries (two a
    loop) and its nodes' entries past their out-neighbours (a directed stream's in-neighbours)."""
    marking = vs.out_degree(mmap=True)
    if marking is None:
        marking = np.empty(0, dtype=np.int32)   # every entry marks
    lanes = numba.get_num_threads()
    counts = np.zeros((5, lanes, k), dtype=np.int64)   # a row a thread
    for blk in vs.ranges(vs.aligned_bounds(a, b, block_entries, 1)):   # as vs.blocks, within [a, b)
        _count_parts_block(blk.first, blk.offsets, blk.neighbours, owner, marking, *counts)
    return counts.sum(axis=1)


_SEGMENT = 1024   # nodes a thread takes at a time (interleaved: the hubs, first in the stream, spread out)


@njit(cache=True, nogil=True, parallel=True)
def _count_parts_block(first, offs, nbrs, owner, marking, present, staying, leaving, loops, inward):
    """For the block's nodes: ``present[t, p]`` += the nodes with p in {owner[v]} ∪ {owner[u] : u ~ v}
    (the first ``marking[v]`` entries of v's list only, unless ``marking`` is empty);
    ``staying`` / ``leaving[t, owner[v]]`` += v's entries in its own part / in another, ``loops`` its
    entries v, ``inward`` its entries past the first ``marking[v]``; row t the thread's (segments t,
    t + threads, ...)."""
    lanes, k = present.shape
    nloc = offs.shape[0] - 1
    nseg = (nloc + _SEGMENT - 1) // _SEGMENT
    for t in prange(lanes):
        stamp = np.zeros(k, dtype=np.int64)   # stamp[p] = v + 1: p already counted for v
        for s in range(t, nseg, lanes):
            end = min(s * _SEGMENT + _SEGMENT, nloc)
            ahead = offs[end]
            for i in range(s * _SEGMENT, end):
                tag = first + i + 1
                a = owner[first + i]
                stamp[a] = tag
                present[t, a] += 1
                same = 0
                looped = 0
                marks = offs[i + 1] if marking.shape[0] == 0 else offs[i] + marking[first + i]
                for j in range(offs[i], offs[i + 1]):
                    if j + PREFETCH_DISTANCE < ahead:
                        prefetch_row(owner, nbrs[j + PREFETCH_DISTANCE])
                    p = owner[nbrs[j]]
                    same += p == a
                    looped += nbrs[j] == tag - 1
                    if j < marks and stamp[p] != tag:
                        stamp[p] = tag
                        present[t, p] += 1
                staying[t, a] += same
                leaving[t, a] += offs[i + 1] - offs[i] - same
                loops[t, a] += looped
                inward[t, a] += offs[i + 1] - marks


def _counts_on_cluster(client: Client, store: GraphStore, owner: np.ndarray, k: int,
                       groups: list[tuple[int, int]], batch_size: int | None,
                       work_dir: str | os.PathLike | None) -> tuple[np.ndarray, np.ndarray]:
    """(edges per part, |inner ∪ halo| per part) by tasks: the figures of the in-process loop.

    One edge range per worker thread: each range's shard is a k-bit set per node, ORed by the node
    ranges, so more ranges would cost more shards to write and read for no more parallelism. With a
    single range (one worker thread) its task counts the columns itself: no shard, no second wave.
    R-MAT s22, k = 8, coarse-refine's owner, one pinned worker: 1.97-2.03 s with four ranges and the
    wave, 1.84-1.93 s with one range, 1.74-1.79 s once the task ran the parallel kernel (against
    1.64-1.76 s in-process on one core). Two workers' two shards ORed on the client instead of by the
    wave: 0.06 s against 0.055 s, not kept.
    """
    parent = work_dir if work_dir is not None else shared_scratch_parent(store.path)
    check_visible(client, store.path)
    edge_count = np.zeros(k, dtype=np.int64)
    present = np.zeros(k, dtype=np.int64)
    with scratch_dir("graphstream-metrics-", parent) as work:
        check_visible(client, work)
        owner_path = str(save_shard(work / "owner.npy", owner))
        edge_ranges = split_range(store.num_edges, task_count(client, per_worker=1), align=store.chunk_size)
        node_ranges = split_range(store.num_nodes, task_count(client), align=64)
        for g, (lo, hi) in enumerate(groups):
            shards = [str(work / f"bits-{g:03d}-{i:05d}.npy") if len(edge_ranges) > 1 else None
                      for i in range(len(edge_ranges))]
            found = run_tasks(client, "metrics: halo bits", halo_bits_range,
                              [(a, b, shard) for (a, b), shard in zip(edge_ranges, shards, strict=True)],
                              unit="edge", size=lambda t: t[1] - t[0], store_path=store.path,
                              owner_path=owner_path, k=k, p_lo=lo, p_hi=hi, batch_size=batch_size)
            if g == 0:   # every edge is counted in the first group's pass (as in-process)
                edge_count += np.sum([counts for counts, _ in found], axis=0, dtype=np.int64)
            if len(edge_ranges) == 1:
                present[lo:hi] = found[0][1]
                continue
            columns = run_tasks(client, "metrics: replicas", present_range, node_ranges, shards=shards,
                                owner_path=owner_path, p_lo=lo, p_hi=hi)
            present[lo:hi] = np.sum(columns, axis=0, dtype=np.int64)
    return edge_count, present


def halo_bits_range(start: int, stop: int, shard: str | None, store_path: str, owner_path: str, k: int, p_lo: int,
                    p_hi: int, batch_size: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Task: the k-bit sets of parts [p_lo, p_hi) marked by edges [start, stop), saved to ``shard``;
    the edges per part (k ints; counted in the first group only). ``shard`` None (the only range): the
    owned bits marked too and the nodes per part of the group counted here, returned instead."""
    store = open_store(store_path)
    owner = np.load(owner_path)   # in RAM: read at random
    bits = new_byte_bitsets(store.num_nodes, p_hi - p_lo)
    edge_count = np.zeros((1, k), dtype=np.int64)
    # one lane (one thread: the worker's run other tasks), through the parallel kernel all the same: the
    # lane kernel called alone ran 25-35% slower (R-MAT s22 batches, one core: 0.37-0.39 s against 0.28-0.29 s)
    lane = np.array([[0, store.num_nodes]], dtype=np.int64)
    for batch in store.stream(batch_size, start=start, stop=stop):
        _mark_halo(batch.src, batch.dst, owner, bits, p_lo, p_hi, edge_count, store.directed, lane)
    if shard is None:
        _mark_owned(owner, bits, p_lo, p_hi)
        return edge_count[0], _column_counts(bits, p_hi - p_lo)
    save_shard(shard, bits)
    return edge_count[0], None


def present_range(a: int, b: int, shards: list[str], owner_path: str, p_lo: int, p_hi: int) -> np.ndarray:
    """Task: for nodes [a, b), the OR of the shards' k-bit sets plus the owned bits; the nodes per
    part of the group that have their bit set (p_hi - p_lo ints)."""
    bits = np.array(np.load(shards[0], mmap_mode="r")[a:b])
    for shard in shards[1:]:
        bits |= np.load(shard, mmap_mode="r")[a:b]
    _mark_owned(np.load(owner_path, mmap_mode="r")[a:b], bits, p_lo, p_hi)
    return _column_counts(bits, p_hi - p_lo)


def _column_counts(bits: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros(bits.shape[1] * 8, dtype=np.int64)
    count_byte_columns(bits, out)
    return out[:width]


def vertex_cut_rf(store: GraphStore, part_path: str | os.PathLike, k: int,
                  batch_size: int | None = None) -> float:
    """Vertex-cut replication factor of an edge partition written at ``part_path``."""
    n = store.num_nodes
    parts = open_edge_parts(part_path)
    if parts.shape != (store.num_edges,):
        raise ValueError(f"{part_path}: {parts.shape[0]} parts for {store.num_edges} edges")
    seen = np.zeros(n, dtype=np.bool_)
    total = 0
    for lo, hi in part_groups(n, k, 1 / 8, align=64):
        bits = np.zeros((n, (hi - lo + 63) // 64), dtype=np.uint64)
        for batch, pb in stream_with_parts(store, parts, batch_size):
            _mark_cut(batch.src, batch.dst, pb, bits, lo, hi)
        t, _ = count_bits(bits)
        total += int(t)
        seen |= bits.any(axis=1)
        del bits
    nonisolated = int(seen.sum())
    return total / nonisolated if nonisolated else 0.0


def vertex_cut_rf_from_bits(bits: np.ndarray) -> float:
    """The same figure from replica sets kept by the partitioner itself (no pass)."""
    total, nonempty = count_bits(bits)
    return int(total) / int(nonempty) if nonempty else 0.0


def edge_load_balance(loads: np.ndarray) -> float:
    """max / mean of the edge partition's own part sizes (edges per part[e])."""
    return _ratio_max_mean(np.asarray(loads, dtype=np.int64))
