"""Reading a partitioned dataset: ``open_partitions(DIR)`` for trainers and exporters.

Everything is memory-mapped; nothing is read until used. Opening validates
the manifest once (:class:`PartitionsManifest`) and every part's file
headers against it (sizes only, cheap), so a missing or inconsistent part is
reported at once, by name; what :func:`open_partitions` returns needs no
further structural checks downstream. torch is imported only by
:meth:`Part.to_torch`; the DGL and PyG views of a part live with the
exporters (:func:`graphstream.export.dgl.part_to_dgl`,
:func:`graphstream.export.pyg.part_to_pyg`).
"""
from __future__ import annotations

import errno
import numbers
import os
import resource
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._resources import raise_open_files_limit
from ..errors import GraphStreamError, ResourceError, path_argument
from .integrity import FileDigest, check_file, check_file_size
from .nodedata import MASK_SUFFIX, NodeArray, check_node_array, read_npy_header
from .partitions_manifest import (
    FORMAT,
    REQUIRED_FILES,
    VERSION,
    PartEntry,
    PartitionsError,
    PartitionsManifest,
    read_manifest,
)

NODE_FILES = ("features", "labels")


class _PartArray:
    """A part's ``<name>.npy``, memory-mapped on first access and cached on the instance
    (like ``functools.cached_property``, which writes the instance ``__dict__`` even of a
    frozen dataclass); ``optional``: None unless the part lists it in ``node_files``."""

    def __init__(self, optional: bool = False):
        self.optional = optional

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, part: Part | None, owner: type) -> Any:
        if part is None:
            return self
        array = None if self.optional and self.name not in part.node_files else part._load(self.name)
        part.__dict__[self.name] = array
        return array


@dataclass(frozen=True)
class Part:
    """One part: a CSR over local ids (inner nodes first, then halo) and its node data rows.

    ``indptr``/``indices``: row r lists the local ids that feed r's
    aggregation (undirected: its neighbours; directed: its in-neighbours).
    Inner rows are complete; halo rows hold only edges to this part's inner
    nodes (undirected) or nothing (directed). ``degree``: each local node's
    aggregation degree in the whole graph. Node data arrays are None where
    the dataset has none.
    """
    path: Path
    index: int
    num_inner: int
    num_halo: int
    num_edges: int
    num_train: int
    node_files: tuple[str, ...] = field(default=())
    files: dict[str, FileDigest] | None = field(default=None, repr=False, compare=False)

    def _load(self, name: str) -> np.ndarray:
        """Memory-map ``<name>.npy``; in a checksummed dataset its CRC-32C is checked first,
        once per part object (one read of the file, at ~8 GB/s plus the disk)."""
        file = self.path / f"{name}.npy"
        if self.files is not None:
            checked = self.__dict__.setdefault("_checked_files", set())
            if file.name not in checked:
                check_file(file, self.files[file.name], f"{self.path.parent}: part {self.index} ({self.path.name})")
                checked.add(file.name)
        try:
            array = np.load(file, mmap_mode="r")
        except OSError as exc:
            if exc.errno != errno.EMFILE:
                raise
            if not raise_open_files_limit():
                limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
                raise ResourceError(f"{file}: too many open files (limit {limit}; every memory-mapped array of "
                                    "an open part holds one): raise the limit (ulimit -n) or keep fewer parts "
                                    "open at once") from exc
            array = np.load(file, mmap_mode="r")
        if name in _CSR_CHECKS:
            _CSR_CHECKS[name](self, array)
        return array

    @property
    def num_nodes(self) -> int:
        return self.num_inner + self.num_halo

    # The part's arrays, memory-mapped on first use (node data: None where the dataset has none).
    global_ids = _PartArray()
    indptr = _PartArray()
    indices = _PartArray()
    degree = _PartArray()
    features = _PartArray(optional=True)
    labels = _PartArray(optional=True)
    train_mask = _PartArray(optional=True)
    val_mask = _PartArray(optional=True)
    test_mask = _PartArray(optional=True)

    @property
    def masks(self) -> dict[str, np.ndarray]:
        """Every ``*_mask`` array of the part, by name."""
        return {n: self._load(n) for n in self.node_files if n.endswith(MASK_SUFFIX)}

    def to_torch(self) -> dict[str, Any]:
        """The part in RAM as torch tensors (ids and labels int64; absent node data left out).

        Keys: ``global_ids``, ``indptr``, ``indices``, ``degree``, ``num_inner``
        (a Python int), and ``features``, ``labels``, ``<name>_mask`` where present.
        """
        import torch  # only here: the storage side never needs torch

        def tensor(a: np.ndarray, dtype=None) -> torch.Tensor:
            return torch.from_numpy(np.array(a, dtype=dtype))  # a copy: memmaps are read-only

        out: dict[str, Any] = {
            "global_ids": tensor(self.global_ids, np.int64),
            "indptr": tensor(self.indptr, np.int64),
            "indices": tensor(self.indices, np.int64),
            "degree": tensor(self.degree, np.int64),
            "num_inner": self.num_inner,
        }
        for name in self.node_files:
            a = self._load(name)
            out[name] = tensor(a, np.int64 if name == "labels" else None)
        return out

    def __reduce__(self):
        # Pickle the description only: worker processes re-map the files instead of
        # receiving copies of every array this process happened to touch.
        return (Part, (self.path, self.index, self.num_inner, self.num_halo, self.num_edges, self.num_train,
                       self.node_files, self.files))

    def __repr__(self) -> str:
        return (f"Part({self.index}, inner={self.num_inner}, halo={self.num_halo}, edges={self.num_edges}, "
                f"node data={list(self.node_files)})")


