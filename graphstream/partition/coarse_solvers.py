"""coarse-refine's step 4 solvers on the bounded coarse graph, and their later trials solved ahead.

METIS (pymetis), KaMinPar, or both in turn partition the coarse graph in
memory, once per trial (a solver and a seed: an *attempt*, which is a trial
unless its partition repeats an earlier one). Both hold the GIL for the
whole call (two METIS calls in threads took as long as one after the other),
so on a coarse graph large enough to pay for a process start the attempts
after the first are solved in child processes while this process moves the
first trial's clusters on the full graph (the trials are then judged together). The children are
``python -m`` processes given the coarse graph in one ``.npz`` and writing
each part vector as a ``.npy`` (renamed into place when complete): not
``multiprocessing``, whose spawn re-runs the caller's main module and whose
fork copies a process that holds numba's and zarr's threads. Where an
attempt was solved does not change its partition, so the plan is the same
with children or without; a child that fails costs its attempts being solved
here, with the child's error logged.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .._report import log, warn
from .._resources import peak_rss_bytes, usable_cores
from ..errors import GraphStreamError

# Solver graphs with fewer nodes are solved here only: a child's start (0.14 s: the interpreter, numpy,
# pymetis; 0.31 s while it imported zarr too, before 2026-11-29) would cost more than the calls it takes
# over. METIS's time follows the nodes (the edges are bounded): R-MAT s18, k = 32, 35,009 clusters:
# 0.34 s a call; s21, k = 32, 180,738 clusters: 1.1-1.3 s; s22, k = 8, the 76,881 linked clusters of
# 544,331: 0.40 s against 1.08 s. 2^14 rather than 2^16 since the solver sees the linked clusters only
# (fewer nodes for the same graph): R-MAT s20, k = 8 / 32, step 4 1.06 -> 0.88-0.92 s / 1.79-1.92 ->
# 1.43-1.44 s; s21 1.92-2.26 -> 1.70-1.82 s / 3.11-3.14 -> 2.40-2.44 s; s18 within 0.05 s (the same plans).
AHEAD_MIN_CLUSTERS = 1 << 14


@dataclass(frozen=True, slots=True)
class CoarseSolver:
    """Which solver, and its parameters (everything a child needs besides the graph and the seeds).

    solver: "metis" or "kaminpar"; method: METIS's "kway", "recursive" or "kway-vol";
    parhip: the coarse graph as a ParHiP file (KaMinPar loads graphs from files only).
    """
    k: int
    balance: float
    solver: str = "metis"
    method: str = "kway"
    parhip: str | None = None


@dataclass(frozen=True, slots=True)
class CoarseGraph:
    """Symmetric weighted CSR: ``xadj``, ``adjncy``, edge weights ``ew``; node weights ``csizes``."""
    xadj: np.ndarray
    adjncy: np.ndarray
    ew: np.ndarray
    csizes: np.ndarray

    def linked(self) -> tuple[CoarseGraph, np.ndarray]:
        """The clusters with at least one coarse edge, as a graph of their own, and their ids here (the
        graph itself and every id when all have one).

        The bound on the coarse edges leaves most of R-MAT's clusters without one (s22, k = 8: 467,450 of
        544,331), and the solvers' memory and time follow their nodes: METIS on the 76,881 linked ones
        took 47 MB and 0.40 s, on them all 105 MB and 1.08 s (:func:`place_unlinked` packs the others).
        """
        degree = np.diff(self.xadj)
        ids = np.flatnonzero(degree)
        if len(ids) == len(self.csizes):
            return self, ids
        new_id = np.full(len(self.csizes), -1, dtype=self.adjncy.dtype)
        new_id[ids] = np.arange(len(ids), dtype=new_id.dtype)
        xadj = np.zeros(len(ids) + 1, dtype=self.xadj.dtype)
        np.cumsum(degree[ids], out=xadj[1:])
        # the unlinked clusters' rows are empty: the entries keep their places, the weights theirs
        return CoarseGraph(xadj, new_id[self.adjncy], self.ew, self.csizes[ids]), ids


def linked_balance(balance: float, weights: np.ndarray, linked: np.ndarray, k: int, unplaced: int = 0) -> float:
    """The solver's balance on the linked clusters alone: their parts may hold up to ``balance`` x the mean
    part of *all* clusters and of ``unplaced`` (weight in no cluster: the nodes without an edge), the
    unlinked clusters and those nodes then filling the room left (at most k: one part all)."""
    total, linked_total = int(weights.sum()) + int(unplaced), int(weights[linked].sum())
    if linked_total == 0:
        return balance
    return min(float(k), balance * total / linked_total)


def unlinked_heaviest_first(linked: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The clusters not in ``linked``, heaviest first (ties by id): the order :func:`place_unlinked` packs
    them in, the same for every trial."""
    rest = np.ones(len(weights), dtype=bool)
    rest[linked] = False
    rest = np.flatnonzero(rest)
    return rest[np.argsort(-weights[rest], kind="stable")]


