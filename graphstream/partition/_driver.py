"""The common tail of every edge partitioner: part[e] on disk -> owner[v] and metrics."""
from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from .._report import track
from ..store import GraphStore
from .edge_parts import EdgePartWriter, owner_from_edge_parts, parts_dir
from .metrics import edge_load_balance
from .plan import PartitionPlan

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
              max_degree: int | None = None) -> PartitionPlan:
    """owner[v] by majority of v's edges, plus the edge partition's own metrics.

    ``vertex_cut``: the RF already known from the partitioner's replica sets
    (``vertex_cut_rf_from_bits``); otherwise the owner pass's counts give it.
    """
    owner, owner_passes, counted_rf = owner_from_edge_parts(store, part_path, k, max_degree)
    # the owner pass's count table gives the vertex-cut RF too (no separate pass)
    vc_rf = vertex_cut if vertex_cut is not None else counted_rf
    metrics = {
        "vertex_cut_rf": vc_rf,
        "edge_load_balance": edge_load_balance(loads),
        "part_edge_loads": np.asarray(loads).astype(np.int64).tolist(),
        "passes": passes + owner_passes,
    }
    return PartitionPlan(algorithm=algorithm, num_parts=k, owner=owner, params=params, metrics=metrics,
                         edge_parts_path=part_path)
