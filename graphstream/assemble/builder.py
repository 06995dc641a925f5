"""The builder: a partition plan becomes a partitioned dataset on disk, out of core.

Every part is a self-contained subgraph: its inner nodes (``owner[v] == p``)
with their full aggregation neighbourhood, the neighbours that are not inner
(the halo), a CSR over local ids, and the matching rows of the node data.

Which edges feed aggregation (the layout contract, see docs/format.md):

- undirected store: each stored edge {u, v} means both directions; a part
  holds every edge with at least one inner endpoint, in both orientations, so
  the local CSR is symmetric. Row of an inner node = all its neighbours; row
  of a halo node = its neighbours among this part's inner nodes. A self-loop
  is one entry.
- directed store: in-neighbours feed aggregation. Row v lists the sources u of
  the edges u -> v; a part holds the in-edges of its inner nodes, halo rows are
  empty.

Duplicate edges are kept (a multigraph stays one). Local ids: inner nodes
first in ascending global id, then halo nodes in ascending global id; the
columns of each row are sorted ascending (local ids).

The passes:

1. route: stream the edges once; each edge goes to the part owning its target
   (and, undirected, to the part owning its source as well); the pairs are
   appended to one spill file per part. The aggregation degree of every node
   is counted on the way (O(num_nodes)).
2. per part, CSR: read the part's spill file in fixed-size chunks; first scan:
   count row lengths and collect the halo; then a counting sort fills the
   column indices row block by row block in a fixed buffer, each block written
   sequentially to ``indices.npy``. Large parts cost extra scans, never RAM.
3. per part, node data: rows gathered in sorted order through windowed
   memory maps (:mod:`graphstream.assemble.features`).
4. metrics recomputed from the written part files, ``manifest.json`` last; the
   whole folder is written as a temporary sibling and renamed into place.

Memory: owner and degree (10 bytes per node), and per worker building parts
in parallel a global->local map, a row counter and a halo list (16 bytes
per node), plus the fixed read, route, sort and gather buffers. Disk: the spill
files hold each routed edge once per part (8 or 16 bytes per pair); each is
deleted as soon as its part is built.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from queue import Queue
from threading import Lock
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from numba import njit

from .._atomic import atomic_dir, check_output
from .._report import log, progress
from .._resources import Stopwatch, peak_rss_bytes
from ..errors import ParameterError
from ..store.graph import GraphStore, is_url
from ..store.nodedata import NodeData, open_node_data
from .features import NpyWriter, gather_node_data
from .manifest import FORMAT, VERSION, part_dir_name, recompute_metrics, write_manifest, write_part_meta

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class BuildConfig:
    """Buffer sizes of the builder (bytes unless said); they bound its RAM.

    ``batch_size``: edges per streamed batch (default: the store's chunk).
    ``read_bytes``: spill file read chunk. ``sort_bytes``: the CSR fill
    buffer (a part with more column entries is filled in several row blocks).
    ``gather_bytes``: node data window mapped at once (and largest block copied).
    ``workers``: parts built at once (threads); each adds its own O(num_nodes)
    scratch (about 16 bytes per node) and buffers.
    """
    batch_size: int | None = None
    read_bytes: int = 64 * MiB
    sort_bytes: int = 256 * MiB
    gather_bytes: int = 128 * MiB
    workers: int = 2

    def __post_init__(self) -> None:
        for name in ("read_bytes", "sort_bytes", "gather_bytes"):
            if getattr(self, name) < 16:
                raise ParameterError(f"BuildConfig.{name} must be >= 16 bytes, got {getattr(self, name)}")
        if self.workers < 1:
            raise ParameterError(f"BuildConfig.workers must be >= 1, got {self.workers}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ParameterError(f"BuildConfig.batch_size must be >= 1, got {self.batch_size}")


# ---------------------------------------------------------------------------
# numba kernels: they see only arrays and scalars
# ---------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _route_batch(src, dst, owner, undirected, degree, counts, pairs):
    """Group a batch's edges by destination part into ``pairs`` (rows = (src, dst)).

    Returns the part offsets into ``pairs``; ``counts`` is scratch (length k).
    An undirected edge whose endpoints have different owners goes to both.
    ``degree`` accumulates each node's aggregation degree (CSR row length).
    """
    k = counts.shape[0]
    for p in range(k):
        counts[p] = 0
    n = src.shape[0]
    for e in range(n):
        u = src[e]
        v = dst[e]
        pv = owner[v]
        counts[pv] += 1
        degree[v] += 1
        if undirected:
            pu = owner[u]
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
        pv = owner[v]
        i = counts[pv]
        pairs[i, 0] = u
        pairs[i, 1] = v
        counts[pv] = i + 1
        if undirected:
            pu = owner[u]
            if pu != pv:
                i = counts[pu]
                pairs[i, 0] = u
                pairs[i, 1] = v
                counts[pu] = i + 1
    return offsets


@njit(cache=True, nogil=True)
def _count_rows(pairs, undirected, local, rowcount, halo, num_halo):
    """First scan of a spill chunk: row lengths by global id, and new halo nodes.

    ``local[x]`` is the local id of inner nodes, -1 for unseen nodes; a halo
    node is marked -2 and appended to ``halo``. Returns the new halo count.
    """
    for e in range(pairs.shape[0]):
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
    for e in range(pairs.shape[0]):
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


@njit(cache=True, nogil=True)
def _sort_rows(indptr, out):
    """Sort every row's columns (``indptr`` relative to ``out``)."""
    for r in range(indptr.shape[0] - 1):
        a = indptr[r]
        b = indptr[r + 1]
        if b - a > 24:
            out[a:b].sort()  # in place, no allocation
        else:  # most rows are short: insertion sort
            for i in range(a + 1, b):
                x = out[i]
                j = i - 1
                while j >= a and out[j] > x:
                    out[j + 1] = out[j]
                    j -= 1
                out[j + 1] = x


# ---------------------------------------------------------------------------
# pass 1: route edges to per-part spill files
# ---------------------------------------------------------------------------

@dataclass
class _Spill:
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


def _raise_open_files_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(hard, need)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        if target < need:
            raise ParameterError(f"{need - 64} parts need {need} open files; the limit is {hard}")


def route_edges(store: GraphStore, owner: np.ndarray, num_parts: int, folder: Path,
                batch_size: int | None = None) -> tuple[_Spill, np.ndarray]:
    """Pass 1: one spill file of (src, dst) pairs per part, plus every node's aggregation degree."""
    undirected = not store.directed
    id_dtype = store.id_dtype
    degree = np.zeros(store.num_nodes, dtype=np.int64)
    counts = np.zeros(num_parts, dtype=np.int64)
    written = np.zeros(num_parts, dtype=np.int64)
    spill = _Spill(folder, id_dtype, written)
    _raise_open_files_limit(num_parts + 64)
    with ExitStack() as stack:
        # Unbuffered: every write is one large slice, and a failure surfaces at the write.
        files = [stack.enter_context(open(spill.path(p), "wb", buffering=0)) for p in range(num_parts)]
        pairs = np.empty((0, 2), dtype=id_dtype)
        with progress(store.num_edges, "build: route edges") as bar:
            for batch in store.stream(batch_size):
                need = len(batch) * (2 if undirected else 1)
                if len(pairs) < need:
                    pairs = np.empty((need, 2), dtype=id_dtype)
                src = batch.src.astype(id_dtype, copy=False)
                dst = batch.dst.astype(id_dtype, copy=False)
                offsets = _route_batch(src, dst, owner, undirected, degree, counts, pairs)
                for p in range(num_parts):
                    a, b = offsets[p], offsets[p + 1]
                    if b > a:
                        _write_all(files[p], pairs[a:b])
                        written[p] += b - a
                bar.update(len(batch))
    return spill, degree


def _write_all(f, arr: np.ndarray) -> None:
    """Unbuffered write of a whole array (a raw file may write less than asked)."""
    view = memoryview(np.ascontiguousarray(arr)).cast("B")
    while len(view):
        n = f.write(view)
        if n is None or n <= 0:
            raise OSError(f"short write to {getattr(f, 'name', f)}")
        view = view[n:]


# ---------------------------------------------------------------------------
# pass 2: one part's CSR
# ---------------------------------------------------------------------------

@dataclass
class _Scratch:
    """O(num_nodes) arrays reused by every part; reset through the part's node ids."""
    local: np.ndarray     # global -> local id (-1 unseen, -2 halo not yet numbered)
    rowcount: np.ndarray  # row length by global id
    halo: np.ndarray      # halo ids found so far

    @classmethod
    def create(cls, num_nodes: int, id_dtype: np.dtype) -> "_Scratch":
        local_dtype = np.int32 if num_nodes < 2**31 else np.int64
        return cls(local=np.full(num_nodes, -1, dtype=local_dtype),
                   rowcount=np.zeros(num_nodes, dtype=np.int64),
                   halo=np.empty(num_nodes, dtype=id_dtype))

    def reset(self, global_ids: np.ndarray) -> None:
        self.local[global_ids] = -1
        self.rowcount[global_ids] = 0


@dataclass(frozen=True, slots=True)
class PartShape:
    num_inner: int
    num_halo: int
    num_edges: int


def build_part_csr(spill: _Spill, p: int, inner: np.ndarray, undirected: bool, scratch: _Scratch,
                   part_dir: Path, degree: np.ndarray, config: BuildConfig) -> tuple[np.ndarray, PartShape]:
    """Write ``global_ids.npy``, ``indptr.npy``, ``indices.npy``, ``degree.npy`` of part ``p``.

    Returns the part's global ids (inner then halo) and its sizes.
    """
    pair_bytes = 2 * spill.id_dtype.itemsize
    chunk_pairs = max(1, config.read_bytes // pair_bytes)
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

    # Scan 2+: counting sort by row, one block of rows per buffer load.
    buf_entries = max(1, config.sort_bytes // index_dtype.itemsize)
    with NpyWriter(part_dir / "indices.npy", index_dtype, (nnz,)) as writer:
        row = 0
        while row < n_local:
            # Largest block of rows whose columns fit the buffer (at least one row).
            end = int(np.searchsorted(indptr, indptr[row] + buf_entries, side="right")) - 1
            end = min(max(end, row + 1), n_local)
            size = int(indptr[end] - indptr[row])
            if size:
                out = np.empty(size, dtype=index_dtype)
                cursor = indptr[row:end] - indptr[row]
                for chunk in spill.read(p, chunk_pairs):
                    _fill_rows(chunk, undirected, local, row, end, cursor, out)
                _sort_rows(indptr[row:end + 1] - indptr[row], out)
                writer.write(out)
                del out
            row = end

    _save(part_dir / "indptr.npy", indptr)
    _save(part_dir / "global_ids.npy", global_ids)
    _save(part_dir / "degree.npy", degree[global_ids])
    write_part_meta(part_dir, num_inner)
    scratch.reset(global_ids)
    return global_ids, PartShape(num_inner, num_halo, nnz)


def _save(path: Path, arr: np.ndarray) -> None:
    with NpyWriter(path, arr.dtype, arr.shape) as writer:
        writer.write(arr)


# ---------------------------------------------------------------------------
# the whole build
# ---------------------------------------------------------------------------

def _build_parts(spill: _Spill, owner: np.ndarray, k: int, undirected: bool, degree: np.ndarray,
                 node_data: NodeData | None, folder: Path, config: BuildConfig, num_nodes: int,
                 id_dtype: np.dtype) -> dict[str, float]:
    """Passes 2 and 3 for every part, ``config.workers`` parts at a time (threads: the kernels
    release the GIL). Each worker has its own O(num_nodes) scratch. Returns the seconds spent
    in each pass, summed over workers."""
    workers = max(1, min(config.workers, k))
    scratches: Queue = Queue()
    for _ in range(workers):
        scratches.put(_Scratch.create(num_nodes, id_dtype))
    busy = {"csr": 0.0, "node_data": 0.0}
    lock = Lock()

    def one(p: int) -> None:
        scratch = scratches.get()
        try:
            t0 = time.perf_counter()
            part_dir = folder / part_dir_name(p)
            part_dir.mkdir()
            inner = np.flatnonzero(owner == p)
            global_ids, _ = build_part_csr(spill, p, inner, undirected, scratch, part_dir, degree, config)
            spill.remove(p)
            t1 = time.perf_counter()
            if node_data is not None:
                gather_node_data(node_data, global_ids, part_dir, config.gather_bytes)
            t2 = time.perf_counter()
            with lock:
                busy["csr"] += t1 - t0
                busy["node_data"] += t2 - t1
        finally:
            scratches.put(scratch)

    with progress(k, "build: parts", unit="part") as bar:
        if workers == 1:
            for p in range(k):
                one(p)
                bar.update(1)
            return busy
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="graphstream-build") as pool:
            futures = [pool.submit(one, p) for p in range(k)]
            try:
                for fut in as_completed(futures):
                    fut.result()
                    bar.update(1)
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise
    return busy


def _check_plan(store: GraphStore, plan) -> tuple[np.ndarray, int]:
    k = int(plan.num_parts)
    if k < 1:
        raise ParameterError(f"plan has num_parts={k}; expected >= 1")
    owner = np.asarray(plan.owner)
    if owner.shape != (store.num_nodes,):
        raise ParameterError(f"plan.owner has shape {owner.shape}; the store {store.path} has "
                             f"{store.num_nodes} nodes")
    if owner.dtype.kind not in "iu":
        raise ParameterError(f"plan.owner must hold integer part ids, got dtype {owner.dtype}")
    if len(owner):
        lo, hi = int(owner.min()), int(owner.max())
        if lo < 0 or hi >= k:
            bad = int(np.flatnonzero((owner < 0) | (owner >= k))[0])
            raise ParameterError(f"plan.owner[{bad}] = {owner[bad]} is outside [0, {k})")
    # One compact dtype for the kernels (int16 halves the footprint at k <= 32767).
    want = np.int16 if k <= np.iinfo(np.int16).max else np.int32
    return np.ascontiguousarray(owner, dtype=want), k


def build_partitions(store: GraphStore, plan, out_dir: str | os.PathLike, *,
                     nodes: str | os.PathLike | NodeData | None = None, overwrite: bool = False,
                     work_dir: str | os.PathLike | None = None,
                     config: BuildConfig | None = None) -> dict[str, Any]:
    """Write the partitioned dataset of ``plan`` (a :class:`PartitionPlan`) to ``out_dir``.

    Args:
        store: the graph store the plan was computed on.
        plan: ``owner[v]`` in [0, num_parts) for every node, ``algorithm``,
            ``params`` and the partitioner's ``metrics``.
        out_dir: the dataset folder; refused if it exists unless ``overwrite``.
        nodes: node data folder (or an opened :class:`NodeData`) whose rows are
            split with the parts; None for a graph without node data.
        work_dir: where the spill files go (default: inside the temporary
            output folder, so on the same disk as the result).
        config: buffer sizes.

    Returns the manifest (also written as ``out_dir/manifest.json``).

    Notes: time O(E + N k / 8 + sum of part sizes); RAM O(N) (10 + 16 x
    workers bytes per node) plus the configured buffers; disk up to 8 or 16 bytes per routed
    pair of scratch space, released part by part.
    """
    config = config or BuildConfig()
    watch = Stopwatch()
    owner, k = _check_plan(store, plan)
    node_data = nodes if isinstance(nodes, NodeData) or nodes is None else open_node_data(nodes, store.num_nodes)
    if isinstance(node_data, NodeData) and node_data.num_nodes != store.num_nodes:
        raise ParameterError(f"node data {node_data.path} is for {node_data.num_nodes} nodes, "
                             f"the store has {store.num_nodes}")
    check_output(out_dir, overwrite)
    undirected = not store.directed

    with atomic_dir(out_dir, overwrite) as tmp:
        if work_dir is None:
            spill_dir = tmp / "_spill"
            spill_dir.mkdir()
        else:
            spill_dir = Path(tempfile.mkdtemp(prefix="graphstream-build-", dir=work_dir))
        try:
            log(f"build: routing {store.num_edges} edges to {k} parts")
            spill, degree = route_edges(store, owner, k, spill_dir, config.batch_size)
            watch.lap("route")
            spill_bytes = int(spill.pairs.sum()) * 2 * store.id_dtype.itemsize

            busy = _build_parts(spill, owner, k, undirected, degree, node_data, tmp, config,
                                store.num_nodes, store.id_dtype)
            watch.lap("parts")
            del degree
        finally:
            shutil.rmtree(spill_dir, ignore_errors=True)

        parts, metrics = recompute_metrics(tmp, k, store.num_nodes)
        plan_metrics = dict(getattr(plan, "metrics", {}) or {})
        partition_seconds = float(plan_metrics.get("seconds", 0.0))
        merged = {key: value for key, value in plan_metrics.items()
                  if key not in ("replication_factor", "node_balance", "edge_balance", "seconds",
                                 "peak_rss_bytes")}
        merged.update(metrics)
        build_seconds = watch.seconds
        merged.update({
            "seconds": partition_seconds + build_seconds,
            "peak_rss_bytes": max(int(plan_metrics.get("peak_rss_bytes", 0) or 0), peak_rss_bytes()),
            "partition_seconds": partition_seconds,
            "build_seconds": build_seconds,
            "build_passes": {"route_seconds": round(watch.laps.get("route", 0.0), 6),
                             "parts_seconds": round(watch.laps.get("parts", 0.0), 6),
                             "csr_seconds": round(busy["csr"], 6),
                             "node_data_seconds": round(busy["node_data"], 6),
                             "workers": config.workers},
            "spill_bytes": spill_bytes,
        })
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "algorithm": str(getattr(plan, "algorithm", "unknown")),
            "params": _jsonable(dict(getattr(plan, "params", {}) or {})),
            "num_parts": k,
            "num_nodes": int(store.num_nodes),
            "num_edges": int(store.num_edges),
            "directed": bool(store.directed),
            # provenance: what was split (absolute local paths, URLs as given)
            "source": {"store": _where(store.path),
                       "nodes": _where(node_data.path) if isinstance(node_data, NodeData) else None},
            "metrics": _jsonable(merged),
            "parts": parts,
        }
        write_manifest(tmp, manifest)
    log(f"build: {k} parts written to {out_dir} in {watch.seconds:.1f} s "
        f"(replication factor {metrics['replication_factor']:.3f})")
    return manifest


def _where(path: str | os.PathLike) -> str:
    path = str(path)
    return path if is_url(path) else str(Path(path).resolve())


def _jsonable(obj: Any) -> Any:
    """Plain JSON types (numpy scalars and arrays, paths, dataclasses converted)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "__dataclass_fields__"):
        return _jsonable(asdict(obj))
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)
