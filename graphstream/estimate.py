"""What a run will cost before it starts: disk, peak memory and time of each step.

A plain model over the graph's size (nodes, edges, features), built from the
per-edge and per-node costs this project measured; every constant names its
source (docs/estimate.md lists them with the commands that reproduce them).
It imports nothing of graphstream's but the error types, so every layer and
command may use it (``generate rmat`` and ``ingest`` check its disk figure
against the free space before writing).

The figures are for the measuring machine (2 cores, a virtual disk at ~180 MB/s):
times scale with the machine; bytes do not. Disk figures are upper-end
(R-MAT ids compress worst of the graphs measured: real graphs take less),
memory figures are the measured peaks, times the slower of the measured runs.
"""
from __future__ import annotations

import math
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from ._report import format_bytes
from ._resources import usable_cores, workers_within
from .errors import ResourceError

MB = 1_000_000

# -- disk --------------------------------------------------------------------------------------
# Graph store, src + dst: random ids barely compress, so their bytes grow with the ids' width:
# R-MAT 5.59 bytes per edge at scale 20, 6.01 at 24, 6.89 at 26, 7.68 at 28; uniform random int64
# ids 8.01 below 2**31 nodes, 8.49 below 2**33, 9.77 below 2**36 (docs/estimate.md). Upper end:
# (log2(nodes) + 3.5) / 4, at most the raw width and Blosc's headers. Real graphs take far less
# (web-NotreDame: 0.65). With the nodes unknown, 6.0.
STORE_BYTES_PER_EDGE = 6.0
STORE_BYTES_PER_EDGE_MARGIN_BITS = 3.5
# Optional columns, at their raw width (timestamps int64, weights float32; compression not counted).
TIME_BYTES_PER_EDGE = 8
WEIGHT_BYTES_PER_EDGE = 4
# Id map of a relabelled store: one int64 per node (docs/store.md, graph store layout).
ID_MAP_BYTES_PER_NODE = 8
# Partitioned dataset, per part (docs/format.md; dtypes of graphstream/assemble/csr.py):
# global_ids (id dtype: 4 bytes below 2**31 nodes) + indptr (int64) + degree (int64) per local
# node, indices (int32) per CSR entry, a 128-byte .npy header per file.
PART_BYTES_PER_LOCAL_NODE = 4 + 8 + 8
PART_BYTES_PER_ENTRY = 4
NPY_HEADER_BYTES = 128
# a part's part.json, and its entry in manifest.json (365 and 441 bytes measured at k = 1024, R-MAT s12)
PART_JSON_BYTES = 512
MANIFEST_BYTES_PER_PART = 512
# the file system's allocation unit: every file and folder takes whole blocks (what du counts); at k = 1024
# on R-MAT s12 the files held 4.3 MB and took 25.0 MiB
DISK_BLOCK_BYTES = 4096
# Build scratch: 8 bytes per routed pair, 16 with int64 ids (docs/format.md, "How it is built";
# measured: 4.1 GB of spill for 268M undirected edges at scale 24, 15.3 bytes per edge).
SPILL_BYTES_PER_PAIR = 8
# A part of many sort-buffer blocks is bucketed by block first: each of its entries once more, as
# (row, column) local ids, while its spill file is still there (graphstream/assemble/csr.py). Upper end:
# one part holding every entry (R-MAT's hubs put 58-62% of them in one part at k = 16).
BUCKET_BYTES_PER_ENTRY = 8
# coarse-refine's work dir at its peak: the vertex stream's neighbour lists (2 ids an edge, both directions,
# directed stores too) beside the external sort's spill files ((node, neighbour) pairs: 4 ids an edge),
# removed when the sort ends (graphstream/partition/vertex_stream.py). It was 2 ids an entry, a third of
# the measured peak on a directed store: R-MAT s22, k = 32, 1.61-1.66 GB against 537 MB estimated.
VERTEX_STREAM_IDS_PER_EDGE = 6
# Edge partitioners keep part[e] on disk, LZ4: 1.0 byte per edge (docs/partitioners.md,
# "What changed for speed").
EDGE_PARTS_BYTES_PER_EDGE = 1.0

