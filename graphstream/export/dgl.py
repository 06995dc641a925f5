"""DistDGL's partition format, written from a graphstream partitioned dataset.

The layout is the one ``dgl.distributed.partition_graph`` writes and
``dgl.distributed.load_partition`` / ``DistGraph`` read (DGL 2.1)::

    OUT/GRAPH_NAME.json        partition config: node_map/edge_map id ranges, part-N file paths
    OUT/partN/graph.dgl        the part's DGLGraph: inner nodes, then halo nodes; the inner rows' edges
    OUT/partN/node_feat.dgl    "_N/feat", "_N/label", "_N/<name>_mask" rows of the inner nodes (those the
                               parts have: possibly only some, or none)
    OUT/partN/edge_feat.dgl    empty (graphstream parts carry no edge data)
    OUT/partN/orig_nids.dgl    {"_N": original id of each inner node} (as DGL's dist. pipeline writes)

Steps (as ``partition_graph`` does them, but from our parts instead of METIS):

1. Renumber: DistDGL's RangePartitionBook needs each part's inner nodes to
   be one contiguous id range, so node ``v`` of part ``p`` gets
   ``node_offsets[p] + (v's rank among p's inner nodes)``; edges likewise get
   ``edge_offsets[p] + their rank in p's inner rows``. Local ids are unchanged
   (inner nodes first, ascending), so ``nid2localnid`` = new id - range start
   holds, which DistDGL's samplers and DistTensors rely on.
2. Per part, a DGLGraph with ``ndata`` ``_ID`` (new global id, int64),
   ``inner_node`` (uint8), ``part_id`` (int64) and ``edata`` ``_ID``,
   ``inner_edge`` (uint8), in DGL's reserved dtypes. All edges are inner
   (halo_hops = 1: a part holds the in-edges of its inner nodes).
3. Node data of the inner nodes in ``ntype/name`` keys; masks as uint8,
   which is what DGL's own writer leaves on disk for bool masks.
4. The JSON config, written last.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._atomic import atomic_dir
from .._report import log, progress, warn
from .._resources import Stopwatch, peak_rss_bytes
from ..cluster import check_visible, clear_task_staging, publish_dir, run_tasks, save_shard, task_staging_dir
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

NTYPE = "_N"
ETYPE = "_N:_E:_N"
# graphstream node data name -> DGL ndata name (DGL's built-in datasets use these).
NDATA_NAMES = {"features": "feat", "labels": "label"}


def _import_dgl():
    try:
        import dgl  # noqa: F401  (DGL 2.1 needs torch<=2.2.1 and numpy<2: see tools/dgl-env.sh)
        import torch
        from dgl.data.utils import save_tensors
    except ImportError as exc:
        raise GraphStreamError(
            f"exporting to DGL needs the dgl package ({exc}); create its environment with "
            f"`bash tools/dgl-env.sh` and run `.venv-dgl/bin/graphstream export ... --to dgl`") from exc
    return dgl, torch, save_tensors


def _graph_name(name: str | None, out: Path) -> str:
    if name == "":   # was the folder's name without a word
        raise GraphStreamError("--graph-name is empty: give a name, or leave it out for the output folder's")
    name = name or re.sub(r"[^A-Za-z0-9_.-]", "_", out.name) or "graph"
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise GraphStreamError(f"graph name {name!r}: use letters, digits, '_', '.', '-' only")
    return name


def export(parts_dir: Path, out: Path, *, overwrite: bool = False, graph_name: str | None = None,
           client: Client | None = None) -> ExportResult:
    """Write ``parts_dir`` as a DistDGL partition folder ``out`` (config ``out/<graph_name>.json``).

    ``client``: write the parts as tasks on its dask cluster (one per part; the same bytes).
    """
    watch = Stopwatch()
    # the input and the name first: dynamic partitions or a bad name were sent to install dgl
    dataset = open_for_export(parts_dir)
    name = _graph_name(graph_name, out)
    _import_dgl()
    k = len(dataset)
    # Step 1: the renumbering (O(num_nodes)).
    maps = id_maps(dataset)
    names, missing = node_data_names(dataset[0])
    config = {
        "graph_name": name,
        "num_nodes": int(dataset.num_nodes),
        "num_edges": int(maps.edge_offsets[-1]),
        "part_method": str(dataset.manifest.get("algorithm", "graphstream")),
        "num_parts": k,
        "halo_hops": 1,   # the inner rows' edges only, whatever the parts' --halo-hops (see the log note)
        "node_map": {NTYPE: [[int(maps.node_offsets[p]), int(maps.node_offsets[p + 1])] for p in range(k)]},
        "edge_map": {ETYPE: [[int(maps.edge_offsets[p]), int(maps.edge_offsets[p + 1])] for p in range(k)]},
        "ntypes": {NTYPE: 0},
        "etypes": {ETYPE: 0},
    }
    with atomic_dir(out, overwrite) as tmp:
        if client is None:
            with progress(k, "export dgl", unit="part") as bar:
                part_rows = []
                for p, part in enumerate(dataset):
                    part_rows.append(write_part(part, tmp, maps.new_id, maps.owner, int(maps.edge_offsets[p]),
                                                names))
                    bar.update(1)
        else:   # the id maps go to the tasks as files (the scheduler is not a data plane)
            check_visible(client, parts_dir, tmp)
            new_id = str(save_shard(tmp / ".new_id.npy", maps.new_id))
            owner = str(save_shard(tmp / ".owner.npy", maps.owner))
            part_rows = run_tasks(client, "export dgl", export_part,
                                  [(p, int(maps.edge_offsets[p])) for p in range(k)], unit="part",
                                  parts_dir=str(parts_dir), folder=str(tmp), new_id_path=new_id,
                                  owner_path=owner, names=names)
            clear_task_staging(tmp)   # what the tasks of a killed worker had begun
            os.unlink(new_id)
            os.unlink(owner)
        for p in range(k):
            config[f"part-{p}"] = {
                "node_feats": f"part{p}/node_feat.dgl",
                "edge_feats": f"part{p}/edge_feat.dgl",
                "part_graph": f"part{p}/graph.dgl",
            }
        # Step 4: the config, last.
        with open(tmp / f"{name}.json", "w", encoding="utf-8") as f:
            json.dump(config, f, indent=4)
    note = missing_note(missing, "DistDGL")
    if note:
        warn(note)
    if dataset.info.halo_hops > 1:   # the halo rows' edges would need their owners' edge ids: not exported
        warn(f"the parts hold complete rows {dataset.info.halo_hops - 1} hop(s) beyond their inner nodes "
            f"(--halo-hops {dataset.info.halo_hops}); the DistDGL export holds the inner rows' edges and the "
            "halo nodes they reach only (halo_hops 1)")
    log(f"exported {k} parts to DistDGL format: {out / (name + '.json')}")
    return ExportResult(target="dgl", out=str(out), entry=str(out / f"{name}.json"), num_parts=k,
                        num_nodes=int(dataset.num_nodes), num_edges=int(maps.edge_offsets[-1]),
                        node_data=names, seconds=watch.seconds,
                        peak_rss_bytes=peak_rss_bytes(), parts=part_rows, missing_node_data=missing,
                        halo_hops_left_out=dataset.info.halo_hops - 1)


def write_part(part: Part, folder: Path, new_id: np.ndarray, owner: np.ndarray, edge_lo: int,
               names: list[str]) -> dict[str, int]:
    """Steps 2 and 3 for one part: ``folder/partN`` (graph, node data, original ids); its ``parts`` row.
    ``new_id``, ``owner``: the id maps of step 1 (arrays or memory maps)."""
    dgl, torch, save_tensors = _import_dgl()
    p = part.index
    part_dir = folder / f"part{p}"
    part_dir.mkdir()
    ni = part.num_inner
    # Step 2: the part's graph, local ids as in our CSR; with --halo-hops above 1 only the halo nodes
    # the inner rows' edges reach (the outer hops, held for their rows, would be isolated nodes here).
    src, dst = inner_edges(part)
    src, local = halo_in_reach(src, ni, part.num_nodes)
    gids = np.asarray(part.global_ids, dtype=np.int64)[local]
    n_local = gids.size
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n_local, idtype=torch.int64)
    g.ndata[dgl.NID] = torch.from_numpy(np.asarray(new_id[gids]))
    inner = np.zeros(n_local, dtype=np.uint8)
    inner[:ni] = 1
    g.ndata["inner_node"] = torch.from_numpy(inner)
    g.ndata["part_id"] = torch.from_numpy(np.asarray(owner[gids]).astype(np.int64))
    ne = src.size
    g.edata[dgl.EID] = torch.arange(edge_lo, edge_lo + ne, dtype=torch.int64)
    g.edata["inner_edge"] = torch.ones(ne, dtype=torch.uint8)
    dgl.save_graphs(str(part_dir / "graph.dgl"), [g])
    del g, src, dst
    # Step 3: node data of the inner nodes, then the original ids.
    feats = {}
    for key in names:
        rows = node_rows(part, key, ni)
        if key not in NDATA_NAMES:   # a mask
            rows = rows.astype(np.uint8)
        feats[f"{NTYPE}/{NDATA_NAMES.get(key, key)}"] = torch.from_numpy(rows)
    save_tensors(str(part_dir / "node_feat.dgl"), feats)
    save_tensors(str(part_dir / "edge_feat.dgl"), {})
    save_tensors(str(part_dir / "orig_nids.dgl"), {NTYPE: torch.from_numpy(gids[:ni].copy())})
    return {"num_inner": ni, "num_halo": n_local - ni, "num_edges": inner_num_edges(part)}


def halo_in_reach(src: np.ndarray, num_inner: int, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``src`` renumbered over the inner nodes and the halo nodes it names, and those nodes' old local
    ids (ascending, so the inner nodes come first and the halo stays in global id order). At one hop
    every halo node feeds an inner node, and both come back unchanged."""
    halo = np.unique(src[src >= num_inner])
    if halo.size == num_nodes - num_inner:
        return src, np.arange(num_nodes, dtype=np.int64)
    new_local = np.arange(num_inner, dtype=np.int64)
    src = np.where(src < num_inner, src, num_inner + np.searchsorted(halo, src))
    return src, np.concatenate([new_local, halo])


