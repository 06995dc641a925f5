"""Pass 2 of the builder: one part's CSR over local ids, from its spill file, in bounded memory.

Read the part's spill file in fixed-size chunks. First scan: count row
lengths and collect the halo. Then a counting sort fills the column indices
row block by row block in a fixed buffer, each block written sequentially to
``indices.npy``. Large parts cost extra disk, never RAM: a part of at least
``BuildConfig.bucket_min_blocks`` blocks of ``bucket_bytes`` is bucketed first:
one more scan writes every entry, in local ids, to the bucket file of its
row's block, and each block then reads its own bucket only. A smaller part
is filled from its spill file in blocks of ``sort_bytes`` (one scan each).
Each block's rows are then sorted: a long row (a hub's) by a radix sort.

Local ids: inner nodes first in ascending global id, then halo nodes in
ascending global id; the columns of each row are sorted ascending.
"""
from __future__ import annotations

import shutil
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from ..kernels.merge import radix_sort
from ..kernels.packing import cut_ranges
from ..kernels.prefetch import PREFETCH_DISTANCE, prefetch_row
from ..store.partitions_manifest import write_part_meta
from .config import BuildConfig
from .features import NpyWriter
from .spill import Spill, SpillSet, open_files, write_all

MAX_BUCKETS = 256   # open files a part's bucketing holds; past it, a bucket holds several blocks


@njit(cache=True, nogil=True)
def _count_rows(pairs, undirected, local, rowcount, halo, num_halo):
    """First scan of a spill chunk: row lengths by global id, and new halo nodes.

    ``local[x]`` is the local id of inner nodes, -1 for unseen nodes; a halo
    node is marked -2 and appended to ``halo``. Returns the new halo count.
    """
    m = pairs.shape[0]
    for e in range(m):
        if e + PREFETCH_DISTANCE < m:   # permuted ids: every lookup below is a cache miss otherwise
            far_u = pairs[e + PREFETCH_DISTANCE, 0]
            far_v = pairs[e + PREFETCH_DISTANCE, 1]
            prefetch_row(rowcount, far_v)
            prefetch_row(local, far_u)
            if undirected:
                prefetch_row(rowcount, far_u)
                prefetch_row(local, far_v)
        u = pairs[e, 0]
        v = pairs[e, 1]
        rowcount[v] += 1
        if local[u] == -1:
            local[u] = -2
            halo[num_halo] = u
            num_halo += 1
        if undirected:
            if u != v:
                rowcount[u] += 1
            if local[v] == -1:
                local[v] = -2
                halo[num_halo] = v
                num_halo += 1
    return num_halo


@njit(cache=True, nogil=True)
def _fill_rows(pairs, undirected, local, row_lo, row_hi, cursor, out):
    """Counting-sort step: put the columns of rows [row_lo, row_hi) at ``cursor[row - row_lo]``."""
    m = pairs.shape[0]
    half = PREFETCH_DISTANCE // 2
    for e in range(m):
        if e + PREFETCH_DISTANCE < m:
            prefetch_row(local, pairs[e + PREFETCH_DISTANCE, 0])
            prefetch_row(local, pairs[e + PREFETCH_DISTANCE, 1])
        if e + half < m:   # the row cursor of a pair whose local ids were asked for half the distance ago
            ahead = local[pairs[e + half, 1]]
            if row_lo <= ahead < row_hi:
                prefetch_row(cursor, ahead - row_lo)
        lu = local[pairs[e, 0]]
        lv = local[pairs[e, 1]]
        if row_lo <= lv < row_hi:
            i = cursor[lv - row_lo]
            out[i] = lu
            cursor[lv - row_lo] = i + 1
        if undirected and lu != lv and row_lo <= lu < row_hi:
            i = cursor[lu - row_lo]
            out[i] = lv
            cursor[lu - row_lo] = i + 1