def place_unlinked(linked_parts: np.ndarray, linked: np.ndarray, unlinked: np.ndarray, weights: np.ndarray,
                   k: int) -> np.ndarray:
    """Every cluster's part: the linked clusters' from the solver, the ``unlinked`` ones (in that order:
    :func:`unlinked_heaviest_first`) each onto the least loaded part (least-loaded packing on the loads the
    linked clusters make). Measured against the solver placing them (METIS seeing every cluster):
    docs/partition-experiments.md, "The solver on the linked clusters"."""
    from ..kernels.packing import pack_least_loaded  # here: a trial child never places, nor loads numba
    parts = np.empty(len(weights), dtype=np.int32)
    parts[linked] = linked_parts
    if len(unlinked):
        loads = np.bincount(linked_parts, weights=weights[linked], minlength=k).astype(np.int64)
        parts[unlinked] = pack_least_loaded(np.asarray(weights[unlinked], dtype=np.int64), loads)
    return parts


SOLVERS = ("auto", "metis", "kaminpar", "metis+kaminpar")
# "auto": KaMinPar from this many parts, METIS below. Against METIS alone (three trials each, the final
# replication factor): k = 16 and 32 on R-MAT s20/s21 and the shared graphs -3.5% to +0.3% (9 of 10 runs
# lower), with step 4 17-29% shorter on R-MAT; k = 8 -0.7% to +6.0% (R-MAT: +1.5% to +6.0%)
# (docs/partition-experiments.md, "KaMinPar on the coarse graph from k = 16").
AUTO_KAMINPAR_MIN_K = 16


def make_solvers(coarse_solver: str, method: str, graph: CoarseGraph, k: int, balance: float,
                 work: Path) -> list[CoarseSolver]:
    """The configured solvers, whose seeds the trials take in turn ("metis+kaminpar": METIS, then
    KaMinPar; "auto": KaMinPar from ``AUTO_KAMINPAR_MIN_K`` parts, METIS below); KaMinPar's graph file
    is written here. Without the ``kaminpar`` package, METIS alone."""
    if coarse_solver == "auto":
        coarse_solver = "kaminpar" if k >= AUTO_KAMINPAR_MIN_K else "metis"
    names = coarse_solver.split("+")
    solvers = []
    if "kaminpar" in names and k > 1 and len(graph.adjncy) > 0 and len(graph.csizes) > k:
        from . import kaminpar_solver
        if kaminpar_solver.available():
            path = kaminpar_solver.write_parhip(work / "coarse.parhip", graph.xadj, graph.adjncy, graph.csizes,
                                                graph.ew)
            solvers = [CoarseSolver(k, balance, "kaminpar", method, str(path))]
        else:
            warn("coarse-refine: the kaminpar package is not installed; METIS (pymetis) partitions the coarse "
                "graph")
    if "metis" in names or not solvers:
        solvers.insert(0, CoarseSolver(k, balance, "metis", method))
    return solvers


@contextmanager
def solver_files(solvers: list[CoarseSolver]) -> Iterator[None]:
    """Removes the files :func:`make_solvers` wrote for ``solvers`` on leaving (KaMinPar's graph file,
    which would otherwise stay in a kept work folder)."""
    try:
        yield
    finally:
        for solver in solvers:
            if solver.parhip is not None:
                Path(solver.parhip).unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One call of a solver: a trial, unless its partition repeats an earlier attempt's."""
    solver: CoarseSolver
    seed: int


