"""The builder's passes as dask tasks (specs/distributed.md, "build"; graphstream.cluster).

The same passes as the in-process builder, cut where they are independent:

1. route: chunk-aligned edge ranges, one task each. A task routes its range
   with :func:`route_edges` into a spill folder of its own (one file per
   part, as in-process) plus that range's aggregation degree; the folder is
   written under a temporary name and renamed whole, so a task rerun after its
   worker died finds all of it or nothing. With ``halo_hops`` H > 1, H - 1
   more rounds of range tasks (:func:`route_hop`), each after the client has
   marked every part's reach from the last round's spill files into a bitset
   shard the tasks load (:func:`widen_halo_on_cluster`).
2. degree: node ranges, one task each, sum the ranges' degrees into one Zarr
   array chunked by node range (each task writes whole chunks of its own).
3. parts: one task per part. The part's CSR is read from every range's spill
   file of the part (:class:`SpillSet`: the CSR does not depend on the order
   of its pairs, its rows are sorted), then its node data rows, then it is
   measured (``part.json``); the part folder is built under a temporary name
   and renamed into place. A part larger than a worker thread's share of the
   stage (R-MAT's node-balanced parts: one with 75% of the edges) would be the
   whole stage on one worker; it is cut into tasks instead (:func:`~graphstream.assemble.csr.parts_to_cut`):
   one counts its rows (the first scan, :func:`layout_part`), one per edge
   range buckets that range's pairs by row block (:func:`bucket_part`), one
   per bucket fills and sorts its rows into its slice of ``indices.npy``
   (:func:`fill_part`), and a last one gathers the node data, measures the part
   and renames it into place (:func:`finish_part`). The bytes are the same:
   the CSR does not depend on where the rows are cut.

The client keeps only small results (pair counts, part entries, seconds); the
output is the in-process one byte for byte whatever the number of workers.
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import zarr

from .._atomic import save_npy
from .._jobs import Job
from ..cluster import (
    check_visible,
    clear_task_staging,
    publish_dir,
    run_jobs,
    run_tasks,
    save_shard,
    split_range,
    task_count,
    task_staging_dir,
)
from ..store.graph import GraphStore, open_store
from ..store.nodedata import NodeData
from ..store.partitions_manifest import PartEntry, measure_part, part_dir_name
from .config import BuildConfig
from .csr import (
    CutPartSteps,
    Scratch,
    bucket_plan,
    bucket_range,
    build_part_csr,
    cut_part_job,
    fill_bucket,
    index_dtype_for,
    lay_out_part,
    local_map,
    parts_to_cut,
)
from .features import ascending_runs, gather_node_data
from .spill import Spill, SpillSet, inner_bits, mark_reach, route_edges, route_hop

if TYPE_CHECKING:
    from distributed import Client

OWNER_FILE = "owner.npy"
DEGREE_ARRAY = "degree.zarr"
DEGREE_CHUNK = 1 << 20            # nodes per chunk of the summed degree (8 MiB)

# A documented test hook: seconds every task of the parts pass (a whole part, or a step of a cut part) sleeps
# before it starts, so that a test can kill a worker while parts are being built
# (tests/test_distributed_faults.py). Unset: no sleep.
PART_DELAY_ENV = "GRAPHSTREAM_TEST_PART_DELAY"


@dataclass(frozen=True, slots=True)
class Routed:
    """What the route stage left in the work folder: one spill folder per edge range and the pairs it
    holds per part (ranges x parts), and the summed aggregation degree."""
    folders: tuple[str, ...]
    pairs: np.ndarray
    degree_path: str

    def spill_set(self, id_dtype: np.dtype) -> SpillSet:
        return SpillSet(tuple(Spill(Path(f), id_dtype, row) for f, row in zip(self.folders, self.pairs, strict=True)))


class DegreeRows:
    """The summed degree array indexed by a part's node ids (ascending runs: inner, then halo), a chunk at
    a time: each chunk touched is read once, sliced, and indexed in memory. Zarr's own coordinate
    selection of the same ids sorts them and took 0.70 s of a 6.0 s parts pass (R-MAT s22, k = 8, one
    worker); this, with the array stored uncompressed, 0.02-0.04 s a part of 1.9M ids."""

    def __init__(self, path: str):
        self.array = zarr.open_array(path, mode="r")

    def __getitem__(self, ids: np.ndarray) -> np.ndarray:
        out = np.empty(len(ids), dtype=self.array.dtype)
        runs = ascending_runs(ids)
        if not runs:
            return out
        chunk = self.array.chunks[0]
        first = min(int(ids[a]) for a, _ in runs) // chunk
        last = max(int(ids[b - 1]) for _, b in runs) // chunk
        edges = np.arange(first, last + 2, dtype=np.int64) * chunk
        cuts = [a + np.searchsorted(ids[a:b], edges) for a, b in runs]   # each run's ids in each chunk
        for c in range(last - first + 1):
            spans = [(int(cut[c]), int(cut[c + 1])) for cut in cuts if cut[c] < cut[c + 1]]
            if spans:
                start = int(edges[c])
                rows = self.array[start:start + chunk]
                for i, j in spans:
                    out[i:j] = rows[ids[i:j] - start]
        return out


# -- tasks (module level: pickled by reference) ---------------------------------------------------

def _routed_folder(final: Path, route) -> np.ndarray:
    """``route(folder)`` (returns a :class:`Spill`) into ``final``, written under a temporary name and
    renamed whole; the pairs per part (k ints). A rerun finds ``final`` complete and routes nothing."""
    if not final.is_dir():
        tmp = final.parent / f".{final.name}.{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            save_npy(tmp / "pairs.npy", route(tmp).pairs)
            publish_dir(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return np.load(final / "pairs.npy")


def route_range(index: int, start: int, stop: int, store_path: str, owner_path: str, k: int,
                batch_size: int | None, work: str) -> np.ndarray:
    """Route edges [start, stop) into ``work/route-NNNNN``; the pairs per part (k ints)."""
    def route(folder: Path) -> Spill:
        owner = np.load(owner_path)   # in RAM: the routing kernel reads it at random
        spill, degree = route_edges(open_store(store_path), owner, k, folder, batch_size, start, stop)
        # int32 where the range allows (route_edges): half the O(n) file every range writes and every
        # degree task reads
        save_npy(folder / "degree.npy", degree)
        return spill
    return _routed_folder(Path(work) / f"route-{index:05d}", route)


def route_hop_range(index: int, start: int, stop: int, hop: int, store_path: str, reach_path: str,
                    done_path: str, k: int, batch_size: int | None, work: str) -> np.ndarray:
    """Halo hop ``hop``'s edges of [start, stop) into ``work/hop-H-NNNNN``; the pairs per part (k ints)."""
    def route(folder: Path) -> Spill:
        # in RAM: the kernel reads the bitsets at random
        return route_hop(open_store(store_path), np.load(reach_path), np.load(done_path), k, folder,
                         batch_size, start, stop)
    return _routed_folder(Path(work) / f"hop-{hop}-{index:05d}", route)


