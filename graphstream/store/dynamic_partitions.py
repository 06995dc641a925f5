"""The dynamic partitions format: per-part snapshot sequences (``partition SNAP.zarr --out DIR``).

Layout of DIR::

    manifest.json        format, params, metrics, parts: [{path, num_nodes, ...}]
    part-00000/          snapshot store over local ids 0..n_p-1, plus
                         global_ids (n_p,) sorted: local id -> global node id
                         inner, inner_offsets: owned local ids per snapshot

The manifest is read and written through :class:`DynamicPartitionsManifest`
only; part paths are relative and stay inside DIR.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorruptDataError, StoreError, path_argument
from .integrity import check_seal_when_due, seal
from .snapshots import SnapshotStore, open_snapshots

FORMAT = "graphstream.dynamic_partitions"
# Version 2: manifest.json carries its own CRC-32C ("crc32c"); its parts are checksummed snapshot stores.
VERSION = 2
READABLE_VERSIONS = (1, 2)
MANIFEST = "manifest.json"
# The attribute of every part, and the manifest field, naming the partitioning they belong to.
PARTITIONING_KEY = "partitioning"
RUN_SETTINGS = ("scratch_dir", "memory_budget")   # PGCConfig fields that leave the parts as they are


def partitioning_id(source_attrs: dict[str, Any], algorithm: str, params: dict[str, Any]) -> str:
    """What tells one partitioning's parts from another's: a digest of the source store's sealed
    attributes, the algorithm and its parameters. The same for the same inputs (a rerun writes the same
    bytes), different for another store, algorithm or setting."""
    # the run's own settings (where it spills, how much memory it may hold) do not change the parts
    params = {k: v for k, v in params.items() if k not in RUN_SETTINGS}
    doc = json.dumps({"source": source_attrs, "algorithm": algorithm, "params": params}, sort_keys=True,
                     default=str)
    return hashlib.sha256(doc.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class DynamicPartitionsManifest:
    """``manifest.json`` of a dynamic partitions folder, checked once.

    ``raw`` keeps the whole document (params, metrics, per-part figures) in
    the order written, so :meth:`to_json` gives back the same bytes.
    """
    algorithm: str
    num_parts: int
    num_snapshots: int
    num_nodes: int
    keyframe_every: int
    part_paths: tuple[str, ...]
    raw: dict[str, Any]

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> DynamicPartitionsManifest:
        if not isinstance(doc, dict):
            raise StoreError(f"{where}: manifest is not a JSON object")
        if doc.get("format") != FORMAT:
            raise StoreError(f"{where}: format {doc.get('format')!r}, expected {FORMAT!r}")
        version = doc.get("version", 1)
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            raise StoreError(f"{where}: dynamic partitions version {doc.get('version')!r}, this graphstream "
                             f"reads versions {' and '.join(map(str, READABLE_VERSIONS))}")
        check_seal_when_due(doc, version, 2, where)
        try:
            parts = doc["parts"]
            manifest = cls(algorithm=str(doc["algorithm"]), num_parts=int(doc["num_parts"]),
                           num_snapshots=int(doc["num_snapshots"]), num_nodes=int(doc["num_nodes"]),
                           keyframe_every=int(doc["keyframe_every"]),
                           part_paths=tuple(str(part["path"]) for part in parts), raw=doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"{where}: damaged manifest ({exc!r})") from exc
        if len(manifest.part_paths) != manifest.num_parts:
            raise StoreError(f"{where}: manifest lists {len(manifest.part_paths)} parts, num_parts is "
                             f"{manifest.num_parts}")
        for path in manifest.part_paths:
            if Path(path).is_absolute() or ".." in Path(path).parts or not path:
                raise StoreError(f"{where}: part path {path!r} must be relative and inside the folder")
        return manifest

    @classmethod
    def from_json(cls, text: str, where: str) -> DynamicPartitionsManifest:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StoreError(f"{where}: unreadable manifest ({exc})") from exc
        return cls.from_dict(doc, where)

    def to_json(self) -> str:
        return json.dumps(seal(self.raw) if self.raw.get("version", 1) >= 2 else self.raw, indent=1)


# -- the reader ---------------------------------------------------------------------

class DynamicPart(SnapshotStore):
    """One part's snapshot sequence over local ids.

    ``snapshot(t)`` / ``delta(t)`` / ``keyframes`` as for any snapshot
    store (local ids); ``global_ids[local]`` is the global node id;
    ``owned(t)`` are the local ids of the instances this part owns at t
    (the rest of the nodes in snapshot t's edges are its halo).
    """

    def __init__(self, group, path: str):
        super().__init__(group, path)
        self.part = int(self.attrs.get("part", -1))
        self.global_ids = self.array("global_ids")

    @property
    def num_local_nodes(self) -> int:
        return len(self.global_ids)

    def owned(self, t: int) -> np.ndarray:
        return self.node_list(t)

    def halo(self, t: int) -> np.ndarray:
        src, dst = self.snapshot(t)
        return np.setdiff1d(np.union1d(src, dst), self.owned(t))

    def to_global(self, local: np.ndarray) -> np.ndarray:
        return self.global_ids[np.asarray(local)]


class DynamicPartitions:
    """A folder of per-part snapshot sequences (open with :func:`open_dynamic_partitions`)."""

    def __init__(self, path: str, manifest: DynamicPartitionsManifest):
        self.path = path
        self.info = manifest
        self.manifest = manifest.raw
        self.num_parts = manifest.num_parts
        self.num_snapshots = manifest.num_snapshots
        self.num_nodes = manifest.num_nodes
        self.keyframe_every = manifest.keyframe_every
        self.algorithm = manifest.algorithm
        self.metrics = manifest.raw.get("metrics", {})
        self._parts: dict[int, DynamicPart] = {}

    def part(self, p: int) -> DynamicPart:
        if not 0 <= p < self.num_parts:
            raise IndexError(f"part {p} out of range [0, {self.num_parts})")
        if p not in self._parts:
            path = str(Path(self.path) / self.info.part_paths[p])
            store = open_snapshots(path)
            part = DynamicPart(store._group, path)
            # each part's sealed attributes name its place: a part folder copied over another, or two
            # swapped, passed every check (each store intact on its own)
            recorded = (part.part, part.attrs.get("num_parts"), part.attrs.get("global_num_nodes"))
            if recorded != (p, self.num_parts, self.num_nodes):
                raise CorruptDataError(
                    f"{path}: holds part {recorded[0]} of {recorded[1]} (of a graph of {recorded[2]} nodes), where "
                    f"the manifest lists part {p} of {self.num_parts} ({self.num_nodes} nodes): a part folder "
                    "copied or moved from elsewhere")
            # ... and its partitioning (folders written before it was recorded have none to compare)
            expected = self.manifest.get(PARTITIONING_KEY)
            if (expected is not None and part.attrs.get(PARTITIONING_KEY) != expected) \
                    or part.num_snapshots != self.num_snapshots:
                counts = (f"{part.num_snapshots} snapshots where the manifest's has {self.num_snapshots}; "
                          if part.num_snapshots != self.num_snapshots else "")
                raise CorruptDataError(
                    f"{path}: part {p} of another partitioning ({counts}the manifest's is "
                    f"{self.manifest.get('source')!r} by {self.algorithm}): a part folder copied from another "
                    "partitions folder, or the folder rewritten while it was open")
            self._parts[p] = part
        return self._parts[p]

    @property
    def parts(self) -> list[DynamicPart]:
        return [self.part(p) for p in range(self.num_parts)]

    def __len__(self) -> int:
        return self.num_parts

    def __getitem__(self, p: int) -> DynamicPart:
        return self.part(p)

    def __iter__(self) -> Iterator[DynamicPart]:
        for p in range(self.num_parts):
            yield self.part(p)


def open_dynamic_partitions(path: str | os.PathLike) -> DynamicPartitions:
    """Open a folder written by ``graphstream partition SNAP.zarr --out DIR``."""
    path = path_argument(path, "path")
    mpath = Path(path) / MANIFEST
    if not mpath.is_file():
        raise StoreError(f"{path}: no manifest.json (not a dynamic partitions folder)")
    return DynamicPartitions(path, DynamicPartitionsManifest.from_json(mpath.read_text(), str(mpath)))


