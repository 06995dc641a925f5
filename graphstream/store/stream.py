"""Streaming with prefetch: the one place edge batches are read from Zarr.

A single background thread reads and decompresses the next batches while the
consumer processes the current one (Blosc releases the GIL), so a numba
kernel over batch i overlaps with decompression of batch i+1.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class EdgeBatch:
    """Edges ``start .. start+len`` of the stream; absent columns are None."""
    start: int
    src: np.ndarray
    dst: np.ndarray
    time: np.ndarray | None = None
    weight: np.ndarray | None = None

    def __len__(self) -> int:
        # a stream of other columns only (``columns=("time",)``) has empty src and dst
        return max(len(column) for column in (self.src, self.dst, self.time, self.weight) if column is not None)

    @property
    def stop(self) -> int:
        return self.start + len(self)


def _assemble(start: int, cols: dict) -> EdgeBatch:
    if "src" not in cols:
        # Streams of only time/weight still carry positions; keep shapes honest.
        empty = np.empty(0, dtype=np.int64)
        cols.setdefault("src", empty)
        cols.setdefault("dst", empty)
    return EdgeBatch(start=start, **cols)


def _read(arrays: Mapping, a: int, b: int) -> EdgeBatch:
    return _assemble(a, {name: arr[a:b] for name, arr in arrays.items()})


def stream_edges(arrays: Mapping, start: int, stop: int, batch_size: int,
                 prefetch: int = 2) -> Iterator[EdgeBatch]:
    """Yield batches [start, stop) of ``batch_size`` edges from zarr arrays.

    With ``prefetch`` > 0, the next ``prefetch`` batches are read ahead by a
    pool of one thread per column, so the columns of a batch decompress in
    parallel and overlap with the consumer; at most ``prefetch`` + 2 batches
    are in memory (the one being consumed, the ones read ahead).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    bounds = ((a, min(a + batch_size, stop)) for a in range(start, stop, batch_size))
    if prefetch <= 0:
        for a, b in bounds:
            yield _read(arrays, a, b)
        return
    names = list(arrays)
    with ThreadPoolExecutor(max_workers=max(1, len(names)), thread_name_prefix="graphstream-prefetch") as pool:
        def submit(a: int, b: int):
            return a, {name: pool.submit(arrays[name].__getitem__, slice(a, b)) for name in names}

        pending: deque = deque()
        it = iter(bounds)
        for a, b in it:
            pending.append(submit(a, b))
            if len(pending) > prefetch:
                break
        try:
            while pending:
                a, futures = pending.popleft()
                cols = {name: fut.result() for name, fut in futures.items()}
                nxt = next(it, None)
                if nxt is not None:
                    pending.append(submit(*nxt))
                yield _assemble(a, cols)
        finally:
            for _, futures in pending:
                for fut in futures.values():
                    fut.cancel()
