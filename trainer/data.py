"""Parts onto devices: checks, the whole graph reassembled, pinned non-blocking copies.

A *part* is anything with the public attributes of the loader's ``Part``
(:func:`graphstream.open_partitions`): ``global_ids`` (inner nodes first, then
halo), ``num_inner``, a local CSR ``indptr``/``indices`` whose inner rows are
complete, and the part's rows of ``features``, ``labels`` and
``train_mask``/``val_mask``/``test_mask`` (``None`` when absent), possibly
memory-mapped. :class:`ArrayPart` is the in-memory stand-in used by tests and
by :func:`assemble_whole_graph`.

Only inner nodes are training or evaluation targets; halo nodes feed
aggregation only.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import graphstream
from graphstream.errors import NodeDataError, ParameterError
from graphstream.store import PartitionsError

from .models import Block, SparseRows
from .params import integer

# The loader's error: one type for every "these parts are wrong" condition.
PartsError = PartitionsError


@dataclass
class ArrayPart:
    """A part held in memory, with the attribute names of the loader's ``Part``."""
    global_ids: np.ndarray
    num_inner: int
    indptr: np.ndarray
    indices: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    train_mask: np.ndarray | None = None
    val_mask: np.ndarray | None = None
    test_mask: np.ndarray | None = None
    degree: np.ndarray | None = None   # aggregation degree in the whole graph, per local node
    path: str = "<memory>"


@dataclass
class PartSet:
    """The parts of a dataset plus what is known about the whole graph."""
    parts: Sequence[Any]
    num_nodes: int
    num_features: int
    num_classes: int
    path: str = "<memory>"
    manifest: dict | None = None
    whole: bool = False   # the one graph the parts of ``manifest`` make together (centralized training)
    classes_present: int | None = None   # the class ids that occur among the nodes' labels

    @property
    def sparse_classes_note(self) -> str | None:
        """What to warn of when the labels do not make the classes they imply: one class only; a binary
        label coded 0/2 or 1/2 (three outputs); most class ids never occurring (a label far above the
        others, a sentinel for "unlabelled" say, gives the model an output for every id up to it)."""
        present = self.classes_present
        if present == 1:   # all-zero labels trained a one-output model to accuracy 1.0 without a word
            return (f"{self.path}: every node has label {self.num_classes - 1}: there is nothing to classify "
                    "(labels.npy of the node data?)")
        if present is None or present == self.num_classes:
            return None
        if self.num_classes > 2 and present == 2:   # 0/2 or 1/2 coding: three outputs, no ROC-AUC
            return (f"{self.path}: labels span 0..{self.num_classes - 1} but only two classes occur: trained as "
                    f"{self.num_classes} classes (no ROC-AUC, no class weighting); a binary label is coded 0/1")
        if 2 * present >= self.num_classes:
            return None
        return (f"{self.path}: labels span 0..{self.num_classes - 1} but only {present} of those classes occur; "
                f"the model has {self.num_classes} outputs (a sentinel label? a node without a class belongs in no "
                "mask, with label -1)")

    def __len__(self) -> int:
        return len(self.parts)

    @property
    def identity(self) -> str | None:
        """The parts' content, named: a digest of every part's files' checksums from the manifest (not of
        its timings, so the same parts built again are the same), marked ``+whole`` for the graph they
        make together; None for parts built in memory."""
        entries = (self.manifest or {}).get("parts")
        if not isinstance(entries, list):
            return None
        files = [[e.get("path"), sorted((name, (f or {}).get("crc32c")) for name, f in (e.get("files") or {}).items())]
                 for e in entries if isinstance(e, dict)]
        digest = hashlib.sha256(json.dumps(files).encode()).hexdigest()[:16]
        return f"{digest}+whole" if self.whole else digest

    def num_train(self, i: int) -> int:
        return int(np.count_nonzero(inner_mask(self.parts[i], "train_mask")))

    def train_class_counts(self) -> np.ndarray:
        """Training nodes per class over every part (inner nodes only: each node counted once)."""
        counts = np.zeros(self.num_classes, np.int64)
        for part in self.parts:
            labels = np.asarray(part.labels[:int(part.num_inner)])[inner_mask(part, "train_mask")]
            counts += np.bincount(labels.astype(np.int64), minlength=self.num_classes)[:self.num_classes]
        return counts


MASKS = ("train_mask", "val_mask", "test_mask")