def sum_degrees(lo: int, hi: int, folders: tuple[str, ...], degree_path: str) -> None:
    """degree[lo:hi] = the sum of the ranges' degrees (whole chunks of the Zarr array: a rerun rewrites them)."""
    total = np.zeros(hi - lo, dtype=np.int64)
    for folder in folders:
        total += np.load(Path(folder) / "degree.npy", mmap_mode="r")[lo:hi]
    zarr.open_array(degree_path, mode="r+")[lo:hi] = total


def _test_delay() -> None:
    delay = os.environ.get(PART_DELAY_ENV)
    if delay:
        time.sleep(float(delay))


def build_part(p: int, routed: Routed, owner_path: str, id_dtype: str, undirected: bool, num_nodes: int,
               node_data: NodeData | None, folder: str, config: BuildConfig) -> tuple[PartEntry, float, float]:
    """Passes 2 and 3 of part ``p`` into ``folder/part-NNNNN``; its entry and the CSR and node data seconds."""
    _test_delay()
    out = Path(folder)
    final = out / part_dir_name(p)
    if final.is_dir():   # an earlier attempt finished it (its result was lost with its worker)
        return measure_part(out, p), 0.0, 0.0
    tmp = task_staging_dir(out, part_dir_name(p))
    try:
        t0 = time.perf_counter()
        dtype = np.dtype(id_dtype)
        spill = routed.spill_set(dtype)
        inner = np.flatnonzero(np.load(owner_path, mmap_mode="r") == p)
        build_part_csr(spill, p, inner, undirected, Scratch.create(num_nodes, dtype), tmp,
                       DegreeRows(routed.degree_path), config)
        t1 = time.perf_counter()
        if node_data is not None:
            gather_node_data(node_data, np.load(tmp / "global_ids.npy"), tmp, config.gather_bytes)
        t2 = time.perf_counter()
        entry = measure_part(out, p, tmp)
        if publish_dir(tmp, final):
            spill.remove(p)   # as in-process: a part's spill files go as soon as it is built
        return entry, t1 - t0, t2 - t1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# A part cut into tasks is assembled in ``folder/.part-NNNNN.split`` (its row offsets, global ids, degrees,
