"""The degree pass: one streaming pass, O(num_nodes) memory."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numba import njit

from .._report import track
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
    # The two columns are counted by two threads at once (the kernels release
    # the GIL); each owns its counter array, so there is nothing to lock and the
    # result does not depend on timing.
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="graphstream-degrees") as pool:
        for batch in track(store.stream(batch_size), store.num_edges, "degree pass", size=len):
            f_out = pool.submit(_count_ids, batch.src, out_deg)
            f_in = pool.submit(_count_ids, batch.dst, in_deg)
            bad = [i for i in (f_out.result(), f_in.result()) if i >= 0]
            if bad:
                i = min(bad)
                raise InvalidIdError(f"{store.path}: edge {batch.start + i} = ({batch.src[i]}, {batch.dst[i]}) "
                                     f"has an id outside [0, {n})")
            loops += int(np.count_nonzero(batch.src == batch.dst))
    return Degrees(out_deg, in_deg, loops)


@njit(cache=True, nogil=True)
def _count_ids(ids, deg):
    """deg[v] += 1 for every id v of the batch, in place; return -1, or the index
    of the first id outside [0, len(deg)) (nothing past it is counted).
    In place, not ``np.bincount(..., minlength=n)``: that costs O(n) per batch."""
    n = deg.shape[0]
    for i in range(ids.shape[0]):
        v = ids[i]
        if v < 0 or v >= n:
            return i
        deg[v] += 1
    return -1


def total_degree(store: GraphStore, batch_size: int | None = None) -> np.ndarray:
    """Exact total degree (both endpoints), what the partitioners use."""
    return degree_pass(store, batch_size).total
