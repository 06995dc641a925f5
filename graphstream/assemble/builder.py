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
   is counted on the way (O(num_nodes)). :mod:`graphstream.assemble.spill`.
   With ``halo_hops`` H > 1, H - 1 more passes over the edges each route to
   every part the edges that complete the rows of its halo one hop further
   out (:func:`graphstream.assemble.spill.widen_halo`): the part then holds a
   complete row for every node within H - 1 hops of its inner nodes, and the
   outermost halo's rows as above (undirected: their edges to the nodes
   inside; directed: empty). An L-layer model needs H = L for every inner
   node's output to be the whole graph's.
2. per part, CSR: read the part's spill file in fixed-size chunks; first scan:
   count row lengths and collect the halo; then a counting sort fills the
   column indices row block by row block in a fixed buffer, each block written
   sequentially to ``indices.npy``. Large parts cost extra disk, never RAM: a
   part of many blocks is first bucketed by block in one more scan, each block
   then reading its own bucket (``BuildConfig.bucket_min_blocks``).
   :mod:`graphstream.assemble.csr`. The parts are built on several threads,
   the largest first; a part with more pairs than a thread's share (R-MAT's
   node-balanced parts: one with 75% of the edges) is cut into steps that
   every thread takes from (its rows counted, each routed edge range bucketed,
   each bucket filled and sorted into its slice of ``indices.npy``), so that
   it does not hold the pass on one thread. The same bytes either way.
3. per part, node data: rows gathered in sorted order through windowed
   memory maps (:mod:`graphstream.assemble.features`).
4. metrics recomputed from the written part files, ``manifest.json`` last
   (:mod:`graphstream.store.partitions_manifest`); the whole folder is
   written as a temporary sibling and renamed into place.

This module is the orchestration: :func:`build_partitions` runs the passes
in that order.