def attempts(solvers: list[CoarseSolver], seed: int, trials: int) -> list[Attempt]:
    """The attempts for ``trials`` distinct partitions, 2 x trials in all (the most
    :func:`distinct_solutions` makes): the first solver's seeds seed, seed + 1, ..., with each later
    solver's seed ``seed`` taken second, third, ... ("metis+kaminpar": METIS seed, KaMinPar seed, METIS
    seed + 1, seed + 2, ...)."""
    first, rest = solvers[0], solvers[1:]
    order = [Attempt(first, seed)] + [Attempt(other, seed) for other in rest]
    order += [Attempt(first, seed + i) for i in range(1, 2 * trials)]
    return order[:2 * trials]


def solve(solver: CoarseSolver, graph: CoarseGraph, seed: int) -> np.ndarray:
    """Part (int32) of every cluster for ``seed``."""
    if solver.solver == "kaminpar":
        trivial = trivial_parts(graph.xadj, graph.adjncy, graph.csizes, solver.k, solver.balance)
        if trivial is not None:
            return trivial
        from . import kaminpar_solver
        return kaminpar_solver.partition(solver.parhip, solver.k, solver.balance, seed)
    return partition_coarse(graph.xadj, graph.adjncy, graph.ew, graph.csizes, solver.k, seed, solver.balance,
                            solver.method)


def packed(num_clusters: int, num_entries: int, k: int) -> bool:
    """Whether a coarse graph of ``num_clusters`` clusters and ``num_entries`` adjacency entries is packed
    (:func:`trivial_parts`) rather than solved: no more clusters than parts, or no edge."""
    return num_clusters <= k or num_entries == 0


def trivial_parts(xadj: np.ndarray, adjncy: np.ndarray, csizes: np.ndarray, k: int, balance: float
                  ) -> np.ndarray | None:
    """The parts of a coarse graph with no more clusters than parts, or without edges, by least-loaded
    packing (heaviest first); None when a solver is needed.

    The connected components are packed whole where one fits under the balance's cap, and the clusters
    of the others one by one: packing the clusters alone put the two clusters of a 10-node graph's
    only edge in two parts (k = 2: RF 1.2), and the refinement could not join them (both endpoints
    proposed to move to the other's part in one round, and both moves were taken)."""
    num_clusters = len(csizes)
    if k == 1 or num_clusters == 0:
        return np.zeros(num_clusters, dtype=np.int32)
    if not packed(num_clusters, len(adjncy), k):
        return None
    # here, not at the top: a trial child never takes this branch and need not load numba
    from ..kernels.packing import pack_least_loaded
    weights = np.asarray(csizes, dtype=np.int64)
    component = _components(xadj, adjncy, num_clusters)
    cweights = np.bincount(component, weights=weights).astype(np.int64)
    cap = int(np.ceil(balance * weights.sum() / k))
    # an item is a component that fits a part, or one cluster of a component that does not
    item = np.where(cweights[component] <= cap, component, len(cweights) + np.arange(num_clusters))
    item = np.unique(item, return_inverse=True)[1].ravel()
    iweights = np.bincount(item, weights=weights).astype(np.int64)
    order = np.argsort(-iweights, kind="stable")
    item_part = np.empty(len(iweights), dtype=np.int32)
    item_part[order] = pack_least_loaded(iweights[order], np.zeros(k, dtype=np.int64))
    return item_part[item]


def _components(xadj: np.ndarray, adjncy: np.ndarray, n: int) -> np.ndarray:
    """Connected component of every vertex of a small CSR graph (at most k vertices with edges here)."""
    component = np.full(n, -1, dtype=np.int64)
    count = 0
    for start in range(n):
        if component[start] >= 0:
            continue
        component[start] = count
        stack = [start]
        while stack:
            v = stack.pop()
            for u in adjncy[xadj[v]:xadj[v + 1]]:
                if component[u] < 0:
                    component[u] = count
                    stack.append(int(u))
        count += 1
    return component


