"""splitmix64 (Steele, Lea and Flood 2014): the one integer hash of graphstream.

Every seeded choice (hash partitioners, DBH, tie-breaks in label propagation,
HDRF's random stream, the R-MAT generator, the relabel hash table) uses the
finaliser below, so a change here changes outputs: stores record the
generator's RNG name for that reason (``ingest/rmat.py``).
"""
from __future__ import annotations

import numpy as np
from numba import njit

GOLDEN = 0x9E3779B97F4A7C15       # the splitmix64 increment (2**64 / golden ratio)
_G = np.uint64(GOLDEN)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK64 = (1 << 64) - 1


@njit(cache=True, inline="always")
def mix64(x):
    """splitmix64 finaliser: a bijection of uint64 with good avalanche."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@njit(cache=True, inline="always")
def hash_node(v, seed):
    """Seeded hash of a node id (uint64): mix64(v + (seed + 1) * GOLDEN), wrapping."""
    return mix64(np.uint64(v) + (np.uint64(seed) + np.uint64(1)) * _G)


@njit(cache=True, inline="always")
def next_random(state):
    """Counter-based random uint64; ``state`` is a uint64[1] array advanced in place."""
    state[0] += _G
    return mix64(state[0])


def py_mix64(x: int) -> int:
    """Plain-Python twin of :func:`mix64` (key derivation and the tests' references)."""
    x &= _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def py_hash_node(v: int, seed: int) -> int:
    """Plain-Python twin of :func:`hash_node`."""
    return py_mix64(v + (seed + 1) * GOLDEN)


def seed_state(seed: int) -> np.ndarray:
    """The state of :func:`next_random`'s stream for ``seed`` (uint64[1])."""
    return np.array([py_mix64(int(seed) ^ 0x5DEECE66D)], dtype=np.uint64)
