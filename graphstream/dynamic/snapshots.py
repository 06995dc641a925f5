"""The snapshot store: timestamped edges -> keyframes + deltas (spec dynamic.md).

Snapshot t holds the events with time in window t, ``t0 + t*W <= time <
t0 + (t+1)*W`` (t0 the earliest timestamp), and, with an edge life of L
windows, those of windows t-L+1 .. t: an event stays present for L
consecutive snapshots. The number of snapshots is the number of windows.

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

Edges are canonical: sorted by (src, dst), duplicates merged with a count;
on an undirected store each edge is first written as (min, max).

Building reads the events by streaming. A time-sorted store is read once (a
store that declares itself sorted is checked on the way and refused at the
first step back in time); an unsorted one is bucketed by window ranges into
files on disk and each bucket is sorted on its own. Memory: O(num_nodes) +
the distinct edges of L windows + a fixed event buffer; never O(events).
"""
from __future__ import annotations

import os
import tempfile
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import zarr
from numba import njit

from .._atomic import atomic_dir
from .._report import log, progress
from .._resources import Stopwatch, peak_rss_bytes
from ..errors import InputFormatError, ParameterError, StoreError
from ..store import default_compressor, id_dtype_for, open_store
from ..store.graph import GraphStore, open_complete_group
from ..kernels.merge import KeyCounter
from .delta import (Delta, KeyDelta, apply_delta, check_key_space, decode_keys, delta_transfer_bytes,
                    diff_sorted, encode_keys, merge_counts)

FORMAT = "graphstream.snapshots"
VERSION = 1
DEFAULT_KEYFRAME_EVERY = 8
RAGGED_CHUNK = 1 << 20
DEFAULT_BUFFER_EVENTS = 1 << 22
SORTED_ATTRS = ("sorted_by_time", "time_sorted")
EMPTY = np.empty(0, dtype=np.int64)


# -- windows -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class WindowSpec:
    """Window index of a timestamp: ``(time - t0) * a // b`` (W = b / a seconds)."""
    t0: int
    a: int
    b: int
    num_windows: int

    @property
    def seconds(self) -> float:
        return self.b / self.a

    def index(self, time: np.ndarray) -> np.ndarray:
        return ((np.asarray(time, dtype=np.int64) - self.t0) * self.a) // self.b

    def bounds(self, t: int) -> tuple[float, float]:
        """[start, end) of window t in the store's time unit."""
        return self.t0 + t * self.b / self.a, self.t0 + (t + 1) * self.b / self.a

    @classmethod
    def make(cls, t0: int, tmax: int, window: float | None, num_snapshots: int | None) -> "WindowSpec":
        if (window is None) == (num_snapshots is None):
            raise ParameterError("give exactly one of --window SECONDS and --num-snapshots T")
        span = int(tmax) - int(t0)
        if window is not None:
            if not np.isfinite(window) or window <= 0:
                raise ParameterError(f"--window must be > 0 seconds, got {window}")
            frac = Fraction(str(window)).limit_denominator(10**6)
            if frac <= 0:
                raise ParameterError(f"--window must be > 0 seconds, got {window}")
            a, b = frac.denominator, frac.numerator
            num = span * a // b + 1
        else:
            if num_snapshots < 1:
                raise ParameterError(f"--num-snapshots must be >= 1, got {num_snapshots}")
            a, b = int(num_snapshots), span + 1
            num = int(num_snapshots)
        if span * a >= 2**62:
            raise ParameterError(f"time span {span} with window {b}/{a} overflows int64 window arithmetic")
        if num > 10**8:
            raise ParameterError(f"{num} windows is too many (span {span}, window {b / a:g}); use a wider window")
        return cls(int(t0), int(a), int(b), int(num))


# -- pass 1: the time column ------------------------------------------------------

@njit(cache=True)
def _scan_time(time, last):
    """min, max and the first position where time steps back (-1 if none)."""
    lo = time[0]
    hi = time[0]
    bad = -1
    prev = last
    for i in range(time.shape[0]):
        x = time[i]
        if x < lo:
            lo = x
        if x > hi:
            hi = x
        if bad < 0 and x < prev:
            bad = i
        prev = x
    return lo, hi, bad


@dataclass(frozen=True, slots=True)
class TimeScan:
    t0: int
    tmax: int
    sorted: bool
    first_unsorted: int  # edge index, -1 if sorted