def inner_mask(part, name: str) -> np.ndarray:
    """The boolean mask ``name`` over the part's inner nodes (all False if absent)."""
    m = getattr(part, name, None)
    k = int(part.num_inner)
    if m is None:
        return np.zeros(k, bool)
    m = np.asarray(m)
    if len(m) < k:
        raise NodeDataError(f"{_where(part)}: {name} has {len(m)} rows, fewer than its {k} inner nodes")
    return m[:k].astype(bool)


def _where(part) -> str:
    return str(getattr(part, "path", "part"))


def check_parts(parts: Sequence[Any], *, path: str = "<memory>", manifest: dict | None = None) -> PartSet:
    """Check that parts built in memory (:class:`ArrayPart`) fit together; return a :class:`PartSet`.

    Raises :class:`PartsError` for missing or inconsistent parts (CSR shapes
    that disagree, inner nodes that do not cover every node exactly once) and
    :class:`NodeDataError` for feature dimension or label mismatches. A
    dataset folder is opened with :func:`open_parts`, which leaves the
    structural checks to the loader.
    """
    for part in parts:
        _check_csr(part)
    return _training_set(parts, path=path, manifest=manifest, num_nodes=None)


def open_parts(path) -> PartSet:
    """Open a partitioned dataset folder (:func:`graphstream.open_partitions`) for training.

    The loader has validated the manifest and every part's CSR shapes and
    node data rows; what is left is what training needs beyond the format:
    features and labels in every part, one feature dimension, inner nodes
    that cover every node once.
    """
    dataset = graphstream.open_partitions(path)
    return _training_set(list(dataset), path=str(dataset.path), manifest=dict(dataset.manifest),
                         num_nodes=dataset.num_nodes)


def _check_csr(part) -> None:
    """What :func:`graphstream.open_partitions` guarantees for parts it opens, checked for the others."""
    n = len(part.global_ids)
    k = int(part.num_inner)
    if not 0 <= k <= n:
        raise PartsError(f"{_where(part)}: num_inner={k} outside [0, {n}] (global_ids has {n} entries)")
    indptr = np.asarray(part.indptr)
    if len(indptr) != n + 1 or (len(indptr) and indptr[-1] != len(part.indices)):
        raise PartsError(f"{_where(part)}: CSR indptr has {len(indptr)} entries and ends at "
                         f"{indptr[-1] if len(indptr) else None}, expected {n + 1} entries ending at "
                         f"{len(part.indices)} (the number of indices)")


def _check_labels(labels: np.ndarray, global_ids: np.ndarray, part, where: str) -> int:
    """Inner labels are class ids: integers, >= 0 on every node in a mask (cross-entropy and the metrics index
    with them); a node in no mask may be unlabelled (-1, as ogbn-papers100M's unlabelled majority is stored).
    Returns the largest."""
    if not np.issubdtype(labels.dtype, np.integer):
        raise NodeDataError(f"{where}: labels have dtype {labels.dtype}, expected integer class ids 0..C-1")
    if int(labels.min()) < 0:
        for name in MASKS:
            unlabelled = (labels < 0) & inner_mask(part, name)
            if unlabelled.any():
                at = int(np.argmax(unlabelled))
                raise NodeDataError(f"{where}: label {int(labels[at])} of node {int(global_ids[at])} (local {at}) in "
                                    f"{name}: a node in a mask needs a class id >= 0 (an unlabelled node, -1 say, "
                                    "belongs in no mask)")
    return int(labels.max())


