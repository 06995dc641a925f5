"""The snapshot store format: a dynamic graph as keyframes + deltas (spec dynamic.md).

Layout (a Zarr v3 group, attribute ``format`` = "graphstream.snapshots"):

- ``edge_counts`` (T,), ``node_counts`` (T,): distinct edges and active nodes
  (nodes with at least one edge) per snapshot;
- keyframes (every K-th snapshot, t % K == 0), ragged over keyframes:
  ``kf_src``, ``kf_dst``, ``kf_count``, ``kf_offsets``;
- deltas from t-1 to t for every t >= 1, ragged over t (row 0 is empty):
  ``add_src``, ``add_dst``, ``add_count``, ``add_offsets``; ``rem_pos``,
  ``rem_offsets`` (positions in t-1's canonical list); ``chg_pos``,
  ``chg_count``, ``chg_offsets`` (surviving edges whose count changed);
- optionally per-snapshot node lists ``inner``, ``inner_offsets`` and
  auxiliary arrays (``global_ids``) for per-part sequences.

Edges are canonical: sorted by (src, dst), duplicates merged with a count.
The group attributes are described by :class:`SnapshotManifest`, read and
written there only; ``complete`` is set last. Building a store from
timestamped events is :func:`graphstream.dynamic.build_snapshots`.
"""
from __future__ import annotations

import numbers
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from numba import njit

from .._atomic import check_output_name
from ..errors import CorruptDataError, ParameterError, StoreError, path_argument
from .delta import (
    Delta,
    KeyDelta,
    apply_delta,
    check_key_space,
    decode_keys,
    delta_transfer_bytes,
    diff_sorted,
    encode_keys,
)
from .graph import check_group_header, default_compressor, id_dtype_for, is_url, open_group
from .integrity import (
    CHUNK_ARRAY_CONFIG,
    CHUNKS_KEY,
    SEAL_KEY,
    CheckedArray,
    FolderIdentity,
    check_seal_when_due,
    chunk_codecs,
    chunks_digests,
    folder_identity,
    open_arrays,
    seal,
)

FORMAT = "graphstream.snapshots"
# Version 2: every chunk carries a CRC-32C and is always written (version 1 stays readable, unchecked).
VERSION = 2
READABLE_VERSIONS = (1, 2)
CHECKSUM_VERSION = 2
DEFAULT_KEYFRAME_EVERY = 8
RAGGED_CHUNK = 1 << 20
OFFSETS_CHUNK = 1 << 16   # per-snapshot int64 columns (offsets, counts): written 64 Ki values at a time
NODE_ID_ARRAYS = frozenset({"kf_src", "kf_dst", "add_src", "add_dst"})   # ids in [0, num_nodes)
EMPTY = np.empty(0, dtype=np.int64)


# -- the manifest (group attributes) ----------------------------------------------