@njit(cache=True, nogil=True, inline="always")
def _bucket_of(starts, table, shift, row):
    """The bucket of ``row``: the last j with ``starts[j] <= row`` (``starts`` ends with int64's max),
    from the bucket of its slot of 2**shift rows, moved past the slot's block bounds (rows come in random
    order: a binary search was a chain of dependent loads and half of the bucketing's time)."""
    j = np.int64(table[row >> shift])
    while starts[j + 1] <= row:
        j += 1
    return j


@njit(cache=True, nogil=True)
def _to_local_entries(pairs, undirected, local, starts, table, shift, counts, bucket):
    """Bucketing, first half: ``pairs`` rewritten in place to local ids, and each pair's buckets in
    ``bucket``: that of its target's row, and undirected its source's (a self-loop is one entry);
    ``counts[j]`` the entries of bucket j."""
    m = pairs.shape[0]
    counts[:] = 0
    for e in range(m):
        if e + PREFETCH_DISTANCE < m:
            prefetch_row(local, pairs[e + PREFETCH_DISTANCE, 0])
            prefetch_row(local, pairs[e + PREFETCH_DISTANCE, 1])
        lu = local[pairs[e, 0]]
        lv = local[pairs[e, 1]]
        pairs[e, 0] = lu
        pairs[e, 1] = lv
        j = _bucket_of(starts, table, shift, lv)
        bucket[e, 0] = j
        counts[j] += 1
        if undirected and lu != lv:
            j = _bucket_of(starts, table, shift, lu)
            bucket[e, 1] = j
            counts[j] += 1


@njit(cache=True, nogil=True)
def _group_entries(pairs, undirected, bucket, offsets, entries):
    """Bucketing, second half: the (row, column) entries of the local ``pairs`` grouped by bucket into
    ``entries``, bucket j at ``offsets[j]``."""
    fill = offsets[:-1].copy()
    for e in range(pairs.shape[0]):
        lu = pairs[e, 0]
        lv = pairs[e, 1]
        i = fill[bucket[e, 0]]
        entries[i, 0] = lv
        entries[i, 1] = lu
        fill[bucket[e, 0]] = i + 1
        if undirected and lu != lv:
            i = fill[bucket[e, 1]]
            entries[i, 0] = lu
            entries[i, 1] = lv
            fill[bucket[e, 1]] = i + 1


@njit(cache=True, nogil=True)
def _fill_entries(entries, row_lo, row_hi, cursor, out):
    """Counting-sort step from a bucket: the columns of rows [row_lo, row_hi) at ``cursor[row - row_lo]``."""
    m = entries.shape[0]
    for e in range(m):
        if e + PREFETCH_DISTANCE < m:
            ahead = entries[e + PREFETCH_DISTANCE, 0]
            if row_lo <= ahead < row_hi:
                prefetch_row(cursor, ahead - row_lo)
        r = entries[e, 0]
        if row_lo <= r < row_hi:
            i = cursor[r - row_lo]
            out[i] = entries[e, 1]
            cursor[r - row_lo] = i + 1


# Rows at least this long are radix sorted (ceil(id bits / 11) passes, 2048 counts each); shorter ones
# by comparisons. Random 23-bit columns, 2-core Xeon: 28 against 39 ns an entry at 128, 10 against 51 at
# 1024, 50 against 37 at 64. R-MAT's hub rows hold most of a large part's entries.
RADIX_MIN_ROW = 128


@njit(cache=True, nogil=True)
def _sort_rows(indptr, out, key_bits):
    """Sort every row's columns (``indptr`` relative to ``out``; columns below ``2**key_bits``)."""
    scratch = np.empty(0, dtype=out.dtype)
    for r in range(indptr.shape[0] - 1):
        a = indptr[r]
        b = indptr[r + 1]
        if b - a >= RADIX_MIN_ROW:
            if scratch.shape[0] < b - a:
                scratch = np.empty(b - a, dtype=out.dtype)
            radix_sort(out[a:b], scratch, key_bits)
        elif b - a > 24:
            out[a:b].sort()  # in place, no allocation
        else:  # most rows are short: insertion sort
            for i in range(a + 1, b):
                x = out[i]
                j = i - 1
                while j >= a and out[j] > x:
                    out[j + 1] = out[j]
                    j -= 1
                out[j + 1] = x


