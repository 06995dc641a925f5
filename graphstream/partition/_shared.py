"""Mechanisms shared by the partitioners, written once.

- seeded 64-bit hashing and a counter-based random stream (numba and Python
  give the same numbers, so the tests' plain-Python references can match);
- k-bit replica sets: ``uint64[num_nodes, ceil(k/64)]`` bit matrices, any k;
- least-loaded packing (LPT) with a binary heap on packed (load, part) keys;
- ``part[e]`` written chunk-aligned to a Zarr array, behind the computation;
- grouped passes: per-node x per-part tables (replica bits, edge counts) that
  would be O(num_nodes * k) are built for a group of parts at a time, sized
  to a memory budget, so memory stays O(num_nodes) for any k.
"""
from __future__ import annotations

import os
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import numpy as np
import zarr
from numba import njit

from zarr.codecs import BloscCodec

from ..store import GraphStore
from ..store.stream import stream_edges

MAX_PARTS = 1024
PART_DTYPE = np.dtype(np.int16)          # enough for MAX_PARTS; 2 bytes per edge on disk


def part_compressor() -> BloscCodec:
    """LZ4 level 1 with byte shuffle for part[e]: the store's zstd-3 spent 0.41 s per 16M
    parts on the writer thread (as long as a whole hash pass on 2 cores), LZ4 0.04 s, at
    1.0 against 0.66 bytes per edge; part[e] is scratch data read once or twice."""
    return BloscCodec(cname="lz4", clevel=1, shuffle="shuffle")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK64 = (1 << 64) - 1


def group_budget_bytes(num_nodes: int) -> int:
    """Memory for one per-node x per-part table: 32 bytes a node, at least 64 MiB.

    Keeps every grouped pass within the 64 bytes/node + 256 MB target while
    letting small graphs do everything in one pass.
    """
    return max(64 << 20, 32 * int(num_nodes))


def num_words(k: int) -> int:
    return (int(k) + 63) // 64


# -- hashing and random numbers --------------------------------------------------------------

