"""Node data: features, labels and masks as plain ``.npy`` files beside a graph.

A node data folder holds ``features.npy`` (N x F, float32 or float16) and,
optionally, ``labels.npy`` (N or N x C, integer) and any number of
``<name>_mask.npy`` files (N, bool; ``train``, ``val`` and ``test`` are the
usual ones). Row i belongs to node i of the graph store. Files are never read
whole: :func:`open_node_data` reads only their headers and checks them against
the store, and rows are reached through memory maps (:meth:`NodeArray.memmap`
maps only a window of rows, so that the pages a reader touches are released
when the window is dropped).

The ``.npy`` headers are the metadata. A folder written by ``graphstream
dataset`` also holds ``node_data.json`` (:data:`MANIFEST`): the size and
CRC-32C of each of its files, sealed like every manifest, so that damaged
bytes are found (by ``verify``, and by the builder before it splits them)
rather than copied into a dataset whose own checksums then hold. A folder
without one (node data a user saved) is read as before, unchecksummed.
:class:`NodeArray` is one header, typed (:meth:`NodeArray.from_npy` reads and
checks it, :func:`write_npy_header` writes one), and :class:`NodeData` the
validated set of a folder (:meth:`NodeData.from_folder`, the one place the
rules per kind of file are checked).
"""
from __future__ import annotations

import json
import os
import tokenize
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CorruptDataError, NodeDataError, path_argument
from .integrity import FileDigest, check_file, check_file_size, check_seal, file_digest, is_file_name, seal

MANIFEST = "node_data.json"
MANIFEST_FORMAT = "graphstream.node_data"
FEATURES = "features"
LABELS = "labels"
MASK_SUFFIX = "_mask"
STANDARD_MASKS = ("train_mask", "val_mask", "test_mask")

# What each kind of file may hold: (allowed dtype kinds or dtypes, allowed ndim, description).
_FEATURE_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


@dataclass(frozen=True, slots=True)
class NodeArray:
    """One ``.npy`` file described by its header: where its rows start and how long they are."""
    name: str
    path: str
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int

    @property
    def num_rows(self) -> int:
        return self.shape[0]

    @property
    def row_shape(self) -> tuple[int, ...]:
        return self.shape[1:]

    @property
    def row_bytes(self) -> int:
        return int(self.dtype.itemsize * int(np.prod(self.shape[1:], dtype=np.int64)))

    @property
    def nbytes(self) -> int:
        return self.row_bytes * self.num_rows

    def memmap(self, start: int = 0, stop: int | None = None) -> np.memmap:
        """Read-only map of rows ``start .. stop`` (only that window is mapped)."""
        stop = self.num_rows if stop is None else stop
        if stop <= start:
            return np.empty((0,) + self.row_shape, dtype=self.dtype)  # type: ignore[return-value]
        return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset + start * self.row_bytes,
                         shape=(stop - start,) + self.row_shape)

    def load(self) -> np.ndarray:
        """Memory map of the whole file (what an external reader would use)."""
        return np.load(self.path, mmap_mode="r")

    @classmethod
    def from_npy(cls, path: str | os.PathLike, name: str) -> NodeArray:
        """Header of one node data file, checked to be a complete, C-ordered plain array."""
        path = Path(path)
        dtype, shape, fortran, offset = read_npy_header(path)
        if dtype.hasobject or dtype.fields is not None:
            raise NodeDataError(f"{path}: {name} has dtype {dtype}; plain numeric arrays only")
        if len(shape) == 0:
            raise NodeDataError(f"{path}: {name} is a scalar, expected one row per node")
        if fortran and len(shape) > 1:
            raise NodeDataError(f"{path}: {name} is stored in Fortran order; save it C-ordered "
                                "(numpy.save(path, numpy.ascontiguousarray(a)))")
        arr = cls(name=name, path=str(path), dtype=dtype, shape=shape, offset=offset)
        expected = offset + arr.nbytes
        size = path.stat().st_size
        if size < expected:
            raise NodeDataError(f"{path}: {name} is truncated ({size} bytes, header promises {expected})")
        return arr