@dataclass
class Scratch:
    """O(num_nodes) arrays reused by every part; reset through the part's node ids."""
    local: np.ndarray     # global -> local id (-1 unseen, -2 halo not yet numbered)
    rowcount: np.ndarray  # row length by global id
    halo: np.ndarray      # halo ids found so far

    @classmethod
    def create(cls, num_nodes: int, id_dtype: np.dtype) -> Scratch:
        local_dtype = np.int32 if num_nodes < 2**31 else np.int64
        return cls(local=np.full(num_nodes, -1, dtype=local_dtype),
                   rowcount=np.zeros(num_nodes, dtype=np.int64),
                   halo=np.empty(num_nodes, dtype=id_dtype))

    def reset(self, global_ids: np.ndarray) -> None:
        self.local[global_ids] = -1
        self.rowcount[global_ids] = 0

    def clear(self) -> None:
        """Every node reset: after a part that failed midway, whose marks are not all known."""
        self.local.fill(-1)
        self.rowcount.fill(0)


@dataclass(frozen=True, slots=True)
class PartShape:
    num_inner: int
    num_halo: int
    num_edges: int


def build_part_csr(spill: Spill | SpillSet, p: int, inner: np.ndarray, undirected: bool, scratch: Scratch,
                   part_dir: Path, degree: np.ndarray, config: BuildConfig) -> tuple[np.ndarray, PartShape]:
    """Write ``global_ids.npy``, ``indptr.npy``, ``indices.npy``, ``degree.npy`` of part ``p``.

    Returns the part's global ids (inner then halo) and its sizes. The scratch is left clean for
    the next part, also when this one fails (a full disk, say): a scratch left with the marks of a
    half-built part would make the next part's kernels index past their buffers.
    """
    try:
        return _build_part_csr(spill, p, inner, undirected, scratch, part_dir, degree, config)
    except BaseException:
        scratch.clear()
        raise


