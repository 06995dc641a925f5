"""Sorted runs of int64 keys with counts: collapse equal neighbours, merge two runs.

The multiset operations of snapshot deltas and PGC's pair counting; each is
one linear pass filling preallocated outputs and returning the length used.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def run_length(sorted_keys, weights, out_keys, out_counts):
    """Collapse equal neighbours of a sorted array, summing ``weights``."""
    m = -1
    for i in range(sorted_keys.shape[0]):
        k = sorted_keys[i]
        if m < 0 or out_keys[m] != k:
            m += 1
            out_keys[m] = k
            out_counts[m] = weights[i]
        else:
            out_counts[m] += weights[i]
    return m + 1


RADIX_BITS = 11   # digits of the LSD radix sort: a 2048-entry count table stays in L1


@njit(cache=True, nogil=True)
def radix_sort(keys, scratch, key_bits):
    """Sort non-negative int64 ``keys`` in place (``scratch``: as long), all below ``2**key_bits``.

    LSD radix sort, ceil(key_bits / 11) counting passes: on the coarse graph's blocks (2^18 keys of
    ~35-41 bits) 6-7x faster than ``np.sort``.
    """
    n = keys.shape[0]
    src = keys
    dst = scratch[:n]
    count = np.empty((1 << RADIX_BITS) + 1, dtype=np.int64)
    mask = (1 << RADIX_BITS) - 1
    shift = 0
    passes = 0
    while shift < key_bits:
        count[:] = 0
        for i in range(n):
            count[((src[i] >> shift) & mask) + 1] += 1
        for d in range(1 << RADIX_BITS):
            count[d + 1] += count[d]
        for i in range(n):
            d = (src[i] >> shift) & mask
            dst[count[d]] = src[i]
            count[d] += 1
        src, dst = dst, src
        shift += RADIX_BITS
        passes += 1
    if passes % 2 == 1:   # the result is in scratch
        keys[:] = src


@njit(cache=True, nogil=True)
def merge_counts(ak, ac, bk, bc, sign, out_k, out_c, hist=None):
    """out = a + sign * b over sorted keys; keys whose count drops to 0 vanish. With ``hist``, each
    count written is also counted there (``hist[min(c, len(hist) - 1)] += 1``, counts above 0): a
    cut to the heaviest keys then needs no pass of its own over the weights."""
    i = 0
    j = 0
    m = 0
    na = ak.shape[0]
    nb = bk.shape[0]
    while i < na or j < nb:
        if j >= nb or (i < na and ak[i] < bk[j]):
            k = ak[i]
            c = ac[i]
            i += 1
        elif i >= na or bk[j] < ak[i]:
            k = bk[j]
            c = sign * bc[j]
            j += 1
        else:
            k = ak[i]
            c = ac[i] + sign * bc[j]
            i += 1
            j += 1
        if c != 0:
            out_k[m] = k
            out_c[m] = c
            m += 1
            if hist is not None:
                hist[min(c, hist.shape[0] - 1)] += 1
    return m


def collapse_sorted(sorted_keys: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys of a sorted int64 array with their summed ``weights`` (1 each by default)."""
    if weights is None:
        weights = np.ones(len(sorted_keys), dtype=np.int64)
    out_k = np.empty(len(sorted_keys), dtype=np.int64)
    out_c = np.empty(len(sorted_keys), dtype=np.int64)
    m = run_length(sorted_keys, weights, out_k, out_c)
    return out_k[:m], out_c[:m]


def merge_sorted(a_keys, a_counts, b_keys, b_counts, sign: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Sorted multiset sum (sign=+1) or difference (sign=-1) of two sorted runs."""
    out_k = np.empty(len(a_keys) + len(b_keys), dtype=np.int64)
    out_c = np.empty(len(a_keys) + len(b_keys), dtype=np.int64)
    m = merge_counts(a_keys, a_counts, b_keys, b_counts, np.int64(sign), out_k, out_c)
    return out_k[:m], out_c[:m]


class KeyCounter:
    """Distinct int64 keys with multiplicities, counted in bounded memory.

    Raw keys are buffered until ``buffer`` of them are pending, then sorted,
    collapsed and merged into the running sorted run: memory is the buffer
    plus the distinct keys, whatever the number of keys added.
    """

    def __init__(self, buffer: int = 1 << 22):
        self.limit = buffer
        self.pending: list[np.ndarray] = []
        self.num_pending = 0
        self.keys = np.empty(0, dtype=np.int64)
        self.counts = np.empty(0, dtype=np.int64)

    def add(self, keys: np.ndarray) -> None:
        if len(keys):
            self.pending.append(keys)
            self.num_pending += len(keys)
            if self.num_pending >= self.limit:
                self._fold()

    def _fold(self) -> None:
        if self.pending:
            keys = np.asarray(np.concatenate(self.pending), dtype=np.int64)
            k, c = collapse_sorted(np.sort(keys, kind="stable"))
            self.pending, self.num_pending = [], 0
            self.keys, self.counts = merge_sorted(self.keys, self.counts, k, c)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The sorted distinct keys and their counts so far."""
        self._fold()
        return self.keys, self.counts
