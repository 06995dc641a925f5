"""``manifest.json`` of a partitioned dataset: the typed manifest, its one parser, and the writer helpers.

:class:`PartitionsManifest` is the one place that reads and writes the
manifest: :meth:`PartitionsManifest.from_json` validates once (format name,
version, counts, part paths relative and inside the folder, types), and
:meth:`PartitionsManifest.to_json` gives back the document in the
documented key order, so the builder's ``manifest.json`` bytes do not depend
on how the manifest was assembled.

The builder writes the manifest last, with metrics measured from the written
part files, not predicted by the partitioner: sizes are read back from the
``.npy`` headers of every part and the training counts from its
``train_mask.npy`` (:func:`recompute_metrics`).
"""
from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PartitionsError
from .integrity import SEAL_KEY, FileDigest, check_seal_when_due, file_digest, is_file_name, seal
from .nodedata import read_npy_header

FORMAT = "graphstream.partitions"
# Version 2: every part lists the size and CRC-32C of each of its files ("files").
# Version 1 datasets stay readable; they carry no checksums.
VERSION = 2
READABLE_VERSIONS = (1, 2)
CHECKSUM_VERSION = 2
MANIFEST = "manifest.json"
PART_META = "part.json"

# Per part: required files; node data files are optional but then in every part.
REQUIRED_FILES = ("global_ids.npy", "indptr.npy", "indices.npy", "degree.npy")
TOP_LEVEL_KEYS = ("format", "version", "algorithm", "params", "num_parts", "num_nodes", "num_edges",
                  "directed", "metrics", "parts")
PART_KEYS = ("path", "num_inner", "num_halo", "num_edges", "num_train")
# Optional top-level key (written after "directed" when not 1): how many hops around the inner nodes a
# part holds complete rows for, minus one (``graphstream partition --halo-hops``). Absent: 1.
HALO_HOPS_KEY = "halo_hops"


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


@dataclass(frozen=True, slots=True)
class PartEntry:
    """One part as the manifest lists it (and as its ``part.json`` repeats it).

    ``extra``: keys beyond the documented ones, kept so that a manifest
    written by a newer builder round-trips unchanged.
    """
    path: str
    num_inner: int
    num_halo: int
    num_edges: int
    num_train: int
    extra: dict[str, Any] = field(default_factory=dict)
    files: dict[str, FileDigest] | None = None   # file name -> size and CRC-32C (None: version 1)

    @property
    def num_nodes(self) -> int:
        return self.num_inner + self.num_halo

    @classmethod
    def from_json(cls, obj: Any, where: str) -> PartEntry:
        """Check one entry: the five keys, counts >= 0, a relative path that stays inside the folder."""
        if not isinstance(obj, dict) or any(k not in obj for k in PART_KEYS):
            raise PartitionsError(f"{where}: malformed manifest entry {obj!r} (expected keys {list(PART_KEYS)})")
        rel = obj["path"]
        if not isinstance(rel, str) or not rel:
            raise PartitionsError(f"{where}: malformed manifest entry {obj!r} (path must be a folder name)")
        # Lexically inside: a reader given the folder must never be sent elsewhere
        # by the manifest ("/etc", "../other"); a symlink placed on purpose is the user's.
        norm = posixpath.normpath(rel.replace("\\", "/"))
        if posixpath.isabs(norm) or os.path.isabs(rel) or norm == "." or norm.split("/")[0] == "..":
            raise PartitionsError(f"{where}: part path {rel!r} must be relative and inside the dataset folder")
        bad = [k for k in PART_KEYS[1:] if not _is_count(obj[k])]
        if bad:
            raise PartitionsError(f"{where}: malformed manifest entry {obj!r} ({', '.join(bad)} must be "
                                  "integers >= 0)")
        files = obj.get("files")
        if files is not None:
            if not isinstance(files, dict) or not all(is_file_name(name) for name in files):
                raise PartitionsError(f"{where}: malformed files list {files!r} (file name -> size and crc32c)")
            files = {name: FileDigest.from_json(d, f"{where}: {name}") for name, d in files.items()}
        return cls(rel, obj["num_inner"], obj["num_halo"], obj["num_edges"], obj["num_train"],
                   {k: v for k, v in obj.items() if k not in PART_KEYS and k != "files"}, files)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "num_inner": self.num_inner, "num_halo": self.num_halo,
                               "num_edges": self.num_edges, "num_train": self.num_train}
        out.update(self.extra)
        if self.files is not None:
            out["files"] = {name: d.to_json() for name, d in self.files.items()}
        return out


