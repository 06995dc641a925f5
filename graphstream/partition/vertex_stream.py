"""Vertex stream: the edges ordered by node on disk, so each node's neighbours arrive together.

An edge stream shows a node's neighbours scattered over the whole pass; a
vertex stream shows them in one piece. Refinement passes that move a node to
the part holding its neighbours, label propagation and the builder's CSR all
want that. Built once by an external counting sort by node range:

1. degree pass: ``offsets[v]`` = where v's neighbours start (O(num_nodes)
   int64, kept in memory and saved as ``offsets.npy``);
2. node ranges ("buckets") cut from the offsets so that each holds at most
   ``bucket_entries`` neighbour entries;
3. one pass over the edge stream: every edge gives both directions; when the
   whole graph fits one bucket they are scattered straight into a buffer,
   otherwise the (node, neighbour) pairs are appended to per-bucket spill
   files (fixed memory: one chunk at a time);
4. each bucket: its spill files are read back in fixed-size pieces, counting
   sorted by node into a bucket buffer, and the buffer is written in place in
   ``neighbours.npy``.

With ``hubs_first``, the nodes are renumbered before the sort: the nodes of
degree above the mean first, then the others, each group in id order
(``new_id[v]`` is v's number in the stream, saved as ``new_id.npy``).
Refinement and label propagation read the owner and counters of every
neighbour at random, and most neighbours are hubs: numbered together, their
rows share cache lines. It changes the partition too (the rounds are node
ranges, so the hubs move first); see docs/partition-quality.md.

Order inside a node's list: first the ``dst`` of the edges where it is
``src``, in edge order, then the ``src`` of the edges where it is ``dst``, in
edge order; so the stream does not depend on the chunk size used to build
it. Every stored edge gives both directions, a self-loop (u, u) gives u twice
in u's list, duplicates are kept (the list is the neighbour multiset of the
undirected view of the store).

Disk: 2 * num_edges ids for the neighbours (plus the same again, as pairs,
for the spill files while building, removed at the end); for a directed
store, ``out_degree.npy`` too (one count a node: where a list's
in-neighbours start, which a directed part's halo is made of). Memory: offsets
(8 bytes/node), with ``hubs_first`` the new ids (one id a node), a
per-bucket cursor, one edge chunk and one bucket buffer.
"""
from __future__ import annotations

import json
import mmap
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from .._atomic import allocated_memmap, save_npy
from .._report import log, track
from ..errors import ParameterError, StoreError
from ..kernels.packing import cut_ranges
from ..kernels.prefetch import PREFETCH_DISTANCE, prefetch_row
from ..store import GraphStore, degree_pass
from ..store.degrees import check_edge_ids
from ..store.integrity import FileDigest, check_file, file_digest

# 16 MiB of int32 neighbours per bucket buffer (two: one sorted, one written). 2^22 rather than 2^24
# (2026-11-29): a bucket's counting sort scatters into a buffer that mostly stays in cache, and the
# buffers held a fifth of the partition's peak. The build alone, one process a setting, two runs each:
# R-MAT s21 peak 437 -> 334-346 MiB, 1.98-2.36 -> 1.62-2.10 s; s22 498 -> 372 MiB, 4.25 -> 4.07 s;
# s20 385-389 -> 297 MiB, 0.95-1.43 -> 0.84-1.12 s; s18 (one bucket before: no spill files) 0.18-0.30
# -> 0.25-0.26 s, the same lists whatever the buckets.
DEFAULT_BUCKET_ENTRIES = 1 << 22
# A bucket's two spill files stay open through the spill pass: past this many buckets' share of the
# entries the buckets grow instead (R-MAT s26's 2.1G entries: buckets of 2^24, as before 2026-11-29;
# greedy cuts give at most 2 x 128 + 1 buckets, 514 files), under the usual limit of 1024 open files.
MAX_BUCKETS = 128
DEFAULT_BLOCK_ENTRIES = 1 << 22    # neighbours per block when reading (16 MiB of int32)
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0)   # Linux: the pages read in when mapped
META = "vertex_stream.json"


@dataclass(frozen=True, slots=True)
class VertexBlock:
    """Nodes ``first .. first + len`` with their neighbour lists.

    ``neighbours[offsets[i]:offsets[i + 1]]`` are the neighbours of node
    ``first + i`` (``offsets`` rebased to start at 0).
    """
    first: int
    offsets: np.ndarray
    neighbours: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def stop(self) -> int:
        return self.first + len(self)


