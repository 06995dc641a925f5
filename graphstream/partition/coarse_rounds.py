"""coarse-refine's label propagation and refinement as batched synchronous rounds over node ranges.

A sweep over the nodes is cut into ``rounds`` node ranges of about equal
entries (the batches of dKaMinPar: a node sees the moves of the earlier
rounds of the sweep, so labels do not oscillate as in one synchronous
sweep). In a round every node's move is computed against the state at the
round's start (label propagation also sees the earlier nodes of its own
segment of :data:`SEGMENT` nodes), in parallel, and only proposed; the round
ends by accepting the proposals one by one in a fixed order (gain, then node
id) under the caps, on the driver. Ranges, segments and the order of
acceptance depend on the graph and the parameters only, so the result is the
same for a seed whatever the thread count (numba ``prange`` over segments)
and whether the proposals come from this process or from dask tasks over
sub-ranges of the round (``client=``).

On a cluster the O(num_nodes) state lives in ``.npy`` files of the work
folder (memory-mapped by the driver, which alone writes them between rounds;
tasks read them), the vertex stream is read by the tasks from the same
folder, and each task writes its proposals as one shard
(:func:`graphstream.cluster.save_shard`) and returns its path. The one
exception, a refresh of the counters, writes disjoint rows in place when
every worker is on this machine, and as shards the driver copies in when not
(memory maps of a file on NFS write whole pages back).

Proposals are records (:func:`lp_proposal_dtype`, :func:`refine_proposal_dtype`:
13 bytes a refinement proposal where four int64 rows took 32), always in
node order, so the order of acceptance is a stable sort by gain (or kind
and delta) alone: the last round of a sweep holds most of the nodes (the
hubs come first and the rounds are cut by entries), and its proposals were
the refinement's largest arrays (R-MAT s21, k = 32: 0.83M of them).
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._atomic import allocated_memmap
from .._report import track
from ..kernels.bitsets import new_bitsets
from ..store import id_dtype_for
from . import _coarse_kernels as K
from .vertex_stream import VertexStream, open_vertex_stream

if TYPE_CHECKING:
    from collections.abc import Iterator

    from distributed import Client

SEGMENT = 1024   # nodes: the Gauss-Seidel unit of label propagation; every range bound is a multiple of it
# Entries below which a round's range is not cut further into tasks: a task costs a few milliseconds
# of scheduler round trip and set-up whatever its size, and a round is a barrier paid ~120 times a run,
# so on a small graph 16 workers' pieces were all overhead (R-MAT s21: refine 16.4 s on 16 workers
# against 9.5 s on 4). 2^20 entries are ~20 ms of proposals on one core.
MIN_TASK_ENTRIES = 1 << 20
# A round's tasks are cut by work, a node's being its entries plus this many: a node costs its proposal's
# set-up and write beside its list, and with the hubs first a round's first piece holds few nodes and many
# entries, its second many nodes with few. R-MAT s21, k = 8, two pinned single-threaded workers
# (tools/bench_rounds_tasks.py, two runs each): label propagation 2.36 s -> 2.04-2.09 s, refine 2.95-3.08 s
# -> 2.82-2.87 s, against 0 (entries alone); 16 and 32 did no better than 8.
TASK_NODE_ENTRIES = 8


def lp_proposal_dtype(num_nodes: int) -> np.dtype:
    """A label-propagation proposal: the node, the label it takes, the gain (neighbours of the new label
    less those of the old)."""
    return np.dtype([("node", id_dtype_for(num_nodes)), ("label", np.int32), ("gain", np.int32)])


def refine_proposal_dtype(num_nodes: int) -> np.dtype:
    """A refinement proposal: the node, the part it would move to (``MAX_PARTS`` fits 16 bits), the change
    in replicas, the kind (``_coarse_kernels.GAIN`` ... ``FORCED``)."""
    return np.dtype([("node", id_dtype_for(num_nodes)), ("part", np.int16), ("delta", np.int32), ("kind", np.int8)])


def round_bounds(offsets: np.ndarray, rounds: int, start: int = 0, stop: int | None = None,
                 node_entries: int = 0) -> list[tuple[int, int]]:
    """``[start, stop)`` (default all nodes) cut into at most ``rounds`` node ranges of about equal work,
    inner bounds multiples of SEGMENT: a node's work is its entries, plus ``node_entries`` (a round's
    task pieces: TASK_NODE_ENTRIES)."""
    stop = len(offsets) - 1 if stop is None else stop
    if stop <= start:
        return []
    base = int(offsets[start])

    def work(i: int) -> int:   # of the nodes [start, i)
        return int(offsets[i]) - base + node_entries * (i - start)

    total = work(stop)
    cuts = {start, stop}
    for r in range(1, rounds):
        # bisection, not a search over an array of the range's work: a round's range is an eighth of the
        # nodes, cut again into task pieces at every round of every sweep
        lo, hi = start, stop
        while lo < hi:
            mid = (lo + hi) // 2
            if work(mid) >= total * r // rounds:
                hi = mid
            else:
                lo = mid + 1
        cuts.add(min(stop, max(start, -(-lo // SEGMENT) * SEGMENT)))
    cuts = sorted(cuts)
    return list(zip(cuts[:-1], cuts[1:], strict=True))


@dataclass
class Rounds:
    """Where the proposals of a round are computed: here (``client`` None), or by dask tasks.

    ``block_entries`` bounds the neighbour entries read at once (here, and in
    every task); ``work`` holds the state files and shards on a cluster.
    """
    vs: VertexStream
    block_entries: int
    client: Client | None = None
    work: Path | None = None
    tasks_per_round: int = 1
    min_task_entries: int = MIN_TASK_ENTRIES
    flush: bool = True            # workers on other machines: state files flushed, the summaries' rows as shards
    accept_seconds: float = 0.0   # the sequential part of the rounds: accepting proposals, applying moves

    @classmethod
    def make(cls, vs: VertexStream, block_entries: int, client: Client | None) -> Rounds:
        if client is None:
            return cls(vs, block_entries)
        from ..cluster import check_visible, task_count, workers_on_this_machine
        work = vs.path.parent / "rounds"
        work.mkdir(exist_ok=True)
        check_visible(client, vs.path, work)
        # msync writes every dirty page to disk; workers on this machine read the page cache anyway
        # one task per thread: a round is a barrier and its pieces are cut by entries (even work), so
        # more pieces would buy little balance for their per-task cost, paid every round
        return cls(vs, block_entries, client, work, task_count(client, per_worker=1),
                   min_task_entries=MIN_TASK_ENTRIES, flush=not workers_on_this_machine(client))

    def state(self, name: str, init: np.ndarray) -> np.ndarray:
        """A state array the tasks read: ``init`` itself in-process, a memory-mapped copy on a cluster."""
        if self.client is None:
            return init
        mm = allocated_memmap(self.work / f"{name}.npy", init.dtype, init.shape)
        mm[...] = init
        mm.flush()
        return mm

    def __enter__(self) -> Rounds:
        return self

    def __exit__(self, *exc) -> None:
        """Remove the cluster's state files (the vertex stream stays with its work folder)."""
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)

    def sync(self, *arrays: np.ndarray) -> None:
        """Make the driver's writes to state arrays visible to the next round's tasks."""
        if not self.flush:
            return
        for a in arrays:
            if isinstance(a, np.memmap):
                a.flush()

    def _pieces(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The node ranges cut into one piece per worker thread in all, each of at least
        ``min_task_entries`` entries, and every range into one piece at least (its own: a range's
        bounds can hold more than an equal share of the entries, the hubs' segments).

        A range's pieces are of equal work (:func:`round_bounds`: its entries, plus TASK_NODE_ENTRIES a
        node), since a round waits for its slowest task; how many pieces a range gets goes by its entries.
        The proposals do not depend on the cut, so neither does the result.
        """
        offsets = self.vs.offsets
        total = int(offsets[ranges[-1][1]]) - int(offsets[ranges[0][0]])
        wanted = min(self.tasks_per_round, total // self.min_task_entries)
        pieces = []
        for a, b in ranges:
            share = (int(offsets[b]) - int(offsets[a])) * wanted // max(total, 1)
            pieces += round_bounds(offsets, max(1, share), a, b, TASK_NODE_ENTRIES)
        return pieces

    def _run(self, stage: str, fn, ranges: list[tuple[int, int]], **common) -> list:
        from ..cluster import run_tasks
        return run_tasks(self.client, stage, fn, self._pieces(ranges), line=False,   # the rounds: a phase's steps
                         vs_dir=str(self.vs.path), block_entries=self.block_entries, **common)

    # -- label propagation ----------------------------------------------------------------------

    def lp_proposals(self, a: int, b: int, label: np.ndarray, full: np.ndarray, seed: int, sweep: int,
                     max_degree: int = 0, sample: int = 0) -> np.ndarray:
        """The proposals (:func:`lp_proposal_dtype`) of the nodes of ``[a, b)`` that propose a new label, in
        node order; nodes of degree above ``max_degree`` propose nothing (0: no bound)."""
        dtype = lp_proposal_dtype(self.vs.num_nodes)
        if self.client is None:
            return _concatenate(_lp_range(self.vs, a, b, label, full, seed, self.block_entries, max_degree, sample),
                                dtype)
        shard = str(self.work / f"lp-{sweep}-{a}")
        paths = self._run("coarse-refine: label propagation", _lp_task, [(a, b)], label_path=label.filename,
                          full_path=full.filename, seed=seed, max_degree=max_degree, sample=sample, shard=shard)
        return _concatenate(list(_shards(paths)), dtype)

    # -- refinement -----------------------------------------------------------------------------

    def summary(self, owner: np.ndarray, counters: np.ndarray, stale: np.ndarray | None,
                hubs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Fresh counters for every node (``stale`` None), or for the nodes marked in ``stale``, and the
        exact counts of the hubs among them (node-local: ranges in parallel, each writing its own rows)."""
        n = self.vs.num_nodes
        if self.client is None:
            _summary_range(self.vs, 0, n, owner, counters, self.block_entries, stale, hubs)
            return
        # the hubs' bitmap and ranks are written once, when made; their counts change with the moves
        self.sync(owner, counters, hubs[2], *(() if stale is None else (stale,)))
        # On one machine the tasks write their rows in place (the page cache is shared). On several, two
        # tasks writing neighbouring rows through memory maps of a shared file would each write whole
        # pages back, the other's rows in them stale (NFS): their rows come back as shards instead.
        found = self._run("coarse-refine: refine summary", _summary_task, [(0, n)], owner_path=owner.filename,
                          counters_path=counters.filename, stale_path=None if stale is None else stale.filename,
                          hub_paths=[h.filename for h in hubs],
                          shard=str(self.work / "summary") if self.flush else None)
        if self.flush:
            for a, rows_path, hub_first, hub_rows_path in found:
                rows, hub_rows = np.load(rows_path), np.load(hub_rows_path)
                counters[a:a + len(rows)] = rows
                hubs[2][hub_first:hub_first + len(hub_rows)] = hub_rows
                os.unlink(rows_path)
                os.unlink(hub_rows_path)
            self.sync(counters, hubs[2])

    def refine_proposals(self, a: int, b: int, load: np.ndarray, counters: np.ndarray, caps: np.ndarray,
                         max_candidates: int, sweep: int) -> np.ndarray:
        """The proposals (:func:`refine_proposal_dtype`, ``refine_propose``) of the nodes of ``[a, b)`` that
        propose a move, in node order."""
        dtype = refine_proposal_dtype(self.vs.num_nodes)
        if self.client is None:
            return _concatenate(_refine_range(self.vs, a, b, load, counters, caps, False, max_candidates, 0,
                                              self.block_entries), dtype)
        shard = str(self.work / f"refine-{sweep}-{a}")
        paths = self._run("coarse-refine: refine", _refine_task, [(a, b)], part_load=load,
                          counters_path=counters.filename, caps=caps, rebalance=False,
                          max_candidates=max_candidates, max_degree=0, shard=shard)
        return _concatenate(list(_shards(paths)), dtype)

    def rebalance_proposals(self, bounds: list[tuple[int, int]], load: np.ndarray, counters: np.ndarray,
                            caps: np.ndarray, max_candidates: int, max_degree: int, call: int
                            ) -> Iterator[np.ndarray]:
        """The rebalancing proposals (of the nodes of a part above a cap only, of degree at most ``max_degree``
        unless 0: ``refine_propose``) of every range of ``bounds``, as arrays of :func:`refine_proposal_dtype`
        in node order, one block or piece at a time.

        A rebalancing round takes its proposals in one global order once all are made, so no range waits
        for another's moves: on a cluster they are one wave of tasks, not a wave per range (a dask round
        trip each, 8 a rebalancing round).
        """
        if self.client is None:
            for a, b in bounds:
                yield from _refine_range(self.vs, a, b, load, counters, caps, True, max_candidates, max_degree,
                                         self.block_entries)
            return
        if not bounds:
            return
        paths = self._run("coarse-refine: rebalance", _refine_task, bounds, part_load=load,
                          counters_path=counters.filename, caps=caps, rebalance=True,
                          max_candidates=max_candidates, max_degree=max_degree,
                          shard=str(self.work / f"rebalance-{call}"))
        yield from _shards(paths)


# -- the two algorithms ------------------------------------------------------------------------

# label propagation reads a sample of the long lists only where it leaves this share of the entries unread
# or more. There it pays (R-MAT s20-s22: 49-53% of the entries, label propagation 40-45% faster at s21);
# below it the sample saves little and costs the web graphs' hubs their first label: on web-NotreDame (8%
# of the entries unread) a sampled first sweep gave k = 32 RF 1.1085-1.1533 over eight seeds (mean
# 1.1251, above METIS's 1.1123), every entry read 1.1043-1.1066 (mean 1.1056), at the same time.
SAMPLE_MIN_UNREAD = 0.25


def lp_sample(offsets: np.ndarray, sample: int) -> int:
    """The sample label propagation reads of a list longer than it: ``sample``, or 0 (every entry) where
    that would leave less than SAMPLE_MIN_UNREAD of the graph's entries unread."""
    if sample and K.entries_past(offsets, sample) < SAMPLE_MIN_UNREAD * offsets[-1]:
        return 0
    return sample


def label_propagation(rounds: Rounds, cap: int, sweeps: int, num_rounds: int, seed: int, hub_degree: int = 0,
                      sample: int = 0) -> tuple[np.ndarray, int]:
    """Labels after up to ``sweeps`` size-capped sweeps (stops early when nothing moves); sweeps run.

    After the first sweep the nodes of degree above ``hub_degree`` (0: none) keep their label: the hubs
    hold most of the entries (R-MAT s21: the nodes above 16 x the mean degree, 1.3% of them, 61% of the
    entries), so the later sweeps scan the light nodes' lists only (docs/partition-experiments.md, "Hubs
    that keep their label, and one loose sweep"). ``sample``: a proposal reads about that many entries of a
    longer list (``CoarseRefineParams.lp_sample``; 0: every entry)."""
    vs = rounds.vs
    n = vs.num_nodes
    label = rounds.state("lp_label", np.arange(n, dtype=np.int32))
    size = np.ones(n, dtype=np.int32)   # the driver's alone: proposals read the clusters without room
    full = new_bitsets(1, n)
    K.mark_full(size, cap, full)
    full = rounds.state("lp_full", full)
    bounds = round_bounds(vs.offsets, num_rounds)
    done = 0
    for sweep in track(range(sweeps), sweeps, "coarse-refine: label propagation", unit="sweep"):
        moved = 0
        for a, b in bounds:
            p = rounds.lp_proposals(a, b, label, full, seed, sweep, hub_degree if sweep else 0, sample)
            t = time.perf_counter()
            order = np.argsort(-p["gain"], kind="stable")   # gain, then node id (they come in node order)
            moved += K.lp_accept(p["node"][order], p["label"][order], label, size, cap, full)
            del p, order
            rounds.sync(label, full)
            rounds.accept_seconds += time.perf_counter() - t
        done += 1
        if moved == 0:
            break
    label = np.array(label)   # a plain array from here on (the state files go with the work folder)
    return label, done


@dataclass(frozen=True, slots=True)
class RefineSchedule:
    """The refinement's sweeps (:func:`refine`).

    passes: sweeps under the hard caps: before the loose phase, or, with the loose phase first (``order``), only when
        the loose phase does not end with fewer replicas than the partition it started from (then
        from that partition).
    loose_passes: then sweeps under ``loose_cap`` nodes a part (0: none; the entries' cap stays),
        after which the parts are brought back under the hard caps (:meth:`_Refinement.rebalance`)
        and ``settle_passes`` sweeps run under them again.
    order: "loose-first" (the loose phase starts from the partition given, and the sweeps under the
        hard caps are its fallback: see ``passes``), "tight-first" (those sweeps first), or "auto":
        loose-first where more than AUTO_BOUNDARY_ENTRIES of the neighbour entries are those of nodes
        with a neighbour in another part, tight-first below.
    shed_max_degree: the rebalancing's sheds, under the nodes' cap alone, come from the nodes of degree at
        most this (0: every node; see :meth:`_Refinement.rebalance`).
    """
    passes: int
    loose_passes: int = 0
    loose_cap: int = 0
    settle_passes: int = 0
    shed_max_degree: int = 0
    order: str = "tight-first"


@dataclass(frozen=True, slots=True)
class RefineResult:
    sweeps: int             # sweeps run (the rebalancing rounds not counted)
    moves: int              # moves accepted, those of a discarded loose phase included
    rebalance_rounds: int   # global rebalancing rounds
    stream_passes: int      # vertex-stream passes (summaries, proposals, applied moves, objectives)
    kept: str               # "loose": the partition after the loose phase; "tight": the one under the hard caps
    objective_tight: float  # replicas / num_nodes before the loose phase (0.0 when not measured)
    objective_loose: float  # replicas / num_nodes after it (0.0 when none ran)
    objective: float | None = None   # replicas / num_nodes of the partition returned, when counted (a loose
                                     # phase ran), else None


# refine(order="auto"): the share of the neighbour entries held by boundary nodes (a neighbour in another
# part) above which the loose phase runs first. The sweeps under the hard cap before it pay where the parts
# are communities already (web-NotreDame k = 16: 18% of the entries on the boundary, RF 1.0860 without them
# against 1.0856; facebook k = 32: 76%, 2.0890 against 2.0795); where nearly every list crosses a part
# (R-MAT s14-s21: 99.6-99.8%) the loose phase ends as low without them, in a third less refinement time.
AUTO_BOUNDARY_ENTRIES = 0.95

# Global rebalancing rounds before every remaining shed goes to the least loaded part: each round moves the
# cheapest sheds first, but a shed whose target filled up waits for the next round.
REBALANCE_ROUNDS = 3


def refine(rounds: Rounds, owner: np.ndarray, load: np.ndarray, caps: np.ndarray, schedule: RefineSchedule,
           num_rounds: int, max_candidates: int) -> RefineResult:
    """Replication-factor refinement of ``owner`` and the parts' ``load`` (in place), ending under ``caps``.

    ``load`` (2, k): the nodes and the neighbour entries of every part; ``caps``:
    their caps (``_coarse_kernels.NODES``). The nodes' cap is always met; the
    entries' (the edge balance, ``K.NO_CAP`` for none) as far as the
    rebalancing reaches it (:meth:`_Refinement.rebalance`).

    Each sweep: one pass refreshing the neighbour-per-part counters, then the
    rounds (proposals, accepted in the order kind, delta, node id; the
    counters of the moved nodes' neighbours updated by one read of the
    round). The first sweep counts every node; later ones recount only the
    nodes whose counters a move left unknown (``stale``, see
    ``refine_apply``), the hubs among them from their exact counts: the
    same counters as a full recount, for the lists of the others alone.

    Under the hard cap most improving moves are refused: on R-MAT s21, k = 32,
    4.8M proposals of moves that gain, 0.2M accepted, the parts they aim at
    being full. So, as Jet refinement does (Gilbert et al., 2024), a phase
    lets the parts grow to ``loose_cap``; the parts are then brought back
    under ``cap`` by the cheapest moves out of the parts above it, taken in
    one global order (:meth:`_Refinement.rebalance`), and settled by sweeps under
    ``cap``. The loose phase can lose on graphs whose parts are communities
    already, so the balanced partition before it is kept when it has fewer
    replicas (counted from the counters, :meth:`_Refinement.objective`).

    With ``schedule.order`` "loose-first" the loose phase starts from ``owner`` itself, and the sweeps
    under the hard caps run only when it loses, from ``owner`` again: on R-MAT they were a third of the
    refinement's time and the loose phase ends where it would have ended after them; "auto" runs it
    first where nearly every list crosses a part (docs/partition-experiments.md, "The loose phase
    first").
    """
    ref = _Refinement(rounds, owner, load.shape[1], caps, num_rounds, max_candidates, schedule.shed_max_degree)
    loose_first = schedule.loose_passes > 0 and schedule.order != "tight-first"
    if loose_first and schedule.order == "auto":
        ref.refresh()   # the first count, which the first sweep or rebalancing would make anyway
        entries = int(ref.vs.offsets[-1])
        loose_first = K.boundary_entries(ref.counters, ref.vs.offsets) > AUTO_BOUNDARY_ENTRIES * entries
    if not loose_first:
        ref.sweeps(load, caps, schedule.passes)
    ref.rebalance(load)   # a start above the caps (the projection's imbalance)
    if schedule.loose_passes == 0:
        owner[:] = ref.owner
        return ref.result("tight", 0.0, 0.0, None)
    tight = ref.objective()
    # the balanced partition kept in the narrowest type of its parts (1 byte up to 256 parts, not 4: the
    # copy lives through the whole refinement, whose memory is the partition's peak on R-MAT from s21)
    kept_owner, kept_load = ref.owner.astype(np.min_scalar_type(load.shape[1] - 1)), load.copy()
    # only the nodes' cap is let go: parts grown past the entries' cap would hold hubs that single
    # moves cannot bring back (the light parts being full of nodes by then)
    ref.sweeps(load, np.array([max(caps[K.NODES], schedule.loose_cap), caps[K.ENTRIES]]), schedule.loose_passes)
    ref.rebalance(load)
    ref.sweeps(load, caps, schedule.settle_passes)
    loose = ref.objective()
    if loose < tight:
        owner[:] = ref.owner
        return ref.result("loose", tight, loose, loose)
    load[:] = kept_load
    ref.restart(kept_owner)
    objective = tight
    if loose_first and schedule.passes:
        ref.sweeps(load, caps, schedule.passes)
        objective = ref.objective()
    owner[:] = ref.owner
    return ref.result("tight", tight, loose, objective)


class _Refinement:
    """The state of :func:`refine`: owner (the rounds' copy), counters, refresh marks and hub counts."""

    def __init__(self, rounds: Rounds, owner: np.ndarray, k: int, caps: np.ndarray, num_rounds: int,
                 max_candidates: int, shed_max_degree: int = 0):
        vs = rounds.vs
        self.rounds, self.vs, self.k, self.caps, self.max_candidates = rounds, vs, k, caps, max_candidates
        self.shed_max_degree = shed_max_degree
        self.owner = rounds.state("owner", owner)
        self.counters = rounds.state("counters", K.new_counters(owner, k))   # the owner in their rows too
        self.stale = rounds.state("stale", np.zeros(vs.num_nodes, dtype=np.uint8))
        self.hubs = tuple(rounds.state(name, a) for name, a in zip(("hub_bits", "hub_ranks", "hub_counts"),
                                                                   K.hub_table(vs.offsets, k), strict=True))
        self.bounds = round_bounds(vs.offsets, num_rounds)
        self.counted = False   # the first refresh counts every node
        self.fresh = False     # no move since the last refresh: the counters are exact
        self.calls = 0         # proposal calls so far (names a cluster's shards)
        self.done = self.moves = self.rebalance_rounds = self.passes = 0

    def refresh(self) -> None:
        """Counters as a full recount would give them (hubs from their exact counts, the other unknown ones
        recounted); nothing to do when no node moved since the last refresh."""
        if self.fresh:
            return
        if self.counted:
            K.refresh_hubs(*self.hubs, self.counters, self.stale)
        self.rounds.summary(self.owner, self.counters, self.stale if self.counted else None, self.hubs)
        self.stale[:] = 0
        self.counted = self.fresh = True
        self.passes += 1

    def proposals(self, a: int, b: int, load: np.ndarray, caps: np.ndarray) -> np.ndarray:
        self.calls += 1
        return self.rounds.refine_proposals(a, b, load, self.counters, caps, self.max_candidates, self.calls)

    def accept(self, node: np.ndarray, part: np.ndarray, kind: np.ndarray, load: np.ndarray, caps: np.ndarray
               ) -> int:
        """Accept proposals in the given order; the moved nodes' neighbours' counters brought up to date."""
        moved_from = np.empty(len(node), dtype=np.int32)
        moved_to = np.empty(len(node), dtype=np.int32)
        m = K.refine_accept(node, part.astype(np.int32, copy=False), kind.astype(np.int32, copy=False), self.owner,
                            self.vs.offsets, self.counters, load, caps, moved_from, moved_to)
        if m:
            self.fresh = False
            by_id = np.argsort(node[:m], kind="stable")
            _apply_moves(self.vs, node[by_id], moved_from[by_id], moved_to[by_id], self.counters, self.stale,
                         self.hubs, self.rounds.block_entries)
        self.rounds.sync(self.owner, self.counters, self.stale, self.hubs[2])
        self.moves += m
        return m

    def sweeps(self, load: np.ndarray, caps: np.ndarray, count: int) -> None:
        """Up to ``count`` sweeps under ``caps`` (fewer when one moves nothing); a part above one sheds
        nodes at no loss."""
        for _ in range(count):
            self.refresh()
            moves = 0
            for a, b in self.bounds:
                p = self.proposals(a, b, load, caps)
                t = time.perf_counter()
                # kind, then delta, then node id (they come in node order): one stable sort of one key
                order = np.argsort((p["kind"].astype(np.int64) << 32) + p["delta"], kind="stable")
                moves += self.accept(p["node"][order], p["part"][order], p["kind"][order], load, caps)
                del p, order
                self.rounds.accept_seconds += time.perf_counter() - t
            self.done += 1
            self.passes += 2   # the proposals, the moved nodes' lists
            if moves == 0:
                break

    def rebalance(self, load: np.ndarray) -> None:
        """Every part under the hard caps: each round, every node of a part above one proposes its
        cheapest move (to a part with room), and the proposals are taken in one order while their part is
        above a cap; after REBALANCE_ROUNDS rounds the remaining ones go to the least loaded part.

        The order is by delta, then node id. With an entries' cap: out of a part above it, by delta per
        entry shed (a hub that costs a few replicas before many light nodes that cost none each); out of
        a part above the nodes' cap only, by delta, then degree (the light nodes first, as the parts
        with room for nodes have little for entries: web-NotreDame, k = 16, edge balance 1.1: entries
        balance 2.20 -> 1.22, RF 1.70 -> 1.35). The nodes' cap is always met: a forced move has a part
        with room, so this ends. The entries' cap is met where single moves can meet it: the rounds
        stop once the nodes are under their cap and a round moved nothing, or after
        REBALANCE_ROUNDS + 1 rounds.

        Under the nodes' cap alone a shed is one node whatever its degree, and a hub's costs replicas by
        the dozen, so the cheapest sheds are light nodes: the nodes of degree above ``shed_max_degree``
        do not propose, and their lists (most of R-MAT's entries) are not scanned for sheds taken last
        if ever (R-MAT s21, k = 32, 4 x the mean degree: 3.9 -> 1.8-2.1 s, the objective after it
        3.694 -> 3.683). Should a round move nothing with a part still above the cap, every node
        proposes from then on."""
        caps = self.caps
        offsets = self.vs.offsets
        done = 0
        max_degree = self.shed_max_degree if caps[K.ENTRIES] >= K.NO_CAP else 0
        while (load[K.NODES] > caps[K.NODES]).any() or (
                (load[K.ENTRIES] > caps[K.ENTRIES]).any() and done <= REBALANCE_ROUNDS):
            self.refresh()
            # every node of a part above a cap proposes: after the loose phase those parts can hold most
            # of the nodes
            self.calls += 1
            p = _concatenate(list(self.rounds.rebalance_proposals(
                self.bounds, load, self.counters, caps, self.max_candidates, max_degree, self.calls)),
                refine_proposal_dtype(self.vs.num_nodes))
            t = time.perf_counter()
            node, part, delta = p["node"], p["part"], p["delta"]
            done += 1
            forced = done >= REBALANCE_ROUNDS
            if caps[K.ENTRIES] < K.NO_CAP:
                degree = offsets[node + 1] - offsets[node]
                heavy = (load[K.ENTRIES] > caps[K.ENTRIES])[self.owner[node]]
                key = np.where(heavy, delta / np.maximum(degree, 1), delta)
                order = np.lexsort((node, degree, key))
                del degree, heavy, key
            else:   # by delta, then node id (they come in node order); moves that gain count as sheds too
                order = np.argsort(delta, kind="stable")
            del p, delta
            kind = np.full(len(node), K.FORCED if forced else K.SHED, dtype=np.int32)
            node, part = node[order], part[order]
            del order
            moved = self.accept(node, part, kind, load, caps)
            self.rounds.accept_seconds += time.perf_counter() - t
            self.rebalance_rounds += 1
            self.passes += 2
            if moved == 0 and not (load[K.NODES] > caps[K.NODES]).any():
                break
            if moved == 0:
                max_degree = 0

    def restart(self, owner: np.ndarray) -> None:
        """Back to ``owner`` (the caller restores the loads): every counter recounted by the next refresh."""
        self.owner[:] = owner
        self.counters[:, K.owner_word(self.counters)] = owner
        self.stale[:] = 0
        self.counted = self.fresh = False

    def objective(self) -> float:
        """Replicas / num_nodes of the current owner, from the counters brought up to date: the lists of
        the nodes whose counts a move left unknown are read, not the stream (R-MAT s21, k = 32: two
        objectives 0.55 s -> about 0.1 s), and the next sweep finds them fresh."""
        self.refresh()
        return K.replicas_from_counters(self.counters) / self.vs.num_nodes

    def result(self, kept: str, tight: float, loose: float, objective: float | None) -> RefineResult:
        return RefineResult(self.done, self.moves, self.rebalance_rounds, self.passes, kept, tight, loose, objective)


def replicas(vs: VertexStream, owner: np.ndarray, k: int, block_entries: int) -> int | np.ndarray:
    """Sum over nodes of the number of parts holding them (owned or halo): RF x num_nodes; for an
    ``owner`` of num_nodes x T (T partitions side by side), the T sums from one read of the stream."""
    owners = owner.reshape(len(owner), -1)   # a view: the kernel reads one partition as a column
    total = np.zeros(owners.shape[1], dtype=np.int64)
    for blk in vs.ranges(vs.aligned_bounds(0, vs.num_nodes, block_entries, SEGMENT)):
        total += K.replicas_range(blk.first, blk.offsets, blk.neighbours, owners, k, SEGMENT)
    return int(total[0]) if owner.ndim == 1 else total


def _apply_moves(vs: VertexStream, node: np.ndarray, moved_from: np.ndarray, moved_to: np.ndarray,
                 counters: np.ndarray, stale: np.ndarray, hubs: tuple, block_entries: int) -> None:
    """Counters of the neighbours of the moved nodes (``node`` in increasing id order), from one read
    of the blocks that hold a moved node; in parallel over the neighbours' lanes (``refine_apply``)."""
    start = int(node[0]) // SEGMENT * SEGMENT
    bounds = [(lo, hi) for lo, hi in vs.aligned_bounds(start, int(node[-1]) + 1, block_entries, SEGMENT)
              if np.searchsorted(node, lo) < np.searchsorted(node, hi)]
    lanes = K.thread_lanes()
    for blk in vs.ranges(bounds):
        i, j = np.searchsorted(node, (blk.first, blk.stop))
        K.refine_apply(blk.first, blk.offsets, blk.neighbours, node[i:j], moved_from[i:j], moved_to[i:j],
                       counters, stale, *hubs, lanes)


# -- one range's proposals (here, or in a task) -----------------------------------------------------

def _lp_range(vs, a, b, label, full, seed, block_entries, max_degree=0, sample=0) -> list[np.ndarray]:
    """The proposals of ``[a, b)``, a block at a time (:func:`lp_proposal_dtype`)."""
    dtype = lp_proposal_dtype(vs.num_nodes)
    out = []
    for blk in vs.ranges(vs.aligned_bounds(a, b, block_entries, SEGMENT)):
        prop = np.empty(len(blk), dtype=np.int32)
        gain = np.empty(len(blk), dtype=np.int32)
        K.lp_propose(blk.first, blk.offsets, blk.neighbours, label, full, seed, SEGMENT, prop, gain, max_degree,
                     sample)
        i = np.flatnonzero(prop != label[blk.first:blk.stop])
        p = np.empty(len(i), dtype)
        p["node"], p["label"], p["gain"] = i + blk.first, prop[i], gain[i]
        out.append(p)
    return out


def _summary_range(vs, a, b, owner, counters, block_entries, stale, hubs, row_base=0, hub_base=0) -> None:
    """Counters for the nodes of [a, b) (``refine_summary``; ``counters`` and the hub counts may hold
    their rows from ``row_base`` and ``hub_base`` on only)."""
    bounds = vs.aligned_bounds(a, b, block_entries, SEGMENT)
    if stale is None:
        stale = np.empty(0, dtype=np.uint8)   # every node
    else:   # blocks without a node to recount are not read
        bounds = [(lo, hi) for lo, hi in bounds if (stale[lo:hi] == K.RECOUNT).any()]
    for blk in vs.ranges(bounds):
        K.refine_summary(blk.first, blk.offsets, blk.neighbours, owner, counters, SEGMENT, stale, *hubs, row_base,
                         hub_base)


def _hub_rows(bits: np.ndarray, ranks: np.ndarray, a: int, b: int, n: int) -> tuple[int, int]:
    """The hub counts' rows of the hubs among nodes [a, b) of n (bounds below n: multiples of 64)."""
    total = int(ranks[-1]) + int(bits[-1]).bit_count() if len(bits) else 0
    return tuple(total if v >= n else int(ranks[v >> 6]) for v in (a, b))


def _refine_range(vs, a, b, load, counters, caps, rebalance, max_candidates, max_degree, block_entries
                  ) -> list[np.ndarray]:
    """The proposals of ``[a, b)``, a block at a time (:func:`refine_proposal_dtype`)."""
    dtype = refine_proposal_dtype(vs.num_nodes)
    out = []
    for blk in vs.ranges(vs.aligned_bounds(a, b, block_entries, SEGMENT)):
        target = np.empty(len(blk), dtype=np.int32)
        delta = np.empty(len(blk), dtype=np.int32)
        kind = np.empty(len(blk), dtype=np.int8)
        K.refine_propose(blk.first, blk.offsets, blk.neighbours, load, counters, caps, rebalance, max_candidates,
                         SEGMENT, target, delta, kind, max_degree)
        i = np.flatnonzero(kind >= 0)
        p = np.empty(len(i), dtype)
        p["node"], p["part"], p["delta"], p["kind"] = i + blk.first, target[i], delta[i], kind[i]
        out.append(p)
    return out


# -- dask tasks (module-level: picklable) ----------------------------------------------------------

def _lp_task(a: int, b: int, *, vs_dir: str, block_entries: int, label_path: str, full_path: str, seed: int,
             max_degree: int, sample: int, shard: str) -> str:
    from ..cluster import save_shard
    vs = open_vertex_stream(vs_dir, mmap=True)
    out = _lp_range(vs, a, b, np.load(label_path, mmap_mode="r"), np.load(full_path, mmap_mode="r"), seed,
                    block_entries, max_degree, sample)
    return str(save_shard(f"{shard}-{a}.npy", out or [np.empty(0, lp_proposal_dtype(vs.num_nodes))]))


def _summary_task(a: int, b: int, *, vs_dir: str, block_entries: int, owner_path: str, counters_path: str,
                  stale_path: str | None, hub_paths: list[str], shard: str | None
                  ) -> int | tuple[int, str, int, str]:
    """The counters of nodes [a, b) and the hub counts of the hubs among them: written in place (``shard``
    None; tasks write disjoint rows), or saved as two shards, whose paths it returns with the first rows."""
    from ..cluster import save_shard
    vs = open_vertex_stream(vs_dir, mmap=True)
    owner = np.load(owner_path, mmap_mode="r")
    stale = None if stale_path is None else np.load(stale_path, mmap_mode="r")
    bits, ranks = (np.load(p, mmap_mode="r") for p in hub_paths[:2])   # written once, when made
    if shard is None:
        c, counts = np.load(counters_path, mmap_mode="r+"), np.load(hub_paths[2], mmap_mode="r+")
        _summary_range(vs, a, b, owner, c, block_entries, stale, (bits, ranks, counts))
        return b - a
    # rows the refresh does not recount keep their values: copied, then saved with the others
    hub_first, hub_stop = _hub_rows(bits, ranks, a, b, vs.num_nodes)
    rows = np.array(np.load(counters_path, mmap_mode="r")[a:b])
    hub_rows = np.array(np.load(hub_paths[2], mmap_mode="r")[hub_first:hub_stop])
    _summary_range(vs, a, b, owner, rows, block_entries, stale, (bits, ranks, hub_rows), a, hub_first)
    return (a, str(save_shard(f"{shard}-{a}.npy", rows)), hub_first,
            str(save_shard(f"{shard}-hubs-{a}.npy", hub_rows)))


def _refine_task(a: int, b: int, *, vs_dir: str, block_entries: int, part_load: np.ndarray, counters_path: str,
                 caps: np.ndarray, rebalance: bool, max_candidates: int, max_degree: int, shard: str) -> str:
    from ..cluster import save_shard
    vs = open_vertex_stream(vs_dir, mmap=True)
    out = _refine_range(vs, a, b, part_load, np.load(counters_path, mmap_mode="r"), caps, rebalance, max_candidates,
                        max_degree, block_entries)
    return str(save_shard(f"{shard}-{a}.npy", out or [np.empty(0, refine_proposal_dtype(vs.num_nodes))]))


def _shards(paths: list[str]) -> Iterator[np.ndarray]:
    """The tasks' shards, in range order, each removed once read."""
    for p in paths:
        shard = np.load(p)
        os.unlink(p)
        yield shard


def _concatenate(pieces: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """Proposals of several blocks or shards as one array (in their order)."""
    if len(pieces) == 1:
        return pieces[0]
    return np.concatenate(pieces) if pieces else np.empty(0, dtype)
