"""Integrity: the one place that writes and checks checksums.

Two mechanisms, one per kind of format:

- Zarr formats (graph store, snapshot store): every chunk carries a CRC-32C
  after its compressed bytes (zarr v3's ``crc32c`` codec, :func:`chunk_codecs`),
  and every chunk is written even when it holds only fill values, so a chunk
  file that is missing is damage, not an all-zero chunk. :class:`CheckedArray`
  reads through both rules and names the array, the chunk and the file when
  one fails.
- File formats (the partitioned dataset): ``manifest.json`` lists the size and
  CRC-32C of every file of every part (:func:`file_digest`), checked by
  :func:`check_file`.

CRC-32C (Castagnoli) because it is what zarr's codec uses and it runs in
hardware: google-crc32c (a zarr dependency) measures ~8 GB/s here, so a
checksum costs well under the decompression it guards.
"""
from __future__ import annotations

import json
import os
import posixpath
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google_crc32c
import numpy as np
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec

from ..errors import CorruptDataError, InvalidIdError, StoreError, StoreReplacedError

# Zarr arrays whose chunks are checksummed and always written (stores of these format versions on).
CHUNK_ARRAY_CONFIG = {"write_empty_chunks": True}
_BLOCK = 8 << 20


def chunk_codecs(compressor: BloscCodec) -> tuple[BloscCodec, Crc32cCodec]:
    """The bytes-to-bytes codecs of a checksummed array: compress, then append the CRC-32C of the result."""
    return (compressor, Crc32cCodec())


def has_chunk_checksums(array: zarr.Array) -> bool:
    return any(isinstance(c, Crc32cCodec) for c in array.compressors)


@dataclass(frozen=True)
class FolderIdentity:
    """What tells a local store's folder from another put at its path later (an ``--overwrite`` swaps a
    new folder in): its device and inode."""
    device: int
    inode: int


def folder_identity(path: str) -> FolderIdentity | None:
    """The identity of the folder at ``path`` now; None for a URL (no cheap test there) or nothing there."""
    if "://" in path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FolderIdentity(st.st_dev, st.st_ino)