class VertexStream:
    """A vertex stream on disk; open with :func:`open_vertex_stream` or build with :func:`build_vertex_stream`."""

    def __init__(self, path: Path, offsets: np.ndarray, id_dtype: np.dtype, new_id: np.ndarray | None = None):
        self.path = Path(path)
        self.offsets = offsets
        self.new_id = new_id   # store id -> stream id, None when the stream keeps the store's ids
        self.id_dtype = np.dtype(id_dtype)
        self.num_nodes = len(offsets) - 1
        self.num_entries = int(offsets[-1])
        self.reused = False   # opened from a kept folder instead of built (build_vertex_stream's keep)
        self._data_offset = _npy_data_offset(self.path / "neighbours.npy")

    def __repr__(self) -> str:
        return f"VertexStream({str(self.path)!r}, {self.num_nodes} nodes, {self.num_entries} entries)"

    def degree(self) -> np.ndarray:
        """Length of every node's list (the undirected degree, self-loops twice)."""
        return np.diff(self.offsets)

    def out_degree(self, mmap: bool = False) -> np.ndarray | None:
        """How many of every node's entries are its out-neighbours (they come first in its list), for a
        stream of a directed store; None for an undirected one (``mmap``: mapped, not read, as a task
        reading a few node ranges wants)."""
        path = self.path / "out_degree.npy"
        if not path.exists():
            return None
        out_degree = np.load(path, mmap_mode="r" if mmap else None)
        if out_degree.shape != (self.num_nodes,):
            raise StoreError(f"{self.path}: out_degree.npy holds {out_degree.shape} counts for {self.num_nodes} nodes")
        return out_degree

    def block_bounds(self, block_entries: int = DEFAULT_BLOCK_ENTRIES) -> list[tuple[int, int]]:
        """Node ranges holding at most ``block_entries`` entries (or one node whose list is longer)."""
        if block_entries < 1:
            raise ParameterError(f"block_entries must be >= 1, got {block_entries}")
        return cut_ranges(self.offsets, block_entries)

    def aligned_bounds(self, start: int, stop: int, block_entries: int, align: int) -> list[tuple[int, int]]:
        """Node ranges covering ``[start, stop)`` whose inner bounds are multiples of ``align``, each
        holding at most ``block_entries`` entries (or one ``align`` step whose lists are longer)."""
        if block_entries < 1 or align < 1:
            raise ParameterError(f"block_entries and align must be >= 1, got {block_entries}, {align}")
        out = []
        a = start
        while a < stop:
            b = int(np.searchsorted(self.offsets, self.offsets[a] + block_entries, side="right")) - 1
            b = min(max(b // align * align, a - a % align + align), stop)
            out.append((a, b))
            a = b
        return out

    def blocks(self, block_entries: int = DEFAULT_BLOCK_ENTRIES, prefetch: int = 1) -> Iterator[VertexBlock]:
        """Yield :class:`VertexBlock` s in node order; the next ``prefetch`` ones are read in a background
        thread.

        A block's ``neighbours`` is a read-only window of ``neighbours.npy`` mapped into memory, its
        pages read in by the thread that maps it (``MAP_POPULATE``): the kernels read the page cache in
        place, where a copy into a buffer cost a core 0.06-0.08 s a pass at R-MAT s21 (67M entries)
        and the passes number dozens. The window is unmapped once no array refers to it, so the memory
        held is the blocks in use, as with buffers.
        """
        return self.ranges(self.block_bounds(block_entries), prefetch)

    def ranges(self, bounds: list[tuple[int, int]], prefetch: int = 1) -> Iterator[VertexBlock]:
        """Like :meth:`blocks`, over the given node ranges (in the given order)."""
        f = open(self.path / "neighbours.npy", "rb")
        try:
            if prefetch <= 0:
                for a, b in bounds:
                    yield self._read(f, a, b)
                return
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstream-vstream") as pool:
                pending: deque = deque()
                it = iter(bounds)
                for a, b in it:
                    pending.append(pool.submit(self._read, f, a, b))
                    if len(pending) > prefetch:
                        break
                try:
                    while pending:
                        blk = pending.popleft().result()
                        yield blk
                        del blk   # this generator's reference: the window goes with the caller's
                        # the next read starts once the caller is done with the block, not as it gets it:
                        # ``prefetch`` blocks ahead of the one in use, not one more (whose pages,
                        # populated, counted in the partition's peak: R-MAT s22, 60 MiB of the stream's
                        # pages mapped at once, 16 MiB a block)
                        nxt = next(it, None)
                        if nxt is not None:
                            pending.append(pool.submit(self._read, f, *nxt))
                finally:
                    for fut in pending:
                        fut.cancel()
        finally:
            f.close()

    def _read(self, f, a: int, b: int) -> VertexBlock:
        lo, hi = int(self.offsets[a]), int(self.offsets[b])
        offsets = self.offsets[a:b + 1] - lo
        if hi == lo:
            return VertexBlock(a, offsets, np.empty(0, dtype=self.id_dtype))
        size = self.id_dtype.itemsize
        start = self._data_offset + lo * size
        base = start - start % mmap.ALLOCATIONGRANULARITY   # a mapping starts on a page
        end = start + (hi - lo) * size
        if end > os.fstat(f.fileno()).st_size:   # a mapping past the end would fault on access
            raise StoreError(f"{self.path}: neighbours.npy is truncated (wanted {(hi - lo) * size} bytes "
                             f"at entry {lo})")
        window = mmap.mmap(f.fileno(), end - base, flags=mmap.MAP_SHARED | _MAP_POPULATE, prot=mmap.PROT_READ,
                           offset=base)
        return VertexBlock(a, offsets, np.frombuffer(window, dtype=self.id_dtype, count=hi - lo, offset=start - base))

    def neighbours_of(self, v: int) -> np.ndarray:
        """One node's list (for tests and inspection; streaming code uses :meth:`blocks`)."""
        with open(self.path / "neighbours.npy", "rb") as f:
            return self._read(f, v, v + 1).neighbours


# -- building -------------------------------------------------------------------------------------

def build_vertex_stream(store: GraphStore, work_dir: str | os.PathLike, *, batch_size: int | None = None,
                        bucket_entries: int = DEFAULT_BUCKET_ENTRIES, hubs_first: bool = False,
                        keep: bool = False) -> VertexStream:
    """Sort the store's edges by node into ``work_dir`` (created if needed) and open the result.

    ``bucket_entries`` bounds the in-memory bucket buffer (entries, not
    bytes); a graph with more than that many entries (2 x edges) takes the
    spill-file route. ``hubs_first``: the nodes renumbered, hubs first (see
    the module's docstring; the stream's ``new_id`` maps the store's ids to
    its own).

    ``keep``: the folder is the user's and outlives this run, so the stream
    records the store's fingerprint (:meth:`GraphStore.fingerprint`) and
    the size and CRC-32C of each of its files, and a stream found there
    that was built from the same store's data, in the same node order, is
    opened instead of built again (``VertexStream.reused``), after its
    files pass their checksums: partitioning one graph at several k sorts
    it once. Anything else found there is rebuilt, and said so.
    """
    if bucket_entries < 1:
        raise ParameterError(f"bucket_entries must be >= 1, got {bucket_entries}")
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    fingerprint = store.fingerprint() if keep else None
    if fingerprint is not None:
        kept, why_not = _kept_stream(work, store, fingerprint, hubs_first)
        if kept is not None:
            log(f"vertex stream: reusing the one in {work} (built from this store's data; checksums pass)")
            return kept
        if why_not:
            log(f"vertex stream: rebuilding the one in {work}: {why_not}")
    meta_path = work / META
    # rebuilding: nothing of an old stream is trusted, least of all the files only some streams have (a
    # directed store's out_degree.npy left beside an undirected one's lists would mark its halos)
    for name in (META, "new_id.npy", "out_degree.npy"):
        (work / name).unlink(missing_ok=True)
    n = store.num_nodes
    id_dtype = np.dtype(store.id_dtype)

    # 1. degrees -> offsets; forward entries (u as src) come first in u's list.
    deg = degree_pass(store, batch_size)
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = deg.out_degree          # in place: no n-sized temporaries beside the two degree arrays
    offsets[1:] += deg.in_degree
    small = n == 0 or int(deg.out_degree.max()) < 2**31
    out_degree = deg.out_degree.astype(np.int32) if small else deg.out_degree
    del deg
    new_id = None
    if hubs_first and n:
        degree = offsets[1:]   # a view: the counts become the offsets in place below
        new_id = np.empty(n, dtype=id_dtype)
        _hubs_first(degree, new_id)
        degree[new_id] = degree.copy()   # the degrees in the stream's order
        out_degree[new_id] = out_degree.copy()
        save_npy(work / "new_id.npy", new_id)
    if store.directed:   # where a list's in-neighbours start: a directed part's halo is its in-neighbours
        save_npy(work / "out_degree.npy", out_degree)
    np.cumsum(offsets[1:], out=offsets[1:])
    total = int(offsets[-1])
    save_npy(work / "offsets.npy", offsets)

    neigh_path = work / "neighbours.npy"
    # the header and the file's blocks allocated (a disk without room for 2 x edges ids fails here, at
    # once, with ENOSPC); data is written with plain writes
    mm = allocated_memmap(neigh_path, id_dtype, (total,))
    del mm
    data_offset = _npy_data_offset(neigh_path)

    # 2. node ranges whose lists fit one bucket buffer.
    buckets = cut_ranges(offsets, max(bucket_entries, -(-total // MAX_BUCKETS)))
    with open(neigh_path, "r+b") as out:
        edges = _edge_batches(store, batch_size, new_id)
        if len(buckets) <= 1:   # none: a graph without nodes
            _build_in_memory(edges, store.num_edges, offsets, out_degree, id_dtype, out, data_offset)
        else:
            _build_spilled(edges, store.num_edges, offsets, out_degree, id_dtype, out, data_offset, buckets, work)
    meta = {"num_nodes": n, "num_entries": total, "id_dtype": str(id_dtype), "source": store.path,
            "num_edges": store.num_edges, "hubs_first": new_id is not None}
    if fingerprint is not None:
        meta["store_fingerprint"] = fingerprint
        meta["files"] = {name: file_digest(work / name).to_json() for name in _stream_files(meta, store.directed)}
    meta_path.write_text(json.dumps(meta))   # written last: marks the stream complete
    return VertexStream(work, offsets, id_dtype, new_id)


def _stream_files(meta: dict, directed: bool) -> list[str]:
    """The files of a vertex stream described by ``meta``."""
    return (["offsets.npy", "neighbours.npy"] + (["new_id.npy"] if meta.get("hubs_first") else [])
            + (["out_degree.npy"] if directed else []))


def _kept_stream(work: Path, store: GraphStore, fingerprint: str, hubs_first: bool
                 ) -> tuple[VertexStream | None, str]:
    """The complete stream in ``work`` when it was built from ``store``'s data (``fingerprint``) with
    this node order and its files pass their checksums; else None and why not ("" when there is none)."""
    try:
        meta = json.loads((work / META).read_text())
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as exc:
        return None, f"its {META} is unreadable ({exc})"
    if not isinstance(meta, dict) or not isinstance(meta.get("files"), dict):
        return None, "it records no checksums (built without a kept work folder, or damaged)"
    if meta.get("store_fingerprint") != fingerprint:
        return None, "it was built from another store, or from this one before its data changed"
    expected = {"num_nodes": store.num_nodes, "num_edges": store.num_edges, "id_dtype": str(store.id_dtype),
                "hubs_first": hubs_first and store.num_nodes > 0}
    differs = [key for key, value in expected.items() if meta.get(key) != value]
    if differs:
        return None, f"its {', '.join(differs)} differ"
    names = _stream_files(meta, store.directed)
    if sorted(meta["files"]) != sorted(names):
        return None, f"it holds {sorted(meta['files'])}, a stream of this store {sorted(names)}"
    try:
        for name in names:
            check_file(work / name, FileDigest.from_json(meta["files"][name], f"{work / META}"), str(work))
    except StoreError as exc:   # CorruptDataError included
        return None, str(exc)
    vs = open_vertex_stream(work)
    vs.reused = True
    return vs, ""


def open_vertex_stream(work_dir: str | os.PathLike, *, mmap: bool = False) -> VertexStream:
    """Open a complete vertex stream built earlier (``mmap``: the offsets memory-mapped, not read, as a
    task reading a few node ranges wants)."""
    work = Path(work_dir)
    meta_path = work / META
    if not meta_path.exists():
        raise StoreError(f"{work}: no complete vertex stream here (missing {META})")
    meta = json.loads(meta_path.read_text())
    offsets = np.load(work / "offsets.npy", mmap_mode="r" if mmap else None)
    new_id = np.load(work / "new_id.npy", mmap_mode="r" if mmap else None) if meta.get("hubs_first") else None
    if new_id is not None and len(new_id) != len(offsets) - 1:
        raise StoreError(f"{work}: new_id.npy holds {len(new_id)} ids for {len(offsets) - 1} nodes")
    return VertexStream(work, offsets, np.dtype(meta["id_dtype"]), new_id)


def _edge_batches(store: GraphStore, batch_size: int | None, new_id: np.ndarray | None
                  ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The store's edges as (src, dst) batches, in the stream's ids (the two columns renumbered in two
    threads: in this one, two numpy gathers were a third of the spill pass, R-MAT s21 1.2 s)."""
    if new_id is None:
        for batch in store.stream(batch_size):
            yield batch.src, batch.dst
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstream-vstream-ids") as pool:
        for batch in store.stream(batch_size):
            dst = np.empty(len(batch.dst), dtype=new_id.dtype)
            src = np.empty(len(batch.src), dtype=new_id.dtype)
            bad_dst = pool.submit(_renumber, new_id, batch.dst, dst)
            # the degree pass checked these edges: a bad id here means the store changed under the build
            check_edge_ids(store.path, batch, (_renumber(new_id, batch.src, src), bad_dst.result()), len(new_id),
                           " (the store changed since the degree pass)")
            yield src, dst


def _build_in_memory(edges, num_edges, offsets, out_degree, id_dtype, out, data_offset) -> None:
    # 3. one bucket: scatter both directions straight into the buffer.
    buf = np.empty(int(offsets[-1]), dtype=id_dtype)
    fwd = offsets[:-1].copy()
    rev = offsets[:-1] + out_degree
    # the backward entries in a second thread: their own cursors and slots (see _build_spilled)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstream-vstream") as pool:
        for src, dst in track(edges, num_edges, "vertex stream", size=lambda b: len(b[0])):
            backward = pool.submit(_scatter, dst, src, 0, 0, rev, buf)
            _scatter(src, dst, 0, 0, fwd, buf)
            backward.result()
    del fwd, rev
    _write_at(out, data_offset, 0, buf)


def _build_spilled(edges, num_edges, offsets, out_degree, id_dtype, out, data_offset, buckets, work) -> None:
    # 3. route (node, neighbour) pairs of each direction to per-bucket spill files.
    starts = np.array([a for a, _ in buckets] + [buckets[-1][1]], dtype=np.int64)
    nb = len(buckets)
    spill_dir = work / "spill"
    spill_dir.mkdir(exist_ok=True)
    names = [(spill_dir / f"f{i:05d}.bin", spill_dir / f"r{i:05d}.bin") for i in range(nb)]
    files = [(open(a, "wb"), open(b, "wb")) for a, b in names]

    def spill(direction: int, u: np.ndarray, v: np.ndarray) -> None:
        pairs, counts = _route(u, v, starts)
        pos = 0
        for i in range(nb):
            c = int(counts[i])
            if c:
                pairs[pos:pos + c].tofile(files[i][direction])
                pos += c

    # The two directions in two threads: each has its own files (and, below, its own cursors and its own
    # slots of every list: forward entries first), and the kernels release the GIL, so the files, and
    # the neighbour lists, are the same bytes as in one thread.
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="graphstream-vstream") as pool:
        try:
            for src, dst in track(edges, num_edges, "vertex stream: spill", size=lambda b: len(b[0])):
                backward = pool.submit(spill, 1, dst, src)
                spill(0, src, dst)
                backward.result()
        finally:
            for fa, fb in files:
                fa.close()
                fb.close()
        # 4. each bucket: counting sort by node into the buffer, then one write in place (in the
        # background, while the next bucket is sorted into the other buffer).
        buffers = [np.empty(0, dtype=id_dtype), np.empty(0, dtype=id_dtype)]
        writing = None
        for i, (a, b) in enumerate(buckets):
            lo, hi = int(offsets[a]), int(offsets[b])
            if len(buffers[i % 2]) < hi - lo:
                buffers[i % 2] = np.empty(hi - lo, dtype=id_dtype)
            buf = buffers[i % 2]
            cursors = (offsets[a:b].copy(), offsets[a:b] + out_degree[a:b])
            backward = pool.submit(_scatter_file, names[i][1], id_dtype, a, lo, cursors[1], buf)
            _scatter_file(names[i][0], id_dtype, a, lo, cursors[0], buf)
            backward.result()
            if writing is not None:
                writing.result()
            writing = pool.submit(_write_at, out, data_offset, lo, buf[:hi - lo])
        if writing is not None:
            writing.result()
    spill_dir.rmdir()


def _scatter_file(path: Path, id_dtype: np.dtype, first_node: int, first_entry: int, cursor: np.ndarray,
                  buf: np.ndarray, piece: int = 1 << 20) -> None:
    """One direction's spill file of a bucket, counting-sorted into ``buf``; the file removed."""
    with open(path, "rb") as f:
        while True:
            pairs = np.fromfile(f, dtype=id_dtype, count=2 * piece)
            if len(pairs) == 0:
                break
            pairs = pairs.reshape(-1, 2)
            _scatter(pairs[:, 0], pairs[:, 1], first_node, first_entry, cursor, buf)
    path.unlink()


def _write_at(f, data_offset: int, entry: int, arr: np.ndarray) -> None:
    f.seek(data_offset + entry * arr.itemsize)
    f.write(memoryview(np.ascontiguousarray(arr)).cast("B"))


def _npy_data_offset(path: Path) -> int:
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            np.lib.format.read_array_header_1_0(f)
        else:
            np.lib.format.read_array_header_2_0(f)
        return f.tell()


# -- kernels ------------------------------------------------------------------------------------

@njit(cache=True)
def _hubs_first(degree, new_id):
    """new_id[v]: the nodes of degree above the mean first, then the others, each group in id order."""
    n = degree.shape[0]
    mean = degree.sum() / n
    hubs = 0
    for v in range(n):
        hubs += degree[v] > mean
    nxt_hub, nxt_other = 0, hubs
    for v in range(n):
        if degree[v] > mean:
            new_id[v] = nxt_hub
            nxt_hub += 1
        else:
            new_id[v] = nxt_other
            nxt_other += 1


@njit(cache=True, nogil=True)
def _renumber(new_id, ids, out):
    """out = new_id[ids], without the GIL; returns -1, or the index of the first id outside new_id
    (nothing past it is written)."""
    n = new_id.shape[0]
    for i in range(ids.shape[0]):
        v = ids[i]
        if v < 0 or v >= n:
            return i
        out[i] = new_id[v]
    return -1


@njit(cache=True, nogil=True)
def _scatter(u, v, base_node, base_entry, cursor, buf):
    """buf[cursor[u - base_node] - base_entry] = v, cursor advancing: a stable counting sort step."""
    m = len(u)
    for i in range(m):
        # cursors and their targets are random: ask for both lines early (the target's address is
        # known once the cursor's line has arrived, half the distance later)
        if i + PREFETCH_DISTANCE < m:
            prefetch_row(cursor, u[i + PREFETCH_DISTANCE] - base_node)
            prefetch_row(buf, cursor[u[i + PREFETCH_DISTANCE // 2] - base_node] - base_entry)
        j = u[i] - base_node
        buf[cursor[j] - base_entry] = v[i]
        cursor[j] += 1


@njit(cache=True, nogil=True)
def _route(u, v, starts):
    """Pairs (u, v) grouped by the bucket of u (stable), and the count per bucket."""
    nb = len(starts) - 1
    m = len(u)
    bucket = np.empty(m, dtype=np.int32)
    counts = np.zeros(nb, dtype=np.int64)
    # the bucket of the first node of every 2**shift ids (at most 64K of them), then a short walk
    # forward: searchsorted's mispredicted compares were most of this loop
    shift = 0
    while (starts[nb] - 1) >> shift >= 1 << 16:
        shift += 1
    first_bucket = np.empty(((starts[nb] - 1) >> shift) + 1, dtype=np.int32)
    b = 0
    for t in range(first_bucket.shape[0]):
        while b + 1 < nb and starts[b + 1] <= t << shift:
            b += 1
        first_bucket[t] = b
    for i in range(m):
        x = u[i]
        b = first_bucket[x >> shift]
        while b + 1 < nb and starts[b + 1] <= x:
            b += 1
        bucket[i] = b
        counts[b] += 1
    pos = np.zeros(nb, dtype=np.int64)
    for b in range(1, nb):
        pos[b] = pos[b - 1] + counts[b - 1]
    pairs = np.empty((m, 2), dtype=u.dtype)
    for i in range(m):
        b = bucket[i]
        pairs[pos[b], 0] = u[i]
        pairs[pos[b], 1] = v[i]
        pos[b] += 1
    return pairs, counts