def _training_set(parts: Sequence[Any], *, path: str, manifest: dict | None, num_nodes: int | None) -> PartSet:
    """Training's own checks (the format does not require node data): features and labels in every
    part, one feature dimension, inner nodes covering ``num_nodes`` (default: max inner id + 1) once."""
    if len(parts) == 0:
        raise PartsError(f"{path}: no parts")
    num_features = None
    max_label = -1
    present = np.empty(0, np.int64)   # the class ids that occur among the inner nodes
    inner_total = 0
    max_gid = -1
    for part in parts:
        where = _where(part)
        gids = np.asarray(part.global_ids)
        k, n = int(part.num_inner), len(gids)
        feats = part.features
        if feats is None:
            raise NodeDataError(f"{where}: no features (build the parts with --nodes NODE_DIR holding features.npy)")
        if len(feats.shape) != 2 or feats.shape[0] != n:
            raise NodeDataError(f"{where}: features have shape {feats.shape}, expected ({n}, F) for {n} local nodes")
        if num_features is None:
            num_features = int(feats.shape[1])
        elif feats.shape[1] != num_features:
            raise NodeDataError(f"{where}: features have dimension {feats.shape[1]}, but part 0 has "
                                f"{num_features}")
        if part.labels is None:
            raise NodeDataError(f"{where}: no labels (build the parts with --nodes NODE_DIR holding labels.npy)")
        labels = np.asarray(part.labels)
        if labels.ndim != 1:   # the format allows (n, C) labels (multi-label); this trainer classifies
            raise NodeDataError(f"{where}: labels have shape {labels.shape}; training takes one class id a node, "
                                f"shape (n,) (class ids in an (n, 1) file: save labels.reshape(-1) and build "
                                "the parts again)")
        if len(labels) < k:
            raise NodeDataError(f"{where}: labels have {len(labels)} rows, expected at least {k}")
        if k:
            max_label = max(max_label, _check_labels(labels[:k], gids[:k], part, where))
            present = np.union1d(present, np.unique(labels[:k][labels[:k] >= 0]).astype(np.int64))
            max_gid = max(max_gid, int(gids[:k].max()))
        inner_total += k
    if num_nodes is None:
        num_nodes = int(manifest["num_nodes"]) if manifest and "num_nodes" in manifest else max_gid + 1
    if inner_total != num_nodes:
        raise PartsError(f"{path}: the parts' inner nodes number {inner_total}, expected {num_nodes} "
                         "(every node owned by exactly one part)")
    # The loader checks counts, not ids: an id out of range or owned twice is found here.
    seen = np.zeros(num_nodes, bool)
    for part in parts:
        g = np.asarray(part.global_ids)[:int(part.num_inner)]
        if len(g) and (g.min() < 0 or g.max() >= num_nodes or seen[g].any()
                       or len(np.unique(g)) != len(g)):
            raise PartsError(f"{_where(part)}: inner global ids out of range or owned twice")
        seen[g] = True
    if manifest and "num_classes" in manifest:
        num_classes = int(manifest["num_classes"])
    else:
        num_classes = max_label + 1
    if num_classes <= 0:   # every inner label negative: no node has a class
        raise NodeDataError(f"{path}: no labels found (every node's label is negative, i.e. unlabelled)")
    if max_label >= num_classes:
        raise NodeDataError(f"{path}: label {max_label} found, but the manifest says {num_classes} classes "
                            f"(labels must be 0..{num_classes - 1})")
    if num_classes > num_nodes:   # a model of that many outputs: a sentinel, not a class (10^6 was OOM-killed)
        raise NodeDataError(f"{path}: label {max_label} found among {num_nodes} nodes: more classes than nodes "
                            "(labels are class ids 0..C-1; a node without a class belongs in no mask, with "
                            "label -1)")
    return PartSet(list(parts), num_nodes, int(num_features), int(num_classes), path, manifest,
                   classes_present=len(present))


def assemble_whole_graph(parts: PartSet) -> ArrayPart:
    """The whole graph, rebuilt from the parts' inner rows (complete by contract).

    Node ``v``'s row comes from the part that owns it, with local ids mapped
    back to global ones; features, labels and masks likewise. Memory is that of
    the whole graph: it is meant for evaluation and centralised training.
    """
    n = parts.num_nodes
    deg = np.zeros(n, np.int64)
    for part in parts.parts:
        k = int(part.num_inner)
        ip = np.asarray(part.indptr)
        deg[np.asarray(part.global_ids)[:k]] = np.diff(ip[:k + 1])
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(deg, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), np.int64)
    feats = np.empty((n, parts.num_features), np.float32)
    labels = np.zeros(n, np.int64)
    masks = {m: np.zeros(n, bool) for m in MASKS}
    for part in parts.parts:
        k = int(part.num_inner)
        gids = np.asarray(part.global_ids).astype(np.int64)
        ip = np.asarray(part.indptr).astype(np.int64)
        local_cols = np.asarray(part.indices[:ip[k]]).astype(np.int64)
        inner = gids[:k]
        # Rows keep their order within each node; place each row at its global offset.
        lens = np.diff(ip[:k + 1])
        dest = np.repeat(indptr[inner] - ip[:k], lens) + np.arange(ip[k])
        indices[dest] = gids[local_cols]
        feats[inner] = np.asarray(part.features[:k], dtype=np.float32)
        labels[inner] = np.asarray(part.labels[:k])
        for m in masks:
            masks[m][inner] = inner_mask(part, m)
    return ArrayPart(np.arange(n, dtype=np.int64), n, indptr, indices, feats, labels,
                     masks["train_mask"], masks["val_mask"], masks["test_mask"], degree=deg,
                     path=f"{parts.path}[whole]")