# GNN replication factor assumed for the dataset's size when none is given (--rf): the
# highest measured at each k on the four shared graphs, MUSAE facebook (docs/partition-quality.md,
# table "facebook"); k outside 4..32 takes the nearest column. R-MAT, which has no communities,
# gives more (coarse-refine k=32 at scale 22: 4.72), so pass --rf for such graphs.
MEASURED_RF = {
    "coarse-refine": {4: 1.346, 8: 1.575, 16: 1.853, 32: 2.186},
    "spring": {4: 2.227, 8: 3.031, 16: 3.866, 32: 4.534},
    "2ps-l": {4: 2.294, 8: 2.936, 16: 3.558, 32: 3.902},
    "hdrf": {4: 3.190, 8: 5.031, 16: 7.297, 32: 9.683},
    "dbh": {4: 3.168, 8: 4.963, 16: 7.182, 32: 9.501},
    "hash": {4: 3.267, 8: 5.152, 16: 7.435, 32: 9.830},
}
ALGORITHMS = tuple(MEASURED_RF)

# -- memory (peak RSS) ----------------------------------------------------------------------------
# The warmed-up process (interpreter, numpy, zarr, numba, compiled kernels): 269-271 MB
# (docs/partitioners.md, "Memory").
BASE_RSS = 270 * MB
# generate: 0.23 GB at scale 24, 0.25 GB at scale 26 whatever the size (docs/format.md,
# "Measured at scale"; docs/store.md: 202-225 MiB).
GENERATE_RSS = 250 * MB
# ingest: text blocks (parsed by a thread a core) and edge chunks, whatever the size: 456-503 MB for R-MAT
# s21 as SNAP text on 2 cores (docs/ingest.md); 421-460 MB at s20 (2026-12-01); plus 24-40 bytes per
# distinct id with --relabel (docs/ingest.md, relabelling). It was 350 MB, under every measured peak.
INGEST_RSS = 500 * MB
RELABEL_BYTES_PER_NODE = 40
# Partitioners: bytes per node above BASE_RSS, from the peak RSS of R-MAT scale 24 (16.7M nodes,
# docs/partitioners.md, "Scale 24" tables: spring 0.94 GB, 2ps-l 1.02, hdrf/dbh/hash (edge) 0.99,
# hash (vertex) 0.55) and scale 26 for spring (docs/format.md: 4.75 GB at 67M nodes, 67 B/node).
# coarse-refine: 53 + its counters (counter_bytes below, which the partitioner allocates) + one id for
# the node order, plus two bounded tables that a per-node figure overstates on large graphs: the hubs'
# counts (hub_table_bytes) and step 4's cluster x part counters (cluster_table_bytes). 53 keeps every
# measured peak of the current default at or under the model without the trial children (52 would
# too, with nothing to spare at s21, where fixed costs weigh most): R-MAT s21, k = 32, 0.49 GB; s22, k = 32,
# 0.57 GB; s24, k = 16, 1.40 GB; s26, k = 16, 3.86 GB (docs/partition-quality.md, README). The model
# with its children gives 0.62, 0.81, 1.66 and 5.04 GB on 2 cores (72 B/node and no tables gave 6.05 GB
# at s26).
# coarse-refine's step 4 solves its later trials' seeds in child processes (at most coarse_trials - 1
# = 2, one per spare core), each up to ~120 MiB with the default coarse-graph bound whatever the graph:
# the solver sees the linked clusters, at most 2^19 for the bound's 2^18 edges (115-120 MiB measured on
# such a graph, METIS k = 8 / 32 and KaMinPar k = 32; 80-83 MiB on R-MAT s22's 76,881 linked clusters,
# 2026-11-29); they are counted with the step's peak.
COARSE_TRIAL_CHILDREN = 2
COARSE_TRIAL_CHILD_RSS = 120 * 2**20
PARTITION_BYTES_PER_NODE = {"coarse-refine": 53, "spring": 67, "2ps-l": 45, "hdrf": 43, "dbh": 43, "hash": 17}
# Step 4's cluster x part counters hold at most this many entries (the partitioner reads it); label
# propagation leaves about a cluster per 7.75-8.9 nodes on R-MAT s21-s26 (singletons included), so the
# model takes one per 7. A count takes 2 bytes in the rows of the clusters of fewer than
# LIGHT_CLUSTER_ENTRIES entries (none of their counts can reach it), 4 in those of the others
MAX_CLUSTER_PART_ENTRIES = 1 << 26
LIGHT_CLUSTER_ENTRIES = 1 << 16
NODES_PER_CLUSTER = 7
# Build: owner and degree (10 B/node) plus, per worker, a local map, a row counter and a halo
# list (16 B/node per worker) plus the buffers per worker (read 64 MiB, sort 256 MiB, gather
# 128 MiB), which small graphs do not fill: counted as at most twice the routed pairs
# (docs/format.md, "How it is built"; measured 1.92 GB at scale 24, 4.43 GB and 4.32 GB at scale 26;
# 385 MB at scale 18, k=8, partition and build in one process, docs/estimate.md).
# Those measurements built 2 parts at a time; the builder now takes as many threads as the cores
# and half of the available memory allow (BuildConfig.resolve_workers), and so does this model: the
# route takes every thread, the parts pass at most k scratches.
# With 10 B/node for the owner and degree the model gave 1.92 GB at scale 24 but 4.03 GB at scale 26,
# 7-9% under both runs there (their parts' halo lists and buckets grow faster than the nodes: edge
# balance 10.3): 6 B/node more puts scale 26 at 4.43 GB and scale 24 at 2.02 GB, at or above every
# measured peak.
BUILD_BYTES_PER_NODE = 16
BUILD_BYTES_PER_NODE_PER_WORKER = 16
ROUTE_BYTES_PER_NODE_PER_THREAD = 8      # each route thread's aggregation degree (int64)
CUT_PART_BYTES_PER_NODE = 4              # a cut part's global -> local map (int32), while its pairs are bucketed
BUILD_BUFFERS_PER_WORKER = (64 + 256 + 128) * 2**20
# Feature split: memory maps of bounded windows (128 MiB per worker); 0.59 GB measured at scale 24
# with 128 float32 features (docs/format.md).
FEATURE_SPLIT_BYTES_PER_WORKER = 128 * 2**20

