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

A part too large to be one thread's task is cut into the same passes as
steps that run on several threads or workers (:func:`parts_to_cut`,
:func:`cut_part_job`): the first scan, a bucketing per routed edge range,
a counting sort per bucket into its slice of ``indices.npy``.
"""
from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from .._jobs import Job
from ..kernels.merge import radix_sort
from ..kernels.packing import cut_ranges
from ..kernels.prefetch import PREFETCH_DISTANCE, prefetch_row
from ..store.nodedata import read_npy_header, write_npy_header
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
        return cls(local=np.full(num_nodes, -1, dtype=index_dtype_for(num_nodes)),
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


@dataclass(frozen=True, slots=True)
class ColumnBlocks:
    """How a part's column entries are sorted: consecutive row blocks, one buffer each, and whether they
    are first bucketed (``per`` blocks a bucket; 0: every block re-reads the spill file)."""
    blocks: list[tuple[int, int]]
    per: int

    @property
    def num_buckets(self) -> int:
        return -(-len(self.blocks) // self.per) if self.per else 0

    @property
    def bucket_starts(self) -> list[int]:
        """The first row of every bucket."""
        return [row for row, _ in self.blocks[::self.per]] if self.per else []

    def bucket_blocks(self, j: int) -> range:
        """The blocks of bucket ``j``."""
        return range(j * self.per, min(len(self.blocks), (j + 1) * self.per))

    def groups(self) -> list[tuple[int | None, range]]:
        """(bucket, its blocks) in row order; not bucketed, one group of every block, bucket None."""
        if not self.per:
            return [(None, range(len(self.blocks)))]
        return [(j, self.bucket_blocks(j)) for j in range(self.num_buckets)]


def column_blocks(indptr: np.ndarray, config: BuildConfig, index_dtype: np.dtype,
                  bucketed: bool | None = None) -> ColumnBlocks:
    """The row blocks of a part of row offsets ``indptr``. ``bucketed`` None: bucketed when the part
    takes at least ``bucket_min_blocks`` blocks of ``bucket_bytes``.

    Each scan of the spill file looks both ends of every pair up in the O(num_nodes) local map, at
    random: re-read for every block, a part cost the square of its size (R-MAT scale 26, k = 16: the
    largest part's columns took 24 blocks). So a large part is bucketed by block first, in blocks of
    ``bucket_bytes``, whose counting sort works in the cache (R-MAT scale 21, k = 8: a part of 257 MB
    built 12% faster in blocks of 32 MiB than in one)."""
    item = np.dtype(index_dtype).itemsize
    blocks = cut_ranges(indptr, max(1, min(config.sort_bytes, config.bucket_bytes) // item))
    if bucketed is None:
        bucketed = len(blocks) >= config.bucket_min_blocks
    if not bucketed:
        return ColumnBlocks(cut_ranges(indptr, max(1, config.sort_bytes // item)), 0)
    return ColumnBlocks(blocks, -(-len(blocks) // MAX_BUCKETS))


def index_dtype_for(n: int) -> np.dtype:
    """The integer dtype of ids below ``n`` (a part's local ids, or the global -> local map's)."""
    return np.dtype(np.int32) if n < 2**31 else np.dtype(np.int64)


def count_rows(spill: Spill | SpillSet, p: int, inner: np.ndarray, undirected: bool, scratch: Scratch,
               chunk_pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """Scan 1 of part ``p``: its global ids (inner, then the halo ascending) and its row offsets;
    ``scratch.local`` holds every one's local id after it."""
    num_inner = len(inner)
    local, rowcount = scratch.local, scratch.rowcount
    local[inner] = np.arange(num_inner, dtype=local.dtype)
    num_halo = 0
    for chunk in spill.read(p, chunk_pairs):
        num_halo = _count_rows(chunk, undirected, local, rowcount, scratch.halo, num_halo)
    halo = np.sort(scratch.halo[:num_halo])
    local[halo] = np.arange(num_inner, num_inner + num_halo, dtype=local.dtype)
    global_ids = np.concatenate([inner.astype(spill.id_dtype, copy=False), halo])
    indptr = np.zeros(len(global_ids) + 1, dtype=np.int64)
    np.cumsum(rowcount[global_ids], out=indptr[1:])
    return global_ids, indptr


def local_map(global_ids: np.ndarray, num_nodes: int) -> np.ndarray:
    """The global -> local map of a part whose nodes are ``global_ids`` (-1 elsewhere), as
    :func:`count_rows` leaves it: for a task that buckets or fills a part counted by another."""
    local = np.full(num_nodes, -1, dtype=index_dtype_for(num_nodes))
    local[global_ids] = np.arange(len(global_ids), dtype=local.dtype)
    return local


def sorted_block(chunks: Iterable[np.ndarray], from_buckets: bool, undirected: bool, local: np.ndarray,
                 indptr: np.ndarray, row: int, end: int, index_dtype: np.dtype) -> np.ndarray:
    """The columns of rows [row, end), each row sorted, by a counting sort over ``chunks``: the part's
    spill pairs (global ids), or its buckets' entries (local row, column)."""
    out = np.empty(int(indptr[end] - indptr[row]), dtype=index_dtype)
    if len(out):
        cursor = indptr[row:end] - indptr[row]
        for chunk in chunks:
            if from_buckets:
                _fill_entries(chunk, row, end, cursor, out)
            else:
                _fill_rows(chunk, undirected, local, row, end, cursor, out)
        _sort_rows(indptr[row:end + 1] - indptr[row], out, max(1, (len(indptr) - 2).bit_length()))
    return out


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
    global_ids, indptr = count_rows(spill, p, inner, undirected, scratch, chunk_pairs)
    nnz = int(indptr[-1])
    index_dtype = index_dtype_for(len(global_ids))
    plan = column_blocks(indptr, config, index_dtype)
    with NpyWriter(part_dir / "indices.npy", index_dtype, (nnz,)) as writer, ExitStack() as stack:
        buckets = None
        if plan.per:
            folder = spill.folder / f"buckets-{p:05d}-{uuid.uuid4().hex[:8]}"   # a rerun task's own
            stack.callback(shutil.rmtree, folder, True)
            buckets = bucket_entries(spill, p, chunk_pairs, undirected, scratch.local, plan.bucket_starts,
                                     len(global_ids), index_dtype, folder)
        for j, group in plan.groups():
            for b in group:
                row, end = plan.blocks[b]
                chunks = spill.read(p, chunk_pairs) if buckets is None else buckets.read(j, chunk_pairs)
                writer.write(sorted_block(chunks, buckets is not None, undirected, scratch.local, indptr,
                                          row, end, index_dtype))
            if buckets is not None:
                buckets.remove(j)   # its disk back as soon as its blocks are written
    write_part_arrays(part_dir, global_ids, indptr, degree, len(inner))
    scratch.reset(global_ids)
    return global_ids, PartShape(len(inner), len(global_ids) - len(inner), nnz)


def write_part_arrays(part_dir: Path, global_ids: np.ndarray, indptr: np.ndarray, degree: np.ndarray,
                      num_inner: int) -> None:
    """A part's files besides ``indices.npy``: row offsets, global ids, degrees, the first ``part.json``."""
    _save(part_dir / "indptr.npy", indptr)
    _save(part_dir / "global_ids.npy", global_ids)
    _save(part_dir / "degree.npy", degree[global_ids])
    write_part_meta(part_dir, num_inner)


# -- a part cut into steps ---------------------------------------------------------------------------
# A part with more pairs than a thread's share of the parts pass (R-MAT's node-balanced parts: one with 75%
# of the edges) would be that whole pass on one thread. It is cut into steps instead, run by the builder's
# threads (assemble.builder) or a cluster's workers (assemble.distributed): (1) count its rows and lay the
# part out, (2) one step per routed edge range buckets that range's pairs by row block, (3) one step per
# bucket fills and sorts its rows into their slice of indices.npy, (4) its node data. The bytes are those of
# build_part_csr: the CSR does not depend on where the rows are cut.

def parts_to_cut(pairs: np.ndarray, undirected: bool, threads: int, config: BuildConfig) -> list[int]:
    """The parts to cut into steps: those with more pairs than a thread's share of the parts pass, large
    enough to be bucketed anyway (at least ``bucket_min_blocks`` blocks of columns); none without
    ``config.cut_parts``."""
    if threads < 2 or not config.cut_parts:
        return []
    pairs = np.asarray(pairs, dtype=np.int64)
    entries = pairs * (2 if undirected else 1)   # a self-loop is one entry: an estimate from above
    blocks = entries * 4 / max(1, min(config.sort_bytes, config.bucket_bytes))   # int32 local ids
    return np.flatnonzero((pairs > pairs.sum() / threads) & (blocks >= config.bucket_min_blocks)).tolist()


def lay_out_part(spill: Spill | SpillSet, p: int, inner: np.ndarray, undirected: bool, scratch: Scratch,
                 degree: np.ndarray, part_dir: Path, config: BuildConfig) -> tuple[np.ndarray, np.ndarray]:
    """Step 1: the part's rows counted; its global ids, row offsets, degrees and first ``part.json``
    written, and ``indices.npy`` at its full length for step 3 to fill. Returns the global ids and the
    row offsets; the scratch is left clean."""
    try:
        global_ids, indptr = count_rows(spill, p, inner, undirected, scratch, config.read_pairs(spill.id_dtype))
        scratch.reset(global_ids)
    except BaseException:
        scratch.clear()
        raise
    write_part_arrays(part_dir, global_ids, indptr, degree, len(inner))
    index_dtype = index_dtype_for(len(global_ids))
    with open(part_dir / "indices.npy", "wb") as f:
        write_npy_header(f, index_dtype, (int(indptr[-1]),))
        f.truncate(f.tell() + int(indptr[-1]) * index_dtype.itemsize)
    return global_ids, indptr


def bucket_plan(indptr: np.ndarray, config: BuildConfig) -> ColumnBlocks:
    """The row blocks and buckets of a part cut into steps (every one is bucketed)."""
    return column_blocks(indptr, config, index_dtype_for(len(indptr) - 1), bucketed=True)


def bucket_range(spill: Spill, p: int, local: np.ndarray, starts: list[int], n_local: int, undirected: bool,
                 config: BuildConfig, folder: Path) -> Spill:
    """Step 2, for one routed edge range: its pairs of part ``p`` in the part's buckets (:func:`bucket_entries`),
    ``local`` the part's global -> local map (:func:`local_map`)."""
    return bucket_entries(spill, p, config.read_pairs(spill.id_dtype), undirected, local, starts, n_local,
                          index_dtype_for(n_local), folder)


def fill_bucket(buckets: SpillSet, j: int, indptr: np.ndarray, config: BuildConfig, indices: Path) -> None:
    """Step 3: bucket ``j``'s rows, each sorted, written into their slice of ``indices`` (in place: run
    again, it writes the same bytes)."""
    index_dtype, _, _, offset = read_npy_header(indices)
    plan = bucket_plan(indptr, config)
    no_map = np.empty(0, dtype=np.int32)   # bucket entries are local ids already
    with open(indices, "r+b", buffering=0) as f:
        for b in plan.bucket_blocks(j):
            row, end = plan.blocks[b]
            out = sorted_block(buckets.read(j, config.read_pairs(index_dtype)), True, False, no_map, indptr,
                               row, end, index_dtype)
            f.seek(offset + int(indptr[row]) * index_dtype.itemsize)
            write_all(f, out)


@dataclass(frozen=True, slots=True)
class CutPartSteps:
    """The steps of a cut part, as a thread pool (in-memory objects) or a cluster (tasks on paths) runs
    them; each returns its busy seconds with its result. ``layout(p)``: the first row of every bucket.
    ``bucket(p, r, starts)``: edge range r's entries per bucket. ``fill(p, j, table, ranges)``: bucket j
    filled (``table``: entries, ranges x buckets). ``finish(p, ranges)``: whatever the caller's
    ``done`` takes."""
    layout: Callable[[int], tuple[list[int], float]]
    bucket: Callable[[int, int, list[int]], tuple[np.ndarray, float]]
    fill: Callable[[int, int, np.ndarray, list[int]], float]
    finish: Callable[[int, list[int]], Any]


def cut_part_job(p: int, range_pairs: np.ndarray, steps: CutPartSteps, busy: dict[str, float],
                 done: Callable[[Any], Sequence[Job]]) -> Job:
    """The first job of part ``p``'s chain (``range_pairs``: its pairs in each routed edge range): each
    step's results release the next steps, the last fill the finish, whose result goes to ``done``.
    The chain's jobs rank above whole parts (priority 1, finish 2, against 0): it is the longest."""
    ranges = [r for r in range(len(range_pairs)) if range_pairs[r]]
    counts: dict[int, np.ndarray] = {}
    unfilled: set[int] = set()

    def laid_out(result: tuple[list[int], float]) -> list[Job]:
        starts, seconds = result
        busy["csr"] += seconds
        return [Job(f"bucket-{p:05d}-{r:05d}", steps.bucket, (p, r, starts), (1, int(range_pairs[r])),
                    partial(bucketed, r)) for r in ranges]

    def bucketed(r: int, result: tuple[np.ndarray, float]) -> list[Job]:
        counts[r], seconds = result
        busy["csr"] += seconds
        if len(counts) < len(ranges):
            return []
        table = np.stack([counts[r] for r in ranges])   # ranges x buckets
        unfilled.update(range(table.shape[1]))
        return [Job(f"fill-{p:05d}-{j:05d}", steps.fill, (p, j, table, ranges), (1, int(table[:, j].sum())),
                    partial(filled, j)) for j in range(table.shape[1])]

    def filled(j: int, seconds: float) -> list[Job]:
        busy["csr"] += seconds
        unfilled.discard(j)
        return [] if unfilled else [Job(f"finish-{p:05d}", steps.finish, (p, ranges), (2, 0), done, 1)]

    return Job(f"layout-{p:05d}", steps.layout, (p,), (1, 2 * int(np.sum(range_pairs))), laid_out)


def bucket_entries(spill: Spill | SpillSet, p: int, chunk_pairs: int, undirected: bool, local: np.ndarray,
            starts: list[int], n_rows: int, index_dtype: np.dtype, folder: Path) -> Spill:
    """One scan of part ``p``'s pairs writing each entry (row, column: local ids) to the bucket of its
    row (bucket j: rows from ``starts[j]``), as the spill files of a :class:`Spill` in ``folder``.

    The pairs are read in half chunks: the grouped entries take as much again (twice the entries of
    half as many pairs, of at most the pairs' width)."""
    folder.mkdir(exist_ok=True)   # a task's own staging folder, made by its caller
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
