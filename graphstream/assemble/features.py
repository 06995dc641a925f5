"""Node data split: each part gets the rows of its nodes, gathered through memory maps.

The source files are never loaded whole. A part's node ids come in two
ascending runs (inner, then halo), so rows are read in increasing file
offset: for each block of ids, only the window of rows from the block's first
to its last id is mapped (at most half of ``window_bytes``), the rows are
written from it (copied out first when not every row is wanted) and the map
is dropped, which also releases the pages it touched from this
process's resident set. Output ``.npy`` files are written sequentially,
header first (:class:`NpyWriter`).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..store.nodedata import NodeArray, NodeData, little_endian, write_npy_header


class NpyWriter:
    """Write a ``.npy`` file of known dtype and shape block by block, in row order.

    ``close`` checks that exactly ``shape[0]`` rows were written, so a file
    is never shorter than its header says.
    """

    def __init__(self, path: str | os.PathLike, dtype: np.dtype, shape: tuple[int, ...]):
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        self.rows = 0
        self._file = open(self.path, "wb")
        write_npy_header(self._file, self.dtype, self.shape)

    def write(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape[1:] != self.shape[1:]:
            raise ValueError(f"{self.path}: block rows have shape {block.shape[1:]}, expected {self.shape[1:]}")
        if self.rows + len(block) > self.shape[0]:
            raise ValueError(f"{self.path}: more than {self.shape[0]} rows written")
        if block.size:
            self._file.write(memoryview(block).cast("B"))
        self.rows += len(block)

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.close()
        if self.rows != self.shape[0]:
            raise ValueError(f"{self.path}: {self.rows} rows written, header says {self.shape[0]}")

    def __enter__(self) -> NpyWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._file.close()


def gather_rows(array: NodeArray, ids: np.ndarray, writer: NpyWriter, window_bytes: int) -> None:
    """Append ``array[ids]`` to ``writer``; ``ids`` ascending and unique; at most ``window_bytes`` of
    node data held at once (one row at least).

    Each block maps the row window [ids[i], ids[j-1]] of at most half of
    ``window_bytes``: a window whose every row is wanted is written from the
    map itself; otherwise the wanted rows are copied out (at most the other
    half). The map and the copy are dropped before the next window is
    mapped, which also releases the pages it touched from this process's
    resident set. (Before 2026-11-30 a window was the whole ``window_bytes``,
    always copied, and the last copy lived on while the next window was
    mapped and copied: three windows at once, 384 MiB a worker with the
    default 128 MiB.)
    """
    if len(ids) == 0:
        return
    window_rows = max(1, window_bytes // 2 // max(1, array.row_bytes))
    i = 0
    n = len(ids)
    while i < n:
        lo = int(ids[i])
        j = int(np.searchsorted(ids, lo + window_rows, side="left"))
        j = max(j, i + 1)
        hi = int(ids[j - 1]) + 1
        window = array.memmap(lo, hi)
        block = window[ids[i:j] - lo] if (j - i) < (hi - lo) else window
        writer.write(block)
        del window, block  # unmap now: its pages leave our resident set
        i = j


def gather_node_data(node_data: NodeData, global_ids: np.ndarray, part_dir: Path, window_bytes: int) -> None:
    """Write ``<name>.npy`` in ``part_dir`` for every node data file: the rows of ``global_ids``.

    ``global_ids`` is a concatenation of ascending runs (inner, halo); each run
    is gathered in one sweep of increasing offsets.
    """
    runs = ascending_runs(global_ids)
    for name, array in node_data.arrays.items():
        with NpyWriter(part_dir / f"{name}.npy", little_endian(array.dtype),
                       (len(global_ids),) + array.row_shape) as writer:
            for a, b in runs:
                gather_rows(array, global_ids[a:b], writer, window_bytes)


def ascending_runs(ids: np.ndarray) -> list[tuple[int, int]]:
    """Bounds of the maximal strictly ascending runs of ``ids``."""
    if len(ids) == 0:
        return []
    breaks = np.flatnonzero(np.diff(ids) <= 0) + 1
    starts = np.concatenate([[0], breaks])
    stops = np.concatenate([breaks, [len(ids)]])
    return [(int(a), int(b)) for a, b in zip(starts, stops, strict=True)]