@dataclass(frozen=True, slots=True)
class PartitionsManifest:
    """``manifest.json``: what was split, how, the measured metrics and every part.

    ``extra``: top-level keys beyond the documented ones (the builder's
    ``source``), written after them in their own order. ``halo_hops``: every
    node within ``halo_hops - 1`` hops of a part's inner nodes has a complete
    row in it (1: the inner rows only); written only when not 1, so manifests
    of 1-hop builds keep their bytes, and read as 1 when absent.
    """
    algorithm: str
    params: dict[str, Any]
    num_parts: int
    num_nodes: int
    num_edges: int
    directed: bool
    metrics: dict[str, Any]
    parts: tuple[PartEntry, ...]
    extra: dict[str, Any] = field(default_factory=dict)
    version: int = VERSION
    halo_hops: int = 1

    @property
    def checksums(self) -> bool:
        """Whether every part lists the size and CRC-32C of its files (version 2 on)."""
        return self.version >= CHECKSUM_VERSION

    @classmethod
    def from_json(cls, obj: Any, where: str | os.PathLike = MANIFEST) -> PartitionsManifest:
        """Validate a parsed ``manifest.json`` once; raise :class:`PartitionsError` naming ``where``."""
        def fail(message: str) -> PartitionsError:
            return PartitionsError(f"{where}: {message}")

        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            got = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
            raise fail(f"format is {got!r}, expected {FORMAT!r}")
        version = obj.get("version")
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            raise fail(f"version {version!r} is not supported (expected "
                       f"{' or '.join(map(str, READABLE_VERSIONS))})")
        check_seal_when_due(obj, version, CHECKSUM_VERSION, str(where))
        missing = [k for k in TOP_LEVEL_KEYS if k not in obj]
        if missing:
            raise fail(f"manifest lacks {missing}")
        parts = obj["parts"]
        if not isinstance(parts, list) or len(parts) != obj["num_parts"]:
            n = len(parts) if isinstance(parts, list) else "no"
            raise fail(f"num_parts is {obj['num_parts']} but {n} parts are listed")
        bad = [k for k in ("num_parts", "num_nodes", "num_edges") if not _is_count(obj[k])]
        bad += [k for k, t in (("algorithm", str), ("params", dict), ("metrics", dict), ("directed", bool))
                if not isinstance(obj[k], t)]
        if bad:
            raise fail(f"malformed manifest: {', '.join(bad)} of the wrong type")
        halo_hops = obj.get(HALO_HOPS_KEY, 1)
        if not _is_count(halo_hops) or halo_hops < 1:
            raise fail(f"{HALO_HOPS_KEY} is {halo_hops!r}, expected a whole number >= 1")
        entries = tuple(PartEntry.from_json(e, f"{Path(where).parent}: part {i}") for i, e in enumerate(parts))
        if version >= CHECKSUM_VERSION:
            unlisted = [i for i, e in enumerate(entries) if e.files is None]
            if unlisted:
                raise fail(f"parts {unlisted[:5]} lack their files' checksums (required from version "
                           f"{CHECKSUM_VERSION})")
        total_inner = sum(e.num_inner for e in entries)
        if total_inner != obj["num_nodes"]:
            raise fail(f"parts hold {total_inner} inner nodes, the manifest says {obj['num_nodes']} nodes")
        return cls(algorithm=obj["algorithm"], params=obj["params"], num_parts=obj["num_parts"],
                   num_nodes=obj["num_nodes"], num_edges=obj["num_edges"], directed=obj["directed"],
                   metrics=obj["metrics"], parts=entries,
                   extra={k: v for k, v in obj.items()
                          if k not in TOP_LEVEL_KEYS and k not in (SEAL_KEY, HALO_HOPS_KEY)},
                   version=version, halo_hops=halo_hops)

    def to_json(self) -> dict[str, Any]:
        """The document, keys in the documented order, then ``extra``."""
        out: dict[str, Any] = {
            "format": FORMAT, "version": self.version, "algorithm": self.algorithm, "params": self.params,
            "num_parts": self.num_parts, "num_nodes": self.num_nodes, "num_edges": self.num_edges,
            "directed": self.directed,
        }
        if self.halo_hops != 1:
            out[HALO_HOPS_KEY] = self.halo_hops
        out.update({"metrics": self.metrics, "parts": [p.to_json() for p in self.parts]})
        out.update(self.extra)
        return seal(out) if self.version >= CHECKSUM_VERSION else out


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------