def _check_indptr(part: Part, indptr: np.ndarray) -> None:
    """Row offsets from 0 to the edge count, never decreasing: checked once per part on first use,
    so a consistent but wrong dataset is an error here, not an index error in a trainer."""
    if len(indptr) and (indptr[0] != 0 or indptr[-1] != part.num_edges or bool(np.any(np.diff(indptr) < 0))):
        raise PartitionsError(f"{part.path}: indptr.npy is not a CSR row index (it must run from 0 to "
                              f"{part.num_edges} without decreasing)")


def _check_indices(part: Part, indices: np.ndarray) -> None:
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= part.num_nodes):
        raise PartitionsError(f"{part.path}: indices.npy holds local ids outside [0, {part.num_nodes})")


_CSR_CHECKS = {"indptr": _check_indptr, "indices": _check_indices}


class PartitionedDataset:
    """A partitioned dataset folder: ``manifest``, ``len()``, ``[i]`` -> :class:`Part`.

    ``info`` is the validated :class:`PartitionsManifest`; ``manifest`` the
    same as a plain JSON dict (what ``manifest.json`` holds).
    """

    def __init__(self, path: Path, info: PartitionsManifest, parts: list[Part]):
        self.path = path
        self.info = info
        self.manifest: dict[str, Any] = info.to_json()
        self._parts = parts

    @property
    def num_parts(self) -> int:
        return len(self._parts)

    @property
    def num_nodes(self) -> int:
        return self.info.num_nodes

    @property
    def directed(self) -> bool:
        return self.info.directed

    def __len__(self) -> int:
        return len(self._parts)

    def __getitem__(self, i: int) -> Part:
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):   # a slice or "0": a part by number
            raise TypeError(f"parts are indexed by an integer, got {i!r}")
        if not -len(self._parts) <= i < len(self._parts):
            raise IndexError(f"part {i} out of range: the dataset has {len(self._parts)} parts")
        return self._parts[i]

    def __iter__(self) -> Iterator[Part]:
        return iter(self._parts)

    def __repr__(self) -> str:
        m = self.info
        return (f"PartitionedDataset({str(self.path)!r}, {m.algorithm}, {len(self)} parts, "
                f"{m.num_nodes} nodes, {m.num_edges} edges)")


def _header(part_dir: Path, name: str, where: str) -> tuple[np.dtype, tuple[int, ...]]:
    file = part_dir / f"{name}.npy"
    if not file.is_file():
        raise PartitionsError(f"{where}: missing {file.name}")
    try:
        dtype, shape, _, offset = read_npy_header(file)
    except GraphStreamError as exc:
        raise PartitionsError(f"{where}: {exc}") from exc
    size = file.stat().st_size
    need = offset + dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if size < need:
        raise PartitionsError(f"{where}: {file.name} is truncated ({size} bytes, header promises {need})")
    return dtype, shape


NodeLayout = dict[str, tuple[np.dtype, tuple[int, ...]]]   # node data file -> (dtype, shape of a row)


