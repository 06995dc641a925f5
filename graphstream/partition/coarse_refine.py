"""coarse-refine: METIS-like vertex partitions in bounded memory (our default vertex partitioner).

The route of specs/partitioners.md ("A route that reaches METIS quality in
bounded memory"), with a refinement that optimises the GNN replication
factor itself rather than the edge cut (counting the halo in both directions:
on a directed store, whose parts hold in-neighbours only, that objective is
reported apart as ``undirected_halo_rf``):

1. vertex stream: the edges sorted by node once on disk (external counting
   sort, :mod:`.vertex_stream`), so each node's neighbours arrive together;
   the nodes renumbered hubs first (``node_order``), the owner mapped back
   to the store's ids at the end;
2. size-capped label propagation over that stream (``lp_passes`` sweeps of
   ``lp_rounds`` synchronous rounds, :mod:`.coarse_rounds`; cluster size cap
   ``n / (cluster_cap_factor * k)``; a hub's label from a sample of its list,
   ``lp_sample``): O(num_nodes) labels and sizes;
3. the coarse graph: clusters as nodes (weight = size), inter-cluster edges
   summed, aggregated by streaming in sorted runs and kept to at most
   ``max_coarse_edges`` edges (past that, the lightest are dropped: the
   coarse graph only seeds the partition, refinement sees the full graph);
4. the coarse graph partitioned in memory by KaMinPar (k >= 16) or METIS
   (pymetis; node weights = cluster sizes; ``coarse_solver``), once per
   trial seed, the trials after the first solved ahead in child processes
   on a large coarse graph (:mod:`.coarse_solvers`; the moves below run on
   the cores they leave), then ``cluster_passes``
   stream passes moving whole clusters to the part holding most of their
   neighbours in the full graph (the coarse graph may have lost most of its
   edges to the bound: on R-MAT this pass is worth 6% of RF; past
   ``MAX_CLUSTER_PART_ENTRIES`` clusters x parts, the clusters with the most
   entries only); isolated nodes fill the least loaded parts;
5. refinement for the replication factor itself, by re-streaming sweeps of
   ``refine_rounds`` synchronous rounds: a node moves to the neighbouring
   part where (halo it adds) - (halo it removes) is most negative, from
   per-node counts of neighbours per part (2-bit saturating, packed in
   words) counted at the start of the first sweep, brought up to date at
   the end of every round, and recounted at the start of later sweeps for
   the nodes whose counts a move left unknown. Under the hard cap
   ``balance * n / k`` owned nodes a part most improving moves are refused
   for want of room (R-MAT s21, k = 32: 4.8M proposals that gain, 0.2M
   accepted), so first a loose phase (as in Jet refinement):
   ``loose_passes`` sweeps under ``loose_balance * n / k``, every part
   brought back under the hard cap by the cheapest moves out of the parts
   above it in one global order, and ``settle_passes`` sweeps under the
   hard cap. When that ends with no fewer replicas than step 4's partition
   (graphs whose parts are communities already can lose there), it is
   dropped and ``refine_passes`` sweeps under the hard cap refine step 4's
   partition instead (``refine_order``). With ``edge_balance``, a part's
   neighbour entries are capped too, in every sweep and in the rebalancing.

Steps 2 and 5 run their rounds with numba threads here, or as dask tasks
over node ranges with ``client=``; the partition is the same for a seed
either way and whatever the thread or worker count.

Time: O(E log) for the sort-free disk pass plus O(E) per sweep (refinement
O(E x ceil(k / 32)): every part's change is tested at once on packed
counter words). Memory: offsets (8 bytes/node), labels and sizes (8, plus
the proposals of one round), owner (4, and 1 more, 2 from 257 parts, for the balanced one kept
during the loose phase; in step 4, 1 per trial and 1 for the parts the cluster moves read instead,
2 each from 128 parts), counters (k/4 rounded up to 1, 2, 4
or a multiple of 8), refresh marks (1), the node order (one id) and the hubs' bitmap (0.19), the hubs' exact counts
(at most 32 MiB), the coarse graph (bounded), cluster x part counters (2
bytes each, 4 in the rows of the clusters of 2^16 entries or more, and a 4-byte row number a cluster;
one table whose rows the threads split, at most ``MAX_CLUSTER_PART_ENTRIES`` counts; past it, about 32
bytes a cluster to number the heaviest first: the order, the ranks, the loads and a trial's parts renumbered),
one vertex-stream block and one edge chunk. Disk: 2 x edges ids (6 x while the stream is sorted).
"""
from __future__ import annotations

import math
import numbers
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numba
import numpy as np

from .._atomic import output_lock, scratch_dir
from .._report import log, phase_logger, warn
from .._resources import Stopwatch, lower_thread_priority, peak_rss_bytes, usable_cores
from ..errors import ParameterError
from ..estimate import MAX_CLUSTER_PART_ENTRIES
from ..kernels.merge import collapse_sorted, radix_sort
from ..kernels.packing import pack_least_loaded
from ..store import GraphStore
from . import _coarse_kernels as K
from .coarse_rounds import RefineSchedule, Rounds, label_propagation, lp_sample, refine, replicas
from .coarse_solvers import (
    SOLVERS,
    CoarseGraph,
    attempts,
    distinct_solutions,
    linked_balance,
    make_solvers,
    packed,
    place_unlinked,
    solved_ahead,
    solver_files,
    unlinked_heaviest_first,
)
from .plan import MAX_PARTS, PartitionPlan
from .vertex_stream import DEFAULT_BLOCK_ENTRIES, DEFAULT_BUCKET_ENTRIES, VertexStream, build_vertex_stream

if TYPE_CHECKING:
    from distributed import Client

