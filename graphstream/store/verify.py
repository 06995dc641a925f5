"""``graphstream verify PATH``: check a graph store, a snapshot store, dynamic partitions or a
partitioned dataset end to end.

Every chunk is read and its CRC-32C checked, every file of a partitioned dataset
is checksummed, and the contents are checked against what the format promises:
counts and shapes, ``complete``, offsets and ``indptr`` non-decreasing from 0 to
the column length, ids in range, each node owned by exactly one part, every
snapshot rebuilt from its keyframe and deltas to its recorded edge count.
Memory stays bounded: arrays are read a chunk (or 1 Mi elements) at a time.

Problems are collected (up to :data:`MAX_PROBLEMS`) instead of stopping at the
first, so one run lists every damaged chunk or file; :func:`verify` raises
:class:`CorruptDataError` with all of them when there is any.
"""
from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CorruptDataError, GraphStreamError, StoreError, StoreReplacedError, path_argument
from .delta import apply_delta, decode_keys
from .integrity import CHUNKS_KEY, CheckedArray, check_chunks_digests, check_file, folder_identity
from .partitions_manifest import PART_META

if TYPE_CHECKING:
    from .dynamic_partitions import DynamicPartitions
    from .snapshots import SnapshotStore

MAX_PROBLEMS = 20
BLOCK = 1 << 20