Memory: owner and degree (10 bytes per node), with H > 1 two per-node part
bitsets while the further hops are routed (16 bytes per node per 64 parts),
and per worker building parts in parallel a global->local map, a row counter
and a halo list (16 bytes per node), plus the fixed read, route, sort and gather buffers; a part cut into
steps keeps its global->local map (4 bytes per node) from its row count until its pairs are bucketed. Disk:
the spill files hold each routed edge once per part (8 or 16 bytes per pair); each is deleted as soon as its
part is built (a cut part's: once bucketed, and its buckets once filled).
"""
from __future__ import annotations

import os
import shutil
import time
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from queue import Queue
from typing import TYPE_CHECKING, Any

import numpy as np

from .._atomic import (
    atomic_dir,
    check_output,
    check_outputs_apart,
    for_workers,
    prepare_work_dir,
    recorded_path,
    scratch_dir,
)
from .._jobs import Job, run_jobs_in_threads
from .._report import log, warn
from .._resources import Stopwatch, peak_rss_bytes
from ..errors import ParameterError, path_argument, whole_number
from ..store.graph import GraphStore, open_store, store_for_workers
from ..store.nodedata import NodeData, open_node_data
from ..store.partitions_manifest import (
    PartitionsManifest,
    metrics_of_parts,
    part_dir_name,
    recompute_metrics,
    write_manifest,
)
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
from .features import gather_node_data
from .spill import Spill, SpillSet, route_edges_in_ranges, widen_halo

if TYPE_CHECKING:
    from distributed import Client


def _build_parts(spill: Spill | SpillSet, owner: np.ndarray, k: int, undirected: bool, degree: np.ndarray,
                 node_data: NodeData | None, folder: Path, config: BuildConfig, num_nodes: int,
                 id_dtype: np.dtype, workers: int) -> dict[str, float]:
    """Passes 2 and 3 for every part on ``workers`` threads (the kernels release the GIL), each
    building a part with its own O(num_nodes) scratch. Parts differ in size by 10x or more (R-MAT's
    hubs): the largest go first, and a part larger than a thread's share is cut into steps that run
    on every thread (:func:`graphstream.assemble.csr.parts_to_cut`). Returns the seconds spent in each
    pass, summed over threads."""
    scratches: Queue = Queue()
    for _ in range(min(workers, k)):   # a whole part or a cut part's first step holds one
        scratches.put(Scratch.create(num_nodes, id_dtype))
    busy = {"csr": 0.0, "node_data": 0.0}

    def whole(p: int) -> tuple[float, float]:
        scratch = scratches.get()
        try:
            t0 = time.perf_counter()
            part_dir = folder / part_dir_name(p)
            part_dir.mkdir()
            global_ids, _ = build_part_csr(spill, p, np.flatnonzero(owner == p), undirected, scratch, part_dir,
                                           degree, config)
            spill.remove(p)
            t1 = time.perf_counter()
            if node_data is not None:
                gather_node_data(node_data, global_ids, part_dir, config.gather_bytes)
            return t1 - t0, time.perf_counter() - t1
        finally:
            scratches.put(scratch)

    def add_busy(result: tuple[float, float]) -> list[Job]:
        busy["csr"] += result[0]
        busy["node_data"] += result[1]
        return []

    pairs = np.asarray(spill.pairs, dtype=np.int64)
    cut = set(parts_to_cut(pairs, undirected, workers, config))
    ranges = spill.spills if isinstance(spill, SpillSet) else (spill,)
    steps = _cut_part_steps(ranges, owner, undirected, degree, node_data, folder, config, num_nodes, scratches)
    jobs = [cut_part_job(p, np.array([r.pairs[p] for r in ranges]), steps, busy, add_busy) if p in cut else
            Job(f"part-{p:05d}", whole, (p,), (0, int(pairs[p])), add_busy, 1) for p in range(k)]
    run_jobs_in_threads(jobs, workers, "build: parts", unit="part", total=k)
    return busy


def _cut_part_steps(ranges: tuple[Spill, ...], owner: np.ndarray, undirected: bool, degree: np.ndarray,
                    node_data: NodeData | None, folder: Path, config: BuildConfig, num_nodes: int,
                    scratches: Queue) -> CutPartSteps:
    """The steps of a cut part on this process's threads: the part is written in place, its global ->
    local map kept (4 bytes a node) until its buckets are written, each bucket's files removed once filled."""
    laid_out: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}

    def layout(p: int) -> tuple[list[int], float]:
        t0 = time.perf_counter()
        scratch = scratches.get()
        try:
            part_dir = folder / part_dir_name(p)
            part_dir.mkdir()
            global_ids, indptr = lay_out_part(SpillSet(ranges), p, np.flatnonzero(owner == p), undirected, scratch,
                                              degree, part_dir, config)
        finally:
            scratches.put(scratch)
        laid_out[p] = (global_ids, indptr, local_map(global_ids, num_nodes))
        return bucket_plan(indptr, config).bucket_starts, time.perf_counter() - t0

    def bucket(p: int, r: int, starts: list[int]) -> tuple[np.ndarray, float]:
        t0 = time.perf_counter()
        global_ids, _, local = laid_out[p]
        buckets = bucket_range(ranges[r], p, local, starts, len(global_ids), undirected, config,
                               _bucket_folder(ranges[r], p))
        ranges[r].remove(p)
        return buckets.pairs, time.perf_counter() - t0

    def fill(p: int, j: int, table: np.ndarray, used: list[int]) -> float:
        t0 = time.perf_counter()
        global_ids, indptr, _ = laid_out[p]
        laid_out[p] = (global_ids, indptr, None)   # every bucket is written: the map is no longer needed
        buckets = SpillSet(tuple(Spill(_bucket_folder(ranges[r], p), index_dtype_for(len(global_ids)), row)
                                 for r, row in zip(used, table, strict=True)))
        fill_bucket(buckets, j, indptr, config, folder / part_dir_name(p) / "indices.npy")
        buckets.remove(j)   # its disk back as soon as its rows are written
        return time.perf_counter() - t0

    def finish(p: int, used: list[int]) -> tuple[float, float]:
        t0 = time.perf_counter()
        global_ids, _, _ = laid_out.pop(p)
        if node_data is not None:
            gather_node_data(node_data, global_ids, folder / part_dir_name(p), config.gather_bytes)
        for r in used:
            shutil.rmtree(_bucket_folder(ranges[r], p), ignore_errors=True)
        return 0.0, time.perf_counter() - t0

    return CutPartSteps(layout, bucket, fill, finish)


def _bucket_folder(spill: Spill, p: int) -> Path:
    return spill.folder / f"buckets-{p:05d}"