def scan_time(store: GraphStore, batch_size: int | None = None) -> TimeScan:
    """One streaming pass over the time column only."""
    lo, hi, first_bad = None, None, -1
    last = np.iinfo(np.int64).min
    for batch in store.stream(batch_size, columns=("time",)):
        t = batch.time
        if len(t) == 0:
            continue
        blo, bhi, bad = _scan_time(t, np.int64(last))
        lo = blo if lo is None else min(lo, blo)
        hi = bhi if hi is None else max(hi, bhi)
        if first_bad < 0 and bad >= 0:
            first_bad = batch.start + int(bad)
        last = int(t[-1])
    if lo is None:
        raise InputFormatError(f"{store.path}: store has no edges, so no snapshots")
    return TimeScan(int(lo), int(hi), first_bad < 0, first_bad)


def declared_sorted(store: GraphStore) -> bool:
    return any(store.attrs.get(k) is True for k in SORTED_ATTRS)


# -- pass 2: one sorted run per window ---------------------------------------------------

def _event_keys(batch, num_nodes: int, directed: bool) -> np.ndarray:
    src, dst = batch.src, batch.dst
    if not directed:
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    return encode_keys(src, dst, num_nodes)


def _runs_sorted(store: GraphStore, spec: WindowSpec, check_monotonic: bool, buffer_events: int,
                 batch_size: int | None) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Windows in order from a time-sorted stream: one read of the events."""
    acc = KeyCounter(buffer_events)
    cur = 0
    last = np.iinfo(np.int64).min
    with progress(store.num_edges, "snapshots") as bar:
        for batch in store.stream(batch_size, columns=("src", "dst", "time")):
            t = batch.time
            if len(t) == 0:
                continue
            if check_monotonic:
                steps = np.flatnonzero(np.diff(t) < 0)
                if t[0] < last or len(steps):
                    pos = batch.start if t[0] < last else batch.start + int(steps[0]) + 1
                    raise InputFormatError(
                        f"{store.path}: declared sorted by time, but time steps back at edge {pos} "
                        f"({int(t[pos - batch.start - 1]) if pos > batch.start else last} -> "
                        f"{int(t[pos - batch.start])})")
            last = int(t[-1])
            w = spec.index(t)
            keys = _event_keys(batch, store.num_nodes, store.directed)
            cuts = np.flatnonzero(np.diff(w)) + 1
            for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(w)]):
                ww = int(w[a])
                while cur < ww:
                    yield (cur, *acc.result())
                    acc = KeyCounter(buffer_events)
                    cur += 1
                acc.add(keys[a:b])
            bar.update(len(t))
    while cur < spec.num_windows:
        yield (cur, *acc.result())
        acc = KeyCounter(buffer_events)
        cur += 1


def _bucket_ranges(hist: np.ndarray, target: int) -> list[tuple[int, int]]:
    """Contiguous window ranges of at most ``target`` events (a bigger window is alone)."""
    ranges, start, total = [], 0, 0
    for w, n in enumerate(hist.tolist()):
        if total and total + n > target:
            ranges.append((start, w))
            start, total = w, 0
        total += n
    ranges.append((start, len(hist)))
    return ranges


def _runs_bucketed(store: GraphStore, spec: WindowSpec, buffer_events: int, bucket_events: int,
                   scratch: Path, batch_size: int | None) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Windows in order from an unsorted stream, by external bucketing on disk.

    Pass a: events per window (time column only). Pass b: each event's key
    and window are appended to the file of its bucket (a contiguous range of
    windows holding at most ``bucket_events`` events). Then each bucket is
    read back in chunks and split into its windows' runs.
    """
    hist = np.zeros(spec.num_windows, dtype=np.int64)
    for batch in store.stream(batch_size, columns=("time",)):
        hist += np.bincount(spec.index(batch.time), minlength=spec.num_windows)
    ranges = _bucket_ranges(hist, bucket_events)
    first_window = np.array([r[0] for r in ranges], dtype=np.int64)
    key_files = [scratch / f"bucket-{i:06d}.keys" for i in range(len(ranges))]
    win_files = [scratch / f"bucket-{i:06d}.win" for i in range(len(ranges))]
    for f in key_files + win_files:
        f.touch()
    with progress(store.num_edges, "bucketing") as bar:
        for batch in store.stream(batch_size, columns=("src", "dst", "time")):
            w = spec.index(batch.time)
            keys = _event_keys(batch, store.num_nodes, store.directed)
            bucket = np.searchsorted(first_window, w, side="right") - 1
            order = np.argsort(bucket, kind="stable")
            sb = bucket[order]
            cuts = np.flatnonzero(np.diff(sb)) + 1
            for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(sb)]):
                if a == b:
                    continue
                i = int(sb[a])
                sel = order[a:b]
                with open(key_files[i], "ab") as f:
                    keys[sel].tofile(f)
                with open(win_files[i], "ab") as f:
                    w[sel].astype(np.int64).tofile(f)
            bar.update(len(batch))
    for i, (wa, wb) in enumerate(ranges):
        accs = {w: KeyCounter(buffer_events) for w in range(wa, wb)}
        n = os.path.getsize(key_files[i]) // 8
        if n:
            kmap = np.memmap(key_files[i], dtype=np.int64, mode="r", shape=(n,))
            wmap = np.memmap(win_files[i], dtype=np.int64, mode="r", shape=(n,))
            for a in range(0, n, buffer_events):
                k = np.array(kmap[a:a + buffer_events])
                w = np.array(wmap[a:a + buffer_events])
                order = np.argsort(w, kind="stable")
                sw = w[order]
                cuts = np.flatnonzero(np.diff(sw)) + 1
                for x, y in zip(np.r_[0, cuts], np.r_[cuts, len(sw)]):
                    if x < y:
                        accs[int(sw[x])].add(k[order[x:y]])
            del kmap, wmap
        key_files[i].unlink()
        win_files[i].unlink()
        for w in range(wa, wb):
            yield (w, *accs.pop(w).result())


