"""The degree pass: one streaming pass, O(num_nodes) memory."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..errors import InvalidIdError
from .graph import GraphStore


@dataclass(frozen=True, slots=True)
class Degrees:
    """Per-node out-, in- and total degree (int64), plus the self-loop count."""
    out_degree: np.ndarray
    in_degree: np.ndarray
    self_loops: int

    @property
    def total(self) -> np.ndarray:
        return self.out_degree + self.in_degree


def degree_pass(store: GraphStore, batch_size: int | None = None) -> Degrees:
    """Count each node's edges as source and as destination.

    For an undirected store (each edge stored once) ``total`` is the degree.
    A self-loop adds 1 to out and 1 to in, as in the edge list.
    """
    n = store.num_nodes
    out_deg = np.zeros(n, dtype=np.int64)
    in_deg = np.zeros(n, dtype=np.int64)
    loops = 0
    for batch in store.stream(batch_size):
        found = _count_degrees(batch.src, batch.dst, out_deg, in_deg)
        if found < 0:
            bad = -found - 1
            raise InvalidIdError(f"{store.path}: edge {batch.start + bad} = ({batch.src[bad]}, {batch.dst[bad]}) "
                                 f"has an id outside [0, {n})")
        loops += found
    return Degrees(out_deg, in_deg, loops)


@njit(cache=True)
def _count_degrees(src, dst, out_deg, in_deg):
    """Add one batch to the counts in place; return its self-loops, or -1 - i
    for the first edge i with an id out of range (nothing past it counted).
    In place, not ``np.bincount(..., minlength=n)``: that costs O(n) per batch."""
    n = out_deg.shape[0]
    loops = 0
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        if s < 0 or s >= n or d < 0 or d >= n:
            return -1 - i
        out_deg[s] += 1
        in_deg[d] += 1
        if s == d:
            loops += 1
    return loops


def total_degree(store: GraphStore, batch_size: int | None = None) -> np.ndarray:
    """Exact total degree (both endpoints), what the partitioners use."""
    return degree_pass(store, batch_size).total