def export_part(p: int, edge_lo: int, parts_dir: str, folder: str, new_id_path: str, owner_path: str,
                names: list[str]) -> dict[str, int]:
    """Task: :func:`write_part` of part ``p`` into a staging folder, renamed into ``folder`` (a rerun
    after a lost worker finds the whole part or none of it)."""
    part = open_for_export(parts_dir)[p]
    out = Path(folder)
    stage = task_staging_dir(out, f"part{p}")
    try:
        row = write_part(part, stage, np.load(new_id_path, mmap_mode="r"), np.load(owner_path, mmap_mode="r"),
                         edge_lo, names)
        publish_dir(stage / f"part{p}", out / f"part{p}")
        return row
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def part_to_dgl(part):
    """One part as a DGLGraph over its local ids (inner nodes first, then halo).

    Edges ``src -> dst`` are the inner rows' edges (src feeds dst's
    aggregation). ``ndata``: ``_ID`` (global id, int64), ``inner_node``
    (bool), and every node data array the part has (``feat``, ``label``,
    ``*_mask``), halo rows included.
    """
    dgl, torch, _ = _import_dgl()
    src, dst = inner_edges(part)
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=part.num_nodes, idtype=torch.int64)
    g.ndata[dgl.NID] = torch.from_numpy(np.asarray(part.global_ids, dtype=np.int64))
    inner = torch.zeros(part.num_nodes, dtype=torch.bool)
    inner[: part.num_inner] = True
    g.ndata["inner_node"] = inner
    for key in part.node_files:
        g.ndata[NDATA_NAMES.get(key, key)] = torch.from_numpy(node_rows(part, key))
    return g