def partition_coarse(xadj: np.ndarray, adjncy: np.ndarray, ew: np.ndarray, csizes: np.ndarray,
                     k: int, seed: int, balance: float, method: str = "kway") -> np.ndarray:
    """Part of every cluster: METIS on the weighted coarse graph (LPT packing when it is trivial).

    The coarse graph is given as symmetric CSR (``xadj``, ``adjncy``, edge weights ``ew``);
    ``csizes`` are the node weights.
    """
    num_clusters = len(csizes)
    trivial = trivial_parts(xadj, adjncy, csizes, k, balance)
    if trivial is not None:
        return trivial
    import pymetis  # in-memory on the bounded coarse graph only

    # METIS gives seeds 0 and 1 the same partition (every graph tried): seed s asks it for s + 1, so
    # the trials' seeds 0, 1, 2 are three partitions without a wasted call
    opts = pymetis.Options(ufactor=max(1, int(round((balance - 1.0) * 1000))), seed=(int(seed) + 1) & 0x7FFFFFFF)
    if method == "kway-vol":
        opts.objtype = 1   # METIS_OBJTYPE_VOL (cluster sizes are not passed as vsize: measured worse)
    if hasattr(pymetis, "CSRAdjacency"):   # pymetis >= 2025 deprecates xadj=/adjncy=
        graph = {"adjacency": pymetis.CSRAdjacency(xadj, adjncy)}
    else:
        graph = {"xadj": xadj, "adjncy": adjncy}
    try:
        res = pymetis.part_graph(k, **graph, vweights=csizes, eweights=ew, options=opts,
                                 recursive=method == "recursive")
    except RuntimeError as exc:
        # METIS (its GKlib) traps SIGTERM, and its own out-of-memory abort, for the length of a call and
        # returns an error, which pymetis raises as "Caught an unknown exception!": the signal is spent
        # there, so the run can only stop here, in one line, its outputs unwound as on any error
        raise GraphStreamError(f"METIS stopped while it partitioned the coarse graph ({num_clusters} clusters, "
                               f"k = {k}): it stops on SIGTERM and when out of memory ({exc})") from exc
    return np.asarray(res[1], dtype=np.int32)


def distinct_solutions(solve_attempt: Callable[[int], np.ndarray], trials: int
                       ) -> Iterator[tuple[int, np.ndarray]]:
    """Up to ``trials`` different coarse partitions, each with its attempt, from the attempts 0, 1, ...
    (at most 2 x trials calls of ``solve_attempt``): a solver may give two seeds the same partition
    (METIS did for 0 and 1, so the default's three trials were two, one of them judged twice;
    partition_coarse now avoids that pair), and a repeated partition is not another trial."""
    seen: list[np.ndarray] = []
    for i in range(2 * trials):
        cpart = solve_attempt(i)
        if any(np.array_equal(cpart, other) for other in seen):
            continue
        seen.append(cpart.copy())   # the caller moves clusters in its copy
        yield i, cpart
        if len(seen) == trials:
            return


