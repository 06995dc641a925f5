"""Least-loaded packing (LPT when the items come sorted by decreasing weight), and consecutive rows
cut into ranges of bounded entries (:func:`cut_ranges`).

Item i, in the order given, goes to the part with the smallest load, ties to
the lowest part id. A binary heap of keys ``load * 2**11 + part`` makes each
step O(log k) for k <= 2048 parts (graphstream's MAX_PARTS is 1024).
"""
from __future__ import annotations

import numpy as np
from numba import njit

_PART_BITS = 11
_PART_MASK = (1 << _PART_BITS) - 1


@njit(cache=True, nogil=True)
def heap_push(heap, size, key):
    """Push ``key`` on the min-heap ``heap[:size]``; returns the new size."""
    i = size
    heap[i] = key
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent
    return size + 1


@njit(cache=True, nogil=True)
def heap_pop(heap, size):
    """Pop the smallest key of ``heap[:size]`` -> (key, new size)."""
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            child = left + 1
        if heap[i] <= heap[child]:
            break
        heap[i], heap[child] = heap[child], heap[i]
        i = child
    return top, size


@njit(cache=True, nogil=True)
def pack_least_loaded(weights, loads):
    """The part of each item; ``loads`` (int64[k]) is updated in place."""
    k = loads.shape[0]
    heap = np.empty(k, dtype=np.int64)
    size = 0
    for p in range(k):
        size = heap_push(heap, size, (loads[p] << _PART_BITS) + p)
    out = np.empty(weights.shape[0], dtype=np.int32)
    for i in range(weights.shape[0]):
        key, size = heap_pop(heap, size)
        p = key & _PART_MASK
        out[i] = p
        loads[p] += weights[i]
        size = heap_push(heap, size, (loads[p] << _PART_BITS) + p)
    return out


def cut_ranges(offsets: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Consecutive row ranges of at most ``limit`` entries each (``offsets``: CSR row offsets); a longer
    single row is a range of its own."""
    n = len(offsets) - 1
    out = []
    a = 0
    while a < n:
        b = int(np.searchsorted(offsets, offsets[a] + limit, side="right")) - 1
        b = min(max(b, a + 1), n)
        out.append((a, b))
        a = b
    return out