@njit(cache=True, inline="always")
def mix64(x):
    """splitmix64 finaliser: a bijection of uint64 with good avalanche."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@njit(cache=True, inline="always")
def hash_node(v, seed):
    """Seeded hash of a node id (uint64)."""
    return mix64(np.uint64(v) + (np.uint64(seed) + np.uint64(1)) * _GOLDEN)


@njit(cache=True, inline="always")
def next_random(state):
    """Counter-based random uint64; ``state`` is a uint64[1] array advanced in place."""
    state[0] += _GOLDEN
    return mix64(state[0])


def py_mix64(x: int) -> int:
    """Plain-Python twin of :func:`mix64` (the tests' references use it)."""
    x &= _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def py_hash_node(v: int, seed: int) -> int:
    return py_mix64(v + (seed + 1) * 0x9E3779B97F4A7C15)


def seed_state(seed: int) -> np.ndarray:
    """The random stream's state for ``seed`` (uint64[1])."""
    return np.array([py_mix64(int(seed) ^ 0x5DEECE66D)], dtype=np.uint64)


# -- replica bitsets -------------------------------------------------------------------------

@njit(cache=True, inline="always")
def has_bit(bits, v, p):
    return (bits[v, p >> 6] >> np.uint64(p & 63)) & np.uint64(1) != np.uint64(0)


@njit(cache=True, inline="always")
def set_bit(bits, v, p):
    bits[v, p >> 6] |= np.uint64(1) << np.uint64(p & 63)


@njit(cache=True, inline="always")
def popcount64(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True, nogil=True)
def count_bits(bits):
    """Total number of set bits, and of rows with at least one bit set."""
    total = 0
    nonempty = 0
    for v in range(bits.shape[0]):
        c = 0
        for w in range(bits.shape[1]):
            c += popcount64(bits[v, w])
        total += c
        if c > 0:
            nonempty += 1
    return total, nonempty


def new_bitsets(num_nodes: int, k: int) -> np.ndarray:
    return np.zeros((num_nodes, num_words(k)), dtype=np.uint64)


def node_records_with_bits(num_nodes: int, k: int, fields: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-node int64 records ``[field 0 .. fields-1, replica bits ...]`` and the bits as uint64.

    A per-edge kernel touching a node's counters and its replica set then
    pays one cache miss instead of one per array (2PS-L's phase 2b: 2.6x; HDRF
    at R-MAT scale 24: 2.2 -> 3.0 M edges/s), with identical results.
    """
    rec = np.zeros((num_nodes, fields + num_words(k)), dtype=np.int64)
    return rec, rec[:, fields:].view(np.uint64)


# -- symmetric CSR from pair keys ----------------------------------------------------------------

@njit(cache=True, nogil=True)
def pairs_to_csr(keys, w, num_rows, indptr, indices, weights):
    """Both directions of the weighted pairs ``keys = a * num_rows + b`` (a < b), by counting.

    Row a gets (b, w) and row b gets (a, w); sorted unique keys give sorted
    rows. ``indptr`` (num_rows + 1 zeros), ``indices`` and ``weights``
    (2 x len(keys) each, any dtypes that hold the values) are filled in place.
    """
    for x in range(keys.shape[0]):
        indptr[keys[x] // num_rows + 1] += 1
        indptr[keys[x] % num_rows + 1] += 1
    for a in range(num_rows):
        indptr[a + 1] += indptr[a]
    fill = indptr[:-1].copy()
    for x in range(keys.shape[0]):
        a = keys[x] // num_rows
        b = keys[x] % num_rows
        indices[fill[a]] = b
        weights[fill[a]] = w[x]
        fill[a] += 1
        indices[fill[b]] = a
        weights[fill[b]] = w[x]
        fill[b] += 1


# -- least-loaded packing ---------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _heap_push(heap, size, key):
    i = size
    heap[i] = key
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent
    return size + 1


@njit(cache=True, nogil=True)
def _heap_pop(heap, size):
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            child = left + 1
        if heap[i] <= heap[child]:
            break
        heap[i], heap[child] = heap[child], heap[i]
        i = child
    return top, size


@njit(cache=True, nogil=True)
def pack_least_loaded(weights, loads):
    """Give item i (in the order given) to the least loaded part, ties lowest part id.

    ``loads`` (int64[k]) is updated in place; returns the part of each item.
    A heap of keys ``load * 2**11 + part`` makes each step O(log k).
    """
    k = loads.shape[0]
    heap = np.empty(k, dtype=np.int64)
    size = 0
    for p in range(k):
        size = _heap_push(heap, size, loads[p] * 2048 + p)
    out = np.empty(weights.shape[0], dtype=np.int32)
    for i in range(weights.shape[0]):
        key, size = _heap_pop(heap, size)
        p = key & 2047
        out[i] = p
        loads[p] += weights[i]
        size = _heap_push(heap, size, loads[p] * 2048 + p)
    return out


# -- part[e] on disk ---------------------------------------------------------------------------

def parts_dir(work_dir: str | os.PathLike | None) -> Path:
    """Where an edge partitioner writes part[e]: ``work_dir`` or a fresh temporary folder."""
    if work_dir is None:
        return Path(tempfile.mkdtemp(prefix="graphstream-parts-"))
    d = Path(work_dir)
    d.mkdir(parents=True, exist_ok=True)
    return d


class EdgePartWriter:
    """Write ``part[e]`` to a 1-D Zarr array chunk-aligned with the store's edges.

    Batches of any size arrive in edge order; whole chunks are compressed and
    written by a background thread (one write in flight) while the caller
    computes the next batch.
    """

    def __init__(self, path: str | os.PathLike, store: GraphStore, k: int, algorithm: str):
        self.path = str(path)
        self.chunk = store.chunk_size
        self.num_edges = store.num_edges
        self.array = zarr.create_array(self.path, shape=(self.num_edges,), chunks=(self.chunk,),
                                       dtype=PART_DTYPE, compressors=part_compressor(),
                                       fill_value=-1, overwrite=True)
        self.array.attrs.update({"format": "graphstream.edge_parts", "num_parts": int(k),
                                 "algorithm": algorithm, "store": store.path, "complete": False})
        self._buf = np.empty(self.chunk, dtype=PART_DTYPE)
        self._fill = 0
        self._pos = 0                     # first edge of the buffer
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstream-parts")
        self._inflight: Future | None = None

    def _submit(self, start: int, data: np.ndarray) -> None:
        if self._inflight is not None:
            self._inflight.result()
        self._inflight = self._pool.submit(self.array.__setitem__, slice(start, start + len(data)), data)

    def write(self, start: int, parts: np.ndarray) -> None:
        if start != self._pos + self._fill:
            raise RuntimeError(f"part batches out of order: got {start}, expected {self._pos + self._fill}")
        i = 0
        n = len(parts)
        while i < n:
            take = min(self.chunk - self._fill, n - i)
            self._buf[self._fill:self._fill + take] = parts[i:i + take]
            self._fill += take
            i += take
            if self._fill == self.chunk:
                self._submit(self._pos, self._buf)
                self._buf = np.empty(self.chunk, dtype=PART_DTYPE)
                self._pos += self.chunk
                self._fill = 0

    def close(self) -> str:
        if self._fill:
            self._submit(self._pos, self._buf[:self._fill].copy())
            self._pos += self._fill
            self._fill = 0
        if self._inflight is not None:
            self._inflight.result()
        self._pool.shutdown()
        if self._pos != self.num_edges:
            raise RuntimeError(f"{self.path}: wrote {self._pos} parts for {self.num_edges} edges")
        self.array.attrs["complete"] = True
        return self.path

    def abort(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def open_edge_parts(path: str | os.PathLike) -> zarr.Array:
    return zarr.open_array(str(path), mode="r")


def stream_with_parts(store: GraphStore, parts: zarr.Array,
                      batch_size: int | None = None) -> Iterator[tuple]:
    """Yield ``(batch, part_batch)`` pairs: edges and their parts, both prefetched."""
    bs = batch_size or store.chunk_size
    # the reader names its non-id column "time"; here it carries part[e]
    part_stream = stream_edges({"time": parts}, 0, store.num_edges, bs, prefetch=2)
    for batch, pb in zip(store.stream(bs), part_stream):
        yield batch, pb.time


# -- grouped per-node x per-part passes --------------------------------------------------------

def part_groups(num_nodes: int, k: int, bytes_per_part: float, align: int = 1) -> list[tuple[int, int]]:
    """Split parts [0, k) into groups whose ``num_nodes x group`` table fits the budget."""
    per_part = max(1.0, num_nodes * bytes_per_part)
    g = max(align, int(group_budget_bytes(num_nodes) // per_part) // align * align)
    return [(lo, min(k, lo + g)) for lo in range(0, k, g)]


@njit(cache=True, nogil=True)
def _count_edge_parts(src, dst, part, counts, p_lo, p_hi):
    """counts[v, p - p_lo] += 1 for both endpoints of every edge in part p of the group."""
    for i in range(src.shape[0]):
        p = part[i]
        if p_lo <= p < p_hi:
            counts[src[i], p - p_lo] += 1
            counts[dst[i], p - p_lo] += 1


@njit(cache=True, nogil=True)
def _take_best(counts, p_lo, best, best_count):
    """Keep the part with most edges; strict '>' over ascending parts = ties to the lowest id.

    Returns the number of non-zero cells: (node, part) pairs where the node has
    an edge, i.e. its replicas in this group (the vertex-cut RF comes for free).
    """
    replicas = 0
    for v in range(counts.shape[0]):
        for j in range(counts.shape[1]):
            c = counts[v, j]
            if c > 0:
                replicas += 1
                if c > best_count[v]:
                    best_count[v] = c
                    best[v] = p_lo + j
    return replicas


def owner_from_edge_parts(store: GraphStore, part_path: str, k: int,
                          max_degree: int | None = None) -> tuple[np.ndarray, int, float]:
    """``owner[v]`` = the part holding most of v's edges (ties: lowest part id).

    Isolated nodes go, in id order, to the part owning fewest nodes so far.
    Returns ``(owner, passes, vertex_cut_rf)``: the count table also gives the
    replicas (non-zero cells), so the vertex-cut RF needs no pass of its own.
    Memory is the grouped count table plus 8 bytes a node.
    """
    n = store.num_nodes
    parts = open_edge_parts(part_path)
    dtype = np.uint16 if (max_degree is not None and max_degree < 65535) else np.uint32
    best = np.full(n, -1, dtype=np.int32)
    best_count = np.zeros(n, dtype=np.int64)
    groups = part_groups(n, k, np.dtype(dtype).itemsize)
    replicas = 0
    for lo, hi in groups:
        counts = np.zeros((n, hi - lo), dtype=dtype)
        for batch, pb in stream_with_parts(store, parts):
            _count_edge_parts(batch.src, batch.dst, pb, counts, lo, hi)
        replicas += int(_take_best(counts, lo, best, best_count))
        del counts
    isolated = np.flatnonzero(best < 0)
    nonisolated = n - len(isolated)
    vc_rf = replicas / nonisolated if nonisolated else 0.0
    if len(isolated):
        loads = np.bincount(best[best >= 0], minlength=k).astype(np.int64)
        best[isolated] = pack_least_loaded(np.ones(len(isolated), dtype=np.int64), loads)
    return best, len(groups), vc_rf
