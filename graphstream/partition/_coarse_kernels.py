"""Numba kernels of coarse-refine (see coarse_refine.py for the algorithm they serve).

They see arrays and scalars only and change state in place. A block is a
slice of the vertex stream: node ``first + i`` has neighbours
``nbrs[offs[i]:offs[i + 1]]``. Self-loops are skipped everywhere: they
neither attract a node nor add a replica.

Refinement keeps, for every node y and part p, a 2-bit saturating count
c_y(p) of y's neighbours owned by p (0, 1, 2, 3 = "3 or more"), packed four
parts a byte: ``counters[y, p >> 2]``, k/4 bytes a node.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..kernels.hashing import hash_node
from ..kernels.pairs import pair_key, pairs_to_csr

# -- step 2: size-capped label propagation ----------------------------------------------------

@njit(cache=True, inline="always")
def count_neighbour_labels(u, start, stop, nbrs, label, cnt, touched):
    """``cnt[label[v]] += 1`` for u's neighbours ``v != u`` in ``nbrs[start:stop]``.

    The distinct labels seen go to ``touched[:nt]``; returns ``nt``. ``cnt`` is
    zero on entry; the caller zeroes ``cnt[touched[:nt]]`` when done with it.
    """
    nt = 0
    for j in range(start, stop):
        v = nbrs[j]
        if v == u:
            continue
        lab = label[v]
        if cnt[lab] == 0:
            touched[nt] = lab
            nt += 1
        cnt[lab] += 1
    return nt

@njit(cache=True)
def lp_block(first, offs, nbrs, label, size, cap, cnt, touched, seed):
    """One label-propagation sweep over a block; returns the number of nodes that changed label.

    A node takes the label most frequent among its neighbours, among labels
    whose cluster has room (size < cap) or its own; ties keep the current
    label, else go to the smallest seeded hash. ``cnt`` (one int32 per label,
    zero on entry and exit) and ``touched`` are scratch.
    """
    moved = 0
    for i in range(offs.shape[0] - 1):
        u = first + i
        nt = count_neighbour_labels(u, offs[i], offs[i + 1], nbrs, label, cnt, touched)
        if nt == 0:
            continue
        cur = label[u]
        best = cur
        best_c = cnt[cur]
        best_h = hash_node(cur ^ seed, 0)
        for t in range(nt):
            lab = touched[t]
            if lab == cur or size[lab] >= cap:
                continue
            c = cnt[lab]
            h = hash_node(lab ^ seed, 0)
            if c > best_c or (c == best_c and best != cur and h < best_h):
                best = lab
                best_c = c
                best_h = h
        for t in range(nt):
            cnt[touched[t]] = 0
        if best != cur:
            size[cur] -= 1
            size[best] += 1
            label[u] = best
            moved += 1
    return moved


@njit(cache=True)
def compact_labels(label, offsets):
    """Cluster ids 0..C-1 for the labels of non-isolated nodes (-1 for isolated); returns (cl, C)."""
    n = label.shape[0]
    remap = np.full(n, -1, dtype=np.int32)
    cl = np.full(n, -1, dtype=np.int32)
    c = 0
    for v in range(n):
        if offsets[v + 1] == offsets[v]:
            continue
        lab = label[v]
        if remap[lab] < 0:
            remap[lab] = c
            c += 1
        cl[v] = remap[lab]
    return cl, c


# -- step 3: the coarse graph --------------------------------------------------------------------

@njit(cache=True)
def coarse_keys_block(first, offs, nbrs, cl, num_clusters, out):
    """Keys cu * C + cv (cu < cv) of the inter-cluster entries of a block; returns how many.

    Each undirected edge appears twice in the vertex stream and is emitted
    once, from the endpoint in the smaller cluster.
    """
    m = 0
    for i in range(offs.shape[0] - 1):
        u = first + i
        cu = cl[u]
        for j in range(offs[i], offs[i + 1]):
            cv = cl[nbrs[j]]
            if cu < cv:
                out[m] = pair_key(cu, cv, num_clusters)
                m += 1
    return m


@njit(cache=True)
def coarse_halo_keys_block(first, offs, nbrs, cl, num_clusters, stamp, out):
    """Like :func:`coarse_keys_block`, but each node emits each neighbouring cluster once.

    Summed, the weight of (A, B) is the number of nodes of A with a
    neighbour in B plus those of B with a neighbour in A: the halo entries
    that cutting A from B creates, the replication factor's own currency.
    ``stamp`` (one int64 per cluster) is scratch.
    """
    m = 0
    for i in range(offs.shape[0] - 1):
        u = first + i
        cu = cl[u]
        tag = u + 1
        for j in range(offs[i], offs[i + 1]):
            cv = cl[nbrs[j]]
            if cv == cu or stamp[cv] == tag:
                continue
            stamp[cv] = tag
            out[m] = pair_key(cu, cv, num_clusters)
            m += 1
    return m


def symmetric_csr(keys, w, num_clusters):
    """The coarse graph as METIS wants it: both directions, rows sorted (xadj, adjncy, eweights)."""
    xadj = np.zeros(num_clusters + 1, dtype=np.int64)
    adjncy = np.empty(2 * len(keys), dtype=np.int64)
    ew = np.empty(2 * len(keys), dtype=np.int64)
    pairs_to_csr(keys, w, num_clusters, xadj, adjncy, ew)
    return xadj, adjncy, ew


@njit(cache=True)
def project_parts(cl, cpart, owner):
    """owner[v] = cpart[cl[v]] for clustered nodes (isolated ones, cl = -1, are left alone)."""
    for v in range(cl.shape[0]):
        if cl[v] >= 0:
            owner[v] = cpart[cl[v]]


# -- step 5: refinement for the replication factor ----------------------------------------------

@njit(cache=True)
def _get(counters, y, p):
    return (counters[y, p >> 2] >> ((p & 3) * 2)) & 3


@njit(cache=True)
def _put(counters, y, p, val):
    s = (p & 3) * 2
    old = np.int64(counters[y, p >> 2])
    counters[y, p >> 2] = np.uint8((old & ~(3 << s)) | (val << s))


class RefineState(NamedTuple):
    """What the refinement changes in place (owner, size, counters) and its scratch.

    ``counters[y]``: c_y(p), the number of y's neighbours in part p saturated
    at 3, two bits per part; ``cnt``/``touched``: per-part neighbour counts of
    the node at hand and which parts they touch; ``cand``: candidate parts.
    """
    owner: np.ndarray
    size: np.ndarray
    counters: np.ndarray
    cnt: np.ndarray
    touched: np.ndarray
    cand: np.ndarray


@njit(cache=True)
def summary_block(first, offs, nbrs, state):
    """Fresh counters c_y(p) for the block's nodes (counts of neighbours per part, saturated at 3)."""
    owner, counters, cnt, touched = state.owner, state.counters, state.cnt, state.touched
    for i in range(offs.shape[0] - 1):
        y = first + i
        counters[y, :] = 0
        nt = count_neighbour_labels(y, offs[i], offs[i + 1], nbrs, owner, cnt, touched)
        for t in range(nt):
            p = touched[t]
            _put(counters, y, p, min(cnt[p], 3))
            cnt[p] = 0


