"""Streaming graph partitioners: one entry point, one module per algorithm.

``partition(store, k, algo)`` checks the parameters against one table, runs
the algorithm module's ``run(store, k, *, seed, balance, work_dir, **params)
-> PartitionPlan`` and fills in the shared metrics (replication factor of the
parts the builder writes: inner + halo, the halo being in-neighbours on a
directed store; balances, seconds, passes, peak RSS). Algorithm modules are
imported lazily, so importing this package compiles nothing.

Vertex partitioners: ``coarse-refine`` (the default, our best), ``spring``,
``hash`` (mode "vertex"). Edge partitioners (write ``part[e]`` to a Zarr
array and derive ``owner[v]``): ``2ps-l``, ``hdrf``, ``dbh``, ``hash``
(mode "edge").

With ``client=`` (a ``distributed.Client``) an algorithm whose ``run`` takes
``client`` gets it (coarse-refine's rounds are tasks); the others, whose
greedy streaming pass is sequential by nature, run whole as one task on one
worker (:func:`graphstream.partition._driver.run_on_cluster`); the metrics
pass is tasks over edge chunks. Same plan as in-process.
"""
from __future__ import annotations

import importlib
import math
import numbers
import os
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._atomic import check_outputs_apart, disk_full, for_workers, prepare_work_dir, scratch_dir
from .._resources import Stopwatch, peak_rss_bytes
from ..errors import DiskFullError, ParameterError, path_argument, whole_number, yes_or_no
from .plan import MAX_PARTS, PartitionPlan

if TYPE_CHECKING:
    from distributed import Client

    from ..store import GraphStore

DEFAULT_ALGORITHM = "coarse-refine"

#: algorithm name -> module that defines ``run``
ALGORITHMS: dict[str, str] = {
    "coarse-refine": "graphstream.partition.coarse_refine",
    "spring": "graphstream.partition.spring",
    "2ps-l": "graphstream.partition.twops",
    "hdrf": "graphstream.partition.hdrf",
    "dbh": "graphstream.partition.dbh",
    "hash": "graphstream.partition.hash",
}


@dataclass(frozen=True, slots=True)
class Param:
    """One algorithm parameter: its check, and the message when it fails."""
    check: Callable[[Any], bool]
    expect: str
    doc: str


