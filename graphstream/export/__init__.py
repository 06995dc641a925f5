"""Exporters: a partitioned dataset, rewritten in the partition format of DistDGL or PyG.

``export(parts_dir, out, "dgl" | "pyg")`` reads a folder written by
``graphstream partition --out`` (see ``docs/format.md``) and writes, into a
temporary sibling renamed into place at the end, what
``dgl.distributed.load_partition`` / ``DistGraph`` or
``torch_geometric.distributed.LocalGraphStore.from_partition`` /
``LocalFeatureStore.from_partition`` read. ``docs/export.md`` shows how to
train on the result.

Both formats take the part's edges from its *inner rows* only: row ``v``
lists the nodes that feed ``v``'s aggregation (its neighbours, or its
in-neighbours when directed), so every edge ``u -> v`` is written exactly
once, by the part that owns ``v``, which is how DGL and PyG assign edges to
partitions (by destination). An undirected graph therefore exports with both
directions of each edge, as DGL and PyG represent it.

Node data is optional in both formats (``LocalFeatureStore.from_partition``
reads whatever ``feats`` a part has, DGL's ``load_partition`` any
``node_feat.dgl`` dict): parts built without ``--nodes``, or with features
but no labels, export their structure and whatever node data they have;
``ExportResult.missing_node_data`` names what was absent.

Memory: O(num_nodes) for the id maps, plus one part's edges and node data at a
time (the libraries' writers take whole tensors). The libraries are imported
only by the writer that needs them: the DGL writer needs ``dgl`` (the
``.venv-dgl`` environment made by ``tools/dgl-env.sh``), the PyG writer needs
only ``torch``.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NodeDataError, ParameterError, path_argument

if TYPE_CHECKING:  # the loader is imported lazily: ``graphstream.export`` stays light
    from distributed import Client

    from ..store.partitions import Part, PartitionedDataset

TARGETS = ("dgl", "pyg")
# What a GNN trainer usually wants; neither format requires it (exported when present, named when absent).
USUAL_NODE_DATA = ("features", "labels")


@dataclass
class ExportResult:
    """What an export wrote (the ``--json`` output of ``graphstream export``)."""
    target: str
    out: str
    entry: str                      # the file a trainer opens (DGL's JSON config, PyG's root folder)
    num_parts: int
    num_nodes: int
    num_edges: int                  # directed edges as the library counts them (both directions if undirected)
    node_data: list[str]            # node data written (features, labels, *_mask), as the parts had it
    seconds: float = 0.0
    peak_rss_bytes: int = 0
    parts: list[dict[str, int]] = field(default_factory=list)
    missing_node_data: list[str] = field(default_factory=list)   # of USUAL_NODE_DATA: the parts had none
    halo_hops_left_out: int = 0     # the dataset's halo hops beyond the first, not exported (--halo-hops 2: 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class IdMaps:
    """Where every node lives: its owner part and its position in the parts' concatenated inner nodes.

    ``new_id[v]`` is v's id once each part's inner nodes form a contiguous
    range (``node_offsets[p] .. node_offsets[p + 1]``) in part order, inner
    nodes in the part's own (ascending global id) order. ``edge_offsets`` does
    the same for the edges of the inner rows.
    """
    owner: np.ndarray               # int32 (num_nodes,)
    new_id: np.ndarray              # int64 (num_nodes,)
    node_offsets: np.ndarray        # int64 (num_parts + 1,)
    edge_offsets: np.ndarray        # int64 (num_parts + 1,)


def open_for_export(parts_dir: str | os.PathLike) -> PartitionedDataset:
    """Open a partitioned dataset (refused if it has no parts)."""
    from ..store.partitions import open_partitions

    dataset = open_partitions(parts_dir)
    if len(dataset) == 0:
        raise NodeDataError(f"{parts_dir}: the dataset has no parts")
    return dataset


def node_data_names(part: Part) -> tuple[list[str], list[str]]:
    """(the node data the part has, in export order: features, labels, masks; the usual ones it lacks)."""
    present = set(part.node_files)
    have = [name for name in USUAL_NODE_DATA if name in present] + mask_names(part)
    return have, [name for name in USUAL_NODE_DATA if name not in present]


def missing_note(missing: list[str], target: str) -> str | None:
    """A log line naming the usual node data the export went without (None when nothing is missing)."""
    if not missing:
        return None
    return (f"the parts have no node {' or '.join(missing)} (partitioned without --nodes, or a node data folder "
            f"without {' or '.join(f'{m}.npy' for m in missing)}): the {target} export holds the structure and "
            f"the node data that exists")


def inner_num_edges(part: Part) -> int:
    """Edges of the part's inner rows: the edges it owns (their destination is inner)."""
    return int(part.indptr[part.num_inner])


