"""Snapshot differences by merging sorted streams.

A snapshot is an edge set in canonical order: int64 keys ``src * N + dst``
sorted ascending, with a count per key (duplicates merged). Between two
consecutive snapshots the difference is

- ``removed``: positions in t-1's sorted list of the edges that are gone
  (a position is half the bytes of an edge pair, spec "graph difference"),
- ``added``: the sorted edges of t that were not in t-1, with their counts,
- ``changed``: positions in t's list of the surviving edges whose count
  changed, with the new count (only needed by consumers of counts).

Everything here is one linear merge of two sorted arrays, in a numba kernel
that fills preallocated outputs. :func:`apply_delta_vectorized` is the same
rebuild written with the bulk operations a device has (boolean mask,
searchsorted, scatter), so the trainer can port it to torch line by line.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..errors import CorruptDataError, ParameterError
from ..kernels.merge import collapse_sorted, merge_sorted

KEY_LIMIT = 2**63 - 1


# -- keys --------------------------------------------------------------------

def check_key_space(num_nodes: int) -> None:
    """Keys ``src * N + dst`` must fit in int64 (N < ~3.04e9)."""
    if num_nodes > 0 and (num_nodes - 1) * num_nodes + (num_nodes - 1) > KEY_LIMIT:
        raise ParameterError(f"num_nodes={num_nodes} is too large for int64 edge keys (limit ~3.04e9)")


def encode_keys(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> np.ndarray:
    """Canonical int64 key of each edge: sorting keys sorts by (src, dst)."""
    return np.asarray(src, dtype=np.int64) * np.int64(num_nodes) + np.asarray(dst, dtype=np.int64)


def decode_keys(keys: np.ndarray, num_nodes: int, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of keys, in ``dtype``."""
    n = np.int64(max(num_nodes, 1))
    src, dst = np.divmod(np.asarray(keys, dtype=np.int64), n)
    return src.astype(dtype, copy=False), dst.astype(dtype, copy=False)


# -- sort and merge kernels -------------------------------------------------------

