"""PyG's distributed partition format, written from a graphstream partitioned dataset.

The layout is the one ``torch_geometric.distributed.Partitioner`` writes for
a homogeneous graph and ``LocalGraphStore.from_partition`` /
``LocalFeatureStore.from_partition`` read (PyG 2.5 to 2.8)::

    OUT/META.json              {"num_parts", "is_hetero": false, "is_sorted": true, ...}
    OUT/node_map.pt            int64 (num_nodes,): the part of every node
    OUT/edge_map.pt            int64 (num_edges,): the part of every edge
    OUT/part_N/graph.pt        {"row", "col", "edge_id", "size"}: the part's edges in global ids, sorted by col
    OUT/part_N/node_feats.pt   {"global_id", "feats": {"x", "y", "<name>_mask"}}: rows of the inner nodes
                               (``feats`` holds what the parts have: possibly only some, or none)
    OUT/part_N/edge_feats.pt   {} (graphstream parts carry no edge data)

and, as PyG's distributed examples keep them beside the partitions:

    OUT/label.pt               int64 labels of all nodes by global id (``feature_store.labels``), when
                               the parts have labels
    OUT/<name>_idx/partitionN.pt   global ids of part N's inner nodes in each mask (train_idx, ...)

PyG keeps the original node ids (no renumbering). Edge ids are new: edges
are numbered part after part in their CSR order, ``edge_offsets[p] + rank``.
``edge_map.pt`` is O(num_edges): it is filled through a memory-mapped
scratch file inside the output, so RAM stays O(num_nodes + one part).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._atomic import allocated_memmap, atomic_dir
from .._report import log, progress, warn
from .._resources import Stopwatch, peak_rss_bytes
from ..cluster import check_visible, clear_task_staging, publish_dir, run_tasks, task_staging_dir
from ..errors import GraphStreamError
from . import (
    ExportResult,
    id_maps,
    inner_edges,
    inner_num_edges,
    missing_note,
    node_data_names,
    node_rows,
    open_for_export,
)

if TYPE_CHECKING:
    from distributed import Client

    from ..store.partitions import Part

# graphstream node data name -> PyG attribute name (``Data.x``, ``Data.y``).
ATTR_NAMES = {"features": "x", "labels": "y"}


def _import_torch():
    try:
        import torch
    except ImportError as exc:
        raise GraphStreamError(f"exporting to PyG needs torch ({exc}); install graphstream[train]") from exc
    return torch


def export(parts_dir: Path, out: Path, *, overwrite: bool = False, client: Client | None = None) -> ExportResult:
    """Write ``parts_dir`` as a PyG partition folder ``out`` (open it with ``LocalGraphStore.from_partition``).

    ``client``: write the parts as tasks on its dask cluster (one per part; the same bytes).
    """
    watch = Stopwatch()
    torch = _import_torch()
    dataset = open_for_export(parts_dir)
    k, n = len(dataset), dataset.num_nodes
    empty = [part.index for part in dataset if part.num_inner == 0]
    if empty:   # torch_geometric's LocalFeatureStore.from_partition fails on one (max() of no ids)
        raise GraphStreamError(f"{parts_dir}: part {empty[0]} owns no nodes ({len(empty)} such parts of {k}); "
                               "PyG cannot load a partition without nodes: partition into fewer parts")
    maps = id_maps(dataset)
    num_edges = int(maps.edge_offsets[-1])
    names, missing = node_data_names(dataset[0])
    masks = [name for name in names if name not in ATTR_NAMES]
    has_labels = "labels" in names
    edge_ranges = [(int(maps.edge_offsets[p]), int(maps.edge_offsets[p + 1])) for p in range(k)]
    with atomic_dir(out, overwrite) as tmp:
        for name in masks:
            (tmp / _idx_folder(name)).mkdir()
        if client is None:
            with progress(k, "export pyg", unit="part") as bar:
                part_rows = []
                for p, part in enumerate(dataset):
                    part_rows.append(write_part(torch, part, tmp, tmp, *edge_ranges[p], n, names, masks))
                    bar.update(1)
        else:
            check_visible(client, parts_dir, tmp)
            part_rows = run_tasks(client, "export pyg", export_part, [(p, *edge_ranges[p]) for p in range(k)],
                                  unit="part", parts_dir=str(parts_dir), folder=str(tmp), num_nodes=n,
                                  names=names, masks=masks)
            clear_task_staging(tmp)   # what the tasks of a killed worker had begun
        torch.save(torch.from_numpy(maps.owner.astype(np.int64)), tmp / "node_map.pt")
        # allocated first: a full disk is an ENOSPC error (exit 2), not a SIGBUS at a store
        edge_map = allocated_memmap(tmp / ".edge_map.scratch", np.int64, (num_edges,))
        for p, (lo, hi) in enumerate(edge_ranges):
            edge_map[lo:hi] = p
        edge_map.flush()
        torch.save(torch.from_numpy(edge_map), tmp / "edge_map.pt")
        del edge_map
        (tmp / ".edge_map.scratch").unlink()
        if has_labels:
            labels = allocated_memmap(tmp / ".label.scratch", np.int64, (n,) + tuple(dataset[0].labels.shape[1:]))
            for part in dataset:
                labels[np.asarray(part.global_ids[: part.num_inner], dtype=np.int64)] = \
                    node_rows(part, "labels", part.num_inner)
            labels.flush()
            torch.save(torch.from_numpy(labels), tmp / "label.pt")
            del labels
            (tmp / ".label.scratch").unlink()
        meta = {"num_parts": k, "node_types": None, "edge_types": None, "node_offset": None,
                "is_hetero": False, "is_sorted": True}
        with open(tmp / "META.json", "w", encoding="utf-8") as f:
            json.dump(meta, f)
    note = missing_note(missing, "PyG")
    if note:
        warn(note)
    if dataset.info.halo_hops > 1:   # the halo rows' edges would need their owners' edge ids: not exported
        warn(f"the parts hold complete rows {dataset.info.halo_hops - 1} hop(s) beyond their inner nodes "
            f"(--halo-hops {dataset.info.halo_hops}); the PyG export holds the inner rows' edges only "
            "(halo_hops 1)")
    log(f"exported {k} parts to PyG format: {out}")
    return ExportResult(target="pyg", out=str(out), entry=str(out), num_parts=k, num_nodes=int(n),
                        num_edges=num_edges, node_data=names, seconds=watch.seconds,
                        peak_rss_bytes=peak_rss_bytes(), parts=part_rows, missing_node_data=missing,
                        halo_hops_left_out=dataset.info.halo_hops - 1)


def _idx_folder(mask: str) -> str:
    """``train_mask`` -> ``train_idx``: where PyG's examples keep each part's mask as global ids."""
    return f"{mask[: -len('_mask')]}_idx"


def write_part(torch, part: Part, folder: Path, idx_root: Path, lo: int, hi: int, num_nodes: int,
               names: list[str], masks: list[str]) -> dict[str, int]:
    """``folder/part_N`` (graph, node and edge features) and ``idx_root/<mask>_idx/partitionN.pt`` of
    part N, whose edges get the ids [lo, hi); its row of the result's ``parts``.

    The files are saved under their final names (torch.save records the file's name in the archive).
    """
    p = part.index
    part_dir = folder / f"part_{p}"
    part_dir.mkdir()
    ni = part.num_inner
    gids = np.asarray(part.global_ids, dtype=np.int64)
    src, dst = inner_edges(part)
    # CSR order is dst (= col) ascending, since inner local ids ascend with global ids.
    torch.save({"edge_id": torch.arange(lo, hi, dtype=torch.int64),
                "row": torch.from_numpy(gids[src]),
                "col": torch.from_numpy(gids[dst]),
                "size": (num_nodes, num_nodes)}, part_dir / "graph.pt")
    # the halo the exported edges reach: with --halo-hops above 1 the part holds more, for rows not exported
    num_halo = int(np.unique(src[src >= ni]).size)
    del src, dst
    inner_ids = gids[:ni].copy()
    feats = {}
    for key in names:
        rows = node_rows(part, key, ni)
        if key in masks:
            rows = rows.astype(bool)
            torch.save(torch.from_numpy(inner_ids[rows]), idx_root / _idx_folder(key) / f"partition{p}.pt")
        feats[ATTR_NAMES.get(key, key)] = torch.from_numpy(rows)
    torch.save({"global_id": torch.from_numpy(inner_ids), "feats": feats}, part_dir / "node_feats.pt")
    torch.save({}, part_dir / "edge_feats.pt")
    return {"num_inner": ni, "num_halo": num_halo, "num_edges": inner_num_edges(part)}


def export_part(p: int, lo: int, hi: int, parts_dir: str, folder: str, num_nodes: int, names: list[str],
                masks: list[str]) -> dict[str, int]:
    """Task: :func:`write_part` of part ``p`` into a staging folder, then moved into ``folder`` (a rerun
    after a lost worker finds whole files or none)."""
    torch = _import_torch()
    part = open_for_export(parts_dir)[p]
    out = Path(folder)
    stage = task_staging_dir(out, f"part_{p}")
    try:
        for key in masks:
            (stage / _idx_folder(key)).mkdir(parents=True)
        stage.mkdir(exist_ok=True)
        row = write_part(torch, part, stage, stage, lo, hi, num_nodes, names, masks)
        for key in masks:   # the index files first: a published part folder means the part is whole
            name = f"{_idx_folder(key)}/partition{p}.pt"
            os.replace(stage / name, out / name)
        publish_dir(stage / f"part_{p}", out / f"part_{p}")
        return row
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def part_to_pyg(part):
    """One part as a ``torch_geometric.data.Data`` over its local ids (inner nodes first, then halo).

    ``edge_index`` holds the inner rows' edges as ``[src; dst]`` (src feeds
    dst); ``global_id`` the global ids; ``inner_mask`` which nodes the part
    owns; ``x``, ``y`` and ``*_mask`` every node data array the part has,
    halo rows included (train only on ``train_mask & inner_mask``).
    """
    torch = _import_torch()
    try:
        from torch_geometric.data import Data
    except ImportError as exc:
        raise GraphStreamError(f"part_to_pyg() needs torch_geometric ({exc})") from exc
    src, dst = inner_edges(part)
    inner = torch.zeros(part.num_nodes, dtype=torch.bool)
    inner[: part.num_inner] = True
    data = Data(edge_index=torch.from_numpy(np.stack([src, dst])), num_nodes=part.num_nodes,
                global_id=torch.from_numpy(np.asarray(part.global_ids, dtype=np.int64)), inner_mask=inner)
    for key in part.node_files:
        data[ATTR_NAMES.get(key, key)] = torch.from_numpy(node_rows(part, key))
    return data
