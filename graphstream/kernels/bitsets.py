"""Per-node sets of parts as rows of uint64 words (replica sets, halo membership).

Row v of a ``(num_nodes, num_words(k))`` uint64 array holds bit p when part p
is in v's set: k <= 64 costs 8 bytes a node, and the membership test is one
load, where a list per node would be an allocation.

Rows of bytes (``new_byte_bitsets``) hold the same sets in ceil(k / 8) bytes:
for sets that are only marked and counted (the metrics' halo), and saved as
shards by tasks, where k = 8 then costs 1 byte a node instead of 8.
"""
from __future__ import annotations

import numpy as np
from numba import njit


def num_words(k: int) -> int:
    """uint64 words per row for k parts."""
    return (int(k) + 63) // 64


def new_bitsets(num_nodes: int, k: int) -> np.ndarray:
    return np.zeros((num_nodes, num_words(k)), dtype=np.uint64)


@njit(cache=True, inline="always")
def has_bit(bits, v, p):
    return (bits[v, p >> 6] >> np.uint64(p & 63)) & np.uint64(1) != np.uint64(0)


@njit(cache=True, inline="always")
def set_bit(bits, v, p):
    bits[v, p >> 6] |= np.uint64(1) << np.uint64(p & 63)


@njit(cache=True, inline="always")
def clear_bit(bits, v, p):
    bits[v, p >> 6] &= ~(np.uint64(1) << np.uint64(p & 63))


def new_byte_bitsets(num_nodes: int, k: int) -> np.ndarray:
    return np.zeros((num_nodes, (int(k) + 7) // 8), dtype=np.uint8)


@njit(cache=True, inline="always")
def set_byte_bit(bits, v, p):
    bits[v, p >> 3] |= np.uint8(1 << (p & 7))


@njit(cache=True, nogil=True)
def count_byte_columns(bits, out):
    """out[p] += the number of rows of the byte bitsets ``bits`` holding p (len(out) = 8 x bytes a row)."""
    for v in range(bits.shape[0]):
        for w in range(bits.shape[1]):
            x = bits[v, w]
            b = 0
            while x != 0:
                if x & 1:
                    out[w * 8 + b] += 1
                x >>= 1
                b += 1


@njit(cache=True, inline="always")
def popcount64(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True, nogil=True)
def count_bits(bits):
    """Total number of set bits, and of rows with at least one bit set."""
    total = 0
    nonempty = 0
    for v in range(bits.shape[0]):
        c = 0
        for w in range(bits.shape[1]):
            c += popcount64(bits[v, w])
        total += c
        if c > 0:
            nonempty += 1
    return total, nonempty


def node_records_with_bits(num_nodes: int, k: int, fields: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-node int64 records ``[field 0 .. fields-1, replica bits ...]`` and the bits as uint64.

    A per-edge kernel touching a node's counters and its replica set then
    pays one cache miss instead of one per array (2PS-L's phase 2b: 2.6x; HDRF
    at R-MAT scale 24: 2.2 -> 3.0 M edges/s), with identical results.
    """
    rec = np.zeros((num_nodes, fields + num_words(k)), dtype=np.int64)
    return rec, rec[:, fields:].view(np.uint64)