# -- onto a device ------------------------------------------------------------

def to_device(array, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Host array -> device tensor; through pinned memory and a non-blocking copy on CUDA."""
    # A copy when the array is a read-only memmap: torch wants writable memory.
    t = torch.from_numpy(np.require(array, requirements=["C", "W"]))
    if dtype is not None and t.dtype != dtype and device.type == "cpu":
        t = t.to(dtype)
    if device.type == "cuda":
        t = t.pin_memory().to(device, non_blocking=True)
        if dtype is not None:
            t = t.to(dtype)
    return t


def aggregation_degree(part) -> np.ndarray:
    """Every local node's aggregation degree in the whole graph (float32).

    The builder stores it (``degree``); without it, a node's row length, or
    for a halo node whose row is partial the number of times it appears as a
    neighbour if larger (on a whole undirected graph both agree).
    """
    deg = getattr(part, "degree", None)
    if deg is not None:
        return np.asarray(deg, dtype=np.float32)
    indptr = np.asarray(part.indptr, np.int64)
    n = len(indptr) - 1
    colcount = np.bincount(np.asarray(part.indices, np.int64), minlength=n)[:n]
    return np.maximum(np.diff(indptr), colcount).astype(np.float32)


def full_block(indptr: np.ndarray, indices: np.ndarray, deg: np.ndarray, device: torch.device) -> Block:
    """The square block of a whole (local) graph: every node to every node.

    A halo node's row holds only its edges inside the part (about a third of
    them on SPRING parts of Citeseer). Like a sampled row, it is scaled by
    ``degree / row length`` (``Block.dst_scale``), so the halo node's first-layer
    output estimates its whole-graph value instead of shrinking towards its
    self-loop term; inner rows are complete and keep scale 1.
    """
    n = len(indptr) - 1
    indptr = np.asarray(indptr, np.int64)
    rowlen = np.diff(indptr)
    row = np.repeat(np.arange(n, dtype=np.int64), rowlen)
    deg = np.asarray(deg, np.float32)
    partial = (rowlen > 0) & (rowlen < deg)
    scale = None
    if partial.any():
        scale = np.ones(n, np.float32)
        scale[partial] = deg[partial] / rowlen[partial]
        scale = to_device(scale, device)
    return Block(to_device(row, device), to_device(indices, device, torch.int64), n, n,
                 to_device(deg, device), dst_scale=scale, sorted_rows=True)


@dataclass
class DeviceGraph:
    """A part on a device: features, labels, the full block, target node ids.

    ``indptr``/``indices`` stay on the host for the sampler (numba);
    ``deg`` is the aggregation degree of every local node in the whole graph
    (a host copy for mini-batches).
    """
    x: torch.Tensor | SparseRows
    y: torch.Tensor
    block: Block
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor
    num_inner: int
    indptr: np.ndarray
    indices: np.ndarray
    deg: np.ndarray
    train_nodes: np.ndarray

    @property
    def num_train(self) -> int:
        return int(len(self.train_nodes))


SPARSE_DENSITY = 0.1


def features_to_device(features, device: torch.device, block_rows: int = 65536, where: str = "features"):
    """Features as a dense float32 tensor, or as :class:`SparseRows` when under 10% are non-zero.

    Read in row blocks, so a memory-mapped matrix is never densified twice. A NaN or infinite value is a
    :class:`NodeDataError` naming ``where`` and the row: one would make every loss NaN, and the run would
    end with the accuracy of a constant prediction.
    """
    n, f = features.shape
    nnz = 0
    for a in range(0, n, block_rows):
        blk = np.asarray(features[a:a + block_rows])
        if blk.dtype.kind == "f" and not np.isfinite(blk).all():
            row = a + int(np.flatnonzero(~np.isfinite(blk).all(axis=1))[0])
            raise NodeDataError(f"{where}: features row {row} holds {blk[row - a][~np.isfinite(blk[row - a])][0]} "
                                "(NaN and infinite features cannot be trained on; fill or drop them before the build)")
        nnz += int(np.count_nonzero(blk))
    if n == 0 or nnz >= SPARSE_DENSITY * n * f:
        return to_device(np.asarray(features, dtype=np.float32), device)
    indptr = np.zeros(n + 1, np.int64)
    indices = np.empty(nnz, np.int64)
    values = np.empty(nnz, np.float32)
    pos = 0
    for a in range(0, n, block_rows):
        blk = np.asarray(features[a:a + block_rows])
        r, c = np.nonzero(blk)
        indptr[a + 1:a + 1 + len(blk)] = np.cumsum(np.bincount(r, minlength=len(blk))) + pos
        indices[pos:pos + len(c)] = c
        values[pos:pos + len(c)] = blk[r, c]
        pos += len(c)
    return SparseRows(to_device(indptr, device), to_device(indices, device), to_device(values, device), int(f))


def load_part(part, device: torch.device) -> DeviceGraph:
    """Copy a part's arrays to ``device`` (pinned, non-blocking on CUDA)."""
    k = int(part.num_inner)
    indptr = np.asarray(part.indptr).astype(np.int64)
    indices = np.asarray(part.indices).astype(np.int64)
    block = full_block(indptr, indices, aggregation_degree(part), device)
    masks = {m: np.flatnonzero(inner_mask(part, m)).astype(np.int64)
             for m in MASKS}
    x = features_to_device(part.features, device, where=f"{_where(part)}/features.npy")
    y = to_device(np.asarray(part.labels).astype(np.int64), device)
    graph = DeviceGraph(x, y, block, to_device(masks["train_mask"], device), to_device(masks["val_mask"], device),
                        to_device(masks["test_mask"], device), k, indptr, indices,
                        block.src_deg.cpu().numpy(), masks["train_mask"])
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    return graph


