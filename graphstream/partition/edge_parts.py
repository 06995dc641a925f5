"""``part[e]`` of the edge partitioners on disk, and the passes that read it back.

- ``part[e]`` written chunk-aligned to a Zarr array, behind the computation
  (:class:`EdgePartWriter`), read back beside the edge stream;
- grouped passes: per-node x per-part tables (replica bits, edge counts) that
  would be O(num_nodes * k) are built for a group of parts at a time, sized
  to a memory budget, so memory stays O(num_nodes) for any k; the owner of
  each node (the part holding most of its edges) is one such pass.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import zarr
from numba import njit
from zarr.codecs import BloscCodec

from .._atomic import scratch_folder_until_exit
from ..kernels.packing import pack_least_loaded
from ..store import GraphStore
from ..store.stream import stream_edges

if TYPE_CHECKING:
    from distributed import Client

PART_DTYPE = np.dtype(np.int16)          # enough for MAX_PARTS; 2 bytes per edge on disk


def part_compressor() -> BloscCodec:
    """LZ4 level 1 with byte shuffle for part[e]: the store's zstd-3 spent 0.41 s per 16M
    parts on the writer thread (as long as a whole hash pass on 2 cores), LZ4 0.04 s, at
    1.0 against 0.66 bytes per edge; part[e] is scratch data read once or twice."""
    return BloscCodec(cname="lz4", clevel=1, shuffle="shuffle")


def group_budget_bytes(num_nodes: int) -> int:
    """Memory for one per-node x per-part table: 32 bytes a node, at least 64 MiB.

    Keeps every grouped pass within the 64 bytes/node + 256 MB target while
    letting small graphs do everything in one pass.
    """
    return max(64 << 20, 32 * int(num_nodes))


# -- part[e] on disk ---------------------------------------------------------------------------

def parts_dir(work_dir: str | os.PathLike | None) -> Path:
    """Where an edge partitioner writes part[e]: ``work_dir`` or a fresh temporary folder.

    The temporary folder is removed when the process that made it exits: the plan that ``run`` returns
    points into it (``edge_parts_path``), so it cannot go sooner, and nothing else would remove it.
    :func:`graphstream.partition.partition` never gets here: it runs the algorithm in a scratch folder
    of its own, removed before it returns."""
    if work_dir is None:
        # pid-named, as partition()'s scratch folders: a killed process's folder goes with the next one's
        return scratch_folder_until_exit("graphstream-parts-")
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


def stream_with_parts(store: GraphStore, parts: zarr.Array, batch_size: int | None = None,
                      start: int = 0, stop: int | None = None) -> Iterator[tuple]:
    """Yield ``(batch, part_batch)`` pairs of edges [start, stop): edges and their parts, both prefetched."""
    bs = store.chunk_size if batch_size is None else batch_size
    stop = store.num_edges if stop is None else stop
    # the reader names its non-id column "time"; here it carries part[e]
    part_stream = stream_edges({"time": parts}, start, stop, bs, prefetch=2)
    for batch, pb in zip(store.stream(bs, start=start, stop=stop), part_stream, strict=True):
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
    dtype = _count_dtype(max_degree)
    best = np.full(n, -1, dtype=np.int32)
    best_count = np.zeros(n, dtype=np.int64)
    groups = part_groups(n, k, dtype.itemsize)
    replicas = 0
    for lo, hi in groups:
        counts = np.zeros((n, hi - lo), dtype=dtype)
        for batch, pb in stream_with_parts(store, parts):
            _count_edge_parts(batch.src, batch.dst, pb, counts, lo, hi)
        replicas += int(_take_best(counts, lo, best, best_count))
        del counts
    return best, len(groups), _place_isolated(best, replicas, k)


def _place_isolated(best: np.ndarray, replicas: int, k: int) -> float:
    """Isolated nodes (``best`` -1) to the parts owning fewest nodes, in id order (in place); returns the
    vertex-cut RF, replicas over the nodes that have an edge."""
    isolated = np.flatnonzero(best < 0)
    nonisolated = len(best) - len(isolated)
    if len(isolated):
        loads = np.bincount(best[best >= 0], minlength=k).astype(np.int64)
        best[isolated] = pack_least_loaded(np.ones(len(isolated), dtype=np.int64), loads)
    return replicas / nonisolated if nonisolated else 0.0


def owner_from_edge_parts_on_cluster(client: Client, store: GraphStore, part_path: str, k: int,
                                     max_degree: int | None, work_dir: str | os.PathLike
                                     ) -> tuple[np.ndarray, int, float]:
    """:func:`owner_from_edge_parts` as tasks, the same result. Per group of parts: tasks over edge
    ranges save their count tables as shards; tasks over node ranges sum their rows of every shard and
    save each node's best part in the group as a shard of their own, which this process folds into
    ``best`` (the tasks write no file another task writes: on a shared file system two machines
    writing different bytes of one page through memory maps each write the whole page back)."""
    from .._atomic import scratch_dir
    from ..cluster import check_visible, run_tasks, split_range, task_count

    n = store.num_nodes
    dtype = _count_dtype(max_degree)
    groups = part_groups(n, k, dtype.itemsize)
    # one edge range per thread: every range costs an O(n x group) shard (as the degree pass)
    edges = split_range(store.num_edges, task_count(client, per_worker=1), align=store.chunk_size)
    nodes = split_range(n, task_count(client))
    best = np.full(n, -1, dtype=np.int32)
    best_count = np.zeros(n, dtype=np.int64)
    replicas = 0
    with scratch_dir("owner-", dir=work_dir) as tmp:
        work = Path(tmp)
        check_visible(client, store.path, part_path, work)
        for lo, hi in groups:
            shards = [str(work / f"counts-{lo}-{i}.npy") for i in range(len(edges))]
            ranges = [(a, b, shard) for (a, b), shard in zip(edges, shards, strict=True)]
            run_tasks(client, "owner: count edges per part", _count_task, ranges, unit="edge",
                      size=lambda t: t[1] - t[0], store_path=store.path, part_path=part_path, lo=lo, hi=hi,
                      dtype=dtype.str)
            found = run_tasks(client, "owner: best part", _best_task, nodes, shards=shards, lo=lo,
                              out=str(work / f"best-{lo}"))
            for (a, b), (path, group_replicas) in zip(nodes, found, strict=True):
                group_best = np.load(path)
                os.unlink(path)
                # strict '>' over ascending groups, as within one: ties to the lowest part id
                better = group_best["count"] > best_count[a:b]
                best[a:b][better] = group_best["part"][better]
                best_count[a:b][better] = group_best["count"][better]
                replicas += group_replicas
            for sh in shards:
                os.unlink(sh)
    return best, len(groups), _place_isolated(best, replicas, k)


def _count_task(start: int, stop: int, shard: str, *, store_path: str, part_path: str, lo: int, hi: int,
                dtype: str) -> None:
    """A task: edges [start, stop) counted per node and part in [lo, hi), saved as an (n, hi - lo) shard."""
    from ..cluster import save_shard
    from ..store import open_store

    store = open_store(store_path)
    counts = np.zeros((store.num_nodes, hi - lo), dtype=np.dtype(dtype))
    for batch, pb in stream_with_parts(store, open_edge_parts(part_path), start=start, stop=stop):
        _count_edge_parts(batch.src, batch.dst, pb, counts, lo, hi)
    save_shard(shard, counts)


def _best_task(a: int, b: int, *, shards: list[str], lo: int, out: str) -> tuple[str, int]:
    """A task: nodes [a, b) of every shard summed; their best part in the group and its count saved as a
    shard (-1 and 0 for a node without an edge there). Returns its path and the replicas among them."""
    from ..cluster import save_shard

    counts = None
    for sh in shards:
        part = np.load(sh, mmap_mode="r")[a:b]
        counts = np.array(part, dtype=np.uint32) if counts is None else counts + part
    group_best = np.empty(b - a, dtype=[("part", np.int32), ("count", np.int64)])
    group_best["part"], group_best["count"] = -1, 0
    replicas = int(_take_best(counts, lo, group_best["part"], group_best["count"]))
    return str(save_shard(f"{out}-{a}.npy", group_best)), replicas


def _count_dtype(max_degree: int | None) -> np.dtype:
    # a node's edges in one part are at most its degree
    return np.dtype(np.uint16 if (max_degree is not None and max_degree < 65535) else np.uint32)
