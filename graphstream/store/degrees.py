"""The degree pass: one streaming pass, O(num_nodes) memory."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
        out_deg += np.bincount(batch.src, minlength=n)
        in_deg += np.bincount(batch.dst, minlength=n)
        loops += int(np.count_nonzero(batch.src == batch.dst))
    return Degrees(out_deg, in_deg, loops)


def total_degree(store: GraphStore, batch_size: int | None = None) -> np.ndarray:
    """Exact total degree (both endpoints), what the partitioners use."""
    return degree_pass(store, batch_size).total
