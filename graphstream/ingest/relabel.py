"""Relabel arbitrary node ids (sparse, 64-bit, negative, or strings) to 0..n-1.

One pass, in file order: each id gets the next local id the first time it
is seen (the source before the destination of each edge), so the result
does not depend on block or chunk sizes. ``id_map[local] = original``.

An open-addressing hash table (linear probing, load <= 1/2) maps original
ids to local ids; it stores only local ids, and keys are compared through
the id map itself. Memory, for n distinct ids:

* integer ids: id map 8n bytes + table 8 x (2n..4n) bytes = 24n..40n bytes
  (plus one transient copy while the table doubles);
* string ids: the id bytes once (an arena), 8n bytes of offsets and the same
  table, i.e. about (total id length) + 24n..40n bytes.

Edges are never held: each block is mapped and handed on.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import InputFormatError
from ..kernels.hashing import mix64

_EMPTY = -1
_MIN_TABLE = 1 << 12


@njit(cache=True, nogil=True)
def _int_lookup(key, table, keys, count):
    """Local id of ``key``, inserting it as ``count`` if new -> (local id, new count)."""
    mask = np.uint64(len(table) - 1)
    slot = mix64(np.uint64(key)) & mask
    while True:
        local = table[slot]
        if local == _EMPTY:
            table[slot] = count
            keys[count] = key
            return count, count + 1
        if keys[local] == key:
            return local, count
        slot = (slot + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def _int_map(src, dst, out_src, out_dst, start, table, keys, count, limit):
    """Map edges from ``start``; stop before an edge that could exceed ``limit`` ids."""
    for i in range(start, len(src)):
        if count + 2 > limit:
            return i, count
        out_src[i], count = _int_lookup(src[i], table, keys, count)
        out_dst[i], count = _int_lookup(dst[i], table, keys, count)
    return len(src), count


@njit(cache=True, nogil=True)
def _int_rehash(keys, count, table):
    mask = np.uint64(len(table) - 1)
    for local in range(count):
        slot = mix64(np.uint64(keys[local])) & mask
        while table[slot] != _EMPTY:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = local


@njit(cache=True, nogil=True)
def _fnv(buf, a, b):
    h = np.uint64(0xCBF29CE484222325)
    for i in range(a, b):
        h = (h ^ np.uint64(buf[i])) * np.uint64(0x100000001B3)
    return mix64(np.uint64(h))


@njit(cache=True, nogil=True)
def _str_lookup(buf, a, b, table, offsets, arena, count):
    mask = np.uint64(len(table) - 1)
    slot = _fnv(buf, a, b) & mask
    n = b - a
    while True:
        local = table[slot]
        if local == _EMPTY:
            o = offsets[count]
            for i in range(n):
                arena[o + i] = buf[a + i]
            offsets[count + 1] = o + n
            table[slot] = count
            return count, count + 1
        o = offsets[local]
        if offsets[local + 1] - o == n:
            same = True
            for i in range(n):
                if arena[o + i] != buf[a + i]:
                    same = False
                    break
            if same:
                return local, count
        slot = (slot + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def _str_map(buf, spans, out_src, out_dst, start, table, offsets, arena, count, limit):
    """Like ``_int_map`` for ids given as byte spans of ``buf``; also stops when the arena is full."""
    room = len(arena)
    for i in range(start, len(spans)):
        need = (spans[i, 1] - spans[i, 0]) + (spans[i, 3] - spans[i, 2])
        if count + 2 > limit or offsets[count] + need > room:
            return i, count
        out_src[i], count = _str_lookup(buf, spans[i, 0], spans[i, 1], table, offsets, arena, count)
        out_dst[i], count = _str_lookup(buf, spans[i, 2], spans[i, 3], table, offsets, arena, count)
    return len(spans), count


@njit(cache=True, nogil=True)
def _str_rehash(offsets, arena, count, table):
    mask = np.uint64(len(table) - 1)
    for local in range(count):
        slot = _fnv(arena, offsets[local], offsets[local + 1]) & mask
        while table[slot] != _EMPTY:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = local


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    out = np.empty(size, dtype=a.dtype)
    out[:len(a)] = a
    return out


class IntRelabeler:
    """Map int64 ids to 0..n-1 in order of first appearance."""

    def __init__(self) -> None:
        self._table = np.full(_MIN_TABLE, _EMPTY, dtype=np.int64)
        self._keys = np.empty(_MIN_TABLE // 2, dtype=np.int64)
        self._count = 0

    @property
    def num_ids(self) -> int:
        return self._count

    def _grow(self) -> None:
        size = len(self._table) * 2
        self._keys = _grown(self._keys, size // 2)
        self._table = np.full(size, _EMPTY, dtype=np.int64)
        _int_rehash(self._keys, self._count, self._table)

    def map(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        src = np.ascontiguousarray(src, dtype=np.int64)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        out_src = np.empty(len(src), dtype=np.int64)
        out_dst = np.empty(len(dst), dtype=np.int64)
        i = 0
        while True:
            i, self._count = _int_map(src, dst, out_src, out_dst, i, self._table, self._keys,
                                      self._count, len(self._keys))
            if i == len(src):
                return out_src, out_dst
            self._grow()

    def id_map(self) -> np.ndarray:
        """Original id by local id (int64)."""
        return self._keys[:self._count].copy()


class StrRelabeler:
    """Map byte-string ids (spans of a buffer) to 0..n-1 in order of first appearance."""

    def __init__(self) -> None:
        self._table = np.full(_MIN_TABLE, _EMPTY, dtype=np.int64)
        self._offsets = np.zeros(_MIN_TABLE // 2 + 1, dtype=np.int64)
        self._arena = np.empty(1 << 16, dtype=np.uint8)
        self._count = 0

    @property
    def num_ids(self) -> int:
        return self._count

    def map_spans(self, buf: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out_src = np.empty(len(spans), dtype=np.int64)
        out_dst = np.empty(len(spans), dtype=np.int64)
        i = 0
        while True:
            i, self._count = _str_map(buf, spans, out_src, out_dst, i, self._table, self._offsets,
                                      self._arena, self._count, len(self._offsets) - 1)
            if i == len(spans):
                return out_src, out_dst
            need = (spans[i, 1] - spans[i, 0]) + (spans[i, 3] - spans[i, 2])
            if self._offsets[self._count] + need > len(self._arena):
                self._arena = _grown(self._arena, max(2 * len(self._arena),
                                                      int(self._offsets[self._count] + need)))
            if self._count + 2 > len(self._offsets) - 1:
                size = len(self._table) * 2
                self._offsets = _grown(self._offsets, size // 2 + 1)
                self._table = np.full(size, _EMPTY, dtype=np.int64)
                _str_rehash(self._offsets, self._arena, self._count, self._table)

    def id_map(self) -> np.ndarray:
        """Original ids by local id, as a numpy array of str; bytes that are not UTF-8 as ``\\xNN``
        escapes (``Jos\\xe9``), so that two ids stay two (with "replace" Latin-1's "José" and "Josè"
        both read "Jos\ufffd")."""
        n = self._count
        offsets = self._offsets[:n + 1]
        try:
            import pyarrow as pa
        except ImportError:
            arena = self._arena
            return _distinct(np.asarray([bytes(arena[offsets[i]:offsets[i + 1]]).decode(
                "utf-8", errors="backslashreplace") for i in range(n)], dtype=str))
        raw = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [
            None, pa.py_buffer(offsets), pa.py_buffer(self._arena[:int(offsets[-1])])])
        try:
            return np.asarray(raw.cast(pa.large_string()).to_numpy(zero_copy_only=False), dtype=str)
        except pa.ArrowInvalid:
            return _distinct(np.asarray([b.decode("utf-8", errors="backslashreplace") for b in raw.to_pylist()],
                                        dtype=str))


def _distinct(values: np.ndarray) -> np.ndarray:
    """``values`` (ids with escaped bytes), refused if two read the same: an escape that equals another id
    written out with a backslash."""
    if len(np.unique(values)) != len(values):
        raise InputFormatError("--relabel: some ids are not UTF-8 text, and written with \\xNN escapes two of "
                               "them read the same; convert the file to UTF-8 first (iconv -f latin1 -t utf-8)")
    return values


def spans_from_arrow(src, dst) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate two pyarrow string/binary arrays into one buffer plus (s_a, s_b, d_a, d_b) spans."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def parts(arr):
        arr = pc.cast(arr, pa.large_binary()) if not pa.types.is_large_binary(arr.type) else arr
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        _, off_buf, data_buf = arr.buffers()
        offs = np.frombuffer(off_buf, dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
        data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
        return offs, data

    so, sd = parts(src)
    do, dd = parts(dst)
    buf = np.concatenate([sd, dd])
    spans = np.empty((len(so) - 1, 4), dtype=np.int64)
    spans[:, 0] = so[:-1]
    spans[:, 1] = so[1:]
    spans[:, 2] = do[:-1] + len(sd)
    spans[:, 3] = do[1:] + len(sd)
    return buf, spans