def _snapshots_from_runs(runs: Iterator, edge_life: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Snapshot t = runs t-L+1..t: add the new window, subtract the expired one."""
    window: deque = deque()
    keys, counts = EMPTY, EMPTY
    for t, rk, rc in runs:
        keys, counts = merge_counts(keys, counts, rk, rc, 1)
        window.append((rk, rc))
        if len(window) > edge_life:
            ok, oc = window.popleft()
            keys, counts = merge_counts(keys, counts, ok, oc, -1)
        yield t, keys, counts


# -- the writer ----------------------------------------------------------------

class _Ragged:
    """Append-only ragged columns with offsets, flushed in whole chunks."""

    def __init__(self, group: zarr.Group, prefix: str, columns: dict[str, np.dtype], chunk: int):
        self.group, self.prefix, self.chunk = group, prefix, chunk
        self.arrays = {c: group.create_array(f"{prefix}_{c}" if c != prefix else c, shape=(0,),
                                             chunks=(chunk,), dtype=dt, compressors=default_compressor(),
                                             fill_value=0)
                       for c, dt in columns.items()}
        self.dtypes = dict(columns)
        self.pending: dict[str, list[np.ndarray]] = {c: [] for c in columns}
        self.npending = 0
        self.written = 0
        self.offsets = [0]

    def append(self, **cols: np.ndarray) -> None:
        n = None
        for c, a in cols.items():
            if n is None:
                n = len(a)
            elif len(a) != n:
                raise ParameterError(f"ragged columns {list(cols)} differ in length")
            self.pending[c].append(np.asarray(a).astype(self.dtypes[c], copy=False))
        self.npending += n
        self.offsets.append(self.offsets[-1] + n)
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
        offs = np.asarray(self.offsets, dtype=np.int64)
        arr = self.group.create_array(f"{self.prefix}_offsets", shape=offs.shape,
                                      chunks=(max(1, min(len(offs), 1 << 20)),), dtype=np.int64,
                                      compressors=default_compressor(), fill_value=0)
        arr[...] = offs


@njit(cache=True)
def _count_active(src, dst, mark):
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
        self.path = str(path)
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
        self.edge_counts: list[int] = []
        self.node_counts: list[int] = []
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
        self.node_counts.append(int(_count_active(src, dst, self._mark)) if e else 0)
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
        arr = self.group.create_array(name, shape=data.shape, chunks=(max(1, min(len(data), 1 << 22)),),
                                      dtype=data.dtype, compressors=default_compressor(), fill_value=0)
        arr[...] = data

    def close(self, attrs: dict[str, Any] | None = None) -> None:
        if self._closed:
            raise StoreError(f"{self.path}: writer already closed")
        if self.num_snapshots == 0:
            raise ParameterError(f"{self.path}: no snapshots were written")
        for r in (self.kf, self.add, self.rem, self.chg, self.inner):
            if r is not None:
                r.close()
        self.write_array("edge_counts", np.asarray(self.edge_counts, dtype=np.int64))
        self.write_array("node_counts", np.asarray(self.node_counts, dtype=np.int64))
        t = self.totals
        meta = {"num_snapshots": self.num_snapshots, "num_nodes": self.num_nodes,
                "directed": self.directed, "id_dtype": str(self.id_dtype),
                "keyframe_every": self.keyframe_every, "node_lists": self.inner is not None,
                "bytes_full": t.bytes_full, "bytes_stored": t.bytes_stored,
                "transfer_bytes_full": t.transfer_bytes_full, "transfer_bytes_delta": t.transfer_bytes_delta,
                "transfer_bytes_adaptive": t.transfer_bytes_adaptive}
        meta.update(self.extra_attrs)
        meta.update(attrs or {})
        self.group.attrs.update(meta)
        self.group.attrs.update({"complete": True})
        self._closed = True


# -- building from a graph store ---------------------------------------------------------

@dataclass
class SnapshotBuildResult:
    path: str
    num_snapshots: int
    num_nodes: int
    num_events: int
    window_seconds: float
    t0: int
    edge_life: int
    keyframe_every: int
    sorted_input: bool
    bucketed: bool
    totals: SnapshotTotals
    bytes_on_disk: int
    seconds: float
    peak_rss_bytes: int
    laps: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        t = self.totals
        return {
            "path": self.path, "num_snapshots": self.num_snapshots, "num_nodes": self.num_nodes,
            "num_events": self.num_events, "window_seconds": self.window_seconds, "t0": self.t0,
            "edge_life": self.edge_life, "keyframe_every": self.keyframe_every,
            "sorted_input": self.sorted_input, "bucketed": self.bucketed, "total_snapshot_edges": t.total_edges,
            "total_added": t.total_added, "total_removed": t.total_removed,
            "bytes_full": t.bytes_full, "bytes_stored": t.bytes_stored,
            "storage_ratio": t.bytes_full / t.bytes_stored if t.bytes_stored else None,
            "transfer_bytes_full": t.transfer_bytes_full, "transfer_bytes_delta": t.transfer_bytes_delta,
            "transfer_ratio": (t.transfer_bytes_full / t.transfer_bytes_delta
                               if t.transfer_bytes_delta else None),
            "transfer_bytes_adaptive": t.transfer_bytes_adaptive,
            "bytes_on_disk": self.bytes_on_disk, "seconds": self.seconds,
            "peak_rss_bytes": self.peak_rss_bytes, "phases": self.laps,
        }


def _disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def build_snapshots(store_path: str | os.PathLike, out: str | os.PathLike, *, window: float | None = None,
                    num_snapshots: int | None = None, edge_life: int = 1,
                    keyframe_every: int = DEFAULT_KEYFRAME_EVERY, overwrite: bool = False,
                    assume_sorted: bool | None = None, buffer_events: int = DEFAULT_BUFFER_EVENTS,
                    bucket_events: int | None = None, batch_size: int | None = None) -> SnapshotBuildResult:
    """Build a snapshot store from a graph store with a ``time`` column.

    ``assume_sorted``: True declares the events sorted by time (checked while
    reading; a step back is an error), False forces external bucketing, None
    (default) trusts the store's ``sorted_by_time`` attribute if set, else
    checks with one pass over the time column and buckets when unsorted.
    """
    watch = Stopwatch()
    if int(keyframe_every) < 1:
        raise ParameterError(f"--keyframe-every must be >= 1, got {keyframe_every}")
    if int(edge_life) < 1:
        raise ParameterError(f"--edge-life must be >= 1, got {edge_life}")
    if window is not None and (not np.isfinite(window) or window <= 0):
        raise ParameterError(f"--window must be > 0 seconds, got {window}")
    if buffer_events < 1:
        raise ParameterError(f"buffer_events must be >= 1, got {buffer_events}")
    store = open_store(store_path)
    if not store.has_time:
        raise StoreError(f"{store.path}: store has no time column (ingest with --time-column N)")
    check_key_space(store.num_nodes)
    if store.num_edges == 0:
        raise InputFormatError(f"{store.path}: store has no edges, so no snapshots")
    declared = declared_sorted(store) if assume_sorted is None else bool(assume_sorted)
    if declared:
        # A sorted store's first and last timestamps are its extremes; the
        # single pass below checks that claim on the way.
        tcol = store.array("time")
        scan = TimeScan(int(tcol[0]), int(tcol[store.num_edges - 1]), True, -1)
        if scan.tmax < scan.t0:
            raise InputFormatError(f"{store.path}: declared sorted by time, but the last timestamp "
                                   f"{scan.tmax} precedes the first {scan.t0}")
    else:
        scan = scan_time(store, batch_size)
    watch.lap("scan_time")
    spec = WindowSpec.make(scan.t0, scan.tmax, window, num_snapshots)
    bucket_events = bucket_events or 4 * buffer_events
    out = Path(out)
    with atomic_dir(out, overwrite=overwrite) as tmp:
        tmp.rmdir()  # zarr creates the group folder itself
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.scratch-") as scratch:
            bucketed = not (scan.sorted and (declared or assume_sorted is None))
            if not bucketed:
                runs = _runs_sorted(store, spec, declared, buffer_events, batch_size)
            else:
                log(f"{store.path}: events are not sorted by time; bucketing by window on disk")
                runs = _runs_bucketed(store, spec, buffer_events, bucket_events, Path(scratch), batch_size)
            writer = SnapshotWriter(tmp, num_nodes=store.num_nodes, keyframe_every=keyframe_every,
                                    directed=store.directed)
            for _t, keys, counts in _snapshots_from_runs(runs, int(edge_life)):
                writer.append(keys, counts)
            writer.close({"t0": spec.t0, "window_a": spec.a, "window_b": spec.b,
                          "window_seconds": spec.seconds, "edge_life": int(edge_life),
                          "num_events": store.num_edges, "source": store.path})
        watch.lap("build")
    return SnapshotBuildResult(
        path=str(out), num_snapshots=writer.num_snapshots, num_nodes=store.num_nodes,
        num_events=store.num_edges, window_seconds=spec.seconds, t0=spec.t0, edge_life=int(edge_life),
        keyframe_every=int(keyframe_every), sorted_input=scan.sorted, bucketed=bucketed, totals=writer.totals,
        bytes_on_disk=_disk_bytes(out), seconds=watch.seconds, peak_rss_bytes=peak_rss_bytes(),
        laps=dict(watch.laps))


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

    def __init__(self, group: zarr.Group, path: str):
        self._group = group
        self.path = path
        self.attrs = dict(group.attrs)
        a = self.attrs
        self.num_snapshots = int(a["num_snapshots"])
        self.num_nodes = int(a["num_nodes"])
        self.directed = bool(a["directed"])
        self.id_dtype = np.dtype(a["id_dtype"])
        self.keyframe_every = int(a["keyframe_every"])
        self.edge_life = int(a.get("edge_life", 1))
        self.window_seconds = a.get("window_seconds")
        self.t0 = a.get("t0")
        self.edge_counts = group["edge_counts"][:]
        self.node_counts = group["node_counts"][:]
        self._offsets = {name: group[f"{name}_offsets"][:] for name in ("kf", "add", "rem", "chg")}
        self.has_node_lists = bool(a.get("node_lists", False))
        if self.has_node_lists:
            self._offsets["inner"] = group["inner_offsets"][:]
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
        arr = self._group[array]
        end = min(arr.shape[0], max(b, a + RAGGED_CHUNK))
        data = arr[a:end]
        self._blocks[array] = (a, data)
        return data[:b - a]

    def array(self, name: str) -> np.ndarray:
        return self._group[name][:]

    # -- raw keys -------------------------------------------------------------
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
        and the added pairs (:func:`graphstream.dynamic.delta.apply_delta_vectorized`)."""
        start = self._check(start)
        stop = self.num_snapshots if stop is None else min(int(stop), self.num_snapshots)
        for t in range(start, stop):
            yield (t, self.snapshot(t)) if t == start else (t, self.delta(t))


def open_snapshots(path: str | os.PathLike) -> SnapshotStore:
    """Open a complete snapshot store; refuse missing, foreign or incomplete ones."""
    path_s = str(path)
    return SnapshotStore(open_complete_group(path_s, FORMAT, "snapshot store"), path_s)


def is_snapshot_store(path: str | os.PathLike) -> bool:
    """True when ``path`` is a Zarr group whose format is a snapshot store."""
    try:
        return zarr.open_group(str(path), mode="r").attrs.get("format") == FORMAT
    except Exception:
        return False
