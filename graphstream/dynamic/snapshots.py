"""Building a snapshot store from timestamped edges (spec dynamic.md; the format: graphstream.store.snapshots).

Snapshot t holds the events with time in window t, ``t0 + t*W <= time <
t0 + (t+1)*W`` (t0 the earliest timestamp), and, with an edge life of L
windows, those of windows t-L+1 .. t: an event stays present for L
consecutive snapshots. The number of snapshots is the number of windows.

Edges are canonical: sorted by (src, dst), duplicates merged with a count;
on an undirected store each edge is first written as (min, max).

Building reads the events by streaming. A time-sorted store is read once (a
store that declares itself sorted is checked on the way and refused at the
first step back in time); an unsorted one is bucketed by window ranges into
files on disk and each bucket is sorted on its own. Memory: O(num_nodes) +
the distinct edges of L windows + a fixed event buffer; never O(events).
"""
from __future__ import annotations

import numbers
import os
import tempfile
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from .._atomic import atomic_dir, check_output, for_workers, recorded_path
from .._report import log, progress, warn
from .._resources import Stopwatch, peak_rss_bytes
from ..errors import InputFormatError, ParameterError, StoreError, whole_number
from ..kernels.merge import KeyCounter
from ..store import open_store
from ..store.delta import check_key_space, encode_keys, merge_counts
from ..store.graph import GraphStore
from ..store.snapshots import (  # noqa: F401 (importable here as before)
    DEFAULT_KEYFRAME_EVERY,
    EMPTY,
    FORMAT,
    SnapshotStore,
    SnapshotTotals,
    SnapshotWriter,
    is_snapshot_store,
    open_snapshots,
)

if TYPE_CHECKING:
    from distributed import Client

DEFAULT_BUFFER_EVENTS = 1 << 22
SORTED_ATTRS = ("sorted_by_time", "time_sorted")
# A window W is kept as the fraction b / a of time units with a <= this: windows down to 1e-6 units.
WINDOW_DENOMINATOR = 10**6


# -- windows -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class WindowSpec:
    """Window index of a timestamp: ``(time - t0) * a // b`` (W = b / a seconds), in int64 without
    overflow whatever the span (a nanosecond clock over a year cut into 1000 windows included)."""
    t0: int
    a: int
    b: int
    num_windows: int
    # the window asked for, where the arithmetic uses another one that cuts the same (one window wider
    # than the whole span); None: b / a
    asked_seconds: float | None = None

    @property
    def seconds(self) -> float:
        return self.b / self.a if self.asked_seconds is None else self.asked_seconds

    def index(self, time: np.ndarray) -> np.ndarray:
        x = np.asarray(time, dtype=np.int64) - self.t0           # 0 .. span
        if self.num_windows * self.b < 2**62:   # x * a < num_windows * b: fits in int64
            return (x * self.a) // self.b
        # floor(x * a / b) estimated in float64 (off by at most one for up to 10^8 windows), then set
        # exactly by the windows' starts: t is the largest t with start(t) <= x
        t = np.clip(np.floor(x * (self.a / self.b)).astype(np.int64), 0, self.num_windows - 1)
        t -= self._start(t) > x
        t += (t + 1 < self.num_windows) & (self._start(t + 1) <= x)
        return t

    def _start(self, t: np.ndarray) -> np.ndarray:
        """ceil(t * b / a), the first time (after t0) in window t, without forming t * b."""
        whole, rest = divmod(self.b, self.a)
        return t * whole + (t * rest + self.a - 1) // self.a

    def bounds(self, t: int) -> tuple[float, float]:
        """[start, end) of window t in the store's time unit."""
        return self.t0 + t * self.b / self.a, self.t0 + (t + 1) * self.b / self.a

    @classmethod
    def make(cls, t0: int, tmax: int, window: float | None, num_snapshots: int | None) -> WindowSpec:
        if (window is None) == (num_snapshots is None):
            raise ParameterError("give exactly one of --window SECONDS and --num-snapshots T")
        span = int(tmax) - int(t0)
        if span >= 2**62:
            raise ParameterError(f"time span {span} (from {t0} to {tmax}) is too wide: at most 2**62 time units")
        asked = None
        if window is not None:
            if not np.isfinite(window) or window <= 0:
                raise ParameterError(f"--window must be > 0 seconds, got {window}")
            frac = Fraction(str(window)).limit_denominator(WINDOW_DENOMINATOR)
            if frac <= 0:
                raise ParameterError(f"--window {window} is below the smallest window, "
                                     f"1/{WINDOW_DENOMINATOR} of the store's time unit")
            a, b = frac.denominator, frac.numerator
            if frac > span:   # wider than the whole span: one window, cut as by span + 1 (b fits int64)
                a, b, asked = 1, span + 1, float(frac)
            num = span * a // b + 1
        else:
            if num_snapshots < 1:
                raise ParameterError(f"--num-snapshots must be >= 1, got {num_snapshots}")
            a, b = int(num_snapshots), span + 1
            num = int(num_snapshots)
        if num > 10**8:
            raise ParameterError(f"{num} windows is too many (span {span}, window {b / a:g}); use a wider window")
        return cls(int(t0), int(a), int(b), int(num), asked)


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
            for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(w)], strict=True):
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
    """Contiguous window ranges of at most ``target`` events (a bigger window is alone), found by
    binary search over the running total: a step a range, not a Python int a window (10^8 windows)."""
    total = np.concatenate([[0], np.cumsum(hist)])   # total[w] = events before window w
    ranges, start, end = [], 0, len(hist)
    while start < end:
        # the first window whose events would carry the range past target
        stop = int(np.searchsorted(total, total[start] + target, side="right")) - 1
        if stop < end and total[stop] == total[start]:   # nothing before it in the range: it goes in alone
            stop += 1
        stop = min(max(stop, start + 1), end)
        ranges.append((start, stop))
        start = stop
    return ranges or [(0, 0)]


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
            for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(sb)], strict=True):
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
        accs: dict[int, KeyCounter] = {}   # the windows with events only (most may have none)
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
                for x, y in zip(np.r_[0, cuts], np.r_[cuts, len(sw)], strict=True):
                    if x < y:
                        window = int(sw[x])
                        if window not in accs:
                            accs[window] = KeyCounter(buffer_events)
                        accs[window].add(k[order[x:y]])
            del kmap, wmap
        key_files[i].unlink()
        win_files[i].unlink()
        for w in range(wa, wb):
            acc = accs.pop(w, None)
            yield (w, *(acc.result() if acc is not None else (EMPTY, EMPTY)))


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


