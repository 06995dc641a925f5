"""Pass 1 of the builder: route every edge to the spill file of each part that needs it.

One streaming pass over the store. Each edge goes to the part owning its
target (and, undirected, to the part owning its source as well); the pairs
are appended to one file per part. The aggregation degree of every node is
counted on the way (O(num_nodes)). Disk: 8 or 16 bytes per routed pair.
With several threads, every pass routes chunk-aligned edge ranges at once,
each into spill files of its own, as a cluster's tasks do
(:func:`route_edges_in_ranges`, :func:`widen_halo`); the first pass keeps a
degree array per thread (8 bytes per node each), summed at its end.

With ``--halo-hops H`` > 1, H - 1 further passes widen every part by one hop
each (:func:`route_hop`): a part's *reach* is every node its routed pairs
touch (inner nodes, then the halo), and pass h routes to part p the edges
that feed the aggregation of a node in its reach whose row it does not
complete yet (:func:`mark_reach` sets the per-part bits from the spill files).
After pass h every node within h hops of an inner node has a complete row.
"""
from __future__ import annotations

import resource
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from threading import Event, Lock

import numpy as np
from numba import njit

from .._report import progress
from ..cluster import split_range
from ..errors import ParameterError
from ..kernels.bitsets import new_bitsets, popcount64, set_bit
from ..kernels.prefetch import prefetch_ends
from ..store.graph import GraphStore


@njit(cache=True, nogil=True)
def _route_batch(src, dst, owner, undirected, degree, counts, pairs, ends):
    """Group a batch's edges by destination part into ``pairs`` (rows = (src, dst)).

    Returns the part offsets into ``pairs``; ``counts`` is scratch (length k),
    ``ends`` too (a row per edge): the owners of both ends, looked up once, in
    the first loop, whose lookups are prefetched (the grouping loop reads
    them back in order instead of missing the cache again on each edge).
    An undirected edge whose endpoints have different owners goes to both.
    ``degree`` accumulates each node's aggregation degree (CSR row length).
    """
    k = counts.shape[0]
    for p in range(k):
        counts[p] = 0
    n = src.shape[0]
    for e in range(n):
        prefetch_ends(src, dst, e, owner)
        prefetch_ends(src, dst, e, degree)
        u = src[e]
        v = dst[e]
        pv = owner[v]
        ends[e, 1] = pv
        counts[pv] += 1
        degree[v] += 1
        if undirected:
            pu = owner[u]
            ends[e, 0] = pu
            if pu != pv:
                counts[pu] += 1
            if u != v:
                degree[u] += 1
    offsets = np.empty(k + 1, np.int64)
    offsets[0] = 0
    for p in range(k):
        offsets[p + 1] = offsets[p] + counts[p]
    for p in range(k):
        counts[p] = offsets[p]
    for e in range(n):
        u = src[e]
        v = dst[e]
        pv = ends[e, 1]
        i = counts[pv]
        pairs[i, 0] = u
        pairs[i, 1] = v
        counts[pv] = i + 1
        if undirected:
            pu = ends[e, 0]
            if pu != pv:
                i = counts[pu]
                pairs[i, 0] = u
                pairs[i, 1] = v
                counts[pu] = i + 1
    return offsets


@dataclass
class Spill:
    """The spill files of one build: ``folder/part-NNNNN.pairs``, ``pairs[p]`` pairs in part p's."""
    folder: Path
    id_dtype: np.dtype
    pairs: np.ndarray  # pairs written per part

    def path(self, p: int) -> Path:
        return self.folder / f"part-{p:05d}.pairs"

    def read(self, p: int, chunk_pairs: int) -> Iterator[np.ndarray]:
        """The part's pairs in chunks of at most ``chunk_pairs`` (one reused buffer)."""
        total = int(self.pairs[p])
        if total == 0:
            return
        buf = np.empty((min(chunk_pairs, total), 2), dtype=self.id_dtype)
        view = memoryview(buf).cast("B")
        pair_bytes = 2 * self.id_dtype.itemsize
        with open(self.path(p), "rb", buffering=0) as f:
            done = 0
            while done < total:
                want = min(len(buf), total - done) * pair_bytes
                got = 0
                while got < want:
                    n = f.readinto(view[got:want])
                    if not n:
                        raise OSError(f"{self.path(p)}: spill file shorter than written "
                                      f"({done} + {got // pair_bytes} of {total} pairs)")
                    got += n
                m = want // pair_bytes
                done += m
                yield buf[:m]

    def remove(self, p: int) -> None:
        self.path(p).unlink(missing_ok=True)


