"""The common tail of every edge partitioner (part[e] on disk -> owner[v] and metrics), and every
partitioner's run on a dask cluster (:func:`on_cluster`)."""
from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._atomic import scratch_dir
from .._report import track
from .._resources import Stopwatch
from ..cluster import check_visible, run_task, save_shard, shared_scratch_parent
from ..store import GraphStore, degree_pass, open_store
from .edge_parts import EdgePartWriter, owner_from_edge_parts, owner_from_edge_parts_on_cluster, parts_dir
from .metrics import edge_load_balance
from .plan import PartitionPlan

if TYPE_CHECKING:
    from distributed import Client

PARTS_NAME = "edge_parts.zarr"


def assign_edges(store: GraphStore, k: int, algorithm: str, work_dir: str | os.PathLike | None,
                 step: Callable, batch_size: int | None = None) -> str:
    """One pass: ``step(batch) -> parts`` for every batch, written chunk-aligned to disk.

    The prefetching reader decompresses batch i+1 and the writer compresses
    batch i-1 while ``step`` (a numba kernel) works on batch i.
    """
    path = str(parts_dir(work_dir) / PARTS_NAME)
    writer = EdgePartWriter(path, store, k, algorithm)
    try:
        for batch in track(store.stream(batch_size), store.num_edges, f"{algorithm}: assign edges", size=len):
            writer.write(batch.start, step(batch))
        return writer.close()
    except BaseException:
        writer.abort()
        raise


def edge_plan(store: GraphStore, k: int, algorithm: str, part_path: str, loads: np.ndarray,
              params: dict, passes: int, *, vertex_cut: float | None = None,
              max_degree: int | None = None, owner_pass: bool = True) -> PartitionPlan:
    """owner[v] by majority of v's edges, plus the edge partition's own metrics.

    ``vertex_cut``: the RF already known from the partitioner's replica sets
    (``vertex_cut_rf_from_bits``); otherwise the owner pass's counts give it.
    ``owner_pass`` False: the plan is returned without its owner (None), for
    :func:`complete_edge_plan` to add on a cluster.
    """
    metrics = {
        "vertex_cut_rf": vertex_cut,
        "edge_load_balance": edge_load_balance(loads),
        "part_edge_loads": np.asarray(loads).astype(np.int64).tolist(),
        "passes": passes,
    }
    plan = PartitionPlan(algorithm=algorithm, num_parts=k, owner=None, params=params, metrics=metrics,
                         edge_parts_path=part_path)
    if not owner_pass:
        plan.metrics["max_degree"] = max_degree   # for complete_edge_plan, which removes it
        return plan
    return _with_owner(plan, *owner_from_edge_parts(store, part_path, k, max_degree))


def complete_edge_plan(plan: PartitionPlan, store: GraphStore, client: Client, work_dir) -> PartitionPlan:
    """The owner pass of a plan made with ``owner_pass=False``, as tasks of the cluster."""
    max_degree = plan.metrics.pop("max_degree")
    found = owner_from_edge_parts_on_cluster(client, store, plan.edge_parts_path, plan.num_parts, max_degree,
                                             work_dir)
    return _with_owner(plan, *found)


def _with_owner(plan: PartitionPlan, owner: np.ndarray, owner_passes: int, counted_rf: float) -> PartitionPlan:
    plan.owner = owner
    if plan.metrics["vertex_cut_rf"] is None:   # the owner pass's count table gives it (no separate pass)
        plan.metrics["vertex_cut_rf"] = counted_rf
    plan.metrics["passes"] += owner_passes
    return plan


# -- on a dask cluster -------------------------------------------------------------------------