def _build_part_csr(spill: Spill | SpillSet, p: int, inner: np.ndarray, undirected: bool, scratch: Scratch,
                    part_dir: Path, degree: np.ndarray, config: BuildConfig) -> tuple[np.ndarray, PartShape]:
    chunk_pairs = config.read_pairs(spill.id_dtype)
    num_inner = len(inner)
    local, rowcount = scratch.local, scratch.rowcount
    local[inner] = np.arange(num_inner, dtype=local.dtype)

    # Scan 1: row lengths and the halo.
    num_halo = 0
    for chunk in spill.read(p, chunk_pairs):
        num_halo = _count_rows(chunk, undirected, local, rowcount, scratch.halo, num_halo)
    halo = np.sort(scratch.halo[:num_halo])
    local[halo] = np.arange(num_inner, num_inner + num_halo, dtype=local.dtype)
    global_ids = np.concatenate([inner.astype(spill.id_dtype, copy=False), halo])
    n_local = len(global_ids)

    indptr = np.zeros(n_local + 1, dtype=np.int64)
    np.cumsum(rowcount[global_ids], out=indptr[1:])
    nnz = int(indptr[-1])
    index_dtype = np.dtype(np.int32) if n_local < 2**31 else np.dtype(np.int64)

    # Scan 2+: counting sort by row, one block of rows per buffer load. Each scan of the spill file looks
    # both ends of every pair up in the O(num_nodes) local map, at random: re-read for every block, a part
    # cost the square of its size (R-MAT scale 26, k = 16: the largest part's columns took 24 blocks). So a
    # large part is bucketed by block first, in blocks of bucket_bytes, whose counting sort works in the
    # cache (R-MAT scale 21, k = 8: a part of 257 MB built 12% faster in blocks of 32 MiB than in one).
    item = index_dtype.itemsize
    blocks = cut_ranges(indptr, max(1, min(config.sort_bytes, config.bucket_bytes) // item))
    with NpyWriter(part_dir / "indices.npy", index_dtype, (nnz,)) as writer, ExitStack() as stack:
        buckets, per = None, 1
        if len(blocks) >= config.bucket_min_blocks:
            per = -(-len(blocks) // MAX_BUCKETS)   # blocks a bucket
            folder = spill.folder / f"buckets-{p:05d}-{uuid.uuid4().hex[:8]}"   # a rerun task's own
            stack.callback(shutil.rmtree, folder, True)
            buckets = _bucket(spill, p, chunk_pairs, undirected, local, [row for row, _ in blocks[::per]],
                              n_local, index_dtype, folder)
        else:
            blocks = cut_ranges(indptr, max(1, config.sort_bytes // item))
        for b, (row, end) in enumerate(blocks):
            size = int(indptr[end] - indptr[row])
            if size:
                out = np.empty(size, dtype=index_dtype)
                cursor = indptr[row:end] - indptr[row]
                if buckets is None:
                    for chunk in spill.read(p, chunk_pairs):
                        _fill_rows(chunk, undirected, local, row, end, cursor, out)
                else:
                    for chunk in buckets.read(b // per, chunk_pairs):
                        _fill_entries(chunk, row, end, cursor, out)
                _sort_rows(indptr[row:end + 1] - indptr[row], out, max(1, (n_local - 1).bit_length()))
                writer.write(out)
                del out
            if buckets is not None and ((b + 1) % per == 0 or b + 1 == len(blocks)):
                buckets.remove(b // per)   # its disk back as soon as its blocks are written

    _save(part_dir / "indptr.npy", indptr)
    _save(part_dir / "global_ids.npy", global_ids)
    _save(part_dir / "degree.npy", degree[global_ids])
    write_part_meta(part_dir, num_inner)
    scratch.reset(global_ids)
    return global_ids, PartShape(num_inner, num_halo, nnz)


def _bucket(spill: Spill | SpillSet, p: int, chunk_pairs: int, undirected: bool, local: np.ndarray,
            starts: list[int], n_rows: int, index_dtype: np.dtype, folder: Path) -> Spill:
    """One scan of part ``p``'s pairs writing each entry (row, column: local ids) to the bucket of its
    row (bucket j: rows from ``starts[j]``), as the spill files of a :class:`Spill` in ``folder``.

    The pairs are read in half chunks: the grouped entries take as much again (twice the entries of
    half as many pairs, of at most the pairs' width)."""
    folder.mkdir()
    bucket_dtype = np.uint8 if len(starts) <= 256 else np.uint16
    bounds = np.append(np.asarray(starts, dtype=np.int64), np.iinfo(np.int64).max)
    shift = max(0, (int(n_rows) - 1).bit_length() - 16)   # at most 2**16 slots: the table stays in cache
    table = (np.searchsorted(bounds, np.arange(((n_rows - 1) >> shift) + 1, dtype=np.int64) << shift,
                             side="right") - 1).astype(bucket_dtype)
    counts = np.zeros(len(starts), dtype=np.int64)
    buckets = Spill(folder, index_dtype, np.zeros(len(starts), dtype=np.int64))
    entries = np.empty((0, 2), dtype=index_dtype)
    bucket = np.empty((0, 2), dtype=bucket_dtype)
    with open_files([buckets.path(j) for j in range(len(starts))]) as files:
        for chunk in spill.read(p, max(1, chunk_pairs // 2)):
            if len(bucket) < len(chunk):
                bucket = np.empty((len(chunk), 2), dtype=bucket_dtype)
            _to_local_entries(chunk, undirected, local, bounds, table, shift, counts, bucket)
            offsets = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=offsets[1:])
            if len(entries) < offsets[-1]:
                entries = np.empty((int(offsets[-1]), 2), dtype=index_dtype)
            _group_entries(chunk, undirected, bucket, offsets, entries)
            for j in range(len(starts)):
                if counts[j]:
                    write_all(files[j], entries[offsets[j]:offsets[j + 1]])
            buckets.pairs += counts
    return buckets


def _save(path: Path, arr: np.ndarray) -> None:
    with NpyWriter(path, arr.dtype, arr.shape) as writer:
        writer.write(arr)