# numbers.Real and numbers.Integral: numpy's numbers too, as k and seed take them (a value from an array)
def _positive(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and 0 < x < math.inf


def _nonneg(x) -> bool:   # finite: HDRF's lambda = inf made every score NaN, every edge went to part 0
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and 0 <= x < math.inf


def _pos_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and x >= 1


DEFAULT_BALANCE = 1.05
#: the algorithms that take ``balance`` (coarse-refine: nodes a part; 2ps-l: edges a part; spring: its
#: clusters' merge cap, beta, in nodes a part)
BALANCED = ("coarse-refine", "2ps-l", "spring")

#: the one table of algorithm parameters (defaults live in each module's config)
PARAMS: dict[str, dict[str, Param]] = {
    "spring": {
        "tau": Param(_positive, "a finite number > 0", "cluster volume cap (default: see docs/partitioners.md)"),
        "tau_factor": Param(_positive, "a finite number > 0", "tau as a multiple of |E|/k"),
        "beta": Param(lambda x: _positive(x) and x >= 1, "a finite number >= 1", "merge size cap, times n/k"),
    },
    "2ps-l": {
        "passes": Param(_pos_int, "an integer >= 1", "streaming clustering passes (re-streaming keeps state)"),
    },
    "hdrf": {
        "lam": Param(_nonneg, "a finite number >= 0", "weight of the balance term (lambda)"),
        "eps": Param(_positive, "a finite number > 0", "epsilon in the balance term's denominator"),
    },
    "dbh": {},
    "hash": {
        "mode": Param(lambda x: x in ("vertex", "edge"), "'vertex' or 'edge'",
                      "vertex: owner = hash(v); edge: part = hash(min(u,v), max(u,v))"),
    },
    # coarse-refine validates its own parameters (its module owns them)
    "coarse-refine": {},
}
PASS_THROUGH = {"coarse-refine"}

#: CLI option names differ from Python keywords where Python forbids them
CLI_ALIASES = {"lambda": "lam"}


def check_num_parts(k) -> int:
    """``k`` as an int; a :class:`ParameterError` unless it is a whole number of parts in [1, MAX_PARTS]
    (here, and before anything is opened: the partition and estimate commands, the service)."""
    return whole_number(k, "k", 1, MAX_PARTS)


def check_parameters(store: GraphStore, k, algo: str, seed, balance, params: dict) -> None:
    """Raise :class:`ParameterError` naming the first bad parameter."""
    check_num_parts(k)   # None too: check_arguments takes it as "not given yet"
    check_arguments(k, algo, seed, balance, params)
    if store.num_nodes == 0 or store.num_edges == 0:
        raise ParameterError(f"{store.path}: empty graph ({store.num_nodes} nodes, {store.num_edges} edges); "
                             "nothing to partition")
    if k > store.num_nodes:
        raise ParameterError(f"k = {k} exceeds the number of nodes ({store.num_nodes}) of {store.path}")


def check_arguments(k, algo: str, seed, balance, params: dict) -> None:
    """What :func:`check_parameters` refuses without the store (the CLI's and the service's preflight):
    the algorithm, k (None: not given yet), the seed, the balance and the algorithm's parameters."""
    if algo not in ALGORITHMS:
        raise ParameterError(f"unknown algorithm {algo!r}; choose one of {', '.join(ALGORITHMS)}")
    if k is not None:
        check_num_parts(k)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**63:   # int64
        raise ParameterError(f"seed must be an integer in [0, 2**63), got {seed!r}")
    if balance is not None and algo not in BALANCED:
        raise ParameterError(f"balance does not apply to {algo}, which balances its parts by its own rule "
                             f"(it applies to {', '.join(BALANCED)}; docs/partitioners.md)")
    if balance is not None and (isinstance(balance, bool) or not isinstance(balance, numbers.Real)
                                or not 1.0 <= balance < float("inf")):
        raise ParameterError(f"balance must be a finite number >= 1.0, got {balance!r}")
    table = PARAMS[algo]
    for name, value in params.items():
        if name not in table:
            if algo in PASS_THROUGH:
                continue
            known = ", ".join(table) or "none"
            raise ParameterError(f"parameter {name!r} does not apply to {algo} (its parameters: {known})")
        if not table[name].check(value):
            raise ParameterError(f"{algo}: {name} must be {table[name].expect}, got {value!r}")


def load_algorithm(algo: str):
    """The module implementing ``algo`` (imported on first use)."""
    if algo not in ALGORITHMS:
        raise ParameterError(f"unknown algorithm {algo!r}; choose one of {', '.join(ALGORITHMS)}")
    try:
        return importlib.import_module(ALGORITHMS[algo])
    except ModuleNotFoundError as exc:
        if exc.name == ALGORITHMS[algo]:
            raise ParameterError(f"algorithm {algo!r} is not available in this build "
                                 f"(module {ALGORITHMS[algo]} missing)") from exc
        raise


def partition(store: GraphStore | str | os.PathLike, k: int, algo: str = DEFAULT_ALGORITHM, *,
              seed: int = 0, balance: float | None = None, work_dir: str | os.PathLike | None = None,
              metrics: bool = True, client: Client | None = None, **params) -> PartitionPlan:
    """Partition ``store`` into ``k`` parts with ``algo``; return the plan with its metrics.

    Args:
        store: an open :class:`GraphStore` or the path of one.
        k: number of parts, 1 <= k <= MAX_PARTS (and <= num_nodes).
        algo: one of :data:`ALGORITHMS`.
        seed: seeds every random choice (hashes, tie breaks); same seed, same plan.
        balance: capacity factor over the mean part size: coarse-refine's nodes, 2ps-l's edges, SPRING's
            merge cap (its ``beta``, nodes) (default 1.05; a value of k or more caps nothing, and is
            recorded as k). The others balance by rules of their own (HDRF's balance term, DBH's and
            hash's hashes)
            and refuse one.
        work_dir: where edge partitioners write ``part[e]`` (the plan's ``edge_parts_path``) and
            coarse-refine its vertex stream. Default: a scratch folder removed before this returns,
            the plan's ``edge_parts_path`` then None: ``part[e]`` takes 2 bytes an edge, which no
            caller would know to delete (the builder needs the owner only).
        metrics: compute the streamed quality metrics (one or more extra passes).
        client: a ``distributed.Client``: run on its dask cluster (see the module's docstring);
            ``work_dir`` must then be a folder every worker sees (default: a scratch folder beside
            the store, removed at the end, and the plan's ``edge_parts_path`` with it).
        **params: the algorithm's own parameters (see :data:`PARAMS`).

    Raises:
        ParameterError: bad k, empty graph, unknown algorithm or parameter.
    """
    from ..store.graph import open_store, store_for_workers  # here: coarse-refine's trial children import this package
    store = open_store(store)
    if work_dir is not None:
        work_dir = path_argument(work_dir, "work_dir")
    if client is not None:   # the workers' paths
        store, work_dir = store_for_workers(store), for_workers(work_dir)
    if work_dir is not None:
        check_outputs_apart({}, {"store": store.path}, {"work_dir": work_dir})
    check_parameters(store, k, algo, seed, balance, params)
    metrics = yes_or_no(metrics, "metrics")
    prepare_work_dir(work_dir)
    # numpy scalars too: the plan's metrics are JSON; a cap of k x the mean holds every node or edge
    k, seed = int(k), int(seed)
    balance = min(float(DEFAULT_BALANCE if balance is None else balance), float(k))
    module = load_algorithm(algo)
    if client is not None:
        from ._driver import on_cluster
        return on_cluster(client, store, k, algo, seed=seed, balance=balance, work_dir=work_dir,
                          metrics=metrics, params=params)
    watch = Stopwatch()
    with scratch_dir("graphstream-parts-") if work_dir is None else nullcontext(work_dir) as folder:
        try:
            plan = module.run(store, k, seed=seed, balance=balance, work_dir=folder, **params)
        except OSError as exc:   # the partitioners write only their work files: name where they went
            if not disk_full(exc, folder):
                raise
            raise DiskFullError(f"{folder}: disk full writing the partitioner's work files "
                                f"({getattr(exc, 'strerror', None) or exc}); free space there, or pass --work-dir "
                                "on another disk (a temporary folder goes where TMPDIR says)") from exc
    if work_dir is None:
        plan.edge_parts_path = None   # removed with the scratch folder
    return finish_plan(plan, store, k, algo, watch.seconds, metrics)


def finish_plan(plan: PartitionPlan, store: GraphStore, k: int, algo: str, seconds: float, metrics: bool,
                client: Client | None = None, work_dir: str | os.PathLike | None = None) -> PartitionPlan:
    """The shared metrics of a plan: the streamed quality figures unless the algorithm gave them, then
    seconds, passes, peak RSS (of this process) and the run's identity."""
    m = plan.metrics
    if metrics and "replication_factor" not in m:
        from .metrics import vertex_partition_metrics
        mwatch = Stopwatch()
        m.update(vertex_partition_metrics(store, plan.owner, k, client=client, work_dir=work_dir))
        m["metrics_seconds"] = mwatch.seconds
    m.setdefault("seconds", seconds)
    m.setdefault("passes", None)
    m["peak_rss_bytes"] = peak_rss_bytes()
    # num_parts: the name the manifest, the dynamic partitioners and report use; k: this command's flag
    m.update({"algorithm": algo, "k": k, "num_parts": k, "num_nodes": store.num_nodes, "num_edges": store.num_edges})
    return plan


__all__ = ["ALGORITHMS", "DEFAULT_ALGORITHM", "MAX_PARTS", "PARAMS", "PartitionPlan", "check_parameters",
           "finish_plan", "load_algorithm", "partition"]