# -- time (wall seconds on the measuring machine: 2-core AMD EPYC) ---------------------------------
# generate: 21.0M edges/s at scale 24, 22.0M at scale 26 (docs/format.md); 23.9M at scale 20
# (docs/store.md).
GENERATE_EDGES_PER_S = 21.0e6
# ingest: SNAP text 12.4M edges/s, .npy 30.9M (docs/store.md, the slower of scales 20 and 24).
INGEST_EDGES_PER_S = {"text": 12.4e6, "npy": 30.9e6, "parquet": 12.4e6}
# Partitioners, end to end (degree, main and owner passes): R-MAT scale 24, k=32
# (docs/partitioners.md, "Scale 24" tables: spring 10.5M, 2ps-l 2.0M, hdrf 2.32M, dbh 6.6M, hash
# (edge) 11.7M; hash (vertex) needs only a degree pass, 22.0M edges/s, docs/store.md);
# coarse-refine 1.87M edges/s: 574.0 s for 1.07B edges at scale 26, k=16, the slower of the two runs of
# the current default (558.9 s on 2026-11-28, 574.0 s on 2026-11-29; docs/format.md, "Scale 26 on the
# faster EPYC"). It was 0.85M (1257.3 s, 2026-11-26) before the hubs-first order, one loose sweep and the
# whole-cluster moves past their table's bound.
PARTITION_EDGES_PER_S = {"coarse-refine": 1.87e6, "spring": 10.5e6, "2ps-l": 2.0e6, "hdrf": 2.32e6,
                         "dbh": 6.6e6, "hash": 22.0e6}
# The quality-metric pass that `partition` runs after the partitioner: one streamed pass
# (streaming read + degree pass, 22.0M edges/s at scale 20, docs/store.md).
METRICS_EDGES_PER_S = 22.0e6
# Build (route + CSR): 6.16M edges/s at scale 26, coarse-refine's 16 parts (174.4 s, edge balance 9.6;
# the slower of the runs of 2026-11-28 and 2026-11-29, 166.2 s; docs/format.md, "Scale 26 on the faster
# EPYC"). It was 3.20M (335.5 s) on a 2-core Intel Xeon, 2026-11-27, and 0.74M at scale 24 before the
# threaded route and the bucketed CSR pass.
BUILD_EDGES_PER_S = 6.16e6
# Feature split: bound by the disk's write rate, 0.27 GB/s (docs/format.md).
FEATURE_SPLIT_BYTES_PER_S = 0.27e9
# The first run after an install compiles the step's numba kernels and caches them (the package's
# __pycache__, or NUMBA_CACHE_DIR): extra seconds, whatever the graph's size. Each measured with an empty
# NUMBA_CACHE_DIR on R-MAT scale 12, k = 4, the first run's seconds less the second's, on a 2-core Intel
# Xeon VM, 2026-12-01 (docs/estimate.md); "build" is `partition --out`'s more than coarse-refine's alone.
FIRST_RUN_COMPILE_SECONDS = {"generate": 1, "ingest": 10, "coarse-refine": 73, "spring": 9, "2ps-l": 9,
                             "hdrf": 5, "dbh": 6, "hash": 2, "build": 10}


