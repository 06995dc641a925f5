"""Unordered pairs as one int64 key ``min * n + max``, and the symmetric CSR of weighted pairs.

Sorting the keys sorts the pairs by (min, max), so distinct pairs with
multiplicities are a sort and a run-length pass (``kernels.merge``).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def pair_key(a, b, n):
    """Key of the unordered pair {a, b} over ids 0..n-1."""
    if a > b:
        a, b = b, a
    return np.int64(a) * n + b


@njit(cache=True, nogil=True)
def pairs_to_csr(keys, w, num_rows, indptr, indices, weights):
    """Both directions of the weighted pairs ``keys = a * num_rows + b`` (a < b), by counting.

    Row a gets (b, w) and row b gets (a, w); sorted unique keys give sorted
    rows. ``indptr`` (num_rows + 1 zeros), ``indices`` and ``weights``
    (2 x len(keys) each, any dtypes that hold the values) are filled in place.
    """
    for x in range(keys.shape[0]):
        indptr[keys[x] // num_rows + 1] += 1
        indptr[keys[x] % num_rows + 1] += 1
    for a in range(num_rows):
        indptr[a + 1] += indptr[a]
    fill = indptr[:-1].copy()
    for x in range(keys.shape[0]):
        a = keys[x] // num_rows
        b = keys[x] % num_rows
        indices[fill[a]] = b
        weights[fill[a]] = w[x]
        fill[a] += 1
        indices[fill[b]] = a
        weights[fill[b]] = w[x]
        fill[b] += 1