@dataclass(frozen=True)
class NodeData:
    """The validated node data of one graph: ``arrays`` by name (``features``, ``labels``, ``*_mask``)."""
    path: str
    num_nodes: int
    arrays: dict[str, NodeArray] = field(default_factory=dict)
    digests: dict[str, FileDigest] | None = None   # node_data.json's, by file name; None: a folder without it
    checked: bool = False   # the files were read against their digests when opened (``checksums``)

    def __contains__(self, name: str) -> bool:
        return name in self.arrays

    def __getitem__(self, name: str) -> NodeArray:
        return self.arrays[name]

    @property
    def names(self) -> list[str]:
        return list(self.arrays)

    @property
    def masks(self) -> list[str]:
        return [n for n in self.arrays if n.endswith(MASK_SUFFIX)]

    @property
    def row_bytes(self) -> int:
        """Bytes of node data per node, all files together."""
        return sum(a.row_bytes for a in self.arrays.values())

    def check_checksums(self) -> int:
        """Every file node_data.json lists read whole against its CRC-32C (:class:`CorruptDataError` naming
        the first that fails); the bytes read (0 without node_data.json)."""
        if self.digests is None:
            return 0
        for name, digest in self.digests.items():
            with replaced_hint():
                check_file(Path(self.path) / name, digest, f"{self.path}/{MANIFEST}")
        return sum(d.size for d in self.digests.values())

    @classmethod
    def from_folder(cls, path: str | os.PathLike, num_nodes: int, *, require_features: bool = True,
                    checksums: bool = False) -> NodeData:
        """Find and check the node data files of a folder against a graph of ``num_nodes`` nodes.

        Recognised: ``features.npy``, ``labels.npy``, ``*_mask.npy``; other files
        are ignored. Raises :class:`NodeDataError` for a missing folder, missing
        features (when required), a row count other than ``num_nodes``, a wrong
        dtype or shape, a Fortran-ordered or truncated file. With ``node_data.json``
        its seal and every listed file's size are checked (:class:`CorruptDataError`),
        and with ``checksums`` every listed file's CRC-32C too (a read of the files).
        """
        folder = Path(path_argument(path, "node data folder"))
        if not folder.exists():
            raise NodeDataError(f"{folder}: no such node data folder")
        if not folder.is_dir():
            raise NodeDataError(f"{folder}: node data must be a folder holding features.npy, labels.npy, "
                                "*_mask.npy")
        arrays: dict[str, NodeArray] = {}
        names = [FEATURES, LABELS] + sorted(p.name[:-4] for p in folder.glob(f"*{MASK_SUFFIX}.npy"))
        for name in names:
            file = folder / f"{name}.npy"
            if not file.is_file():
                continue
            arr = NodeArray.from_npy(file, name)
            check_node_array(arr, num_nodes)
            arrays[name] = arr
        if require_features and FEATURES not in arrays:
            found = sorted(p.name for p in folder.glob("*.npy"))
            raise NodeDataError(f"{folder}: node data folder has no features.npy "
                                f"(found {found or 'no .npy files'})")
        if not arrays:
            raise NodeDataError(f"{folder}: no node data files (features.npy, labels.npy, *_mask.npy)")
        digests = read_manifest(folder)
        unlisted = [f"{name}.npy" for name in arrays if digests is not None and f"{name}.npy" not in digests]
        if unlisted:   # split into the parts, checksummed anew there, its bytes never checked
            raise NodeDataError(f"{folder}: {', '.join(unlisted)} not in {MANIFEST} (added after graphstream "
                                f"dataset wrote the folder?), so not checked; {_WAY_OUT}")
        data = cls(path=str(folder), num_nodes=int(num_nodes), arrays=arrays, digests=digests, checked=checksums)
        if checksums:
            data.check_checksums()
        return data