def resolve_device(name: str) -> torch.device:
    """``cpu`` or ``cuda[:i]``; refuse CUDA when there is none."""
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ParameterError(f"--device {name}: CUDA was asked for but no CUDA device is available "
                                 f"(torch {torch.__version__})")
        return torch.device(name)
    if name != "cpu":
        raise ParameterError(f"--device {name}: expected cpu or cuda")
    return torch.device("cpu")


__all__ = ["ArrayPart", "DeviceGraph", "aggregation_degree", "PartSet", "PartsError", "assemble_whole_graph",
           "check_parts",
           "full_block", "inner_mask", "load_part", "open_parts", "resolve_device", "split_graph", "to_device"]


def split_graph(whole: ArrayPart, owner: np.ndarray, hops: int = 1) -> list[ArrayPart]:
    """Cut an in-memory graph into parts with a ``hops``-hop halo (tests, benchmarks).

    Part m holds the nodes with ``owner == m`` (inner, in increasing global id)
    and then the nodes up to ``hops`` aggregation hops from them owned elsewhere
    (halo, increasing global id). Rows of the nodes within ``hops - 1`` hops
    (inner nodes, and with ``hops >= 2`` the nearer halo) are complete; the
    outermost halo's rows are empty: the builder's contract at its leanest
    (``graphstream partition --halo-hops``).
    """
    integer("hops", hops)
    owner = np.asarray(owner)
    indptr = np.asarray(whole.indptr, np.int64)
    indices = np.asarray(whole.indices, np.int64)
    out = []
    for m in range(int(owner.max()) + 1):
        inner = np.flatnonzero(owner == m)
        complete = inner
        for _ in range(hops - 1):   # widen by one hop: the aggregation neighbours of the last ring
            complete = np.union1d(complete, _row_columns(indptr, indices, complete))
        complete_halo = np.setdiff1d(complete, inner)
        cols = _row_columns(indptr, indices, complete)
        outer = np.setdiff1d(np.unique(cols), complete)
        gids = np.concatenate([inner, np.union1d(complete_halo, outer)]).astype(np.int64)
        local = np.full(len(owner), -1, np.int64)
        local[gids] = np.arange(len(gids))
        has_row = np.zeros(len(gids), bool)
        has_row[local[complete]] = True
        lens = np.where(has_row, indptr[gids + 1] - indptr[gids], 0)
        ip = np.zeros(len(gids) + 1, np.int64)
        np.cumsum(lens, out=ip[1:])

        def rows(a, gids=gids):
            return None if a is None else np.asarray(a)[gids]
        out.append(ArrayPart(gids, len(inner), ip, local[_row_columns(indptr, indices, gids[has_row])],
                             np.asarray(whole.features)[gids], np.asarray(whole.labels)[gids],
                             rows(whole.train_mask), rows(whole.val_mask), rows(whole.test_mask),
                             degree=np.diff(indptr)[gids], path=f"<memory part {m}>"))
    return out


def _row_columns(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The concatenated CSR rows ``rows`` (in that order)."""
    lens = indptr[rows + 1] - indptr[rows]
    starts = np.repeat(indptr[rows] - np.cumsum(lens) + lens, lens)
    return indices[starts + np.arange(int(lens.sum()))]