@dataclass
class SpillSet:
    """The spill folders of several routed edge ranges (a build on a cluster routes each range in a
    task of its own): a part's pairs are those of every range. Same reading interface as
    :class:`Spill`; the CSR does not depend on the order of a part's pairs (rows are sorted)."""
    spills: tuple[Spill, ...]

    @property
    def id_dtype(self) -> np.dtype:
        return self.spills[0].id_dtype

    @property
    def pairs(self) -> np.ndarray:
        return np.sum([s.pairs for s in self.spills], axis=0, dtype=np.int64)

    @property
    def folder(self) -> Path:
        """A folder of this build's scratch (the first range's)."""
        return self.spills[0].folder

    def read(self, p: int, chunk_pairs: int) -> Iterator[np.ndarray]:
        for spill in self.spills:
            yield from spill.read(p, chunk_pairs)

    def remove(self, p: int) -> None:
        for spill in self.spills:
            spill.remove(p)


OTHER_FILES = 64   # open files left for the rest of the process (the store's chunks, the output, logs)


def _open_files_limit(need: int) -> int:
    """Raise this process's soft limit on open files towards ``need`` (up to the hard limit); the soft
    limit after it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return need if soft == resource.RLIM_INFINITY else soft
    target = need if hard == resource.RLIM_INFINITY else min(hard, need)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


@contextmanager
def open_files(paths: list[Path]) -> Iterator[list]:
    """``paths`` (one spill file per part, or per bucket) opened for writing at once, unbuffered: every
    write is one large slice (:func:`write_all`), and a failure surfaces at the write. The open-files
    limit is raised for them."""
    need = len(paths) + OTHER_FILES
    if _open_files_limit(need) < need:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        raise ParameterError(f"{len(paths)} spill files ({paths[0].parent}) need {need} open files; "
                             f"the limit is {hard}")
    with ExitStack() as stack:
        yield [stack.enter_context(open(path, "wb", buffering=0)) for path in paths]


def route_edges_in_ranges(store: GraphStore, owner: np.ndarray, num_parts: int, folder: Path,
                          batch_size: int | None, threads: int) -> tuple[Spill | SpillSet, np.ndarray]:
    """:func:`route_edges` over ``threads`` chunk-aligned edge ranges at once, each into a spill folder
    of its own; their degrees summed. The routing kernel, the stream's reads and the writes release
    the GIL: R-MAT scale 24 on 2 cores routes in 17-20 s with 2 threads against 30-38 s with one. The
    parts' CSRs do not depend on the order of their pairs (rows are sorted), so the dataset is the
    same bytes whatever the thread count."""
    routed = _in_ranges(store, folder, threads, num_parts, "build: route edges",
                        lambda a, b, sub, advance: route_edges(store, owner, num_parts, sub, batch_size, a, b,
                                                               advance=advance))
    degree = routed[0][1].astype(np.int64, copy=False)   # the ranges' counts summed (int32 where a range allows)
    for _, more in routed[1:]:
        degree += more
    if len(routed) == 1:
        return routed[0][0], degree
    return SpillSet(tuple(spill for spill, _ in routed)), degree


def _in_ranges(store: GraphStore, folder: Path, threads: int, num_parts: int, desc: str, route_range) -> list:
    """``route_range(start, stop, folder, advance)`` over ``threads`` chunk-aligned edge ranges at once,
    each range into a subfolder of its own (``folder/range-NNNNN``); one progress bar. Their results,
    in range order (one range: ``folder`` itself).

    Every range holds ``num_parts`` files open: fewer ranges run when the open-files limit (raised
    up to the hard limit) cannot hold them all.

    The first range to fail (a damaged chunk, a full disk), or an interrupt of this thread, stops the
    others at their next batch (``advance`` raises in them), so the error is raised at once rather
    than after every other range has been routed.
    """
    room = _open_files_limit(threads * num_parts + OTHER_FILES) - OTHER_FILES
    ranges = split_range(store.num_edges, max(1, min(threads, room // max(1, num_parts))), align=store.chunk_size)
    if len(ranges) <= 1:
        return [route_range(0, store.num_edges, folder, None)]
    stopping, lock = Event(), Lock()
    with progress(store.num_edges, desc) as bar:
        def advance(n: int) -> None:
            if stopping.is_set():
                raise _Stopped
            with lock:   # one bar, several threads
                bar.update(n)

        def one(i: int):
            sub = folder / f"range-{i:05d}"
            sub.mkdir()
            return route_range(*ranges[i], sub, advance)

        with ThreadPoolExecutor(max_workers=len(ranges), thread_name_prefix="graphstream-route") as pool:
            futures = [pool.submit(one, i) for i in range(len(ranges))]
            try:
                wait(futures, return_when=FIRST_EXCEPTION)
            finally:   # all done, one failed, or this thread interrupted: the others (if any) stop now
                stopping.set()
            errors = [e for e in (f.exception() for f in futures) if e is not None]
            first = next((e for e in errors if not isinstance(e, _Stopped)), errors[0] if errors else None)
            if first is not None:
                raise first
            return [f.result() for f in futures]


class _Stopped(Exception):
    """Raised in a range's thread when another range failed: its work is moot."""