@dataclass(frozen=True, slots=True)
class GraphSize:
    """What the model needs to know of a graph (``store_bytes``: measured on disk, when it exists)."""
    num_nodes: int
    num_edges: int
    directed: bool = True
    with_time: bool = False
    with_weight: bool = False
    features: int = 0
    feature_itemsize: int = 4
    store_bytes: int | None = None

    @property
    def entries(self) -> int:
        """Adjacency entries: each edge once (directed), both directions (undirected)."""
        return self.num_edges if self.directed else 2 * self.num_edges

    @property
    def wide_ids(self) -> bool:
        return self.num_nodes >= 2**31

    @property
    def id_bytes(self) -> int:
        """Bytes of a node id in the partitioner's and builder's arrays: int32, int64 from 2^31 nodes."""
        return 8 if self.wide_ids else 4


@dataclass(frozen=True, slots=True)
class StepEstimate:
    """One step: bytes it leaves on disk, scratch disk it needs while it runs, peak RSS, wall seconds, and
    the seconds its first run after an install adds (its kernels compiled, then cached)."""
    step: str
    disk_bytes: int
    scratch_bytes: int
    peak_rss_bytes: int
    seconds: float
    first_run_extra_seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def counter_word_bytes(k: int) -> int:
    """The word of coarse-refine's refinement counters: the narrowest of 8, 16 or 32 bits that holds k
    2-bit fields, past that 64 bits."""
    for size in (1, 2, 4):
        if 2 * k <= 8 * size:
            return size
    return 8