def read_manifest(folder: Path) -> dict[str, FileDigest] | None:
    """node_data.json's digests by file name, its seal and each file's size checked; None without one."""
    file = folder / MANIFEST
    if not file.is_file():
        return None
    where = str(file)
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptDataError(f"{where}: unreadable node data manifest ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT or not isinstance(doc.get("files"), dict):
        raise CorruptDataError(f"{where}: not a graphstream node data manifest (format {MANIFEST_FORMAT!r}, files)")
    check_seal(doc, where)
    outside = [name for name in doc["files"] if not is_file_name(name)]
    if outside:   # checked and reported as its own: never a file elsewhere
        raise CorruptDataError(f"{where}: file name {outside[0]!r} is not a file of this folder")
    digests = {name: FileDigest.from_json(obj, where) for name, obj in doc["files"].items()}
    for name, digest in digests.items():
        with replaced_hint():
            check_file_size(folder / name, digest, where)
    return digests


_WAY_OUT = (f"if the folder's files are yours to change, remove {MANIFEST} (the folder is then read as node data "
            "saved by hand, unchecksummed), or write it again with graphstream dataset")


@contextmanager
def replaced_hint() -> Iterator[None]:
    """A file that fails its recorded size or checksum: damaged, or replaced by its user on purpose; the
    message says the way out of the second."""
    try:
        yield
    except CorruptDataError as exc:
        raise CorruptDataError(f"{exc}; {_WAY_OUT}") from exc


def write_manifest(folder: str | os.PathLike) -> None:
    """node_data.json for the recognised node data files of ``folder``, sealed: written last, by the writer
    of the folder (inside its atomic output)."""
    folder = Path(folder)
    names = [n for n in sorted(os.listdir(folder)) if n in (f"{FEATURES}.npy", f"{LABELS}.npy")
             or n.endswith(f"{MASK_SUFFIX}.npy")]
    doc = {"format": MANIFEST_FORMAT, "version": 1,
           "files": {n: file_digest(folder / n).to_json() for n in names}}
    (folder / MANIFEST).write_text(json.dumps(seal(doc), indent=1) + "\n", encoding="utf-8")


def read_npy_header(path: str | os.PathLike) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """(dtype, shape, fortran_order, data offset) of a ``.npy`` file, reading only its header."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise NodeDataError(f"{path}: unsupported .npy format version {version}")
            offset = f.tell()
    except NodeDataError:
        raise
    except (ValueError, EOFError, SyntaxError, tokenize.TokenError, OverflowError) as exc:
        # numpy parses the header dict with ast.literal_eval: a damaged one raises these
        raise NodeDataError(f"{path}: not a readable .npy file ({exc.__class__.__name__}: {exc})") from exc
    return np.dtype(dtype), tuple(int(s) for s in shape), bool(fortran), int(offset)


def write_npy_header(file, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """Write the header of a C-ordered ``.npy`` file of ``dtype`` and ``shape`` at the file's position
    (format 1.0, or 2.0 when the header exceeds 64 KiB); the rows follow."""
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
              "shape": tuple(int(s) for s in shape)}
    start = file.tell()
    try:
        np.lib.format.write_array_header_1_0(file, header)
    except ValueError:  # header over 64 KiB (enormous shapes): format 2.0
        file.seek(start)
        np.lib.format.write_array_header_2_0(file, header)


def describe_npy(path: str | os.PathLike, name: str) -> NodeArray:
    """Header of one node data file, checked (see :meth:`NodeArray.from_npy`)."""
    return NodeArray.from_npy(path, name)


def little_endian(dtype: np.dtype) -> np.dtype:
    """``dtype`` in little-endian byte order, the order of every file a partitioned dataset holds (a
    big-endian source file's rows are converted as they are split)."""
    return np.dtype(dtype).newbyteorder("<")


def check_node_array(arr: NodeArray, num_nodes: int) -> None:
    """One node data file's rows, dtype and shape as its kind (features, labels, a mask) allows."""
    where = arr.path
    if arr.num_rows != num_nodes:
        raise NodeDataError(f"{where}: {arr.name} has {arr.num_rows} rows, the graph has {num_nodes} nodes")
    if arr.name == FEATURES:
        if len(arr.shape) != 2:
            raise NodeDataError(f"{where}: features must be 2-D (num_nodes x F), got shape {arr.shape}")
        if little_endian(arr.dtype) not in _FEATURE_DTYPES:   # either byte order: the parts get little-endian
            raise NodeDataError(f"{where}: features must be float32 or float16, got {arr.dtype}")
    elif arr.name == LABELS:
        if len(arr.shape) not in (1, 2):
            raise NodeDataError(f"{where}: labels must be 1-D (classes) or 2-D (multi-label), "
                                f"got shape {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise NodeDataError(f"{where}: labels must be integers, got {arr.dtype}")
    elif arr.name.endswith(MASK_SUFFIX):
        if len(arr.shape) != 1:
            raise NodeDataError(f"{where}: {arr.name} must be 1-D, got shape {arr.shape}")
        if arr.dtype != np.bool_:
            raise NodeDataError(f"{where}: {arr.name} must be bool, got {arr.dtype}")


def open_node_data(path: str | os.PathLike, num_nodes: int, *, require_features: bool = True,
                   checksums: bool = False) -> NodeData:
    """The checked node data of a folder (see :meth:`NodeData.from_folder`)."""
    return NodeData.from_folder(path, num_nodes, require_features=require_features, checksums=checksums)