# and ``indices.npy`` at its full length, filled slice by slice), then renamed to ``folder/part-NNNNN``.
def _split_dir(folder: str | Path, p: int) -> Path:
    return Path(folder) / f".{part_dir_name(p)}.split"


def _bucket_dir(work: str | Path, p: int, r: int) -> Path:
    return Path(work) / f"bucket-{p:05d}-{r:05d}"


def layout_part(p: int, routed: Routed, owner_path: str, id_dtype: str, undirected: bool, num_nodes: int,
                folder: str, config: BuildConfig) -> tuple[list[int], float]:
    """Step 1 of a cut part (:func:`graphstream.assemble.csr.lay_out_part`) in its split folder, written
    under a temporary name and renamed whole; the first row of every bucket and the seconds."""
    _test_delay()
    t0 = time.perf_counter()
    split = _split_dir(folder, p)
    dtype = np.dtype(id_dtype)
    if not split.is_dir():
        tmp = task_staging_dir(folder, split.name)
        try:
            inner = np.flatnonzero(np.load(owner_path, mmap_mode="r") == p)
            lay_out_part(routed.spill_set(dtype), p, inner, undirected, Scratch.create(num_nodes, dtype),
                         DegreeRows(routed.degree_path), tmp, config)
            publish_dir(tmp, split)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return bucket_plan(np.load(split / "indptr.npy"), config).bucket_starts, time.perf_counter() - t0


def bucket_part(p: int, r: int, starts: list[int], routed: Routed, id_dtype: str, undirected: bool,
                num_nodes: int, folder: str, work: str, config: BuildConfig) -> tuple[np.ndarray, float]:
    """Step 2 for edge range ``r`` into ``work/bucket-P-R``; the entries per bucket and the seconds. The
    range's spill file of the part goes once its buckets are in place."""
    _test_delay()
    t0 = time.perf_counter()
    spill = routed.spill_set(np.dtype(id_dtype)).spills[r]

    def route(tmp: Path) -> Spill:
        global_ids = np.load(_split_dir(folder, p) / "global_ids.npy")
        return bucket_range(spill, p, local_map(global_ids, num_nodes), starts, len(global_ids), undirected,
                            config, tmp)
    counts = _routed_folder(_bucket_dir(work, p, r), route)
    spill.remove(p)
    return counts, time.perf_counter() - t0