def route_edges(store: GraphStore, owner: np.ndarray, num_parts: int, folder: Path,
                batch_size: int | None = None, start: int = 0, stop: int | None = None, *,
                advance: Callable[[int], None] | None = None) -> tuple[Spill, np.ndarray]:
    """Pass 1: one spill file of (src, dst) pairs per part, plus every node's aggregation degree.

    ``start``/``stop``: route only the edges in that range (a task of a build on a cluster:
    :mod:`graphstream.assemble.distributed`, or a thread of :func:`route_edges_in_ranges`); the
    degree then counts those edges only, in int32 when no count can pass it (at most twice the
    range's edges): it is incremented at random, and every thread or worker routing a range holds
    one (R-MAT s22: 16.8 MB, not 33.6 MB, beside the others' in the last-level cache).
    ``advance(n)``: reports progress instead of a bar of its own.
    """
    undirected = not store.directed
    stop = store.num_edges if stop is None else stop
    degree = np.zeros(store.num_nodes, dtype=np.int32 if 2 * (stop - start) < 2**31 else np.int64)
    counts = np.zeros(num_parts, dtype=np.int64)
    pairs = np.empty((0, 2), dtype=store.id_dtype)
    ends = np.empty((0, 2), dtype=np.int16)   # part ids: MAX_PARTS fit

    def group(src, dst):
        nonlocal pairs, ends
        need = len(src) * (2 if undirected else 1)
        if len(pairs) < need:
            pairs = np.empty((need, 2), dtype=store.id_dtype)
        if len(ends) < len(src):
            ends = np.empty((len(src), 2), dtype=np.int16)
        return pairs, _route_batch(src, dst, owner, undirected, degree, counts, pairs, ends)

    spill = _route(store, num_parts, folder, batch_size, start, stop, "build: route edges", group, advance)
    return spill, degree


def _route(store: GraphStore, num_parts: int, folder: Path, batch_size: int | None, start: int,
           stop: int | None, desc: str, group, advance: Callable[[int], None] | None = None) -> Spill:
    """The routing loop of every pass: stream edges [start, stop), ``group(src, dst) -> (pairs,
    offsets)`` sorts a batch's pairs by part, and each part's run is appended to its spill file.
    Progress goes to ``advance`` when given, else to a bar of its own."""
    id_dtype = store.id_dtype
    written = np.zeros(num_parts, dtype=np.int64)
    spill = Spill(folder, id_dtype, written)
    with ExitStack() as stack:
        files = stack.enter_context(open_files([spill.path(p) for p in range(num_parts)]))
        stop = store.num_edges if stop is None else stop
        bar = stack.enter_context(progress(stop - start, desc)) if advance is None else None
        for batch in store.stream(batch_size, start=start, stop=stop):
            pairs, offsets = group(batch.src.astype(id_dtype, copy=False), batch.dst.astype(id_dtype, copy=False))
            for p in range(num_parts):
                a, b = offsets[p], offsets[p + 1]
                if b > a:
                    write_all(files[p], pairs[a:b])
                    written[p] += b - a
            (advance or bar.update)(len(batch))
    return spill


@njit(cache=True, nogil=True)
def _hop_wanted(u, v, w, undirected, reach, done):
    """Bits (word ``w``) of the parts that still need edge (u, v): v is in their reach but its row is
    not complete yet (v not ``done``); undirected, u likewise. An edge with an endpoint ``done`` in a
    part is already in that part's spill files."""
    want = reach[v, w] & ~done[v, w]
    if undirected:
        want = (want | reach[u, w]) & ~(done[v, w] | done[u, w])
    return want


@njit(cache=True, nogil=True)
def _hop_offsets(src, dst, undirected, reach, done, k):
    """Where each part's pairs of the batch start in the grouped buffer (k + 1 offsets): an edge
    may go to many parts, so the buffer is sized from this count before :func:`_hop_place`."""
    counts = np.zeros(k, np.int64)
    for e in range(src.shape[0]):
        for w in range(reach.shape[1]):
            want = _hop_wanted(src[e], dst[e], w, undirected, reach, done)
            while want:
                bit = want & (~want + np.uint64(1))   # the lowest set bit
                counts[w * 64 + int(popcount64(bit - np.uint64(1)))] += 1
                want ^= bit
    offsets = np.zeros(k + 1, np.int64)
    offsets[1:] = np.cumsum(counts)
    return offsets