ALGORITHM = "coarse-refine"
COARSE_KEY_LANES = 4   # step 3's threads making blocks' keys for the one merging them (more would wait on it)


@dataclass(frozen=True, slots=True)
class CoarseRefineParams:
    """Parameters (defaults measured on the shared graphs, see docs/partition-quality.md).

    lp_passes: label-propagation sweeps (step 2).
    lp_rounds: synchronous rounds a label-propagation sweep is cut into (coarse_rounds.py).
    lp_hub_factor: after the first sweep, the nodes of degree above this multiple of the mean (the
        neighbour entries per node) keep their label (0, the default: every node proposes in every
        sweep). For graphs without communities: on R-MAT, 16 against 0 (s20/s21 k = 8/16/32, two seeds)
        gave -0.92% RF on average (-4.65% to +2.08%) with label propagation ~2x faster (the later sweeps
        skip 61% of the entries at s21); on web-NotreDame it costs 0.1-0.6% (k = 4..32, three seeds, at 16
        and at 64), which is the margin by which the default is below METIS there.
    lp_sample: a node's proposal reads about this many entries of its list at most: a longer list is read
        every ceil(degree / lp_sample)-th entry from a seeded offset, its gain counted in whole-list units
        (0: every entry). The hubs' lists are most of the entries (R-MAT s21: half of them past the first
        256 of a list) and their labels are decided long before the list ends. 256 against 0 (2026-12-01,
        docs/partition-experiments.md, "Label propagation reads a sample of a hub's list"): label
        propagation 40-45% faster at R-MAT s21; RF over R-MAT s20/s21 and web-NotreDame, two seeds, -0.65%
        on average (-4.9% to +5.3%); the shared graphs at k = 4..32, seed 0, within -1.1% and +0.3% (Cora and
        Citeseer, whose degrees stay under it, the same partitions), all still below METIS. A sample is
        read only where it leaves a quarter of the entries unread or more (coarse_rounds.lp_sample: R-MAT
        about half; web-NotreDame 8%, where sampled first sweeps cost k = 32 up to 3.7% over METIS).
    cluster_cap_factor: cluster size cap = num_nodes / (factor * k) (step 2); on small
        graphs (num_nodes < factor * k * 2) the cap is 1 and the coarse graph is the graph.
    max_coarse_edges: bound on the coarse graph's edges (step 3).
    coarse_weights: "halo" (cluster pair weight = nodes of each with a neighbour in the
        other: the halo entries a cut creates) or "edges" (edge count) (step 3).
    coarse_solver: "auto" (KaMinPar from 16 parts, METIS below: ``coarse_solvers.AUTO_KAMINPAR_MIN_K``),
        "metis" (pymetis), "kaminpar" (KaMinPar, one thread) or "metis+kaminpar" (a KaMinPar trial
        beside METIS's: :func:`.coarse_solvers.attempts`) on the coarse graph (step 4); METIS alone
        when the ``kaminpar`` package cannot be imported.
    coarse_metis: "kway" (multilevel k-way, edge-cut objective), "recursive"
        (recursive bisection) or "kway-vol" (k-way, communication-volume objective) (step 4).
    unlinked_clusters: "packed" (the clusters left without a coarse edge by its bound are not in the
        solver's graph: the solver balances the linked ones under a cap loosened to leave the others room,
        and those are packed onto the least loaded parts after it; :meth:`.CoarseGraph.linked`) or "solved"
        (the solver's graph holds every cluster, as before 2026-11-29) (step 4). On R-MAT most clusters
        lose their edges to the bound (s22, k = 8: 467,450 of 544,331), and METIS's memory follows its
        nodes: "packed" against "solved", R-MAT s20/s21 k = 8/16/32 seeds 0-4 and s22 k = 8/32 seeds 0-1,
        29 runs: -0.03% RF on average (-4.8% to +7.8%), 0.97-1.03x the time; facebook and web-NotreDame
        the same plans, Cora k = 4 -0.1% to -0.3%, Citeseer k = 4 / 8 +0.1% to +0.6% (seeds 0-2, still at
        or below METIS); R-MAT s22, k = 8 / 32: the peak of this process and its trial child together 640-643 ->
        504-508 / 553-559 MiB (docs/partition-experiments.md, "The solver on the linked clusters").
    coarse_trials: different coarse partitions tried (solver seeds seed, seed+1, ..., an attempt
        whose partition repeats an earlier one skipped); the one whose projection has the
        lowest replication factor is refined (all of them judged in one stream pass) (step 4).
    cluster_passes: passes moving whole clusters on the full graph after the solver (step 4). 3 rather
        than 4 (2026-12-01): the fourth moves about 1% of the clusters (R-MAT s21, k = 32: 4k of 384k);
        over the graphs and seeds of ``refine_order`` below, +0.02% RF on average (-0.75% to +0.76%), the
        shared graphs unchanged.
    refine_passes: refinement sweeps under the hard cap (step 5): with ``refine_order`` "loose-first",
        run only when the loose phase loses; a phase stops early when a sweep moves nothing.
    refine_order: "auto" (the default: "loose-first" where more than 95% of the neighbour entries are
        those of nodes with a neighbour in another part after step 4, as on R-MAT, "tight-first" below,
        as on the shared graphs: ``coarse_rounds.AUTO_BOUNDARY_ENTRIES``), "loose-first" (the loose phase
        starts from step 4's partition, and the ``refine_passes`` sweeps under the hard cap run only when
        it does not end with fewer replicas than that partition, from it) or "tight-first" (those sweeps
        first, the loose phase after them: the order before 2026-12-01). The loose phase ends about where
        it ends after them: over R-MAT s14/s20/s21 at k = 8
        and 32, web-NotreDame and facebook at k = 4 and 32, Cora k = 4 / 16 and Citeseer k = 8 / 32, seeds
        0-2 (42 runs), "loose-first" against "tight-first": +0.01% RF on average (-5.2% to +1.9%; facebook
        k = 32 +0.5% to +1.2%; web-NotreDame k = 16 +0.04%, above METIS by 0.06%: why "auto"), refinement
        25-35% faster on R-MAT s21 (docs/partition-experiments.md, "The loose phase first").
    loose_passes: then sweeps under the loose cap ``loose_balance`` x n / k (0: none), the
        parts brought back under the hard cap, and ``settle_passes`` sweeps under it; the
        balanced partition before the loose phase is kept when it has fewer replicas. 1 rather
        than 4: the first loose sweep makes the phase's gain (R-MAT s21, k = 32: 4.10 -> 3.38, the
        next three 3.38 -> 3.29, most of which the rebalancing takes back); 1 against 4, R-MAT
        s20/s21 k = 8/16/32, two seeds: +0.21% RF on average (-0.96% to +1.79%), the shared graphs
        +0.01% (-0.08% to +0.09%), three sweeps fewer.
    loose_balance: 1.5 with the hubs first (3.0 before them: with the hubs first, a loose phase
        at 3.0 lost at k = 8 on R-MAT s20 in three seeds of three, and gains at 1.5).
    node_order: "hubs-first" (the nodes of degree above the mean numbered first in the vertex
        stream, so the rounds meet them first and their rows share cache lines) or "id" (the
        store's). With loose_balance 1.5, against "id" at 3.0: R-MAT s20 k = 8 / 32, three seeds,
        -2.3% to -14.3% RF; s21 k = 8 / 32, two seeds, -0.1% to -9.0%; the shared graphs -1.9% to +1.4%
        (docs/partition-experiments.md, "The hubs first").
    shed_degree_factor: the rebalancing after the loose phase (without an edge balance) sheds nodes of
        degree at most this multiple of the mean only (0: any node): a hub's shed costs many replicas and
        its list is long. 4 against 0: R-MAT s21, k = 32, the rebalancing 3.9 -> 1.8-2.1 s; R-MAT s20/s21
        k = 8/16/32 -3.2% to +0.4% RF, the shared graphs -0.1% to +0.1% (docs/partition-quality.md).
    refine_rounds: synchronous rounds a refinement sweep is cut into. 8 rather than 16: fewer replicas as
        the graph grows (R-MAT s21 k = 8 / 32: -2.0% / -3.0%; s22 k = 32: -5.0%; s20: +0.3%; the shared
        graphs within 0.06%) in the same time or less, and half the synchronous rounds on a cluster.
    edge_balance: 0 (the default) balances the parts' nodes only; a factor >= 1 also caps a part's
        neighbour entries (the sum of its nodes' degrees, about twice its inner edges plus its cut
        ones) at that multiple of the mean, as DistDGL's ``balance_edges`` does with METIS's second
        constraint: step 4 then balances the clusters' entries, step 5 keeps both caps. On R-MAT
        the nodes alone leave edge balances of 5-13 (a part's hubs), which a trainer with a part a
        GPU waits on.
    block_entries: neighbour entries read per vertex-stream block.
    bucket_entries: bucket buffer of the external sort (entries).
    batch_size: edges per store batch (default: the store's chunk).
    """
    lp_passes: int = 5
    lp_rounds: int = 8
    lp_hub_factor: float = 0.0
    lp_sample: int = 256
    cluster_cap_factor: float = 200.0
    max_coarse_edges: int = 1 << 18
    refine_passes: int = 2
    loose_passes: int = 1
    loose_balance: float = 1.5
    settle_passes: int = 2
    shed_degree_factor: float = 4.0
    refine_order: str = "auto"
    refine_rounds: int = 8
    max_candidates: int = 8
    edge_balance: float = 0.0
    coarse_trials: int = 3
    cluster_passes: int = 3
    coarse_weights: str = "halo"
    coarse_solver: str = "auto"
    coarse_metis: str = "kway"
    unlinked_clusters: str = "packed"
    node_order: str = "hubs-first"
    block_entries: int = DEFAULT_BLOCK_ENTRIES
    bucket_entries: int = DEFAULT_BUCKET_ENTRIES
    batch_size: int | None = None

    def __post_init__(self) -> None:
        for name, (ok, expect) in PARAM_RANGES.items():
            value = getattr(self, name)
            if not ok(value):
                raise ParameterError(f"coarse-refine: invalid {name}={value!r}: expected {expect}")