def _check_part(folder: Path, i: int, entry: PartEntry, first: NodeLayout | None) -> tuple[Part, NodeLayout]:
    """The part's files against its manifest entry (headers, shapes, integer dtypes, node data rows),
    and its node data against part 0's (``first``): the same files, dtypes and row shapes."""
    part_dir = folder / entry.path
    where = f"{folder}: part {i} ({entry.path})"
    if not part_dir.is_dir():
        raise PartitionsError(f"{where}: part folder is missing")
    n_local = entry.num_nodes
    expect = {"global_ids": (n_local,), "indptr": (n_local + 1,), "indices": (entry.num_edges,),
              "degree": (n_local,)}
    for name in (f[:-4] for f in REQUIRED_FILES):
        dtype, shape = _header(part_dir, name, where)
        if shape != expect[name]:
            raise PartitionsError(f"{where}: {name}.npy has shape {shape}, the manifest implies {expect[name]}")
        if dtype.kind not in "iu":
            raise PartitionsError(f"{where}: {name}.npy has dtype {dtype}, expected integers")
    present = tuple(n for n in NODE_FILES if (part_dir / f"{n}.npy").is_file()) + tuple(
        sorted(p.name[:-4] for p in part_dir.glob(f"*{MASK_SUFFIX}.npy")))
    if first is not None and present != tuple(first):
        raise PartitionsError(f"{where}: node data files {list(present)} differ from part 0's {list(first)}")
    layout: NodeLayout = {}
    for name in present:
        _, shape = _header(part_dir, name, where)
        if not shape or shape[0] != n_local:
            raise PartitionsError(f"{where}: {name}.npy has {shape[0] if shape else 0} rows, "
                                  f"the part has {n_local} nodes")
        # the node data folder's own rules (an older layout has no checksums to stand in for them)
        try:
            arr = NodeArray.from_npy(part_dir / f"{name}.npy", name)
            check_node_array(arr, n_local)
        except GraphStreamError as exc:
            raise PartitionsError(f"{where}: {exc}") from exc
        layout[name] = (arr.dtype, arr.row_shape)
        if first is not None and layout[name] != first[name]:
            raise PartitionsError(f"{where}: {name}.npy has dtype {arr.dtype} and rows of shape {arr.row_shape}, "
                                  f"part 0's has {first[name][0]} and {first[name][1]}")
    if entry.files is not None:
        # Cheap checks at open (a stat per file); the CRC-32C is checked when a file is read.
        on_disk = sorted(p.name for p in part_dir.glob("*.npy"))
        if on_disk != sorted(entry.files):
            extra = sorted(set(on_disk) - set(entry.files))
            missing = sorted(set(entry.files) - set(on_disk))
            raise PartitionsError(f"{where}: files differ from the manifest (missing {missing}, unlisted {extra})")
        for name, digest in entry.files.items():
            check_file_size(part_dir / name, digest, where)
    return Part(path=part_dir, index=i, num_inner=entry.num_inner, num_halo=entry.num_halo,
                num_edges=entry.num_edges, num_train=entry.num_train, node_files=present,
                files=entry.files), layout


def open_partitions(path: str | os.PathLike) -> PartitionedDataset:
    """Open a partitioned dataset written by ``graphstream partition --out`` (or build_partitions).

    Guarantees, once it returns: the manifest is valid, the parts' inner
    counts sum to ``num_nodes``, every part has its four CSR files with the
    shapes the manifest implies (integer dtypes, not truncated), and every
    part has the same node data files, one row per local node, with the
    dtypes and row shapes the node data folder allows, the same in every part.

    Raises :class:`PartitionsError` (a :class:`GraphStreamError`) naming the
    part when the manifest or a part is missing, truncated or inconsistent.
    """
    folder = Path(path_argument(path, "path"))
    info = read_manifest(folder)
    parts: list[Part] = []
    first: NodeLayout | None = None
    for i, entry in enumerate(info.parts):
        part, layout = _check_part(folder, i, entry, first)
        first = layout if first is None else first
        parts.append(part)
    return PartitionedDataset(folder, info, parts)


__all__ = ["FORMAT", "VERSION", "Part", "PartEntry", "PartitionedDataset", "PartitionsError", "PartitionsManifest",
           "open_partitions"]