def inner_edges(part: Part) -> tuple[np.ndarray, np.ndarray]:
    """Local (src, dst) of the inner rows' edges, in CSR order (dst ascending): src feeds dst."""
    indptr = np.asarray(part.indptr[: part.num_inner + 1], dtype=np.int64)
    dst = np.repeat(np.arange(part.num_inner, dtype=np.int64), np.diff(indptr))
    src = np.asarray(part.indices[: indptr[-1]], dtype=np.int64)
    return src, dst


def check_global_ids(part, num_nodes: int) -> None:
    """Every global id of a part, halo included, must be a node: 0 <= id < num_nodes.

    Run by :func:`id_maps` on every part before any output: a halo id out of
    range would otherwise be written as an edge end (PyG's ``row``, DGL's NID).
    """
    gids = np.asarray(part.global_ids, dtype=np.int64)
    bad = np.flatnonzero((gids < 0) | (gids >= num_nodes))
    if bad.size:
        i = int(bad[0])
        kind = "inner" if i < part.num_inner else "halo"
        raise NodeDataError(f"part {part.index}: {part.path / 'global_ids.npy'}: {kind} global id {int(gids[i])} "
                            f"at local id {i} is outside [0, {num_nodes}) ({bad.size} such ids)")


def id_maps(dataset: PartitionedDataset) -> IdMaps:
    """Owner and contiguous new id of every node, from the parts' inner ``global_ids``."""
    n = dataset.num_nodes
    owner = np.full(n, -1, dtype=np.int32)
    new_id = np.full(n, -1, dtype=np.int64)
    node_offsets = np.zeros(len(dataset) + 1, dtype=np.int64)
    edge_offsets = np.zeros(len(dataset) + 1, dtype=np.int64)
    for p, part in enumerate(dataset):
        check_global_ids(part, n)
        inner = np.asarray(part.global_ids[: part.num_inner], dtype=np.int64)
        if np.any(owner[inner] >= 0):
            raise NodeDataError(f"{part.path}: inner nodes also owned by another part")
        owner[inner] = p
        new_id[inner] = node_offsets[p] + np.arange(inner.size, dtype=np.int64)
        node_offsets[p + 1] = node_offsets[p] + inner.size
        edge_offsets[p + 1] = edge_offsets[p] + inner_num_edges(part)
    if np.any(owner < 0):
        raise NodeDataError(f"{dataset.path}: {int(np.count_nonzero(owner < 0))} nodes belong to no part")
    return IdMaps(owner=owner, new_id=new_id, node_offsets=node_offsets, edge_offsets=edge_offsets)


def node_rows(part: Part, name: str, stop: int | None = None) -> np.ndarray:
    """Rows ``0 .. stop`` of a node data file as a writable in-RAM array (the libraries keep tensors)."""
    arr = part.features if name == "features" else part.labels if name == "labels" else part.masks[name]
    stop = part.num_nodes if stop is None else stop
    out = np.array(arr[:stop])
    if name == "labels":
        out = out.astype(np.int64, copy=False)
    return out


def mask_names(part: Part) -> list[str]:
    return sorted(part.masks)


def export(parts_dir: str | os.PathLike | PartitionedDataset, out: str | os.PathLike, target: str, *,
           overwrite: bool = False, graph_name: str | None = None, client: Client | None = None) -> ExportResult:
    """Write the partitioned dataset ``parts_dir`` (its folder, or the dataset opened) to ``out`` in
    ``target``'s format ("dgl" or "pyg").

    ``client``: a ``distributed.Client``; every part is then written by a task of its cluster (the
    same bytes; ``parts_dir`` and ``out``'s folder must be visible to every worker).
    """
    if target not in TARGETS:
        raise ParameterError(f"unknown export target {target!r}: expected one of {', '.join(TARGETS)}")
    from .._atomic import check_output, for_workers
    from ..store.partitions import PartitionedDataset

    if isinstance(parts_dir, PartitionedDataset):   # reopened by the export, which checks it again
        parts_dir = parts_dir.path
    parts_dir, out = path_argument(parts_dir, "parts_dir"), path_argument(out, "out")
    if client is not None:   # the workers' paths
        parts_dir, out = for_workers(parts_dir), for_workers(out)
    check_output(out, overwrite, inputs={"partitioned dataset": parts_dir})  # fail before any work
    module = import_module(f"{__name__}.{target}")
    kwargs: dict[str, Any] = {"overwrite": overwrite, "client": client}
    if target == "dgl":
        kwargs["graph_name"] = graph_name
    return module.export(Path(parts_dir), Path(out), **kwargs)


__all__ = ["ExportResult", "IdMaps", "TARGETS", "export", "id_maps", "inner_edges", "node_data_names",
           "open_for_export"]