def _whole(least: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= least,
            f"a whole number >= {least}")


def _real(ok: Callable[[float], bool], expect: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool) and ok(v), expect)


def _one_of(*choices: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in choices, "one of " + ", ".join(choices))


# Each parameter's range, stated once: CoarseRefineParams checks it, the CLI's flags say it in their terms.
PARAM_RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "lp_passes": _whole(0), "lp_rounds": _whole(1), "lp_sample": _whole(0), "refine_rounds": _whole(1),
    "max_coarse_edges": _whole(1),
    "refine_passes": _whole(0), "loose_passes": _whole(0), "settle_passes": _whole(0),
    "max_candidates": _whole(1), "coarse_trials": _whole(1), "cluster_passes": _whole(0),
    "block_entries": _whole(1), "bucket_entries": _whole(1),
    "batch_size": (lambda v: v is None or _whole(1)[0](v), "a whole number >= 1"),
    "lp_hub_factor": _real(lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    "cluster_cap_factor": _real(lambda v: 0 < v < math.inf, "a finite number > 0"),
    "loose_balance": _real(lambda v: 1 <= v < math.inf, "a finite number >= 1"),
    "shed_degree_factor": _real(lambda v: 0 <= v < math.inf, "a finite number >= 0"),
    "edge_balance": _real(lambda v: v == 0 or 1 <= v < math.inf, "0 (no cap on the entries) or a finite number >= 1"),
    "coarse_weights": _one_of("edges", "halo"),
    "coarse_metis": _one_of("kway", "recursive", "kway-vol"),
    "coarse_solver": _one_of(*SOLVERS),
    "node_order": _one_of("hubs-first", "id"),
    "refine_order": _one_of("auto", "loose-first", "tight-first"),
    "unlinked_clusters": _one_of("packed", "solved"),
}