@dataclass
class VerifyReport:
    """What :func:`verify` checked; ``problems`` is empty when everything holds."""
    path: str
    kind: str
    version: int | None = None
    checksums: bool = False
    chunks: int = 0
    files: int = 0
    bytes_checked: int = 0   # of the intact chunks and files (chunks and files count every one read)
    items: dict[str, int] = field(default_factory=dict)   # e.g. edges, snapshots, parts
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    chunk_order: bool = False   # whether the store recorded its chunks' digests (and they were checked)
    note: str | None = None     # why the bytes were not all checksummed, where it is not the format's version

    def problem(self, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(message)
        elif len(self.problems) == MAX_PROBLEMS:
            self.problems.append("... (more problems not listed)")

    def to_dict(self) -> dict[str, Any]:
        out = {"path": self.path, "kind": self.kind, "ok": not self.problems, "version": self.version,
               "checksums": self.checksums, "chunks_checked": self.chunks, "files_checked": self.files,
               "bytes_checked": self.bytes_checked, "chunk_order_checked": self.chunk_order, **self.items,
               "seconds": self.seconds}
        if self.note is not None:
            out["note"] = self.note
        elif not self.checksums and self.version is not None:   # (None: it could not be opened to say)
            out["note"] = "written before checksums (format version 1): contents checked, bytes not checksummed"
        if self.problems:
            out["problems"] = self.problems
        return out


def detect_kind(path: str | os.PathLike) -> str:
    """``graph``, ``snapshots``, ``dynamic_partitions`` or ``partitions``, from the format name on disk."""
    p = Path(path)
    if not p.exists():
        raise StoreError(f"{p}: no such file or folder")
    manifest = p / "manifest.json"
    if manifest.is_file():
        fmt = _json_object(manifest, "manifest").get("format")
        kinds = {"graphstream.partitions": "partitions", "graphstream.dynamic_partitions": "dynamic_partitions"}
        if fmt in kinds:
            return kinds[fmt]
        raise StoreError(f"{manifest}: format {fmt!r} is not a graphstream format")
    group_meta = p / "zarr.json"
    if group_meta.is_file():
        attributes = _json_object(group_meta, "group metadata").get("attributes", {})
        if not isinstance(attributes, dict):
            raise CorruptDataError(f"{group_meta}: unreadable group metadata (attributes are not an object)")
        fmt = attributes.get("format")
        kinds = {"graphstream.graph": "graph", "graphstream.snapshots": "snapshots"}
        if fmt in kinds:
            return kinds[fmt]
        raise StoreError(f"{p}: Zarr group of format {fmt!r} is not a graphstream store")
    if (p / "node_data.json").is_file() or ((p / "graph.zarr").is_dir() and (p / "features.npy").is_file()):
        return "node_data"   # graphstream dataset's folder: a graph store and its node data
    raise StoreError(f"{p}: neither a graph or snapshot store (zarr.json), a dataset folder (manifest.json) nor "
                     "a node data folder (graph.zarr and features.npy, from graphstream dataset)")


def _json_object(file: Path, what: str) -> dict[str, Any]:
    """A JSON object from ``file``; anything else (bad JSON, bad text, a list) is damage named by ``what``."""
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptDataError(f"{file}: unreadable {what} ({exc})") from exc
    if not isinstance(doc, dict):
        raise CorruptDataError(f"{file}: unreadable {what} (a JSON {type(doc).__name__}, expected an object)")
    return doc


def verify(path: str | os.PathLike) -> VerifyReport:
    """Check ``path`` end to end; return the report, or raise :class:`CorruptDataError` listing every problem."""
    start = time.perf_counter()
    path = path_argument(path, "path")   # reported as every handle reports it: absolute
    kind = detect_kind(path)
    report = VerifyReport(path=str(path), kind=kind)
    checks: dict[str, Callable[[str, VerifyReport], None]] = {
        "graph": _verify_graph, "snapshots": _verify_snapshots, "partitions": _verify_partitions,
        "dynamic_partitions": _verify_dynamic_partitions, "node_data": _verify_node_data}
    opened = folder_identity(str(path))
    try:
        checks[kind](str(path), report)
    except StoreReplacedError:
        raise
    except GraphStreamError as exc:   # a damage that stops the walk (e.g. an unreadable manifest)
        report.problem(str(exc))
    if report.problems and folder_identity(str(path)) != opened:   # not damage: read across a replacement
        raise StoreReplacedError(f"{path}: replaced or removed while it was being verified (another run "
                                 "wrote this path, with --overwrite?): verify it again")
    report.seconds = time.perf_counter() - start
    if report.problems:   # every one listed (up to MAX_PROBLEMS): the line names each file to look at
        more = f" (and {len(report.problems) - 1} more: {'; '.join(report.problems[1:])})" \
            if len(report.problems) > 1 else ""
        error = CorruptDataError(f"{report.problems[0]}{more}")
        error.report = report   # type: ignore[attr-defined]
        error.json_result = report.to_dict()   # type: ignore[attr-defined]  (--json prints it, exit 2)
        raise error
    return report


# -- node data folders (graphstream dataset's) --------------------------------------------------

def _verify_node_data(path: str, report: VerifyReport) -> None:
    """Its graph store (as a store is verified) and every file node_data.json lists against its CRC-32C;
    the files' headers against the store's node count."""
    from .nodedata import MANIFEST, open_node_data, read_manifest, replaced_hint
    folder = Path(path)
    graph = folder / "graph.zarr"
    num_nodes = None
    if graph.is_dir():
        before = len(report.problems)
        try:
            _verify_graph(str(graph), report)
        except GraphStreamError as exc:
            report.problem(str(exc))
        num_nodes = report.items.get("num_nodes") if len(report.problems) == before else None
    else:
        report.problem(f"{path}: graph.zarr is missing (a node data folder from graphstream dataset holds it)")
    try:
        digests = read_manifest(folder)
    except GraphStreamError as exc:
        report.problem(str(exc))
        return
    for name, digest in (digests or {}).items():
        report.files += 1
        try:
            with replaced_hint():
                check_file(folder / name, digest, f"{path}/{MANIFEST}")
        except GraphStreamError as exc:
            report.problem(str(exc))
            continue
        report.bytes_checked += digest.size
    if digests is None and report.checksums:
        report.checksums = False
        report.note = ("no node_data.json (node data saved by hand, or by graphstream dataset before it wrote one): "
                       "the graph store checked, the node data files' headers only")
    if num_nodes is not None:
        try:
            data = open_node_data(folder, num_nodes, require_features=False)
        except GraphStreamError as exc:
            report.problem(str(exc))
            return
        report.items["node_files"] = len(data.arrays)


# -- Zarr arrays ------------------------------------------------------------------------------

def _blocks(array: CheckedArray, report: VerifyReport) -> Iterator[tuple[int, np.ndarray]]:
    """Every chunk of ``array`` in order, as (start, values); a damaged chunk is a problem and skipped."""
    step = array.chunks[0] if array.chunks and array.chunks[0] else BLOCK
    n = array.shape[0] if array.shape else 0
    for a in range(0, n, step):
        report.chunks += 1   # read and checked, intact or not (a store of two damaged chunks said 0)
        try:
            values = array[a:min(a + step, n)]
        except CorruptDataError as exc:
            report.problem(str(exc))
            continue
        report.bytes_checked += values.nbytes
        yield a, values


def _check_ids(name: str, a: int, ids: np.ndarray, limit: int, report: VerifyReport) -> None:
    if len(ids) and (ids.min() < 0 or ids.max() >= limit):
        bad = int(np.flatnonzero((ids < 0) | (ids >= limit))[0])
        report.problem(f"{name}[{a + bad}] = {ids[bad]} is outside [0, {limit})")


def _check_chunk_order(arrays: dict[str, CheckedArray], attrs: dict[str, Any], path: str,
                       report: VerifyReport) -> None:
    """Each array's chunk files are the ones written there (:data:`~.integrity.CHUNKS_KEY`), for the
    arrays whose chunks all passed their own checksums (a damaged one is listed already). Stores
    written before the digest was recorded, and stores at a URL, have none to check."""
    if CHUNKS_KEY not in attrs:
        return
    report.chunk_order = True
    for problem in check_chunks_digests(arrays, attrs[CHUNKS_KEY], path):
        report.problem(problem)


def _verify_graph(path: str, report: VerifyReport) -> None:
    from .graph import open_store
    store = open_store(path)
    report.version, report.checksums = store.manifest.version, store.checksums
    report.items.update(num_nodes=store.num_nodes, num_edges=store.num_edges)
    intact: dict[str, CheckedArray] = {}
    for name in store.columns:
        array = store.array(name, check_ids=False)   # every bad id a problem of the report, not the first an error
        before = len(report.problems)
        for a, values in _blocks(array, report):
            if name in ("src", "dst"):
                _check_ids(f"{path}: {name}", a, values, store.num_nodes, report)
            elif name == "weight" and not np.all(np.isfinite(values)):
                bad = int(np.flatnonzero(~np.isfinite(values))[0])
                report.problem(f"{path}: weight[{a + bad}] = {values[bad]} is not finite")
        if len(report.problems) == before:
            intact[name] = array
    if store.info.has_id_map:
        id_map = store.array("id_map")
        if id_map.shape != (store.num_nodes,):
            report.problem(f"{path}: id_map has shape {id_map.shape}, expected ({store.num_nodes},)")
        before = len(report.problems)
        for _ in _blocks(id_map, report):
            pass
        if len(report.problems) == before:
            intact["id_map"] = id_map
    _check_chunk_order(intact, store.attrs, path, report)


def _verify_snapshots(path: str, report: VerifyReport) -> None:
    from .snapshots import open_snapshots
    store = open_snapshots(path)
    intact = _check_snapshot_columns(store, path, report, store.num_nodes)
    if not report.problems:   # rebuilding from damaged columns would only repeat what is listed
        _while_applicable(lambda: deque(_rebuilt_snapshots(store, path, report), maxlen=0), report)
    _check_chunk_order(intact, store.attrs, path, report)


def _check_snapshot_columns(store: SnapshotStore, path: str, report: VerifyReport,
                            node_limit: int) -> dict[str, CheckedArray]:
    """Every column read against its checksums and its ids against ``node_limit``; the intact columns."""
    from .snapshots import RAGGED_COLUMNS
    report.version, report.checksums = store.manifest.version, store.checksums
    report.items["snapshots"] = store.num_snapshots   # a dynamic partition's parts: the same snapshots each
    ids = {"kf_src", "kf_dst", "add_src", "add_dst"} | ({"inner"} if store.has_node_lists else set())
    for prefix, cols in RAGGED_COLUMNS.items():
        lengths = {c: store._checked(f"{prefix}_{c}").shape[0] for c in cols}
        if len(set(lengths.values())) > 1:
            report.problem(f"{path}: columns of {prefix!r} differ in length {lengths}")
    intact: dict[str, CheckedArray] = {}
    for name in sorted(store._zarr_arrays):
        array = store._checked(name, check_ids=False)   # every bad id a problem of the report
        before = len(report.problems)
        for a, values in _blocks(array, report):
            if name in ids:
                _check_ids(f"{path}: {name}", a, values, node_limit, report)
            elif name.endswith("_count") and len(values) and values.min() < 1:
                report.problem(f"{path}: {name} holds a count < 1 (first at {a + int(np.argmin(values))})")
        if len(report.problems) == before:
            intact[name] = array
    return intact


def _while_applicable(check: Callable[[], object], report: VerifyReport) -> None:
    """Runs a check that rebuilds snapshots; a delta that cannot be applied is listed as a problem."""
    try:
        check()
    except StoreReplacedError:
        raise
    except GraphStreamError as exc:   # listed, and the chunk order still checked
        report.problem(str(exc))


def _rebuilt_snapshots(store: SnapshotStore, path: str, report: VerifyReport) -> Iterator[np.ndarray]:
    """Each snapshot rebuilt and its counts checked, its keys yielded in order; stops at a problem."""
    from .snapshots import count_active
    # At a keyframe also the delta chain that leads to it is checked (a reader starting at an earlier
    # keyframe gets the chain's snapshot, one starting there the keyframe's: with valid checksums the two
    # could still disagree).
    prev_keys, prev_counts = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    mark = np.zeros(store.num_nodes, dtype=np.bool_)   # count_active's scratch, as the writer counted
    for t in range(store.num_snapshots):
        chain = None
        if t > 0:
            delta = store.key_delta(t)
            # Removed positions index snapshot t-1; changed positions index snapshot t.
            new_len = len(prev_keys) - len(delta.removed_pos) + len(delta.added_keys)
            for what, pos, limit, of in (("removed", delta.removed_pos, len(prev_keys), t - 1),
                                         ("changed", delta.changed_pos, new_len, t)):
                if len(pos) and (pos.min() < 0 or pos.max() >= limit):
                    report.problem(f"{path}: snapshot {t}: a {what} position is outside the {limit} edges of "
                                   f"snapshot {of}")
            if report.problems:
                return
            if t % store.keyframe_every == 0:
                chain = apply_delta(prev_keys, prev_counts, delta.removed_pos, delta.added_keys,
                                    delta.added_counts, delta.changed_pos, delta.changed_counts)
        keys, counts = store.snapshot_keys(t)
        if chain is not None and not (np.array_equal(chain[0], keys) and np.array_equal(chain[1], counts)):
            report.problem(f"{path}: snapshot {t}: its keyframe differs from the snapshot its deltas rebuild "
                           f"({len(keys)} and {len(chain[0])} edges)")
        if len(keys) != store.edge_counts[t]:
            report.problem(f"{path}: snapshot {t} rebuilds to {len(keys)} edges, edge_counts says "
                           f"{store.edge_counts[t]}")
        if len(keys) > 1 and not bool(np.all(keys[1:] > keys[:-1])):
            report.problem(f"{path}: snapshot {t} is not in canonical order (sorted, distinct)")
        nodes = int(count_active(*decode_keys(keys, store.num_nodes, store.id_dtype), mark)) if len(keys) else 0
        if nodes != store.node_counts[t]:
            report.problem(f"{path}: snapshot {t} has {nodes} active nodes, node_counts says {store.node_counts[t]}")
        if len(report.problems) >= MAX_PROBLEMS:
            return
        prev_keys, prev_counts = keys, counts
        yield keys


def _verify_dynamic_partitions(path: str, report: VerifyReport) -> None:
    from .dynamic_partitions import open_dynamic_partitions
    parts = open_dynamic_partitions(path)
    report.items["parts"] = parts.num_parts
    intact = []
    for part in parts:
        intact.append(_check_snapshot_columns(part, part.path, report, part.num_local_nodes))
        global_ids = part.global_ids
        _check_ids(f"{part.path}: global_ids", 0, global_ids, parts.num_nodes, report)
        if len(global_ids) > 1 and not bool(np.all(global_ids[1:] > global_ids[:-1])):
            report.problem(f"{part.path}: global_ids are not sorted and distinct")
    if not report.problems:   # each store's columns sound: its snapshots rebuilt, the parts' side by side
        _while_applicable(lambda: _check_dynamic_ownership(path, parts, report), report)
    for part, arrays in zip(parts, intact, strict=True):
        _check_chunk_order(arrays, part.attrs, part.path, report)


def _check_dynamic_ownership(path: str, parts: DynamicPartitions, report: VerifyReport) -> None:
    """Every part's snapshots rebuilt once (their counts checked) and, at every snapshot, each active node
    (an endpoint of an edge of some part's snapshot: every edge is in the parts of both its endpoints'
    owners) owned by exactly one part."""
    rebuilt = [_rebuilt_snapshots(part, part.path, report) for part in parts]
    for t in range(parts.num_snapshots):
        owned, active = [], []
        for part, snapshots in zip(parts, rebuilt, strict=True):
            keys = next(snapshots, None)
            if keys is None:   # a problem in that part's rebuild: listed, and the parts no longer compared
                return
            ids = part.global_ids
            src, dst = decode_keys(keys, part.num_nodes, part.id_dtype)
            owned.append(ids[part.owned(t)])
            active.append(ids[np.union1d(src, dst)])
        owned_all = np.sort(np.concatenate(owned))
        twice = owned_all[1:][owned_all[1:] == owned_all[:-1]]
        unowned = np.setdiff1d(np.concatenate(active), owned_all)
        if len(twice):
            report.problem(f"{path}: snapshot {t}: {len(np.unique(twice))} node(s) owned by more than one part "
                           f"(node {twice[0]} first)")
        if len(unowned):
            report.problem(f"{path}: snapshot {t}: {len(unowned)} active node(s) owned by no part "
                           f"(node {unowned[0]} first)")
        if len(twice) or len(unowned):
            return   # one snapshot named: the parts do not belong together


# -- the partitioned dataset ------------------------------------------------------------------

def _mark_owned(owned: np.ndarray, inner, where: str, report: VerifyReport) -> None:
    inner = np.asarray(inner)
    inner = inner[(inner >= 0) & (inner < owned.size)]
    if bool(np.any(owned[inner])) or len(np.unique(inner)) != len(inner):
        report.problem(f"{where}: owns nodes that another part (or this one) already owns")
    owned[inner] = True


def _verify_partitions(path: str, report: VerifyReport) -> None:
    from .partitions import open_partitions
    dataset = open_partitions(path)
    info = dataset.info
    report.version, report.checksums = info.version, info.checksums
    report.items.update(parts=len(dataset), num_nodes=info.num_nodes, num_edges=info.num_edges)
    owned = np.zeros(info.num_nodes, dtype=np.bool_)
    ownership_known = True   # a part whose global_ids.npy is damaged says nothing about what it owns
    for part, entry in zip(dataset, info.parts, strict=True):
        where = f"{path}: part {part.index} ({part.path.name})"
        damaged = False
        try:   # part.json repeats the manifest entry, for tools that look at one part alone
            repeated = json.loads((part.path / PART_META).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            repeated = f"unreadable ({exc.__class__.__name__})"
        if repeated != entry.to_json():
            report.problem(f"{where}: {PART_META} differs from the manifest's entry ({str(repeated)[:80]})")
        for name, digest in (part.files or {}).items():
            report.files += 1
            try:
                check_file(part.path / name, digest, where)
            except CorruptDataError as exc:
                report.problem(str(exc))
                damaged = True
                ownership_known &= name != "global_ids.npy"
                continue
            report.bytes_checked += digest.size
        if damaged:
            if ownership_known:   # its other files are damaged, not its ownership: count its nodes owned
                _mark_owned(owned, np.load(Path(part.path) / "global_ids.npy", mmap_mode="r")[:part.num_inner],
                            where, report)
            continue
        raw = Path(part.path)

        def load(name: str, raw: Path = raw) -> np.ndarray:   # the digests were checked above
            return np.load(raw / f"{name}.npy", mmap_mode="r")

        indptr = load("indptr")
        if indptr[0] != 0 or indptr[-1] != part.num_edges:
            report.problem(f"{where}: indptr runs from {indptr[0]} to {indptr[-1]}, expected 0 to {part.num_edges}")
        for a in range(0, len(indptr), BLOCK):
            block = np.asarray(indptr[max(a - 1, 0):a + BLOCK])
            if len(block) > 1 and bool(np.any(np.diff(block) < 0)):
                report.problem(f"{where}: indptr decreases near row {a + int(np.argmax(np.diff(block) < 0))}")
                break
        indices = load("indices")
        for a in range(0, len(indices), BLOCK):
            _check_ids(f"{where}: indices", a, np.asarray(indices[a:a + BLOCK]), part.num_nodes, report)
        global_ids = load("global_ids")
        for a in range(0, len(global_ids), BLOCK):
            _check_ids(f"{where}: global_ids", a, np.asarray(global_ids[a:a + BLOCK]), info.num_nodes, report)
        _mark_owned(owned, global_ids[:part.num_inner], where, report)
        degree = load("degree")
        if len(degree) and int(np.min(degree)) < 0:
            report.problem(f"{where}: degree.npy holds negative degrees")
        if "labels" in part.node_files and load("labels").dtype.kind not in "iu":
            report.problem(f"{where}: labels.npy has dtype {load('labels').dtype}, expected integers")
        for name in part.node_files:
            if name.endswith("_mask") and load(name).dtype != np.bool_:
                report.problem(f"{where}: {name}.npy has dtype {load(name).dtype}, expected bool")
    missing = info.num_nodes - int(np.count_nonzero(owned))
    if missing and ownership_known:
        report.problem(f"{path}: {missing} nodes are owned by no part")