def sort_unique(keys: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys with the number (or summed ``counts``) of each."""
    keys = np.asarray(keys, dtype=np.int64)
    if counts is None:
        return collapse_sorted(np.sort(keys, kind="stable"))
    order = np.argsort(keys, kind="stable")
    return collapse_sorted(keys[order], np.asarray(counts, dtype=np.int64)[order])


def merge_counts(a_keys, a_counts, b_keys, b_counts, sign: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Sorted multiset sum (sign=+1) or difference (sign=-1) of two sorted runs."""
    return merge_sorted(a_keys, a_counts, b_keys, b_counts, sign)


@njit(cache=True)
def _diff(pk, pc, ck, cc, add_k, add_c, rem_pos, chg_pos, chg_c):
    """One merge of prev and cur: what was added, removed, and recounted."""
    i = 0
    j = 0
    na = 0
    nr = 0
    nc = 0
    np_ = pk.shape[0]
    nq = ck.shape[0]
    while i < np_ or j < nq:
        if j >= nq or (i < np_ and pk[i] < ck[j]):
            rem_pos[nr] = i
            nr += 1
            i += 1
        elif i >= np_ or ck[j] < pk[i]:
            add_k[na] = ck[j]
            add_c[na] = cc[j]
            na += 1
            j += 1
        else:
            if pc[i] != cc[j]:
                chg_pos[nc] = j
                chg_c[nc] = cc[j]
                nc += 1
            i += 1
            j += 1
    return na, nr, nc


@dataclass(frozen=True, slots=True)
class KeyDelta:
    """The difference of two canonical snapshots, in keys and positions."""
    added_keys: np.ndarray
    added_counts: np.ndarray
    removed_pos: np.ndarray
    changed_pos: np.ndarray
    changed_counts: np.ndarray


def diff_sorted(prev_keys, prev_counts, cur_keys, cur_counts) -> KeyDelta:
    """Delta from snapshot t-1 to t (both canonical), by one linear merge."""
    n_prev, n_cur = len(prev_keys), len(cur_keys)
    add_k = np.empty(n_cur, dtype=np.int64)
    add_c = np.empty(n_cur, dtype=np.int64)
    rem = np.empty(n_prev, dtype=np.int64)
    chg = np.empty(n_cur, dtype=np.int64)
    chg_c = np.empty(n_cur, dtype=np.int64)
    na, nr, nc = _diff(prev_keys, prev_counts, cur_keys, cur_counts, add_k, add_c, rem, chg, chg_c)
    return KeyDelta(add_k[:na].copy(), add_c[:na].copy(), rem[:nr].copy(), chg[:nc].copy(), chg_c[:nc].copy())


@njit(cache=True)
def _apply(pk, pc, rem_pos, add_k, add_c, out_k, out_c):
    """Drop the removed positions of prev while merging in the sorted additions; -1 when the delta
    does not fit prev (removed positions unsorted or repeated, from a store edited or damaged with valid
    checksums): the kernel does not check bounds, and it wrote past its output (a heap corruption)."""
    i = 0
    r = 0
    j = 0
    m = 0
    np_ = pk.shape[0]
    nr = rem_pos.shape[0]
    na = add_k.shape[0]
    while i < np_ or j < na:
        if i < np_ and r < nr and rem_pos[r] == i:
            r += 1
            i += 1
            continue
        if m >= out_k.shape[0]:
            return -1
        if j >= na or (i < np_ and pk[i] < add_k[j]):
            out_k[m] = pk[i]
            out_c[m] = pc[i]
            i += 1
        else:
            out_k[m] = add_k[j]
            out_c[m] = add_c[j]
            j += 1
        m += 1
    return m


def apply_delta(prev_keys, prev_counts, removed_pos, added_keys, added_counts,
                changed_pos=None, changed_counts=None) -> tuple[np.ndarray, np.ndarray]:
    """Snapshot t from t-1 and the delta (numba merge, linear time)."""
    n = len(prev_keys) - len(removed_pos) + len(added_keys)
    if n < 0:
        raise ParameterError(f"delta removes {len(removed_pos)} edges from a snapshot of {len(prev_keys)}")
    out_k = np.empty(n, dtype=np.int64)
    out_c = np.empty(n, dtype=np.int64)
    m = _apply(np.asarray(prev_keys, dtype=np.int64), np.asarray(prev_counts, dtype=np.int64),
               np.asarray(removed_pos, dtype=np.int64), np.asarray(added_keys, dtype=np.int64),
               np.asarray(added_counts, dtype=np.int64), out_k, out_c)
    if m != n:
        raise CorruptDataError(f"a delta does not match the snapshot it is applied to ({len(removed_pos)} removed "
                               f"positions of {len(prev_keys)} edges, not all of them removed once, in order)")
    if changed_pos is not None and len(changed_pos):
        out_c[np.asarray(changed_pos, dtype=np.int64)] = changed_counts
    return out_k, out_c


def apply_delta_vectorized(prev_keys: np.ndarray, removed_pos: np.ndarray,
                           added_keys: np.ndarray) -> np.ndarray:
    """The device-side rebuild, in bulk array operations only (portable to torch).

    1. keep = all-true mask over t-1's list; keep[removed_pos] = False.
    2. kept = prev[keep] (still sorted).
    3. each added key lands at searchsorted(kept, key) + its own rank.
    4. scatter the added keys there and the kept keys into the other slots.
    """
    keep = np.ones(len(prev_keys), dtype=bool)
    keep[removed_pos] = False
    kept = prev_keys[keep]
    n = len(kept) + len(added_keys)
    slot = np.searchsorted(kept, added_keys) + np.arange(len(added_keys))
    out = np.empty(n, dtype=prev_keys.dtype)
    free = np.ones(n, dtype=bool)
    free[slot] = False
    out[slot] = added_keys
    out[free] = kept
    return out


def delta_transfer_bytes(num_added: int, num_removed: int, prev_edges: int, id_bytes: int) -> int:
    """Bytes to ship a delta: added pairs plus removed positions (int32 where they fit)."""
    pos_bytes = 4 if prev_edges < 2**31 else 8
    return int(num_added) * 2 * id_bytes + int(num_removed) * pos_bytes


# -- the public delta object ------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Delta:
    """What changes from snapshot t-1 to t, as edge pairs and positions.

    Unpacks as ``added, removed = store.delta(t)`` where each is a
    ``(src, dst)`` pair of sorted arrays. ``removed_pos`` are positions in
    t-1's canonical list; ``changed_pos`` positions in t's list of surviving
    edges whose count changed to ``changed_count``.
    """
    t: int
    added_src: np.ndarray
    added_dst: np.ndarray
    added_count: np.ndarray
    removed_src: np.ndarray
    removed_dst: np.ndarray
    removed_pos: np.ndarray
    changed_pos: np.ndarray
    changed_count: np.ndarray

    @property
    def added(self) -> tuple[np.ndarray, np.ndarray]:
        return self.added_src, self.added_dst

    @property
    def removed(self) -> tuple[np.ndarray, np.ndarray]:
        return self.removed_src, self.removed_dst

    def __iter__(self):
        yield self.added
        yield self.removed

    def __len__(self) -> int:
        return 2