class SolvedAhead:
    """``attempt -> parts``: the attempts (indices into ``attempts``) in ``ahead`` solved by ``processes``
    child processes started now (dealt out in turn), the others here.

    A context manager: leaving it stops the children still running and removes ``work``, the
    folder of their files.
    """

    def __init__(self, attempts: list[Attempt], graph: CoarseGraph, ahead: list[int], work: Path,
                 processes: int):
        self.attempts, self.graph, self.work = attempts, graph, work
        self.children: list[tuple[subprocess.Popen, list[int], Path]] = []
        self.owner_of: dict[int, int] = {}
        # the largest peak RSS a child reported (set on leaving): the partition's own peak leaves them out
        self.children_peak_rss_bytes = 0
        if ahead and processes >= 1:
            try:
                self._start(list(ahead), processes)
            except OSError as e:   # a full disk, say: the attempts are solved here, as without children
                log(f"coarse-refine: no child processes for the coarse trials ({e}); solving them here")
                self.__exit__()
                self.children, self.owner_of = [], {}

    def __call__(self, attempt: int) -> np.ndarray:
        child = self.owner_of.pop(attempt, None)
        if child is not None:
            parts = self._wait(child, attempt)
            if parts is not None:
                return parts
        return solve(self.attempts[attempt].solver, self.graph, self.attempts[attempt].seed)

    def _start(self, ahead: list[int], processes: int) -> None:
        # a fresh folder: a killed run in a kept work folder leaves parts of another coarse graph there
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        graph_path = self.work / "coarse-graph.npz"
        np.savez(graph_path, **asdict(self.graph))
        env = dict(os.environ)
        # the child imports this package from where this process did, whatever the caller's sys.path
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env["NUMBA_NUM_THREADS"] = "1"   # a child calls the solver only
        for i in range(processes):
            mine = ahead[i::processes]
            job = self.work / f"coarse-job-{i}.json"
            job.write_text(json.dumps({"graph": str(graph_path), "out": str(self.work),
                                       "attempts": [{"index": a, **asdict(self.attempts[a])} for a in mine]}))
            err = self.work / f"coarse-job-{i}.err"
            with open(err, "wb") as stderr:
                proc = subprocess.Popen([sys.executable, "-m", __name__, str(job)], env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
            self.children.append((proc, mine, err))
            for a in mine:
                self.owner_of[a] = i

    def running(self) -> int:
        """Children still solving (each holds a core)."""
        return sum(proc.poll() is None for proc, _, _ in self.children)

    def _wait(self, child: int, attempt: int) -> np.ndarray | None:
        proc, _, err = self.children[child]
        path = _part_path(self.work, attempt)
        name = self._name(attempt)
        while not path.exists():
            if proc.poll() is not None and not path.exists():
                detail = err.read_text(errors="replace").strip().splitlines()[-1:] if err.exists() else []
                log(f"coarse-refine: the child process solving {name} exited with {proc.returncode}"
                    f"{': ' + detail[0] if detail else ''}; solving it here")
                return None
            time.sleep(0.005)
        parts = np.load(path)
        k = self.attempts[attempt].solver.k
        whole = parts.shape == self.graph.csizes.shape and (len(parts) == 0 or 0 <= parts.min() <= parts.max() < k)
        if not whole:   # never trusted unchecked: a bad file costs the attempt being solved here
            log(f"coarse-refine: {path} is not a part below {k} for each of "
                f"{len(self.graph.csizes)} clusters; solving {name} here")
            return None
        return parts

    def _name(self, attempt: int) -> str:
        a = self.attempts[attempt]
        return f"{a.solver.solver} seed {a.seed}"

    def __enter__(self) -> SolvedAhead:
        return self

    def __exit__(self, *exc) -> None:
        for i, (proc, mine, _) in enumerate(self.children):
            done = all(_part_path(self.work, a).exists() for a in mine)
            try:
                proc.wait(timeout=5 if done else 0)   # a child whose parts are all written is exiting
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            try:   # written by a child that finished its attempts (a killed one has none)
                peak = int(_peak_path(self.work / f"coarse-job-{i}.json").read_text())
                self.children_peak_rss_bytes = max(self.children_peak_rss_bytes, peak)
            except (OSError, ValueError):
                pass
        if self.children or self.work.exists():
            shutil.rmtree(self.work, ignore_errors=True)


def solved_ahead(attempts: list[Attempt], graph: CoarseGraph, trials: int, work: Path) -> SolvedAhead:
    """The trials' attempts after the first solved ahead by up to ``usable_cores() - 1`` children, when
    the coarse graph is large enough to pay for their start (and there is a core to spare)."""
    ahead = list(range(1, trials))
    processes = min(len(ahead), usable_cores() - 1)
    # sys.executable is empty in an embedding interpreter that cannot name its Python
    if len(graph.csizes) < AHEAD_MIN_CLUSTERS or attempts[0].solver.k <= 1 or not sys.executable:
        processes = 0
    return SolvedAhead(attempts, graph, ahead, work, processes)


def _part_path(work: Path, attempt: int) -> Path:
    return work / f"coarse-part-{attempt}.npy"


def _peak_path(job: Path) -> Path:
    return job.with_suffix(".peak")


def _child(job_path: str) -> None:
    """A child: solve the job's attempts in order, each written complete before it is visible."""
    job = json.loads(Path(job_path).read_text())
    with np.load(job["graph"]) as z:
        graph = CoarseGraph(z["xadj"], z["adjncy"], z["ew"], z["csizes"])
    out = Path(job["out"])
    for a in job["attempts"]:
        parts = solve(CoarseSolver(**a["solver"]), graph, a["seed"])
        tmp = out / f".coarse-part-{a['index']}.tmp.npy"
        np.save(tmp, parts)
        os.replace(tmp, _part_path(out, a["index"]))
    _peak_path(Path(job_path)).write_text(str(peak_rss_bytes()))


if __name__ == "__main__":
    _child(sys.argv[1])