@njit(cache=True)
def _least_loaded(size):
    """The part with the fewest nodes (ties: lowest id)."""
    b = 0
    for p in range(1, size.shape[0]):
        if size[p] < size[b]:
            b = p
    return b


@njit(cache=True)
def _candidates(a, nt, touched, cnt, size, cap, cand):
    """Fill ``cand`` with the parts (other than a, with room) holding most of u's neighbours; how many."""
    nc = 0
    for t in range(nt):
        b = touched[t]
        if b == a or size[b] >= cap:
            continue
        if nc < cand.shape[0]:
            cand[nc] = b
            nc += 1
        else:
            w = 0
            for c in range(1, nc):   # the weakest kept candidate (fewest neighbours, then highest id)
                if cnt[cand[c]] < cnt[cand[w]] or (cnt[cand[c]] == cnt[cand[w]] and cand[c] > cand[w]):
                    w = c
            if cnt[b] > cnt[cand[w]] or (cnt[b] == cnt[cand[w]] and b < cand[w]):
                cand[w] = b
    return nc


@njit(cache=True)
def _neighbours_counting(u, lo, hi, nbrs, owner, counters, p, count):
    """#{y ~ u : owner[y] != p and c_y(p) = count}: with count 0 the neighbours that moving u
    into p makes halo of p (A_b), with count 1 those that leave p's halo when u leaves p (R_a)."""
    total = 0
    for j in range(lo, hi):
        y = nbrs[j]
        if y != u and owner[y] != p and _get(counters, y, p) == count:
            total += 1
    return total