def fill_part(p: int, j: int, counts: np.ndarray, ranges: list[int], folder: str, work: str,
              config: BuildConfig) -> float:
    """Step 3 for bucket ``j``, from the bucket files of the edge ranges ``ranges`` (``counts``, ranges x
    buckets: their entries); the seconds. Its buckets stay until the part is finished: a rerun of
    this task reads them again."""
    _test_delay()
    t0 = time.perf_counter()
    split = _split_dir(folder, p)
    indptr = np.load(split / "indptr.npy")
    index_dtype = index_dtype_for(len(indptr) - 1)
    fill_bucket(SpillSet(tuple(Spill(_bucket_dir(work, p, r), index_dtype, row)
                               for r, row in zip(ranges, counts, strict=True))),
                j, indptr, config, split / "indices.npy")
    return time.perf_counter() - t0


def finish_part(p: int, ranges: list[int], node_data: NodeData | None, folder: str, work: str,
                config: BuildConfig) -> tuple[PartEntry, float]:
    """The node data rows of a part cut into tasks, then the part measured and renamed into place; its
    entry and the node data seconds. Its buckets go with it."""
    _test_delay()
    out = Path(folder)
    if (out / part_dir_name(p)).is_dir():   # an earlier attempt finished it
        return measure_part(out, p), 0.0
    split = _split_dir(folder, p)
    t0 = time.perf_counter()
    if node_data is not None:
        gather_node_data(node_data, np.load(split / "global_ids.npy"), split, config.gather_bytes)
    seconds = time.perf_counter() - t0
    entry = measure_part(out, p, split)
    publish_dir(split, out / part_dir_name(p))
    for r in ranges:
        shutil.rmtree(_bucket_dir(work, p, r), ignore_errors=True)
    return entry, seconds


# -- the client's side ------------------------------------------------------------------------------

def _edge_ranges(client: Client, store: GraphStore) -> list[tuple[int, int]]:
    """The chunk-aligned edge ranges of the route and of every halo hop: one per worker thread, as the
    degree pass. Routing is uniform work a range, and every range costs an O(n) degree file and a spill
    file per part (R-MAT s26 on 16 workers: 16 degree files of 268 MB, where four ranges a thread wrote
    64 of 537 MB)."""
    return split_range(store.num_edges, task_count(client, per_worker=1), align=store.chunk_size)


def route_on_cluster(client: Client, store: GraphStore, owner: np.ndarray, k: int, work: Path,
                     batch_size: int | None) -> Routed:
    """Stages 1 and 2: spill folders of every edge range, and the summed degree, in ``work``."""
    check_visible(client, store.path, work)
    owner_path = str(save_shard(work / OWNER_FILE, owner))
    ranges = _edge_ranges(client, store)
    pairs = run_tasks(client, "build: route edges", route_range,
                      [(i, a, b) for i, (a, b) in enumerate(ranges)], unit="edge", size=lambda t: t[2] - t[1],
                      store_path=store.path, owner_path=owner_path, k=k, batch_size=batch_size, work=str(work))
    folders = tuple(str(work / f"route-{i:05d}") for i in range(len(ranges)))
    degree_path = str(work / DEGREE_ARRAY)
    n = store.num_nodes
    # uncompressed: every part task reads the chunks its nodes fall in (DegreeRows), most of them at R-MAT's spread
    zarr.create_array(degree_path, shape=(n,), chunks=(min(DEGREE_CHUNK, max(1, n)),), dtype=np.int64,
                      fill_value=0, overwrite=True, compressors=None)
    run_tasks(client, "build: degrees", sum_degrees,
              split_range(n, task_count(client), align=DEGREE_CHUNK), folders=folders, degree_path=degree_path)
    return Routed(folders, np.asarray(pairs, dtype=np.int64).reshape(len(ranges), k), degree_path)