# Named sets of parameters (``preset``); a parameter given beside a preset overrides the preset's.
# "fast": two label-propagation sweeps fewer, one coarse trial, two whole-cluster passes and one sweep under
# the hard cap (when the loose phase loses). Against the default, over R-MAT s20/s21 (k = 8..32), facebook
# and web-NotreDame (k = 8..32), two seeds each (tools/bench_rf_variants.py, 2026-11-29): 0.70x the time,
# +1.0% RF on average (-2.7% to +6.1%); R-MAT s21 at KaMinPar's time (docs/partition-quality.md, "The fast
# preset"). Its sweeps read the default's sample since that is taken only where it pays (coarse_rounds.
# lp_sample): on R-MAT s20/s21, k = 8 and 32, seeds 0 and 1, 0.89x the time of every entry at -1.2% RF on
# average (-5.8% to +4.9%); web-NotreDame, where a sample had cost k = 32 1.4-7.4%, reads every entry.
PRESETS: dict[str, dict[str, int]] = {
    "default": {},
    "fast": {"lp_passes": 3, "coarse_trials": 1, "cluster_passes": 2, "refine_passes": 1},
}


def run(store: GraphStore, k: int, *, seed: int = 0, balance: float = 1.05,
        work_dir: str | os.PathLike | None = None, client: Client | None = None, **params) -> PartitionPlan:
    """Partition ``store``'s nodes into ``k`` parts; see the module docstring for the steps.

    ``work_dir`` holds the vertex stream (2 x edges ids); a temporary folder
    (removed at the end) when None. ``client``: a dask client whose tasks
    compute the rounds of steps 2 and 5 (the work folder must be visible to
    its workers); the result is the same as without. ``params``: fields of
    :class:`CoarseRefineParams`, and ``preset`` (a key of :data:`PRESETS`,
    whose fields the others override).
    """
    if "passes" in params:   # the CLI's --passes: the refinement sweeps
        params["refine_passes"] = params.pop("passes")
    preset = params.pop("preset", "default")
    if preset not in PRESETS:
        raise ParameterError(f"coarse-refine: unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    unknown = set(params) - set(CoarseRefineParams.__dataclass_fields__)
    if unknown:
        raise ParameterError(f"coarse-refine: unknown parameter(s) {sorted(unknown)}")
    cfg = CoarseRefineParams(**{**PRESETS[preset], **params})
    n = store.num_nodes
    if not 1 <= k <= MAX_PARTS:
        raise ParameterError(f"k must be in [1, {MAX_PARTS}], got {k}")
    if not balance >= 1.0:
        raise ParameterError(f"balance must be >= 1.0, got {balance}")
    if n == 0:
        raise ParameterError(f"{store.path}: the graph has no nodes")
    # caps of k x the mean or more hold every node (entry): no cap, and no int64 overflow past them
    balance = min(balance, float(k))
    if cfg.edge_balance >= k:
        cfg = replace(cfg, edge_balance=0.0)
    if work_dir is None:
        # pid-named: a folder left by a killed run is removed by the next one
        with scratch_dir("graphstream-cr-") as tmp:
            return _run(store, k, seed, balance, Path(tmp), cfg, client, preset)
    # the user's folder: its vertex stream is kept for the next run on the same store, and held by this
    # one (a second run on the folder fails at once rather than rebuild the stream under this one)
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    with output_lock(work / "vertex_stream"):
        return _run(store, k, seed, balance, work, cfg, client, preset, keep=True)


def _run(store: GraphStore, k: int, seed: int, balance: float, work: Path, cfg: CoarseRefineParams,
         client: Client | None, preset: str = "default", keep: bool = False) -> PartitionPlan:
    watch = Stopwatch(on_lap=phase_logger("coarse-refine"))  # one progress line per phase
    n = store.num_nodes
    # 1. vertex stream on disk (reused when ``keep`` finds one of the same store's data there)
    vs = build_vertex_stream(store, work / "vertex_stream", batch_size=cfg.batch_size,
                             bucket_entries=cfg.bucket_entries, hubs_first=cfg.node_order == "hubs-first", keep=keep)
    watch.lap("vertex_stream")
    passes = 0 if vs.reused else 2   # degree pass + sort pass over the edge store

    with Rounds.make(vs, cfg.block_entries, client) as rounds:   # the state files of a cluster run go at the end
        # 2. size-capped label propagation
        cap_cluster = max(1, int(n // (cfg.cluster_cap_factor * k)))
        hub_degree = int(np.ceil(cfg.lp_hub_factor * vs.offsets[-1] / n)) if cfg.lp_hub_factor else 0
        sample = lp_sample(vs.offsets, cfg.lp_sample)
        label, lp_sweeps = label_propagation(rounds, cap_cluster, cfg.lp_passes, cfg.lp_rounds, seed, hub_degree,
                                             sample)
        watch.lap("label_propagation")

        # 3. coarse graph (bounded)
        cl, num_clusters = K.compact_labels(label, vs.offsets)
        del label
        cloads = K.part_loads(cl, vs.offsets, num_clusters)   # the clusters' nodes and entries
        csizes = cloads[K.NODES]
        # blocks no longer than the bound: which edges survive depends on it, and larger blocks
        # (fewer drops) measured no better (R-MAT s20/s21, k 8/32: RF -1.4% to +2.2%)
        keys, weights, dropped = coarse_edges(vs, cl, num_clusters, cfg.max_coarse_edges,
                                              min(cfg.block_entries, cfg.max_coarse_edges),
                                              halo=cfg.coarse_weights == "halo")
        watch.lap("coarse_graph")

        num_coarse_edges = len(keys)
        xadj, adjncy, eweights = K.symmetric_csr(keys, weights, num_clusters)
        del keys, weights

        # 4. coarse graph partitioned in memory (best of `coarse_trials` solver seeds, judged by the
        #    replication factor they give on the full graph); isolated nodes fill the least loaded parts
        isolated = np.flatnonzero(cl < 0)
        cap = max(int(np.ceil(n / k)), int(np.floor(balance * n / k + 1e-9)))
        caps = np.array([cap, K.NO_CAP], dtype=np.int64)
        if cfg.edge_balance:
            entries = int(vs.offsets[-1])
            caps[K.ENTRIES] = max(-(-entries // k), int(np.floor(cfg.edge_balance * entries / k + 1e-9)))
        # With edge_balance the solver and the whole-cluster moves balance the entries, and the
        # refinement then the nodes too: light nodes fill the parts short of nodes (those holding hubs)
        # within their entries' margin, where a node-balanced start leaves the hubs together in a few
        # parts and no single move can spread them (R-MAT s20, k = 32: edge balance stuck at 7).
        weigh = K.ENTRIES if cfg.edge_balance else K.NODES
        graph = CoarseGraph(xadj, adjncy, eweights, _solver_weights(cloads[weigh]))
        solver_graph, linked, unlinked = graph, None, None
        # the entries balanced as tightly as the nodes would be: at the cap's own looseness a loose cap
        # (F = 5 on Cora, k = 4) let the solver put most clusters in one part, which the refinement then
        # had to unpick node by node (RF 1.419 against 1.174; without a cap 1.163)
        solver_balance = min(cfg.edge_balance, balance) if cfg.edge_balance else balance
        if cfg.unlinked_clusters == "packed":
            solver_graph, linked = graph.linked()
            # the nodes without an edge are placed after the solver too, onto the least loaded parts, and
            # count in the room of a packed coarse graph (no more linked clusters than parts: on a 10-node
            # graph with one edge, its two clusters alone had room for one node a part at k = 4). Not in a
            # solver's: given that room on R-MAT s24, k = 16 (47% of the nodes without an edge), its parts
            # refined to RF 2.515 against 2.280 (docs/partition-experiments.md, "The isolated nodes leave the
            # solver's room again")
            unplaced = len(isolated) if weigh == K.NODES and packed(len(linked), len(solver_graph.adjncy), k) else 0
            solver_balance = linked_balance(solver_balance, graph.csizes, linked, k, unplaced)
            unlinked = unlinked_heaviest_first(linked, graph.csizes)
        solvers = make_solvers(cfg.coarse_solver, cfg.coarse_metis, solver_graph, k, solver_balance, work)
        tries = attempts(solvers, seed, cfg.coarse_trials)
        # the solver's graph keeps the clusters' ids; past the moves' table bound the clusters with the
        # most entries are renumbered first (every trial's parts renumbered with them below)
        renumbered = heaviest_first(cl, cloads, k) if cfg.cluster_passes else None
        if renumbered is not None:
            heavy_order, cloads = renumbered
            csizes = cloads[K.NODES]
        # every trial's parts side by side, so one read of the stream judges them all (R-MAT s21, k = 32:
        # three trials 0.6 s against 1.1-1.3 s one at a time); int8 up to 127 parts, int16 to MAX_PARTS:
        # three trials in less than the 4-byte owner and trial arrays they replace
        trial_parts = np.empty((n, cfg.coarse_trials), dtype=signed_parts(k))
        solved = []   # each trial's attempt
        cluster_stream_passes = 0
        # the later trials are solved in child processes while this one moves the first one's clusters
        cores = usable_cores()   # once: a file read (the cgroup's quota), where the children's count is asked a block
        with solver_files(solvers), \
                solved_ahead(tries, solver_graph, cfg.coarse_trials, work / "coarse_trials") as solve_attempt:
            for i, cpart in distinct_solutions(solve_attempt, cfg.coarse_trials):
                if linked is not None:
                    cpart = place_unlinked(cpart, linked, unlinked, graph.csizes, k)
                if renumbered is not None:
                    cpart = cpart[heavy_order]
                if cfg.cluster_passes:
                    # the children solving the later trials hold a core each: the moves leave them theirs
                    # while they run (R-MAT s21, k = 8, on 2 cores: step 4 2.72-2.78 s with two threads
                    # against the child, 2.20-2.29 s with one; the same moves whatever the threads)
                    cluster_stream_passes += cluster_refine(vs, cl, cpart, cloads[weigh], cloads[K.ENTRIES], k,
                                                            int(caps[weigh]), cfg.cluster_passes, cfg.block_entries,
                                                            cores=lambda: cores - solve_attempt.running())[1]
                trial = trial_parts[:, len(solved)]
                K.project_parts(cl, cpart, trial)
                tsize = np.bincount(cpart, weights=csizes, minlength=k).astype(np.int64)
                trial[isolated] = pack_least_loaded(np.ones(len(isolated), dtype=np.int64), tsize)
                solved.append(tries[i])
                del trial, cpart
        children_peak = solve_attempt.children_peak_rss_bytes
        # the objective of each (of the one, too: the refinement starts from its count)
        counts = replicas(vs, trial_parts[:, :len(solved)], k, cfg.block_entries)
        trials = [{"solver": a.solver.solver, "seed": a.seed, "undirected_halo_rf": int(r) / n}
                  for a, r in zip(solved, counts, strict=True)]
        best = int(np.argmin(counts))   # the first of the lowest
        owner = trial_parts[:, best].astype(np.int32)
        objective_before = int(counts[best]) / n
        del trial_parts, counts
        del xadj, adjncy, eweights, graph, solver_graph, linked, unlinked, cl, isolated
        watch.lap("metis")

        # 5. refinement for the replication factor under the hard cap
        # The refinement's objective counts the halo in both directions (the vertex stream holds in- and
        # out-neighbours); on a directed store the builder's halo is the in-neighbours only, so there the
        # replication factor proper is measured by the metrics pass (once before, once after refining).
        before = _metrics(vs, owner, k, client, cfg.block_entries, True) if store.directed else None
        rf_before = before["replication_factor"] if before else objective_before
        load = K.part_loads(owner, vs.offsets, k)
        schedule = RefineSchedule(cfg.refine_passes, cfg.loose_passes, int(cfg.loose_balance * n / k),
                                  cfg.settle_passes, int(np.ceil(cfg.shed_degree_factor * vs.offsets[-1] / n)),
                                  order=cfg.refine_order)
        refined = refine(rounds, owner, load, caps, schedule, cfg.refine_rounds, cfg.max_candidates)
        watch.lap("refine")
        accept_seconds = rounds.accept_seconds
        # the balance the entries' cap bounds (the metrics' edge_balance counts a part's edges instead)
        entries_balance = float(load[K.ENTRIES].max() / (vs.offsets[-1] / k)) if vs.offsets[-1] else 1.0
        if cfg.edge_balance and load[K.ENTRIES].max() > caps[K.ENTRIES]:
            warn(f"coarse-refine: edge balance {cfg.edge_balance} not reached: the largest part holds "
                f"{entries_balance:.3f} x the mean neighbour entries (no single move fits both caps)")

    plan_owner = _in_store_ids(vs, owner)   # every step above works in the stream's ids
    metrics = _metrics(vs, owner, k, client, cfg.block_entries, store.directed)
    rf = metrics["replication_factor"]
    # undirected, the builder's halo is the objective's (tests/test_rf_truth.py): no pass to count it again;
    # directed, the refinement counted it already when it judged a loose phase
    recount = store.directed and refined.objective is None
    objective = (replicas(vs, owner, k, cfg.block_entries) / n if recount
                 else refined.objective if store.directed else rf)
    # LP, coarse edges, the trials' cluster moves, the one pass judging the trials (the objective before
    # refining), refine (counters, proposals, the moved nodes' lists, the objectives before and after a
    # loose phase), the objective after when directed and not counted there
    # and the figures' reads (_metrics: the closing ones, and directed those before refining)
    passes_vs = (lp_sweeps + 1 + cluster_stream_passes + 1 + refined.stream_passes + int(recount)
                 + 1 + int(before is not None))
    metrics.update({
        "seconds": watch.seconds,
        "passes": passes,
        "vertex_stream_reused": vs.reused,
        "vertex_stream_passes": passes_vs,
        "peak_rss_bytes": peak_rss_bytes(),
        # this process's peak leaves out the children solving the later coarse trials beside it in step 4:
        # the largest of theirs (0: none ran; at most usable cores - 1 run at once)
        "coarse_trial_children_peak_rss_bytes": children_peak,
        "lp_sample": sample,   # 0: label propagation read every entry (coarse_rounds.lp_sample)
        "num_clusters": int(num_clusters),
        "coarse_edges": int(num_coarse_edges),
        "coarse_edges_dropped_weight": int(dropped),
        "coarse_trials": trials,
        "replication_factor_before_refine": rf_before,
        "undirected_halo_rf": objective,
        "undirected_halo_rf_before_refine": objective_before,
        "refine_sweeps": refined.sweeps,
        "refine_moves": refined.moves,
        "refine_rebalance_rounds": refined.rebalance_rounds,
        "refine_kept": refined.kept,
        "entries_balance": entries_balance,
        "undirected_halo_rf_before_loose": refined.objective_tight,
        "undirected_halo_rf_after_loose": refined.objective_loose,
        "phase_seconds": dict(watch.laps),
        "rounds_accept_seconds": accept_seconds,   # the sequential part of label propagation + refine
    })
    # name each figure: "replication factor" is only ever the one the built parts will have
    also = (f"; refinement objective, halo of in- and out-neighbours: {objective_before:.4f} -> {objective:.4f}"
            if store.directed else "")
    log(f"coarse-refine k={k}: {num_clusters} clusters, replication factor {rf_before:.4f} -> {rf:.4f}{also} "
        f"({refined.moves} moves in {refined.sweeps} sweeps, {refined.kept} phase kept), {watch.seconds:.1f}s")
    params = {"seed": seed, "balance": balance, "preset": preset, **asdict(cfg)}
    return PartitionPlan(algorithm=ALGORITHM, num_parts=k, owner=plan_owner, params=params, metrics=metrics)


@contextmanager
def _threads(count: int) -> Iterator[None]:
    """numba's threads for this thread's kernels limited to ``count`` (at least 1, at most as many as
    before) inside the block."""
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(count, before)))
    try:
        yield
    finally:
        numba.set_num_threads(before)


# -- step 3 ---------------------------------------------------------------------------------------

def coarse_edges(vs: VertexStream, cl: np.ndarray, num_clusters: int, max_edges: int,
                 block_entries: int = DEFAULT_BLOCK_ENTRIES, halo: bool = False, lanes: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """Inter-cluster edges (key = cu * C + cv, cu < cv) with summed weights, at most ``max_edges``.

    Each block's keys are sorted and run-length reduced, then merged into the
    running table; when the table outgrows ``max_edges`` the lightest edges
    are dropped (their weight is returned, so callers can report it). The
    blocks' keys are made and sorted by ``lanes`` threads (default: the numba
    threads, at most COARSE_KEY_LANES), up to two blocks a thread ahead, while
    this one merges them in block order, so the table is the same whatever the
    lanes (the kernels release the GIL). The merges are a chain no thread can
    share, so the lanes run at a lower priority (``lower_thread_priority``):
    on 2 cores, three busy threads left the chain two thirds of a core.
    R-MAT s21: one lane ahead of the merge 2.5 -> 1.7 s (k = 32); the lanes
    two blocks ahead and below the merge 1.43-1.48 -> 1.07-1.10 s (k = 8).
    """
    # the table (keys, weights: its first `size` entries) is merged with each block's run into the spare
    # buffers, which then hold the table: two pairs of buffers for the whole step, not two arrays a block
    table = spare = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    size = 0
    dropped = 0
    bounds = vs.block_bounds(block_entries)
    lanes = max(1, min(lanes or min(COARSE_KEY_LANES, numba.get_num_threads()), len(bounds)))
    make_run = _BlockRuns(vs, cl, num_clusters, halo)
    with ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="graphstream-coarse",
                            initializer=lower_thread_priority) as pool:
        pending = deque(pool.submit(make_run, a, b) for a, b in bounds[:2 * lanes])
        later = iter(bounds[2 * lanes:])
        try:
            while pending:
                run = pending.popleft().result()
                if (nxt := next(later, None)) is not None:
                    pending.append(pool.submit(make_run, *nxt))
                if not len(run[0]):
                    continue
                if len(spare[0]) < size + len(run[0]):
                    spare = tuple(np.empty(size + len(run[0]), dtype=np.int64) for _ in range(2))
                size, lost = K.merge_heaviest(table[0][:size], table[1][:size], *run, max_edges, *spare)
                dropped += int(lost)
                table, spare = spare, table
        finally:
            for future in pending:
                future.cancel()
    return table[0][:size], table[1][:size], dropped


class _BlockRuns:
    """The inter-cluster pair keys of a block, sorted, with their counts (empty arrays for a block without
    any); called by several threads at once, each with scratch of its own."""

    def __init__(self, vs: VertexStream, cl: np.ndarray, num_clusters: int, halo: bool) -> None:
        self.vs, self.cl, self.num_clusters, self.halo = vs, cl, num_clusters, halo
        self.key_bits = max(1, (int(num_clusters) ** 2 - 1).bit_length())   # pair keys cu * C + cv < C^2
        self.scratch = threading.local()

    def __call__(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        blk = next(iter(self.vs.ranges([(a, b)], prefetch=0)))
        mine = self.scratch
        if not hasattr(mine, "stamp"):
            mine.stamp = np.zeros(self.num_clusters if self.halo else 0, dtype=np.int64)
            mine.buf = mine.sorting = np.empty(0, dtype=np.int64)
        if len(mine.buf) < len(blk.neighbours):
            mine.buf = np.empty(len(blk.neighbours), dtype=np.int64)
            mine.sorting = np.empty(len(blk.neighbours), dtype=np.int64)
        if self.halo:
            m = K.coarse_halo_keys_block(blk.first, blk.offsets, blk.neighbours, self.cl, self.num_clusters,
                                         mine.stamp, mine.buf)
        else:
            m = K.coarse_keys_block(blk.first, blk.offsets, blk.neighbours, self.cl, self.num_clusters, mine.buf)
        radix_sort(mine.buf[:m], mine.sorting, self.key_bits)
        return collapse_sorted(mine.buf[:m])   # new arrays: buf is refilled while the caller merges them


# -- step 4 ---------------------------------------------------------------------------------------

def cluster_refine(vs: VertexStream, cl: np.ndarray, cpart: np.ndarray, csizes: np.ndarray, centries: np.ndarray,
                   k: int, cap: int, passes: int, block_entries: int, cores: Callable[[], int] | None = None
                   ) -> tuple[int, int]:
    """Whole clusters moved to the part holding most of their neighbours on the full graph (the coarse
    graph the solver saw may have lost edges), up to ``passes`` stream passes, a part's sum of
    ``csizes`` (the clusters' nodes, or entries) kept under ``cap``; returns the moves and the passes
    run. Only the clusters numbered below ``MAX_CLUSTER_PART_ENTRIES // k`` move (all of them up to
    that many; past it :func:`heaviest_first` numbers the clusters with the most entries first).
    ``centries``: the clusters' entries, which size their counts (:func:`.cluster_part_table`).

    ``cores``: the threads the kernels may take, asked again every block (None: numba's). The children
    solving the later trials hold a core each until they exit, which on a large graph is early in the
    first trial's passes (R-MAT s24, k = 16: the children done after 1 s of its 9.6 s of passes on one
    thread). The moves are the same whatever the threads."""
    rows = _cluster_rows(len(csizes), k)
    size = np.bincount(cpart, weights=csizes, minlength=k).astype(np.int64)
    # one table, its rows split between the threads (the heavy clusters' rows in 4 bytes beside it)
    light, heavy, heavy_row = K.cluster_part_table(centries[:rows], k)
    if cores is None:
        cores = numba.get_num_threads
    lanes = K.thread_lanes()
    # Every lane reads every moved list (the rows a change goes to are the neighbours'), where a recount
    # reads each list once in all, so with more lanes than two the change must be smaller still (a bound
    # by that reasoning, not measured)
    limit = max(4, 2 * lanes)
    # the parts on the nodes, read at random once an entry: in int8 (int16 from 128 parts) they stay in the
    # cache (R-MAT s21: 2 MB, not 8; the three trials' passes 1.96-2.24 s -> 1.54-1.68 s at k = 8 and 32)
    node_part = np.full(len(cl), -1, dtype=signed_parts(k))
    gain = np.empty(rows, dtype=np.int64)
    total = 0
    done = 0
    before = None
    while done < passes:
        # after moves, only the change the moved clusters make is counted, from their lists alone, unless
        # they hold more than 1 / ``limit`` of the entries (a quarter up to two lanes): integers, the same
        # counts as a recount (R-MAT s21,
        # k = 32: a trial's four passes 1.2-1.6 -> 0.95 s, the same moves). A change costs two updates of
        # random rows an entry, a recount one of the node's own row: 16-21 ns against 5 ns an entry (R-MAT
        # s21 and s24), so past a quarter the recount is cheaper (s24, k = 16: the second pass, 38% of
        # the entries, 4.3 s as a change, 2.7-3.1 s recounted)
        recount = before is None or limit * K.moved_entries(cl, vs.offsets, before, cpart) > vs.num_entries
        if recount:
            K.project_parts(cl, cpart, node_part)
            light[:] = 0
            heavy[:] = 0
        for blk in vs.blocks(block_entries):
            with _threads(cores()):
                if recount:
                    K.cluster_part_entries(blk.first, blk.offsets, blk.neighbours, cl, node_part, light, heavy,
                                           heavy_row, K.thread_lanes())
                else:
                    K.cluster_part_moved(blk.first, blk.offsets, blk.neighbours, cl, before, cpart, light, heavy,
                                         heavy_row, K.thread_lanes())
        with _threads(cores()):
            K.cluster_gains(light, heavy, heavy_row, cpart, gain)
        done += 1
        order = np.flatnonzero(gain > 0)
        order = order[np.argsort(-gain[order], kind="stable")]   # gain, then cluster id
        before = cpart.copy()
        moved = K.cluster_moves(order, light, heavy, heavy_row, cpart, csizes, size, cap)
        total += moved
        if moved == 0:
            break
    return total, done


def heaviest_first(cl: np.ndarray, cloads: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Past the bound of the whole-cluster moves' table (clusters x parts), the clusters renumbered by
    their entries, most first, so that the moves take the ones with the most to gain (:func:`cluster_refine`):
    ``cl`` in place, and the loads in the new order; with the new id's old id (to renumber the solver's
    parts: ``cpart[order]``). None (nothing changed) within the bound.

    R-MAT s26, k = 16: 7.9M clusters x 16 parts is twice the bound; without this the moves were skipped
    there, which the solver's coarse graph (2^18 of its edges) cannot make up for."""
    num_clusters = cloads.shape[1]
    rows = _cluster_rows(num_clusters, k)
    if rows == num_clusters:
        return None
    order = np.argsort(-cloads[K.ENTRIES], kind="stable")
    rank = np.empty(len(order), dtype=cl.dtype)
    rank[order] = np.arange(len(order), dtype=cl.dtype)
    K.project_parts(cl, rank, cl)   # in place: each node reads and writes its own slot
    log(f"coarse-refine: {num_clusters} clusters x {k} parts: only the {rows} with the most entries move whole")
    return order, cloads[:, order]


def signed_parts(k: int) -> np.dtype:
    """The narrowest signed type for parts 0..k-1 and -1 (none), for per-node parts read at random."""
    return np.dtype(np.int8 if k <= 127 else np.int16)


def _cluster_rows(num_clusters: int, k: int) -> int:
    """The clusters the whole-cluster moves' table holds a row for (the first ones by number)."""
    return min(num_clusters, MAX_CLUSTER_PART_ENTRIES // k)


def _solver_weights(weights: np.ndarray) -> np.ndarray:
    """Node weights for the coarse solver: scaled down (rounded up) to a total under 2^30, as METIS's
    32-bit weights need (a billion-edge graph has over 2^31 entries)."""
    scale = -(-int(weights.sum()) // (1 << 30))
    return weights if scale <= 1 else -(-weights // scale)


def _in_store_ids(vs: VertexStream, owner: np.ndarray) -> np.ndarray:
    """``owner`` (indexed by the vertex stream's node ids) indexed by the store's."""
    return owner if vs.new_id is None else owner[vs.new_id]


def _metrics(vs: VertexStream, owner: np.ndarray, k: int, client: Client | None, block_entries: int,
             directed: bool) -> dict:
    """The shared metrics (their ``replication_factor`` counts the builder's halo) of ``owner`` (in the
    stream's ids), from one read of the vertex stream, here or as tasks over its node ranges: the same
    figures as the store's pass in a quarter of its time (R-MAT s21, k = 32: 0.35-0.38 s against
    1.50-1.59 s); directed, from the out-neighbours at the head of each list (a part's halo is its inner
    nodes' in-neighbours)."""
    from .metrics import vertex_stream_metrics
    m = vertex_stream_metrics(vs, owner, k, block_entries, client=client)
    out = {key: m[key] for key in ("replication_factor", "node_balance", "edge_balance", "part_inner", "part_halo",
                                   "part_edges")}
    if directed:   # the key earlier versions wrote when the two differed; now the same figure
        out["replication_factor_metrics"] = m["replication_factor"]
    return out