def read_manifest(path: str | os.PathLike) -> PartitionsManifest:
    """``manifest.json`` of the dataset folder ``path``, parsed and validated."""
    folder = Path(path)
    if not folder.exists():
        raise PartitionsError(f"{folder}: no such partitioned dataset")
    file = folder / MANIFEST
    if not file.is_file():
        raise PartitionsError(f"{folder}: no {MANIFEST}: not a partitioned dataset (or an unfinished build)")
    try:
        with open(file, encoding="utf-8") as f:
            obj = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PartitionsError(f"{file}: unreadable manifest ({exc})") from exc
    return PartitionsManifest.from_json(obj, file)


# ---------------------------------------------------------------------------
# writing (the builder's side)
# ---------------------------------------------------------------------------

def part_dir_name(index: int) -> str:
    return f"part-{index:05d}"


def write_part_meta(part_dir: Path, num_inner: int) -> None:
    """The first ``part.json``: what only the builder knows (the rest is measured later)."""
    _write_json(part_dir / PART_META, {"num_inner": int(num_inner)})


def read_part_meta(part_dir: Path) -> dict[str, Any]:
    with open(part_dir / PART_META, encoding="utf-8") as f:
        return json.load(f)


def npy_rows(path: Path) -> int:
    """Row count of a ``.npy`` file from its header."""
    _, shape, _, _ = read_npy_header(path)
    return shape[0] if shape else 0


def measure_part(folder: Path, index: int, part_dir: Path | None = None) -> PartEntry:
    """The manifest entry of one written part, measured from its files (and written as its ``part.json``).

    ``part_dir``: where the part's files are now, when not yet at ``folder/part-NNNNN`` (a
    build task measures its part before renaming it into place); the entry names the final path.
    """
    name = part_dir_name(index)
    part_dir = folder / name if part_dir is None else part_dir
    num_inner = int(read_part_meta(part_dir)["num_inner"])
    n_local = npy_rows(part_dir / "global_ids.npy")
    num_edges = npy_rows(part_dir / "indices.npy")
    train = part_dir / "train_mask.npy"
    if train.is_file():
        num_train = int(np.count_nonzero(np.load(train, mmap_mode="r")[:num_inner]))
    else:
        num_train = 0
    # Every data file's size and CRC-32C, read back from the written file (the bytes a
    # reader will check are the ones in the file, not the builder's buffers).
    files = {f.name: file_digest(f) for f in sorted(part_dir.glob("*.npy"))}
    entry = PartEntry(path=name, num_inner=num_inner, num_halo=n_local - num_inner, num_edges=num_edges,
                      num_train=num_train, files=files)
    _write_json(part_dir / PART_META, entry.to_json())
    return entry


def balance(values: list[int], total: float, k: int) -> float:
    """max / mean (1.0 for nothing to balance)."""
    mean = total / k if k else 0.0
    return float(max(values) / mean) if mean > 0 else 1.0


def recompute_metrics(folder: Path, num_parts: int, num_nodes: int) -> tuple[tuple[PartEntry, ...], dict[str, Any]]:
    """Manifest part entries and the replication/balance metrics of the written parts.

    ``replication_factor`` = sum over parts of (num_inner + num_halo) / num_nodes, the nodes a
    trainer loads; ``part_inner`` and ``part_halo`` are its per-part terms, measured here so
    that they replace the partitioner's predictions in the manifest.
    """
    parts = tuple(measure_part(folder, i) for i in range(num_parts))
    return parts, metrics_of_parts(parts, num_nodes)


def metrics_of_parts(parts: tuple[PartEntry, ...], num_nodes: int) -> dict[str, Any]:
    """The replication/balance metrics of measured part entries (see :func:`recompute_metrics`)."""
    num_parts = len(parts)
    local = sum(p.num_nodes for p in parts)
    inner = [p.num_inner for p in parts]
    edges = [p.num_edges for p in parts]
    return {
        "replication_factor": local / num_nodes if num_nodes else 1.0,
        "node_balance": balance(inner, num_nodes, num_parts),
        "edge_balance": balance(edges, sum(edges), num_parts),
        "part_inner": inner,
        "part_halo": [p.num_halo for p in parts],
        # the entries edge_balance is of (the partitioner's own count, edges with an owned endpoint, stayed
        # beside it: one manifest with two edge counts that disagreed)
        "part_edges": edges,
    }


def _write_json(path: Path, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def write_manifest(folder: Path, manifest: PartitionsManifest) -> None:
    """``manifest.json``, the last file of a build."""
    _write_json(folder / MANIFEST, manifest.to_json())


__all__ = ["FORMAT", "MANIFEST", "PART_META", "REQUIRED_FILES", "VERSION", "PartEntry", "PartitionsError",
           "PartitionsManifest", "measure_part", "metrics_of_parts", "read_manifest", "recompute_metrics",
           "write_manifest", "write_part_meta"]