def on_cluster(client: Client, store: GraphStore, k: int, algo: str, *, seed: int, balance: float,
               work_dir: str | os.PathLike | None, metrics: bool, params: dict[str, Any]) -> PartitionPlan:
    """:func:`graphstream.partition.partition` on the cluster of ``client``.

    An algorithm whose ``run`` takes ``client`` runs here and submits its own
    tasks (coarse-refine's rounds). The others run whole as one task on one
    worker (their greedy streaming pass is sequential by nature), which saves
    ``owner`` to the work folder and returns the rest of the plan. The metrics
    pass is then tasks over edge chunks.
    """
    from . import finish_plan, load_algorithm

    module = load_algorithm(algo)
    keep_edge_parts = work_dir is not None   # made by partition() (prepare_work_dir) when given
    with ExitStack() as stack:
        if work_dir is None:   # beside the store: every worker must see it (a local /tmp is not shared)
            work_dir = stack.enter_context(scratch_dir("graphstream-partition-", shared_scratch_parent(store.path)))
        check_visible(client, store.path, work_dir)
        watch = Stopwatch()
        if "client" in inspect.signature(module.run).parameters:
            plan = module.run(store, k, seed=seed, balance=balance, work_dir=work_dir, client=client, **params)
        else:
            plan = _greedy_pass_as_one_task(client, module, store, k, algo, seed, balance, Path(work_dir), params)
        plan = finish_plan(plan, store, k, algo, watch.seconds, metrics, client=client, work_dir=work_dir)
        if not keep_edge_parts:
            plan.edge_parts_path = None   # it was in the scratch folder, removed now
    return plan


def _greedy_pass_as_one_task(client: Client, module, store: GraphStore, k: int, algo: str, seed: int,
                             balance: float, work_dir: Path, params: dict[str, Any]) -> PartitionPlan:
    """A greedy streaming partitioner on the cluster: its passes that are parallel by nature (the degree
    pass before, the owner pass of an edge partitioner after) as tasks over edge chunks, the greedy pass,
    sequential by nature, as one task on one worker."""
    takes = inspect.signature(module.run).parameters
    owner_path = work_dir / f"owner-{algo}-{os.getpid()}.npy"
    degree_path = work_dir / f"degree-{algo}-{os.getpid()}.npy" if "degree" in takes else None
    cluster_seconds = {}   # the phases run as the cluster's tasks: the one task's own laps found them done
    try:
        if degree_path is not None:
            watch = Stopwatch()
            save_shard(degree_path, degree_pass(store, params.get("batch_size"), client=client,
                                                work_dir=work_dir).total)
            cluster_seconds["degrees"] = watch.seconds
        fields = run_task(client, f"{algo}: partition (one worker)", partition_task, store.path, k, algo, seed,
                          balance, str(work_dir), params, str(owner_path),
                          None if degree_path is None else str(degree_path), "owner_pass" not in takes)
        plan = PartitionPlan(owner=np.load(owner_path) if owner_path.exists() else None, **fields)
    finally:
        for path in (owner_path, degree_path):
            if path is not None:
                path.unlink(missing_ok=True)
    if plan.owner is None:
        watch = Stopwatch()
        plan = complete_edge_plan(plan, store, client, work_dir)
        cluster_seconds["owner"] = watch.seconds
    phases = plan.metrics.get("phase_seconds")
    if isinstance(phases, dict):
        phases.update({name: seconds for name, seconds in cluster_seconds.items() if name in phases})
    return plan


def partition_task(store_path: str, k: int, algo: str, seed: int, balance: float, work_dir: str,
                   params: dict[str, Any], owner_path: str, degree_path: str | None = None,
                   owner_pass: bool = True) -> dict[str, Any]:
    """Task: run ``algo`` whole on this worker; ``owner`` saved to ``owner_path``, the plan's other
    fields returned (small: parameters, metrics, the part[e] path). ``degree_path``: the total degrees,
    counted by the cluster before (for the algorithms whose first pass they are). ``owner_pass`` False:
    an edge partitioner's plan comes back without its owner (the cluster's tasks add it)."""
    from . import load_algorithm

    if degree_path is not None:
        params = {**params, "degree": np.load(degree_path)}
    if not owner_pass:
        params = {**params, "owner_pass": False}
    plan = load_algorithm(algo).run(open_store(store_path), k, seed=seed, balance=balance, work_dir=work_dir,
                                    **params)
    if plan.owner is not None:
        save_shard(owner_path, np.asarray(plan.owner))
    return {"algorithm": plan.algorithm, "num_parts": plan.num_parts, "params": plan.params,
            "metrics": plan.metrics, "edge_parts_path": plan.edge_parts_path}