class CheckedArray:
    """A 1-D Zarr array read with integrity checks: a damaged chunk raises
    :class:`CorruptDataError` naming the array, the chunk and its file.

    ``all_chunks_written``: the writer wrote every chunk (stores of a
    checksummed format version), so a missing chunk file is damage; zarr
    itself would read it as fill values. Checked for local stores only (an
    fsspec store has no cheap existence test per chunk). Such an array
    without its checksum codec is damage too.

    ``id_bound``: the array holds node ids, each in [0, id_bound): a value
    outside raises :class:`InvalidIdError` naming it. A chunk's checksum says
    its bytes are the ones written, not that they make sense: a store edited
    through zarr (which checksums what it is given) or written by another
    tool can hold any id, and the numba kernels that index per-node arrays
    with it do not check bounds (a crash, or a wrong result with exit 0).
    Checked in the reading thread, so a prefetched stream pays it in the
    background (numpy's min and max, which release the GIL: 0.13 ns a value
    measured on this project's 2-core VM; numba here would load it for ``--help``).
    """

    def __init__(self, array: zarr.Array, name: str, where: str, *, all_chunks_written: bool,
                 id_bound: int | None = None, opened: FolderIdentity | None = None):
        self._array = array
        self._opened = opened
        self.name = name
        self.where = where
        self.id_bound = id_bound
        self.shape = array.shape
        self.dtype = array.dtype
        self.chunks = array.chunks
        self.checksums = has_chunk_checksums(array)
        if all_chunks_written and not self.checksums:
            # a store of a checksummed version wrote the codec into every array's zarr.json, which no seal
            # covers: without it, zarr would read any byte as it is
            raise CorruptDataError(f"{where}: array {name!r} has no CRC-32C checksum codec in its zarr.json "
                                   f"({Path(where) / name / 'zarr.json'}), which every array of this store's "
                                   "version has: the metadata was edited or damaged")
        local = "://" not in where
        self._folder = Path(where) / name if local and all_chunks_written else None

    def __len__(self) -> int:
        return self.shape[0]

    def chunk_file(self, i: int) -> str:
        key = self._array.metadata.encode_chunk_key((i,))
        return str(Path(self.where) / self.name / key)

    def _chunk_range(self, a: int, b: int) -> range:
        c = self.chunks[0]
        return range(a // c, (b - 1) // c + 1) if b > a else range(0)

    @property
    def ndim(self) -> int:
        return 1

    def __getitem__(self, key: slice | int | tuple) -> Any:
        if isinstance(key, tuple) and len(key) == 1:   # numpy-style indexing, as dask.array.from_array does
            key = key[0]
        if isinstance(key, (int, np.integer)):
            i = int(key) + (self.shape[0] if key < 0 else 0)
            if not 0 <= i < self.shape[0]:
                raise IndexError(f"{self.where}: index {key} out of range for array {self.name!r} of {self.shape[0]}")
            return self[i:i + 1][0]
        if not isinstance(key, slice):
            raise TypeError(f"{self.name}: CheckedArray takes an int or a slice, got {key!r}")
        a, b, _ = key.indices(self.shape[0])
        if self._folder is not None:
            for i in self._chunk_range(a, b):
                if not (self._folder / self._array.metadata.encode_chunk_key((i,))).is_file():
                    raise self._damage(i, "the chunk file is missing")
        try:
            values = self._array[key]
        except (MemoryError, PermissionError):   # not damage: the bytes were never read
            raise
        except Exception as exc:  # zarr, Blosc and the codec raise many types; find the chunk
            raise self._locate(a, b, exc) from exc
        # After the read: chunks of a store swapped in since it was opened pass their own checksums and
        # would be taken under the old store's shape and attributes (a wrong graph, exit 0).
        self._check_not_replaced()
        if self.id_bound is not None and len(values) and (values.min() < 0 or values.max() >= self.id_bound):
            bad = int(np.flatnonzero((values < 0) | (values >= self.id_bound))[0])
            edge = f" (edge {a + bad})" if self.name in ("src", "dst") else ""
            raise InvalidIdError(f"{self.where}: {self.name}[{a + bad}] = {values[bad]}{edge} is outside "
                                 f"[0, {self.id_bound}), the store's node ids (a damaged or edited store: "
                                 "graphstream verify lists every bad id)")
        return values

    def read_all(self) -> np.ndarray:
        return self[0:self.shape[0]]

    def _locate(self, a: int, b: int, exc: Exception) -> StoreError:
        c = self.chunks[0]
        for i in self._chunk_range(a, b):
            try:
                self._array[i * c:min((i + 1) * c, self.shape[0])]
            except MemoryError:
                raise
            except Exception as chunk_exc:
                return self._damage(i, _reason(chunk_exc))
        self._check_not_replaced()
        return CorruptDataError(f"{self.where}: array {self.name!r} elements [{a}, {b}) are unreadable "
                                f"({_reason(exc)})")

    def _check_not_replaced(self) -> None:
        if self._opened is not None and folder_identity(self.where) != self._opened:
            raise StoreReplacedError(f"{self.where}: the store was replaced or removed while it was being read "
                                     "(another run wrote this path, with --overwrite?): run again on the new one")

    def _damage(self, i: int, reason: str) -> StoreError:
        self._check_not_replaced()   # a replacement's other chunks are not damage
        return CorruptDataError(f"{self.where}: array {self.name!r} chunk {i} ({self.chunk_file(i)}) is damaged: "
                                f"{reason}")


def recorded_crcs(array: CheckedArray) -> Iterator[bytes]:
    """Each chunk's recorded CRC-32C in chunk order: the last 4 bytes of its file, which the ``crc32c``
    codec wrote, so a small read a chunk rather than a read of the data. Local arrays of a checksummed
    store only; a missing or short file is :class:`CorruptDataError` naming it."""
    for i in range(-(-array.shape[0] // array.chunks[0]) if array.shape[0] else 0):
        try:
            with open(array.chunk_file(i), "rb") as f:
                f.seek(-4, os.SEEK_END)
                yield f.read(4)
        except PermissionError:   # not damage: unreadable to this user (the error names the file)
            raise
        except OSError as exc:   # missing or shorter than a checksum: a damaged store
            raise CorruptDataError(f"{array.where}: array {array.name!r} chunk {i} ({array.chunk_file(i)}) "
                                   f"is missing or damaged: {exc.strerror or exc}") from exc


# A store's attribute recording, per array, the CRC-32C of its chunks' CRC-32Cs in chunk order. Each chunk's
# own checksum says its bytes are intact, not that they are the chunk written at that place of that store:
# a chunk file copied from another store, another position or an older run of the same shape passes it.
CHUNKS_KEY = "chunks_crc32c"


def chunks_digest(array: CheckedArray) -> str:
    """The CRC-32C of ``array``'s recorded chunk checksums in order (:data:`CHUNKS_KEY`)."""
    crc = google_crc32c.Checksum()
    for recorded in recorded_crcs(array):
        crc.update(recorded)
    return crc.hexdigest().decode()


def chunks_digests(group: zarr.Group, where: str) -> dict[str, str]:
    """:func:`chunks_digest` of every array of a local store's group, by name (what a writer records)."""
    return {name: chunks_digest(CheckedArray(array, name, where, all_chunks_written=True))
            for name, array in sorted(group.arrays())}


def check_chunks_digests(arrays: dict[str, CheckedArray], recorded: Any, where: str) -> list[str]:
    """The problems with ``arrays``' chunk files against their recorded digests (:data:`CHUNKS_KEY`):
    a chunk that is valid on its own but not the one written there."""
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        return [f"{where}: the {CHUNKS_KEY!r} attribute is malformed ({str(recorded)[:100]})"]
    problems = []
    for name, array in arrays.items():
        if name not in recorded:
            problems.append(f"{where}: array {name!r} has no recorded digest of its chunks in {CHUNKS_KEY!r}")
            continue
        try:
            got = chunks_digest(array)
        except CorruptDataError as exc:
            problems.append(str(exc))
            continue
        if got != recorded[name]:
            problems.append(f"{where}: array {name!r} holds chunk files that are each intact but not the ones "
                            f"written there (digest of its chunks' checksums {got}, recorded {recorded[name]}): a "
                            "chunk was copied in from another position or store, or rewritten after the store was "
                            "sealed")
    return problems


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if "checksum" in text.lower():
        return "its CRC-32C checksum does not match (a flipped or truncated byte)"
    return f"{exc.__class__.__name__}: {text}"[:300]


# -- files (the partitioned dataset) ------------------------------------------------

@dataclass(frozen=True, slots=True)
class FileDigest:
    """Size and CRC-32C of a file, as ``manifest.json`` records it: ``{"size": n, "crc32c": "8 hex digits"}``."""
    size: int
    crc32c: str

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "crc32c": self.crc32c}

    @classmethod
    def from_json(cls, obj: Any, where: str) -> FileDigest:
        if (not isinstance(obj, dict) or not isinstance(obj.get("size"), int) or isinstance(obj.get("size"), bool)
                or obj["size"] < 0 or not isinstance(obj.get("crc32c"), str) or len(obj["crc32c"]) != 8):
            raise StoreError(f"{where}: malformed file digest {obj!r} (expected size >= 0 and an 8-digit crc32c)")
        return cls(obj["size"], obj["crc32c"])


def is_file_name(name: Any) -> bool:
    """A manifest's file name is one entry of its folder: a reader given the folder is never sent elsewhere
    ("../x", "/etc/passwd")."""
    return isinstance(name, str) and name == posixpath.basename(name) and name not in ("", ".", "..")


def file_digest(path: str | os.PathLike) -> FileDigest:
    """Size and CRC-32C of a file, read in 8 MiB blocks (memory stays bounded)."""
    crc = google_crc32c.Checksum()
    size = 0
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            crc.update(block)
            size += len(block)
    return FileDigest(size, crc.hexdigest().decode())


def check_file_size(path: Path, expected: FileDigest, where: str) -> None:
    """The cheap check (one stat): the file exists and has the recorded size."""
    if not path.is_file():
        raise CorruptDataError(f"{where}: {path.name} is missing ({path})")
    size = path.stat().st_size
    if size != expected.size:
        raise CorruptDataError(f"{where}: {path.name} has {size} bytes, the manifest recorded {expected.size} "
                               f"(truncated or replaced: {path})")


def check_file(path: Path, expected: FileDigest, where: str) -> None:
    """Size, then CRC-32C of the whole file against the manifest."""
    check_file_size(path, expected, where)
    got = file_digest(path)
    if got != expected:
        raise CorruptDataError(f"{where}: {path.name} fails its checksum (crc32c {got.crc32c}, the manifest "
                               f"recorded {expected.crc32c}: damaged bytes in {path})")


# -- metadata (group attributes, manifest.json) ------------------------------------------

SEAL_KEY = "crc32c"


def _canonical_crc(doc: dict[str, Any]) -> str:
    text = json.dumps({k: v for k, v in doc.items() if k != SEAL_KEY}, sort_keys=True, separators=(",", ":"))
    return f"{google_crc32c.value(text.encode()):08x}"


def seal(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` plus ``"crc32c"``: the CRC-32C of its canonical JSON (sorted keys, no spaces), so a
    flipped byte in a manifest's or store's metadata is caught like one in its data."""
    return {**{k: v for k, v in doc.items() if k != SEAL_KEY}, SEAL_KEY: _canonical_crc(doc)}


def check_seal(doc: dict[str, Any], where: str) -> None:
    """Refuse metadata whose content does not match its recorded CRC-32C (or that lost it)."""
    recorded = doc.get(SEAL_KEY)
    if recorded is None:
        raise CorruptDataError(f"{where}: metadata lacks its {SEAL_KEY!r} checksum (damaged or edited)")
    if recorded != _canonical_crc(doc):
        raise CorruptDataError(f"{where}: metadata fails its checksum (recorded {recorded}, computed "
                               f"{_canonical_crc(doc)}): damaged or edited by hand")


def check_seal_when_due(doc: dict[str, Any], version: int, sealed_from: int, where: str) -> None:
    """:func:`check_seal` for a document of a version from ``sealed_from`` on, and for any that carries a
    seal: an older version never wrote one, so a seal there belongs to a newer document whose version
    was edited down (which would otherwise turn the check off)."""
    if version >= sealed_from or SEAL_KEY in doc:
        check_seal(doc, where)


def open_arrays(group: zarr.Group, where: str) -> dict[str, zarr.Array]:
    """A group's arrays by name. zarr parses every array's ``zarr.json`` here; a damaged one
    (bad JSON, unknown codec or dtype) is :class:`CorruptDataError`, not zarr's exception."""
    try:
        with warnings.catch_warnings():   # a folder without its zarr.json: said below as a missing array
            warnings.filterwarnings("ignore", message=".*not recognized as a component of a Zarr hierarchy")
            arrays = dict(group.arrays())
    except (MemoryError, PermissionError):   # not damage: unreadable to this user
        raise
    except Exception as exc:
        raise CorruptDataError(f"{where}: an array's metadata (zarr.json) is damaged "
                               f"({exc.__class__.__name__}: {str(exc)[:200]})") from exc
    for name, array in arrays.items():
        # every array is written little-endian; the codec's word is not under a checksum (zarr.json is
        # zarr's), and "big" there read every value byte-swapped, verify and info content
        endian = getattr(getattr(array, "serializer", None), "endian", None)
        endian = getattr(endian, "value", endian)   # zarr's Endian enum, or None for 1-byte values
        if endian is not None and endian != "little":
            raise CorruptDataError(f"{where}: array {name!r} metadata (zarr.json) is damaged: its bytes are "
                                   f"declared {endian}-endian, graphstream writes little-endian")
    return arrays