@dataclass(frozen=True, slots=True)
class SnapshotManifest:
    """The attributes of a complete snapshot store, checked once.

    ``extra`` keeps every other attribute (window, source, per-part fields)
    in the order written.
    """
    num_snapshots: int
    num_nodes: int
    directed: bool
    id_dtype: str
    keyframe_every: int
    node_lists: bool
    totals: dict[str, int]
    extra: dict[str, Any]
    version: int = VERSION

    @property
    def checksums(self) -> bool:
        return self.version >= CHECKSUM_VERSION

    TOTALS = ("bytes_full", "bytes_stored", "transfer_bytes_full", "transfer_bytes_delta",
              "transfer_bytes_adaptive")

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any], where: str) -> SnapshotManifest:
        check_group_header(attrs, FORMAT, READABLE_VERSIONS, "snapshot store", where)
        check_seal_when_due(attrs, attrs["version"], CHECKSUM_VERSION, f"{where}/zarr.json")
        try:
            manifest = cls(num_snapshots=int(attrs["num_snapshots"]), num_nodes=int(attrs["num_nodes"]),
                           directed=bool(attrs["directed"]), id_dtype=str(np.dtype(attrs["id_dtype"])),
                           keyframe_every=int(attrs["keyframe_every"]),
                           node_lists=bool(attrs.get("node_lists", False)),
                           totals={k: int(attrs[k]) for k in cls.TOTALS if k in attrs},
                           extra={k: v for k, v in attrs.items() if k not in _CORE_KEYS},
                           version=int(attrs["version"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"{where}: damaged snapshot store attributes ({exc!r})") from exc
        if manifest.num_snapshots < 1 or manifest.num_nodes < 0 or manifest.keyframe_every < 1:
            raise StoreError(f"{where}: damaged snapshot store attributes (num_snapshots="
                             f"{manifest.num_snapshots}, num_nodes={manifest.num_nodes}, "
                             f"keyframe_every={manifest.keyframe_every})")
        return manifest

    def to_attrs(self) -> dict[str, Any]:
        """The attributes written when the store is closed (``complete`` is set after them)."""
        attrs = {"num_snapshots": self.num_snapshots, "num_nodes": self.num_nodes,
                 "directed": self.directed, "id_dtype": self.id_dtype,
                 "keyframe_every": self.keyframe_every, "node_lists": self.node_lists}
        attrs.update(self.totals)
        attrs.update(self.extra)
        return attrs


_CORE_KEYS = frozenset((SEAL_KEY, "format", "version", "complete", "num_snapshots", "num_nodes", "directed", "id_dtype",
                        "keyframe_every", "node_lists", *SnapshotManifest.TOTALS))


# -- the writer ----------------------------------------------------------------

RAGGED_COLUMNS = {"kf": ("src", "dst", "count"), "add": ("src", "dst", "count"), "rem": ("pos",),
                  "chg": ("pos", "count")}


def store_arrays(node_lists: bool) -> tuple[str, ...]:
    """The arrays every snapshot store holds (with ``node_lists`` also ``inner`` and its offsets)."""
    names = [f"{prefix}_{c}" for prefix, cols in RAGGED_COLUMNS.items() for c in (*cols, "offsets")]
    names += ["inner", "inner_offsets"] if node_lists else []
    return (*names, "edge_counts", "node_counts")


class _IntColumn:
    """An append-only int64 array written in whole chunks: O(chunk) memory however many values
    (offsets and counts have one per snapshot, and a store may hold 10^8 snapshots)."""

    def __init__(self, group: zarr.Group, name: str, chunk: int):
        self.array = _create_array(group, name, (0,), chunk, np.dtype(np.int64))
        self.buffer = np.empty(chunk, dtype=np.int64)
        self.filled = 0
        self.written = 0
        self.last = 0

    def __len__(self) -> int:
        return self.written + self.filled

    def append(self, value: int) -> None:
        self.buffer[self.filled] = value
        self.filled += 1
        self.last = value
        if self.filled == self.buffer.size:
            self.flush()

    def flush(self) -> None:
        if self.filled:
            end = self.written + self.filled
            self.array.resize((end,))
            self.array[self.written:end] = self.buffer[:self.filled]
            self.written, self.filled = end, 0


class _Ragged:
    """Append-only ragged columns with offsets, flushed in whole chunks."""

    def __init__(self, group: zarr.Group, prefix: str, columns: dict[str, np.dtype], chunk: int):
        self.group, self.prefix, self.chunk = group, prefix, chunk
        self.arrays = {c: _create_array(group, f"{prefix}_{c}" if c != prefix else c, (0,), chunk, dt)
                       for c, dt in columns.items()}
        self.dtypes = dict(columns)
        self.pending: dict[str, list[np.ndarray]] = {c: [] for c in columns}
        self.npending = 0
        self.written = 0
        self.offsets = _IntColumn(group, f"{prefix}_offsets", min(chunk, OFFSETS_CHUNK))
        self.offsets.append(0)

    def append(self, **cols: np.ndarray) -> None:
        n = len(next(iter(cols.values())))
        if any(len(a) != n for a in cols.values()):
            raise ParameterError(f"ragged columns {list(cols)} differ in length")
        if n:   # an empty row is its offset only (empty windows would pile up arrays of nothing here)
            for c, a in cols.items():
                self.pending[c].append(np.asarray(a).astype(self.dtypes[c], copy=False))
        self.npending += n
        self.offsets.append(self.offsets.last + n)
        if self.npending >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if self.npending == 0:
            return
        end = self.written + self.npending
        for c, parts in self.pending.items():
            data = np.concatenate(parts) if len(parts) > 1 else parts[0]
            arr = self.arrays[c]
            arr.resize((end,))
            arr[self.written:end] = data
            self.pending[c] = []
        self.written, self.npending = end, 0

    def close(self) -> None:
        self.flush()
        self.offsets.flush()


def _create_array(group: zarr.Group, name: str, shape: tuple[int, ...], chunk: int, dtype) -> zarr.Array:
    """Every array of a snapshot store: compressed, each chunk checksummed and always written."""
    return group.create_array(name, shape=shape, chunks=(chunk,), dtype=dtype,
                              compressors=chunk_codecs(default_compressor()), fill_value=0, config=CHUNK_ARRAY_CONFIG)


@njit(cache=True)
def count_active(src, dst, mark):
    """Distinct nodes among src and dst; ``mark`` (all False) is restored."""
    n = 0
    for arr in (src, dst):
        for i in range(arr.shape[0]):
            v = arr[i]
            if not mark[v]:
                mark[v] = True
                n += 1
    for arr in (src, dst):
        for i in range(arr.shape[0]):
            mark[arr[i]] = False
    return n


@dataclass
class SnapshotTotals:
    """Raw (uncompressed) byte accounting, topology only (src/dst ids, positions)."""
    bytes_full: int = 0          # every snapshot stored in full
    bytes_stored: int = 0        # keyframes + every delta (what this store holds)
    transfer_bytes_full: int = 0   # ship every snapshot in full
    transfer_bytes_delta: int = 0  # ship snapshot 0, then deltas
    transfer_bytes_adaptive: int = 0  # per step the smaller of delta and full copy
    total_edges: int = 0
    total_added: int = 0
    total_removed: int = 0


class SnapshotWriter:
    """Write canonical snapshots one by one, in order; ``close()`` marks complete.

    ``append(keys, counts)`` takes snapshot t as sorted distinct int64 keys
    (``src * num_nodes + dst``) and their counts; the writer keeps t-1 to
    compute the delta. ``node_lists``: also store one node list per snapshot
    (``inner``), e.g. the owned nodes of a part.
    """

    def __init__(self, path: str | os.PathLike, *, num_nodes: int, keyframe_every: int = DEFAULT_KEYFRAME_EVERY,
                 directed: bool = True, node_lists: bool = False, attrs: dict[str, Any] | None = None,
                 chunk: int = RAGGED_CHUNK):
        if int(keyframe_every) < 1:
            raise ParameterError(f"--keyframe-every must be >= 1, got {keyframe_every}")
        check_key_space(num_nodes)
        self.path = path_argument(path, "path")
        if not is_url(self.path):   # "nx/." wrote a store named nx (its own name, as every output's)
            check_output_name(self.path)
        if Path(self.path).exists():
            raise StoreError(f"{self.path}: snapshot store path already exists")
        self.num_nodes = int(num_nodes)
        self.keyframe_every = int(keyframe_every)
        self.directed = bool(directed)
        self.id_dtype = id_dtype_for(self.num_nodes)
        self.id_bytes = self.id_dtype.itemsize
        self.group = zarr.open_group(self.path, mode="w-")
        self.group.attrs.update({"format": FORMAT, "version": VERSION, "complete": False})
        idt = self.id_dtype
        self.kf = _Ragged(self.group, "kf", {"src": idt, "dst": idt, "count": np.int32}, chunk)
        self.add = _Ragged(self.group, "add", {"src": idt, "dst": idt, "count": np.int32}, chunk)
        self.rem = _Ragged(self.group, "rem", {"pos": np.int64}, chunk)
        self.chg = _Ragged(self.group, "chg", {"pos": np.int64, "count": np.int32}, chunk)
        self.inner = _Ragged(self.group, "inner", {"inner": idt}, chunk) if node_lists else None
        self.extra_attrs = dict(attrs or {})
        self.edge_counts = _IntColumn(self.group, "edge_counts", OFFSETS_CHUNK)
        self.node_counts = _IntColumn(self.group, "node_counts", OFFSETS_CHUNK)
        self.totals = SnapshotTotals()
        self._prev_k, self._prev_c = EMPTY, EMPTY
        self._mark = np.zeros(self.num_nodes, dtype=np.bool_)
        self._closed = False

    @property
    def num_snapshots(self) -> int:
        return len(self.edge_counts)

    def append(self, keys: np.ndarray, counts: np.ndarray, inner: np.ndarray | None = None) -> KeyDelta | None:
        """Add snapshot t (= the number appended so far); returns its delta (None at t=0)."""
        t = self.num_snapshots
        keys = np.asarray(keys, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        src, dst = decode_keys(keys, self.num_nodes, self.id_dtype)
        e = len(keys)
        self.edge_counts.append(e)
        self.node_counts.append(int(count_active(src, dst, self._mark)) if e else 0)
        tot = self.totals
        full = e * 2 * self.id_bytes
        tot.bytes_full += full
        tot.transfer_bytes_full += full
        tot.total_edges += e
        if t % self.keyframe_every == 0:
            self.kf.append(src=src, dst=dst, count=counts)
            tot.bytes_stored += full
        delta = None
        if t == 0:
            self.add.append(src=EMPTY, dst=EMPTY, count=EMPTY)
            self.rem.append(pos=EMPTY)
            self.chg.append(pos=EMPTY, count=EMPTY)
            tot.transfer_bytes_delta += full
            tot.transfer_bytes_adaptive += full
        else:
            delta = diff_sorted(self._prev_k, self._prev_c, keys, counts)
            asrc, adst = decode_keys(delta.added_keys, self.num_nodes, self.id_dtype)
            self.add.append(src=asrc, dst=adst, count=delta.added_counts)
            self.rem.append(pos=delta.removed_pos)
            self.chg.append(pos=delta.changed_pos, count=delta.changed_counts)
            nbytes = delta_transfer_bytes(len(delta.added_keys), len(delta.removed_pos), len(self._prev_k),
                                          self.id_bytes)
            tot.bytes_stored += nbytes
            tot.transfer_bytes_delta += nbytes
            tot.transfer_bytes_adaptive += min(nbytes, full)
            tot.total_added += len(delta.added_keys)
            tot.total_removed += len(delta.removed_pos)
        if self.inner is not None:
            self.inner.append(inner=EMPTY if inner is None else inner)
        elif inner is not None:
            raise ParameterError("this writer stores no node lists")
        self._prev_k, self._prev_c = keys, counts
        return delta

    def write_array(self, name: str, data: np.ndarray) -> None:
        data = np.asarray(data)
        arr = _create_array(self.group, name, data.shape, max(1, min(len(data), 1 << 22)), data.dtype)
        arr[...] = data

    def close(self, attrs: dict[str, Any] | None = None) -> None:
        if self._closed:
            raise StoreError(f"{self.path}: writer already closed")
        if self.num_snapshots == 0:
            raise ParameterError(f"{self.path}: no snapshots were written")
        for r in (self.kf, self.add, self.rem, self.chg, self.inner):
            if r is not None:
                r.close()
        self.edge_counts.flush()
        self.node_counts.flush()
        t = self.totals
        manifest = SnapshotManifest(
            num_snapshots=self.num_snapshots, num_nodes=self.num_nodes, directed=self.directed,
            id_dtype=str(self.id_dtype), keyframe_every=self.keyframe_every, node_lists=self.inner is not None,
            totals={k: getattr(t, k) for k in SnapshotManifest.TOTALS},
            extra={**self.extra_attrs, **(attrs or {}), CHUNKS_KEY: chunks_digests(self.group, self.path)})
        # Sealed over the final attributes (complete included); complete is still written last.
        final = seal({**self.group.attrs, **manifest.to_attrs(), "complete": True})
        self.group.attrs.update({k: v for k, v in final.items() if k != "complete"})
        self.group.attrs.update({"complete": True})
        self._closed = True


# -- the reader -----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SnapshotCounts:
    num_nodes: np.ndarray   # active nodes per snapshot
    num_edges: np.ndarray   # distinct edges per snapshot


class SnapshotStore:
    """A complete snapshot store (open with :func:`open_snapshots`).

    ``snapshot(t)`` rebuilds t from the keyframe at or before it and the
    deltas after that keyframe; the last rebuilt snapshot is kept, so a
    forward scan costs one delta per step.
    """

    def __init__(self, group: zarr.Group, path: str, opened: FolderIdentity | None = None):
        self._group = group
        self.path = path
        # the folder these attributes were read from: a read after another folder is swapped in is refused
        self._opened = opened if opened is not None else folder_identity(path)
        self.attrs = dict(group.attrs)
        self.manifest = m = SnapshotManifest.from_attrs(self.attrs, path)
        self.num_snapshots = m.num_snapshots
        self.num_nodes = m.num_nodes
        self.directed = m.directed
        self.id_dtype = np.dtype(m.id_dtype)
        self.keyframe_every = m.keyframe_every
        self.edge_life = int(m.extra.get("edge_life", 1))
        self.window_seconds = m.extra.get("window_seconds")
        self.t0 = m.extra.get("t0")
        self.checksums = m.checksums
        self._zarr_arrays = open_arrays(group, path)
        missing = sorted(set(store_arrays(m.node_lists)) - set(self._zarr_arrays))
        if missing:   # found at open (info, report), not when a reader first reaches for one
            raise CorruptDataError(f"{path}: snapshot store lacks the array(s) {missing}")
        self._arrays: dict[str, CheckedArray] = {}
        self.edge_counts = self.array("edge_counts")
        self.node_counts = self.array("node_counts")
        self.has_node_lists = m.node_lists
        ragged = (*RAGGED_COLUMNS, *(("inner",) if self.has_node_lists else ()))
        self._offsets = {name: self._check_offsets(name) for name in ragged}
        for name, counts in (("edge_counts", self.edge_counts), ("node_counts", self.node_counts)):
            if counts.shape != (self.num_snapshots,):
                raise CorruptDataError(f"{path}: {name} has shape {counts.shape}, expected ({self.num_snapshots},)")
        self._cache: tuple[int, np.ndarray, np.ndarray] | None = None
        self._blocks: dict[str, tuple[int, np.ndarray]] = {}

    def __len__(self) -> int:
        return self.num_snapshots

    def __repr__(self) -> str:
        return (f"SnapshotStore({self.path!r}, {self.num_snapshots} snapshots, {self.num_nodes} nodes, "
                f"keyframe every {self.keyframe_every})")

    @property
    def counts(self) -> SnapshotCounts:
        return SnapshotCounts(self.node_counts, self.edge_counts)

    @property
    def keyframes(self) -> list[int]:
        return list(range(0, self.num_snapshots, self.keyframe_every))

    def is_keyframe(self, t: int) -> bool:
        return t % self.keyframe_every == 0

    def _check(self, t: int) -> int:
        if isinstance(t, bool) or not isinstance(t, numbers.Integral):   # int(2.5) read snapshot 2
            raise TypeError(f"snapshot index must be an integer, got {t!r}")
        t = int(t)
        if t < 0:
            t += self.num_snapshots
        if not 0 <= t < self.num_snapshots:
            raise IndexError(f"snapshot {t} out of range [0, {self.num_snapshots})")
        return t

    def _rows(self, name: str, i: int, cols: tuple[str, ...]) -> list[np.ndarray]:
        off = self._offsets[name]
        a, b = int(off[i]), int(off[i + 1])
        return [self._read(c if c == name else f"{name}_{c}", a, b) for c in cols]

    def _read(self, array: str, a: int, b: int) -> np.ndarray:
        """Elements [a, b) of a ragged column through a one-block read-ahead
        cache: a forward scan reads each column in blocks of RAGGED_CHUNK
        elements instead of one small Zarr read per snapshot."""
        block = self._blocks.get(array)
        if block is not None and block[0] <= a and b <= block[0] + len(block[1]):
            return block[1][a - block[0]:b - block[0]]
        arr = self._checked(array)
        end = min(arr.shape[0], max(b, a + RAGGED_CHUNK))
        data = arr[a:end]
        self._blocks[array] = (a, data)
        return data[:b - a]

    def _checked(self, name: str, check_ids: bool = True) -> CheckedArray:
        """An array of the store, read through the integrity checks; a missing one is damage. The node ids'
        arrays (:data:`NODE_ID_ARRAYS`) are bounds-checked on read unless ``check_ids`` is False (verify,
        which reports every bad id instead of stopping at the first)."""
        if name not in self._zarr_arrays:
            raise CorruptDataError(f"{self.path}: snapshot store lacks the array {name!r}")
        if not check_ids:
            return CheckedArray(self._zarr_arrays[name], name, self.path, all_chunks_written=self.checksums,
                                opened=self._opened)
        arr = self._arrays.get(name)
        if arr is None:
            ids = name in NODE_ID_ARRAYS   # the kernels index per-node arrays with them
            arr = CheckedArray(self._zarr_arrays[name], name, self.path, all_chunks_written=self.checksums,
                               id_bound=self.num_nodes if ids else None, opened=self._opened)
            self._arrays[name] = arr
        return arr

    def array(self, name: str) -> np.ndarray:
        return self._checked(name).read_all()

    def _check_offsets(self, name: str) -> np.ndarray:
        """Offsets of a ragged group: 0 first, never decreasing, ending at its columns' length.
        Checked at open (O(snapshots)) so a damaged store cannot send a reader out of range."""
        off = self.array(f"{name}_offsets")
        rows = self.num_snapshots if name != "kf" else len(range(0, self.num_snapshots, self.keyframe_every))
        column = self._checked(name if name == "inner" else f"{name}_{'pos' if name in ('rem', 'chg') else 'src'}")
        if (off.ndim != 1 or len(off) != rows + 1 or (len(off) and off[0] != 0)
                or bool(np.any(np.diff(off) < 0)) or (len(off) and off[-1] != column.shape[0])):
            raise CorruptDataError(f"{self.path}: {name}_offsets is damaged (expected {rows + 1} non-decreasing "
                                   f"offsets from 0 to {column.shape[0]}; got {len(off)} ending at "
                                   f"{off[-1] if len(off) else None})")
        return off

    # -- raw keys -------------------------------------------------------------
    def delta_sizes(self, t: int) -> tuple[int, int]:
        """How many edges delta t adds and removes, from the offsets alone (no row is read)."""
        t = self._check(t)
        add, rem = self._offsets["add"], self._offsets["rem"]
        return int(add[t + 1] - add[t]), int(rem[t + 1] - rem[t])

    def key_delta(self, t: int) -> KeyDelta:
        t = self._check(t)
        asrc, adst, acnt = self._rows("add", t, ("src", "dst", "count"))
        (rpos,) = self._rows("rem", t, ("pos",))
        cpos, ccnt = self._rows("chg", t, ("pos", "count"))
        return KeyDelta(encode_keys(asrc, adst, self.num_nodes), acnt.astype(np.int64), rpos.astype(np.int64),
                        cpos.astype(np.int64), ccnt.astype(np.int64))

    def snapshot_keys(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Snapshot t as sorted int64 keys and counts."""
        t = self._check(t)
        kf = (t // self.keyframe_every) * self.keyframe_every
        if self._cache is not None and kf <= self._cache[0] <= t:
            s, keys, counts = self._cache
        else:
            src, dst, cnt = self._rows("kf", kf // self.keyframe_every, ("src", "dst", "count"))
            s, keys, counts = kf, encode_keys(src, dst, self.num_nodes), cnt.astype(np.int64)
        for u in range(s + 1, t + 1):
            d = self.key_delta(u)
            keys, counts = apply_delta(keys, counts, d.removed_pos, d.added_keys, d.added_counts,
                                       d.changed_pos, d.changed_counts)
        self._cache = (t, keys, counts)
        return keys, counts

    # -- public views -------------------------------------------------------------
    def snapshot(self, t: int, with_counts: bool = False):
        """(src, dst) of snapshot t in canonical order (plus counts if asked)."""
        keys, counts = self.snapshot_keys(t)
        src, dst = decode_keys(keys, self.num_nodes, self.id_dtype)
        return (src, dst, counts) if with_counts else (src, dst)

    def delta(self, t: int) -> Delta:
        """What changes from t-1 to t; ``added, removed = store.delta(t)``.

        delta(0) adds all of snapshot 0. Removed pairs are read from t-1,
        which is rebuilt (cheap in a forward scan).
        """
        t = self._check(t)
        if t == 0:
            keys, counts = self.snapshot_keys(0)
            d = KeyDelta(keys, counts, EMPTY, EMPTY, EMPTY)
            prev = EMPTY
        else:
            d = self.key_delta(t)
            prev = self.snapshot_keys(t - 1)[0][d.removed_pos] if len(d.removed_pos) else EMPTY
        asrc, adst = decode_keys(d.added_keys, self.num_nodes, self.id_dtype)
        rsrc, rdst = decode_keys(prev, self.num_nodes, self.id_dtype)
        return Delta(t, asrc, adst, d.added_counts, rsrc, rdst, d.removed_pos, d.changed_pos, d.changed_counts)

    def node_list(self, t: int) -> np.ndarray:
        """The node list stored with snapshot t (per-part stores: owned nodes)."""
        if not self.has_node_lists:
            raise StoreError(f"{self.path}: store has no per-snapshot node lists")
        return self._rows("inner", self._check(t), ("inner",))[0]

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for t in range(self.num_snapshots):
            yield self.snapshot(t)

    def sequence(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, Any]]:
        """What a consumer ships for snapshots [start, stop): ``(start, (src, dst))``
        in full first (a sequence always starts from a full snapshot), then
        ``(t, Delta)`` for each later t; rebuild t with the removed positions
        and the added pairs (:func:`graphstream.store.delta.apply_delta_vectorized`)."""
        start = self._check(start)
        stop = self.num_snapshots if stop is None else min(int(stop), self.num_snapshots)
        for t in range(start, stop):
            yield (t, self.snapshot(t)) if t == start else (t, self.delta(t))


def open_snapshots(path: str | os.PathLike) -> SnapshotStore:
    """Open a complete snapshot store; refuse missing, foreign or incomplete ones."""
    path_s = path_argument(path, "path")
    opened = folder_identity(path_s)   # before the metadata is read: a swap after it is then seen
    return SnapshotStore(open_group(path_s, "snapshot store"), path_s, opened)


def is_snapshot_store(path: str | os.PathLike) -> bool:
    """True when ``path`` is a Zarr group whose format is a snapshot store."""
    try:
        return zarr.open_group(str(path), mode="r").attrs.get("format") == FORMAT
    except Exception:
        return False