def counter_bytes(k: int) -> int:
    """Bytes a node of coarse-refine's refinement counters: k 2-bit fields in one word
    (:func:`counter_word_bytes`), or ceil(k / 32) 64-bit words, and one more word holding the node's
    owner (the partitioner allocates exactly this)."""
    word = counter_word_bytes(k)
    return word * (max(1, (2 * k + 8 * word - 1) // (8 * word)) + 1)


# coarse-refine's refinement keeps exact neighbour-per-part counts (int32) for at most this many of
# the nodes of highest degree, and at most MAX_HUB_CELLS counts in all (the partitioner reads both)
MAX_HUBS = 1 << 18
MAX_HUB_CELLS = 1 << 23


def hub_table_bytes(k: int) -> int:
    """Bytes of coarse-refine's hub counts at most (their bitmap and ranks, 0.19 B/node, are in the
    per-node figure)."""
    return 4 * max(1, min(MAX_HUBS, MAX_HUB_CELLS // k)) * k


def cluster_table_bytes(num_nodes: int, k: int, num_entries: int) -> int:
    """Bytes of coarse-refine's step-4 cluster x part counters at most (a cluster per NODES_PER_CLUSTER
    nodes, at most MAX_CLUSTER_PART_ENTRIES counts): 2 bytes a count, 4 more for the rows of the clusters of
    LIGHT_CLUSTER_ENTRIES of the ``num_entries`` entries (the vertex stream's, 2 an edge) or more, and a
    4-byte row number a cluster."""
    clusters = min(MAX_CLUSTER_PART_ENTRIES // k, -(-num_nodes // NODES_PER_CLUSTER))
    heavy = min(clusters, num_entries // LIGHT_CLUSTER_ENTRIES)
    return 2 * clusters * k + 4 * heavy * k + 4 * clusters


def store_bytes_per_edge(num_nodes: int) -> float:
    """Upper-end bytes of src + dst per edge for ids below ``num_nodes`` (0: unknown)."""
    if num_nodes <= 0:
        return STORE_BYTES_PER_EDGE
    raw = 8 if num_nodes < 2**31 else 16   # int32 or int64 ids, two a edge
    return min(raw + 0.2, (math.log2(num_nodes) + STORE_BYTES_PER_EDGE_MARGIN_BITS) / 4)


def store_bytes(num_edges: int, *, num_nodes: int = 0, with_time: bool = False, with_weight: bool = False,
                id_map: bool = False) -> int:
    """Upper-end bytes of a graph store of ``num_edges`` edges."""
    per_edge = store_bytes_per_edge(num_nodes)
    per_edge += TIME_BYTES_PER_EDGE * with_time + WEIGHT_BYTES_PER_EDGE * with_weight
    return int(num_edges * per_edge + (ID_MAP_BYTES_PER_NODE * num_nodes if id_map else 0))


def generate_size(scale: int, edge_factor: int) -> GraphSize:
    """The graph ``generate rmat`` writes: 2**scale nodes, edge_factor x 2**scale edges."""
    return GraphSize(num_nodes=2**scale, num_edges=edge_factor * 2**scale)


def assumed_rf(algorithm: str, k: int) -> float:
    """The replication factor :data:`MEASURED_RF` gives ``algorithm`` at ``k`` (nearest measured k, never > k)."""
    table = MEASURED_RF[algorithm]
    nearest = min(table, key=lambda kk: (abs(kk.bit_length() - k.bit_length()), kk))
    return min(float(k), table[nearest])


def dataset_bytes(size: GraphSize, k: int, rf: float) -> int:
    """Graph part of a partitioned dataset: RF x nodes local rows, and the CSR entries.

    Directed stores keep each edge once (in the part of its target). Undirected ones keep both
    directions of each inner node's edges plus, in each halo row, the entries back to the inner
    nodes, one per cut edge end: counted here at a random partition's cut share (1 - 1/k), the
    most a partitioner leaves, so the figure is an upper end.
    """
    local = rf * size.num_nodes / k   # a part's, the parts taken as equal
    entries = (size.entries if size.directed else size.entries * (2 - 1 / k)) / k
    id_extra = 4 if size.wide_ids else 0
    # the part's files (global_ids, indptr and degree: PART_BYTES_PER_LOCAL_NODE; indices; part.json)
    # and its folder, each in whole blocks
    files = (local * (4 + id_extra), local * 8, local * 8, entries * PART_BYTES_PER_ENTRY)
    part = sum(_in_blocks(f + NPY_HEADER_BYTES) for f in files) + _in_blocks(PART_JSON_BYTES) + DISK_BLOCK_BYTES
    return k * part + _in_blocks(k * MANIFEST_BYTES_PER_PART)


def _in_blocks(nbytes: float) -> int:
    """``nbytes`` rounded up to whole file-system blocks."""
    return math.ceil(nbytes / DISK_BLOCK_BYTES) * DISK_BLOCK_BYTES


def feature_bytes(size: GraphSize, rf: float) -> int:
    """The node feature rows of every part (inner and halo): RF x nodes x features."""
    return int(rf * size.num_nodes * size.features * size.feature_itemsize)


def partition_peak_bytes(size: GraphSize, k: int, algorithm: str, *, children: bool = True) -> int:
    """Peak RSS of partitioning a graph of ``size`` into ``k`` parts with ``algorithm`` (the ``partition``
    step of :func:`estimate_steps`); ``children`` False: the partition's own process, without
    coarse-refine's trial children (what its process reports as its peak)."""
    n = size.num_nodes
    per_node = PARTITION_BYTES_PER_NODE[algorithm]
    fixed = 0
    if algorithm == "coarse-refine":
        # its counters, the vertex stream's node order (one id a node, hubs first), its hub table and
        # step 4's cluster x part table, and while step 4 runs, its trial children
        per_node += counter_bytes(k) + size.id_bytes
        fixed = hub_table_bytes(k) + cluster_table_bytes(n, k, 2 * size.num_edges)
        if children:
            fixed += min(COARSE_TRIAL_CHILDREN, usable_cores() - 1) * COARSE_TRIAL_CHILD_RSS
    return int(BASE_RSS + per_node * n + fixed)


def estimate_steps(size: GraphSize, *, k: int = 16, algorithms: tuple[str, ...] = ALGORITHMS,
                   rf: float | None = None, ingest_format: str = "text", build_workers: int | None = None,
                   relabel: bool = False) -> dict:
    """Disk, peak memory and time of each step for a graph of ``size`` split into ``k`` parts.

    ``build_workers``: the build's threads (default: what the builder would choose on this machine).
    ``relabel``: ingest with ``--relabel`` (its id map in memory).
    Build times are those measured with 2 workers on 2 cores: an upper bound with more.
    """
    n, e = size.num_nodes, size.num_edges
    # as BuildConfig.resolve_workers chooses them (the builder sits above this module)
    workers = build_workers or workers_within(BUILD_BYTES_PER_NODE_PER_WORKER * n + BUILD_BUFFERS_PER_WORKER)
    store = size.store_bytes if size.store_bytes is not None else store_bytes(
        e, num_nodes=n, with_time=size.with_time, with_weight=size.with_weight)
    steps = [
        StepEstimate("generate", store, 0, GENERATE_RSS, e / GENERATE_EDGES_PER_S,
                     FIRST_RUN_COMPILE_SECONDS["generate"]),
        # --relabel: the id map of every distinct id (as many as nodes) in memory while it reads
        StepEstimate("ingest", store, 0, INGEST_RSS + (RELABEL_BYTES_PER_NODE * n if relabel else 0),
                     e / INGEST_EDGES_PER_S.get(ingest_format, 12.4e6),
                     FIRST_RUN_COMPILE_SECONDS["ingest"]),
    ]
    buffers = min(workers * BUILD_BUFFERS_PER_WORKER, 2 * SPILL_BYTES_PER_PAIR * size.entries)
    # the route's threads (a degree array each), then the parts' scratches (no more than the parts; a
    # part cut into steps keeps its global -> local map meanwhile)
    build_per_node = BUILD_BYTES_PER_NODE + max(ROUTE_BYTES_PER_NODE_PER_THREAD * workers,
                                                BUILD_BYTES_PER_NODE_PER_WORKER * min(workers, k)
                                                + (CUT_PART_BYTES_PER_NODE if workers > 1 else 0))
    partitions = {}
    for algo in algorithms:
        r = rf if rf is not None else assumed_rf(algo, k)
        scratch = (VERTEX_STREAM_IDS_PER_EDGE * size.id_bytes * e if algo == "coarse-refine"
                   else EDGE_PARTS_BYTES_PER_EDGE * e if algo in ("2ps-l", "hdrf", "dbh") else 0)
        partition = StepEstimate(f"partition {algo}", 0, int(scratch), partition_peak_bytes(size, k, algo),
                                 e / PARTITION_EDGES_PER_S[algo] + e / METRICS_EDGES_PER_S,
                                 FIRST_RUN_COMPILE_SECONDS[algo])
        build = StepEstimate(f"build {algo}", dataset_bytes(size, k, r),
                             (SPILL_BYTES_PER_PAIR + BUCKET_BYTES_PER_ENTRY) * (2 if size.wide_ids else 1)
                             * size.entries,
                             int(BASE_RSS + build_per_node * n + buffers), e / BUILD_EDGES_PER_S,
                             FIRST_RUN_COMPILE_SECONDS["build"])
        partitions[algo] = {"replication_factor": r, "partition": partition.to_dict(), "build": build.to_dict()}
        if size.features:
            written = feature_bytes(size, r)
            partitions[algo]["feature_split"] = StepEstimate(
                f"feature split {algo}", written, 0, BASE_RSS + workers * FEATURE_SPLIT_BYTES_PER_WORKER,
                written / FEATURE_SPLIT_BYTES_PER_S).to_dict()
    return {"num_nodes": n, "num_edges": e, "directed": size.directed, "k": k, "build_workers": workers,
            "features": size.features,
            "feature_itemsize": size.feature_itemsize, "store_bytes_estimated": size.store_bytes is None,
            "store_bytes": store, "steps": {s.step: s.to_dict() for s in steps}, "partitioners": partitions}


# -- free disk ------------------------------------------------------------------------------------

def free_disk_bytes(out: str | os.PathLike) -> tuple[int, Path]:
    """Free bytes on the file system that will hold ``out`` (its nearest existing parent)."""
    parent = Path(os.path.abspath(out)).parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return shutil.disk_usage(parent).free, parent


def check_free_disk(out: str | os.PathLike, need: int, what: str) -> None:
    """Refuse (one-line :class:`ResourceError`) when ``need`` estimated bytes exceed the free disk at ``out``."""
    free, where = free_disk_bytes(out)
    if need > free:
        raise ResourceError(f"{out}: {what} needs about {format_bytes(need)} of disk (estimate, docs/estimate.md), "
                            f"only {format_bytes(free)} free on {where}")


__all__ = ["ALGORITHMS", "GraphSize", "StepEstimate", "assumed_rf", "check_free_disk", "dataset_bytes",
           "estimate_steps", "feature_bytes", "free_disk_bytes", "generate_size", "store_bytes"]