@njit(cache=True, nogil=True)
def _hop_place(src, dst, undirected, reach, done, offsets, pairs):
    """Group the batch's edges by the parts that need them into ``pairs`` (rows = (src, dst)), at
    the ``offsets`` :func:`_hop_offsets` gave."""
    fill = offsets[:-1].copy()
    for e in range(src.shape[0]):
        u = src[e]
        v = dst[e]
        for w in range(reach.shape[1]):
            want = _hop_wanted(u, v, w, undirected, reach, done)
            while want:
                bit = want & (~want + np.uint64(1))
                p = w * 64 + int(popcount64(bit - np.uint64(1)))
                want ^= bit
                i = fill[p]
                pairs[i, 0] = u
                pairs[i, 1] = v
                fill[p] = i + 1


@njit(cache=True, nogil=True)
def _mark_pairs(pairs, p, bits):
    for e in range(pairs.shape[0]):
        set_bit(bits, pairs[e, 0], p)
        set_bit(bits, pairs[e, 1], p)


@njit(cache=True, nogil=True)
def _mark_owned(owner, bits):
    for v in range(owner.shape[0]):
        set_bit(bits, v, owner[v])


def inner_bits(owner: np.ndarray, k: int) -> np.ndarray:
    """Per-node part bits (:mod:`graphstream.kernels.bitsets`) of the inner nodes: bit ``owner[v]``."""
    bits = new_bitsets(len(owner), k)
    _mark_owned(owner, bits)
    return bits


def mark_reach(spill: Spill | SpillSet, k: int, bits: np.ndarray, chunk_pairs: int) -> None:
    """Set bit p of every node that part p's spill pairs touch (its reach: inner nodes with edges and
    the halo), reading each part's spill files once."""
    for p in range(k):
        for chunk in spill.read(p, chunk_pairs):
            _mark_pairs(chunk, p, bits)


def widen_halo(store: GraphStore, owner: np.ndarray, num_parts: int, spill: Spill | SpillSet, folder: Path,
               hops: int, batch_size: int | None, chunk_pairs: int, threads: int = 1) -> Spill | SpillSet:
    """The further passes of ``--halo-hops hops`` after :func:`route_edges`: the spill files of every
    hop (``folder/hop-H``), as one set. Two per-node part bitsets (done, reach) while it runs. Each
    pass routes ``threads`` edge ranges at once (:func:`_in_ranges`); the bitsets are only read then."""
    if hops == 1:
        return spill
    done = inner_bits(owner, num_parts)
    spills = [spill]
    for h in range(1, hops):
        # Only the last pass's pairs can touch nodes outside ``done``: the earlier ones made it.
        reach = done.copy()
        mark_reach(spills[-1], num_parts, reach, chunk_pairs)
        hop_dir = folder / f"hop-{h}"
        hop_dir.mkdir()
        hop = _in_ranges(store, hop_dir, threads, num_parts, "build: route halo hop",
                         lambda a, b, sub, advance, reach=reach, done=done: route_hop(
                             store, reach, done, num_parts, sub, batch_size, a, b, advance=advance))
        spills.append(hop[0] if len(hop) == 1 else SpillSet(tuple(hop)))   # the next hop reads all of it
        done = reach
    return SpillSet(tuple(spills))


def route_hop(store: GraphStore, reach: np.ndarray, done: np.ndarray, num_parts: int, folder: Path,
              batch_size: int | None = None, start: int = 0, stop: int | None = None, *,
              advance: Callable[[int], None] | None = None) -> Spill:
    """One more halo hop: the edges each part needs to complete the rows of its ``reach`` nodes
    that are not ``done`` (:func:`_hop_wanted`), into spill files of their own in ``folder``.

    ``reach`` and ``done`` are per-node part bitsets; ``start``/``stop``: the edge range routed (a
    task of a build on a cluster).
    """
    undirected = not store.directed
    pairs = np.empty((0, 2), dtype=store.id_dtype)

    def group(src, dst):
        nonlocal pairs
        offsets = _hop_offsets(src, dst, undirected, reach, done, num_parts)
        if len(pairs) < offsets[-1]:
            pairs = np.empty((int(offsets[-1]), 2), dtype=store.id_dtype)
        _hop_place(src, dst, undirected, reach, done, offsets, pairs)
        return pairs, offsets

    return _route(store, num_parts, folder, batch_size, start, stop, "build: route halo hop", group, advance)


def write_all(f, arr: np.ndarray) -> None:
    """Unbuffered write of a whole array (a raw file may write less than asked)."""
    view = memoryview(np.ascontiguousarray(arr)).cast("B")
    while len(view):
        n = f.write(view)
        if n is None or n <= 0:
            raise OSError(f"short write to {getattr(f, 'name', f)}")
        view = view[n:]