def _check_plan(store: GraphStore, plan) -> tuple[np.ndarray, int]:
    if not hasattr(plan, "owner") or not hasattr(plan, "num_parts"):
        raise ParameterError(f"plan must be a PartitionPlan (num_parts, owner[v]), got {type(plan).__name__}; "
                             "for an owner array: PartitionPlan(algorithm, num_parts, owner)")
    k = whole_number(plan.num_parts, "plan.num_parts")
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


def build_partitions(store: GraphStore | str | os.PathLike, plan, out_dir: str | os.PathLike, *,
                     nodes: str | os.PathLike | NodeData | None = None, overwrite: bool = False,
                     work_dir: str | os.PathLike | None = None, halo_hops: int = 1,
                     config: BuildConfig | None = None, client: Client | None = None) -> dict[str, Any]:
    """Write the partitioned dataset of ``plan`` (a :class:`PartitionPlan`) to ``out_dir``.

    Args:
        store: the graph store the plan was computed on (or its path).
        plan: ``owner[v]`` in [0, num_parts) for every node, ``algorithm``,
            ``params`` and the partitioner's ``metrics``.
        out_dir: the dataset folder; refused if it exists unless ``overwrite``.
        nodes: node data folder (or an opened :class:`NodeData`) whose rows are
            split with the parts; None for a graph without node data.
        work_dir: where the spill files go (default: inside the temporary
            output folder, so on the same disk as the result).
        halo_hops: H >= 1: every node within H - 1 hops of a part's inner nodes gets its complete
            row in the part (1: the inner nodes only); one more pass over the edges per extra hop.
        config: buffer sizes.
        client: a ``distributed.Client``: route edge ranges and build parts as tasks on its cluster
            (:mod:`graphstream.assemble.distributed`; the same bytes). None: in this process.

    Returns the manifest (also written as ``out_dir/manifest.json``).

    Notes: time O(E + N k / 8 + sum of part sizes); RAM O(N) (10 + 16 x
    workers bytes per node) plus the configured buffers; disk up to 8 or 16 bytes per routed
    pair of scratch space, released part by part.
    """
    config = BuildConfig() if config is None else config
    if not isinstance(config, BuildConfig):
        raise ParameterError(f"config must be a BuildConfig, got {type(config).__name__}")
    watch = Stopwatch()
    # 0. check the plan, the node data and where the output goes before writing anything
    store = open_store(store)
    out_dir = path_argument(out_dir, "out_dir")
    work_dir = None if work_dir is None else path_argument(work_dir, "work_dir")
    if nodes is not None and not isinstance(nodes, NodeData):
        nodes = path_argument(nodes, "nodes")
    if client is not None:   # the workers' paths
        store, out_dir, work_dir = store_for_workers(store), for_workers(out_dir), for_workers(work_dir)
        nodes = nodes if isinstance(nodes, NodeData) else for_workers(nodes)
    node_path = nodes.path if isinstance(nodes, NodeData) else nodes
    inputs = {"store": store.path, "nodes": node_path}
    check_outputs_apart({"out_dir": out_dir}, inputs)
    check_outputs_apart({}, inputs, {"work_dir": work_dir})   # the spill goes in a folder of its own there
    owner, k = _check_plan(store, plan)
    if isinstance(halo_hops, bool) or not isinstance(halo_hops, (int, np.integer)) or halo_hops < 1:
        raise ParameterError(f"halo_hops (--halo-hops) {halo_hops}: expected a whole number >= 1")
    halo_hops = int(halo_hops)
    node_data = nodes if isinstance(nodes, NodeData) or nodes is None else open_node_data(nodes, store.num_nodes)
    if isinstance(node_data, NodeData) and node_data.num_nodes != store.num_nodes:
        raise ParameterError(f"node data {node_data.path} is for {node_data.num_nodes} nodes, "
                             f"the store has {store.num_nodes}")
    check_output(out_dir, overwrite)
    if node_data is not None and not node_data.checked:   # a damaged byte would pass into parts checksummed anew
        node_data.check_checksums()
    prepare_work_dir(work_dir)
    undirected = not store.directed
    if store.has_weight:   # a weighted GCN trained on the parts would be unweighted without a word
        warn(f"{store.path}: the store's edge weights are not written into the parts (a part holds the "
             "structure and the node data: docs/format.md); the exports carry none either")

    with atomic_dir(out_dir, overwrite) as tmp, ExitStack() as scratch:
        if work_dir is None:
            spill_dir = tmp / "_spill"
            spill_dir.mkdir()
        else:   # pid-named: a folder left by a killed run is removed by the next one
            spill_dir = scratch.enter_context(scratch_dir("graphstream-build-", work_dir))
        try:
            # 1. route the edges to one spill file per part
            log(f"build: routing {store.num_edges} edges to {k} parts")
            if client is None:
                # the route's threads take 8 B/node each, within the parts' 16 B/node + buffers
                workers = config.resolve_workers(store.num_nodes)
                spill, degree = route_edges_in_ranges(store, owner, k, spill_dir, config.batch_size, workers)
                spill = widen_halo(store, owner, k, spill, spill_dir, halo_hops, config.batch_size,
                                   config.read_pairs(store.id_dtype), workers)
                watch.lap("route")
                spill_bytes = int(spill.pairs.sum()) * 2 * store.id_dtype.itemsize

                # 2. and 3. per part: its CSR, then its node data rows
                busy = _build_parts(spill, owner, k, undirected, degree, node_data, tmp, config,
                                    store.num_nodes, store.id_dtype, workers)
                watch.lap("parts")
                del degree
            else:   # the same passes as tasks; the parts come back measured
                from .distributed import build_parts_on_cluster, route_on_cluster, widen_halo_on_cluster

                routed = route_on_cluster(client, store, owner, k, spill_dir, config.batch_size)
                routed = widen_halo_on_cluster(client, store, routed, owner, k, spill_dir, halo_hops,
                                               config.batch_size, config.read_pairs(store.id_dtype))
                watch.lap("route")
                spill_bytes = int(routed.pairs.sum()) * 2 * store.id_dtype.itemsize
                measured_parts, busy = build_parts_on_cluster(client, routed, spill_dir, k, undirected,
                                                              store.num_nodes, store.id_dtype, node_data, tmp,
                                                              config)
                watch.lap("parts")
                workers = sum(client.nthreads().values())
        finally:
            shutil.rmtree(spill_dir, ignore_errors=True)

        # 4. metrics measured from the written parts, then the manifest, last
        if client is None:
            parts, measured = recompute_metrics(tmp, k, store.num_nodes)
        else:
            parts, measured = measured_parts, metrics_of_parts(measured_parts, store.num_nodes)
        metrics = _merge_metrics(dict(getattr(plan, "metrics", {}) or {}), measured, watch, busy,
                                 workers, spill_bytes)
        metrics["part_bytes"] = sum(d.size for part in parts for d in (part.files or {}).values())
        manifest = PartitionsManifest(
            algorithm=str(getattr(plan, "algorithm", "unknown")),
            params=_jsonable(dict(getattr(plan, "params", {}) or {})),
            num_parts=k,
            num_nodes=int(store.num_nodes),
            num_edges=int(store.num_edges),
            directed=bool(store.directed),
            metrics=_jsonable(metrics),
            parts=parts,
            halo_hops=halo_hops,
            # provenance: what was split (absolute local paths, URLs as given)
            extra={"source": {"store": recorded_path(store.path),
                              "nodes": recorded_path(node_data.path) if isinstance(node_data, NodeData) else None}},
        )
        write_manifest(tmp, manifest)
    log(f"build: {k} parts written to {out_dir} in {watch.seconds:.1f} s "
        f"(replication factor {measured['replication_factor']:.4f})")
    return manifest.to_json()


def _merge_metrics(plan_metrics: dict[str, Any], measured: dict[str, Any], watch: Stopwatch,
                   busy: dict[str, float], workers: int, spill_bytes: int) -> dict[str, Any]:
    """The manifest's metrics: the partitioner's own figures, with the replication factor, the
    balances and the per-part ``part_inner``/``part_halo`` replaced by the ones measured from the
    written parts, then the build's costs."""
    partition_seconds = float(plan_metrics.get("seconds", 0.0))
    merged = {key: value for key, value in plan_metrics.items()
              if key not in ("replication_factor", "node_balance", "edge_balance", "seconds",
                             "peak_rss_bytes")}
    merged.update(measured)
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
                         "workers": workers},
        "spill_bytes": spill_bytes,
    })
    return merged


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


__all__ = ["BuildConfig", "build_partitions"]