def _note_weights(store) -> None:
    if store.has_weight:   # a snapshot holds each pair and its count: the ratings were dropped without a word
        warn(f"{store.path}: the store's edge weights are not carried into the snapshots (each holds its edges "
             "and their counts in the window: docs/dynamic.md)")


def _in_a_task() -> bool:
    """Whether this runs as a dask task (its client said what is to be said)."""
    try:
        from distributed import get_worker
        get_worker()
    except (ImportError, ValueError):
        return False
    return True


def build_snapshots(store_path: str | os.PathLike, out: str | os.PathLike, *, window: float | None = None,
                    num_snapshots: int | None = None, edge_life: int = 1,
                    keyframe_every: int = DEFAULT_KEYFRAME_EVERY, overwrite: bool = False,
                    assume_sorted: bool | None = None, buffer_events: int = DEFAULT_BUFFER_EVENTS,
                    bucket_events: int | None = None, batch_size: int | None = None,
                    client: Client | None = None) -> SnapshotBuildResult:
    """Build a snapshot store from a graph store with a ``time`` column.

    ``assume_sorted``: True declares the events sorted by time (checked while
    reading; a step back is an error), False forces external bucketing, None
    (default) trusts the store's ``sorted_by_time`` attribute if set, else
    checks with one pass over the time column and buckets when unsorted.

    ``client`` (a ``distributed.Client``): the build runs as one task on one
    worker of its cluster (it is sequential: each snapshot is the previous one
    plus a delta), writing into a temporary sibling of ``out`` that this
    process holds and swaps in (:func:`graphstream.cluster.output_for_tasks`). Same store.
    """
    # absolute (the workers', and every path reported), a file:/// URL its local path
    store_path, out = for_workers(store_path), for_workers(out)
    check_output(out, overwrite, inputs={"input store": store_path})
    if client is not None:
        from dataclasses import replace

        _note_weights(open_store(store_path))   # here: the task's own note reaches a worker's stderr only

        from ..cluster import output_for_tasks, run_task
        with output_for_tasks(client, out, overwrite, inputs=(store_path,)) as tmp:
            result = run_task(client, "snapshots", build_snapshots, store_path, str(tmp), overwrite=True,
                              window=window, num_snapshots=num_snapshots, edge_life=edge_life,
                              keyframe_every=keyframe_every, assume_sorted=assume_sorted,
                              buffer_events=buffer_events, bucket_events=bucket_events, batch_size=batch_size)
        return replace(result, path=str(out))
    watch = Stopwatch()
    keyframe_every = whole_number(keyframe_every, "--keyframe-every", 1)
    edge_life = whole_number(edge_life, "--edge-life", 1)
    if num_snapshots is not None:
        num_snapshots = whole_number(num_snapshots, "--num-snapshots", 1)
    if window is not None and (isinstance(window, bool) or not isinstance(window, numbers.Real)
                               or not np.isfinite(window) or window <= 0):
        raise ParameterError(f"--window must be > 0 seconds, got {window!r}")
    buffer_events = whole_number(buffer_events, "buffer_events", 1)
    store = open_store(store_path)
    if not store.has_time:
        raise StoreError(f"{store.path}: store has no time column (ingest with --time-column N)")
    if not _in_a_task():
        _note_weights(store)
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
                why = "--unsorted" if assume_sorted is False else "events are not sorted by time"
                log(f"{store.path}: {why}; bucketing by window on disk")
                runs = _runs_bucketed(store, spec, buffer_events, bucket_events, Path(scratch), batch_size)
            writer = SnapshotWriter(tmp, num_nodes=store.num_nodes, keyframe_every=keyframe_every,
                                    directed=store.directed)
            for _t, keys, counts in _snapshots_from_runs(runs, int(edge_life)):
                writer.append(keys, counts)
            writer.close({"t0": spec.t0, "window_a": spec.a, "window_b": spec.b,
                          "window_seconds": spec.seconds, "edge_life": int(edge_life),
                          "num_events": store.num_edges, "source": recorded_path(store.path)})
        watch.lap("build")
    return SnapshotBuildResult(
        path=str(out), num_snapshots=writer.num_snapshots, num_nodes=store.num_nodes,
        num_events=store.num_edges, window_seconds=spec.seconds, t0=spec.t0, edge_life=int(edge_life),
        keyframe_every=int(keyframe_every), sorted_input=scan.sorted, bucketed=bucketed, totals=writer.totals,
        bytes_on_disk=_disk_bytes(out), seconds=watch.seconds, peak_rss_bytes=peak_rss_bytes(),
        laps=dict(watch.laps))