@njit(cache=True)
def _move(u, a, b, lo, hi, nbrs, state):
    """Move u from part a to part b and update its neighbours' counters."""
    owner, size, counters = state.owner, state.size, state.counters
    owner[u] = b
    size[a] -= 1
    size[b] += 1
    for j in range(lo, hi):
        y = nbrs[j]
        if y == u:
            continue
        ca = _get(counters, y, a)
        if ca == 1 or ca == 2:     # 3 means "3 or more": after one removal still >= 2, keep 3
            _put(counters, y, a, ca - 1)
        cb = _get(counters, y, b)
        if cb < 3:
            _put(counters, y, b, cb + 1)


@njit(cache=True)
def refine_block(first, offs, nbrs, state, cap, force):
    """One greedy refinement sweep over a block; returns (moves, change in sum of replicas).

    Moving u from part a to part b changes the number of replicas (the sum
    over parts of |inner ∪ halo|) by
        delta = A_b - R_a - [u has no neighbour in a]
    with A_b = #{y ~ u : owner[y] != b and c_y(b) = 0} (neighbours that
    become halo of b) and R_a = #{y ~ u : owner[y] != a and c_y(a) = 1}
    (neighbours that leave the halo of a, u being their only neighbour
    there). Candidates are the parts of u's neighbours that have room
    (size < cap), at most ``len(cand)`` of them, those holding most of u's
    neighbours (so a sweep costs at most len(cand) x the stream). A move is
    taken when delta < 0, or delta = 0 and u has more neighbours in b than
    in a (edge cut as the second objective). A node of an overloaded part
    (size > cap) takes its best candidate when delta <= 0, and any (or the
    least loaded part) when ``force``.
    """
    owner, size, counters = state.owner, state.size, state.counters
    cnt, touched, cand = state.cnt, state.touched, state.cand
    moves = 0
    change = 0
    for i in range(offs.shape[0] - 1):
        u = first + i
        lo, hi = offs[i], offs[i + 1]
        a = owner[u]
        over = size[a] > cap
        nt = count_neighbour_labels(u, lo, hi, nbrs, owner, cnt, touched)
        if nt == 0 or (nt == 1 and touched[0] == a and not over):
            for t in range(nt):
                cnt[touched[t]] = 0
            if nt == 0 and over and force:
                b = _least_loaded(size)
                if size[b] < cap:
                    owner[u] = b
                    size[a] -= 1
                    size[b] += 1
                    moves += 1
            continue
        nc = _candidates(a, nt, touched, cnt, size, cap, cand)
        own = 1 if cnt[a] == 0 else 0
        r_a = _neighbours_counting(u, lo, hi, nbrs, owner, counters, a, 1) if nc > 0 else 0
        best = -1
        best_d = 0
        best_c = 0
        for c in range(nc):
            b = cand[c]
            d = _neighbours_counting(u, lo, hi, nbrs, owner, counters, b, 0) - r_a - own
            cb = cnt[b]
            if (best < 0 or d < best_d or (d == best_d and (cb > best_c or (cb == best_c and (
                    size[b] < size[best] or (size[b] == size[best] and b < best)))))):
                best = b
                best_d = d
                best_c = cb
        take = False
        if best >= 0:
            if best_d < 0 or (best_d == 0 and best_c > cnt[a]):
                take = True
            elif best_d == 0 and best_c == cnt[a] and size[best] + 1 < size[a]:
                take = True    # free room in a fuller part at no cost: later gains may need it
            elif over and (best_d <= 0 or force):
                take = True
        if best < 0 and over and force:
            b = _least_loaded(size)
            if size[b] < cap:
                best = b
                take = True
                best_d = 0   # unknown here; the caller recomputes the exact figure
        for t in range(nt):
            cnt[touched[t]] = 0
        if not take:
            continue
        _move(u, a, best, lo, hi, nbrs, state)
        moves += 1
        change += best_d
    return moves, change


@njit(cache=True)
def replicas_block(first, offs, nbrs, owner, stamp):
    """Sum over the block's nodes of |{owner[v]} ∪ {owner[u] : u ~ v}| (stamp: k int64, scratch)."""
    total = 0
    for i in range(offs.shape[0] - 1):
        v = first + i
        tag = v + 1
        stamp[owner[v]] = tag
        r = 1
        for j in range(offs[i], offs[i + 1]):
            p = owner[nbrs[j]]
            if stamp[p] != tag:
                stamp[p] = tag
                r += 1
        total += r
    return total