def widen_halo_on_cluster(client: Client, store: GraphStore, routed: Routed, owner: np.ndarray, k: int,
                          work: Path, hops: int, batch_size: int | None, chunk_pairs: int) -> Routed:
    """:func:`graphstream.assemble.spill.widen_halo` on the cluster: every further hop's edges routed by
    range tasks; the client marks each part's reach from the last round's spill files between rounds
    (it reads them once: O(routed pairs) of I/O here) and hands the bitsets over as shards."""
    if hops == 1:
        return routed
    done = inner_bits(owner, k)
    last, folders, pairs = routed, list(routed.folders), [routed.pairs]
    ranges = _edge_ranges(client, store)
    for h in range(1, hops):
        reach = done.copy()
        mark_reach(last.spill_set(store.id_dtype), k, reach, chunk_pairs)
        reach_path = str(save_shard(work / f"reach-{h}.npy", reach))
        done_path = str(save_shard(work / f"done-{h}.npy", done))
        got = run_tasks(client, f"build: route halo hop {h + 1}", route_hop_range,
                        [(i, a, b) for i, (a, b) in enumerate(ranges)], unit="edge", size=lambda t: t[2] - t[1],
                        hop=h, store_path=store.path, reach_path=reach_path, done_path=done_path, k=k,
                        batch_size=batch_size, work=str(work))
        last = Routed(tuple(str(work / f"hop-{h}-{i:05d}") for i in range(len(ranges))),
                      np.asarray(got, dtype=np.int64).reshape(len(ranges), k), routed.degree_path)
        folders += last.folders
        pairs.append(last.pairs)
        done = reach
        os.unlink(reach_path)
        os.unlink(done_path)
    return Routed(tuple(folders), np.concatenate(pairs), routed.degree_path)


def build_parts_on_cluster(client: Client, routed: Routed, work: Path, k: int, undirected: bool, num_nodes: int,
                           id_dtype: np.dtype, node_data: NodeData | None, folder: Path, config: BuildConfig,
                           ) -> tuple[tuple[PartEntry, ...], dict[str, float]]:
    """Stage 3: every part built, renamed into ``folder`` and measured; the entries and the busy seconds.

    A part of :func:`graphstream.assemble.csr.parts_to_cut` runs as a chain of tasks (layout, then a
    bucket task per edge range, then a fill task per bucket, then finish), each released when the last
    step's results are in; its tasks go before whole parts, so that the longest chain starts first and
    the whole parts fill the threads it leaves free. Whole parts go largest first (parts differ in size
    by 10x or more)."""
    check_visible(client, folder, *([node_data.path] if node_data is not None else []))
    pairs = routed.pairs.sum(axis=0)
    common = {"routed": routed, "id_dtype": np.dtype(id_dtype).str, "undirected": undirected, "num_nodes": num_nodes,
              "folder": str(folder), "config": config}
    entries: list[PartEntry | None] = [None] * k
    busy = {"csr": 0.0, "node_data": 0.0}

    def whole_done(p: int, result: tuple[PartEntry, float, float]) -> list[Job]:
        entries[p] = result[0]
        busy["csr"] += result[1]
        busy["node_data"] += result[2]
        return []

    def finished(p: int, result: tuple[PartEntry, float]) -> list[Job]:
        entries[p] = result[0]
        busy["node_data"] += result[1]
        return []

    steps = CutPartSteps(layout=partial(layout_part, **common, owner_path=str(work / OWNER_FILE)),
                         bucket=partial(bucket_part, **common, work=str(work)),
                         fill=partial(fill_part, folder=str(folder), work=str(work), config=config),
                         finish=partial(finish_part, node_data=node_data, folder=str(folder), work=str(work),
                                        config=config))
    split = set(parts_to_cut(pairs, undirected, sum(client.nthreads().values()), config))
    jobs = [cut_part_job(p, routed.pairs[:, p], steps, busy, partial(finished, p)) if p in split else
            Job(f"part-{p:05d}", partial(build_part, **common, owner_path=str(work / OWNER_FILE),
                                         node_data=node_data), (p,), (0, int(pairs[p])), partial(whole_done, p), 1)
            for p in range(k)]
    run_jobs(client, "build: parts", jobs, unit="part", total=k)
    clear_task_staging(folder)   # what the part tasks of a killed worker had begun
    return tuple(entries), busy
