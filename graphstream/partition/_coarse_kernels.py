"""Numba kernels of coarse-refine (see coarse_refine.py for the algorithm they serve).

They see arrays and scalars only and change state in place. A block is a
slice of the vertex stream: node ``first + i`` has neighbours
``nbrs[offs[i]:offs[i + 1]]``. Self-loops are skipped everywhere: they
neither attract a node nor add a replica.

Refinement keeps, for every node y and part p, a 2-bit saturating count
c_y(p) of y's neighbours owned by p (0, 1, 2, 3 = "3 or more"), packed in
words (:func:`new_counters`): one 8-, 16- or 32-bit word a node up to k = 16,
then ceil(k / 32) 64-bit words, so a proposal reads a neighbour's row in one
load and tests every part at once (SWAR: "SIMD within a register"). The row
ends with one more word holding y's owner, so that a proposal finds both in
one cache line.

Label propagation and refinement run as synchronous rounds (coarse_rounds.py):
the ``*_propose`` kernels compute every node's move against the state at the
round's start, in parallel (``prange`` over segments of ``seg`` nodes; a
block's ``first`` is a multiple of ``seg``, so segments are the same whatever
the blocks), and write proposals only; the ``*_accept`` kernels then take them
one by one in a fixed order under the size caps. So the result does not depend
on the thread count or on how a round is cut into blocks or tasks.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ..estimate import LIGHT_CLUSTER_ENTRIES, MAX_HUB_CELLS, MAX_HUBS, counter_bytes, counter_word_bytes
from ..kernels.bitsets import clear_bit, has_bit, popcount64, set_bit
from ..kernels.hashing import hash_node
from ..kernels.merge import merge_counts
from ..kernels.pairs import pair_key, pairs_to_csr
from ..kernels.prefetch import PREFETCH_DISTANCE, prefetch_row

# -- step 2: size-capped label propagation ----------------------------------------------------

@njit(cache=True, inline="always")
def count_neighbour_labels(u, start, stop, nbrs, label, cnt, touched, ahead):
    """``cnt[label[v]] += 1`` for u's neighbours ``v != u`` in ``nbrs[start:stop]``.

    The distinct labels seen go to ``touched[:nt]``; returns ``nt``. ``cnt`` is
    zero on entry; the caller zeroes ``cnt[touched[:nt]]`` when done with it.
    Labels of entries before ``ahead`` (the end of the caller's segment) are
    prefetched ``PREFETCH_DISTANCE`` entries early.
    """
    nt = 0
    for j in range(start, stop):
        if j + PREFETCH_DISTANCE < ahead:
            prefetch_row(label, nbrs[j + PREFETCH_DISTANCE])
        v = nbrs[j]
        if v == u:
            continue
        lab = label[v]
        if cnt[lab] == 0:
            touched[nt] = lab
            nt += 1
        cnt[lab] += 1
    return nt

@njit(cache=True, inline="always")
def _table_slot(keys, lab, mask):
    """Open-addressing slot of ``lab`` in ``keys`` (-1 = empty): its own or the empty one to take."""
    h = np.int64((np.uint64(lab) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask
    while keys[h] != -1 and keys[h] != lab:
        h = (h + 1) & mask
    return h


@njit(cache=True)
def mark_full(size, cap, full):
    """Set bit c of ``full`` (one row of bits, :func:`graphstream.kernels.bitsets.new_bitsets` (1, n))
    for every cluster c without room (size >= cap)."""
    for c in range(size.shape[0]):
        if size[c] >= cap:
            set_bit(full, 0, c)


@njit(cache=True, parallel=True)
def lp_propose(first, offs, nbrs, label, full, seed, seg, prop, gain, max_degree=0, sample=0):
    """Label-propagation proposals for the block's nodes: ``prop[i]``, ``gain[i]`` for node first + i.

    A node takes the label most frequent among its neighbours, among labels
    whose cluster has room (its bit in ``full`` clear at the round's start:
    one bit a cluster stays in the caches where the clusters' sizes, 4 bytes
    each, did not; R-MAT s24 after two sweeps, one proposal pass took
    5.8-6.4 s against 6.7-7.1 s) or its own; ties
    keep the current label, else go to the smallest seeded hash; ``gain`` is
    the count of the new label minus that of the old. Inside a segment the
    nodes go in order and see the proposals of the segment's earlier nodes
    (Gauss-Seidel: two neighbours do not swap labels); other nodes' labels
    are those of the round's start. Nodes of degree above ``max_degree`` (0: no bound) keep their label
    without reading their list. A list longer than ``sample`` (0: none is) is read every step-th entry,
    step = ceil(degree / sample), from an offset seeded by the node, and its gain counted times step
    (whole-list units, as the other nodes' gains that the accept order compares it with).
    """
    nloc = offs.shape[0] - 1
    for s in prange((nloc + seg - 1) // seg):
        lo = s * seg
        hi = min(lo + seg, nloc)
        maxd = 1
        for i in range(lo, hi):
            maxd = max(maxd, offs[i + 1] - offs[i])
        tsize = 2
        while tsize < 2 * maxd:
            tsize *= 2
        keys = np.full(tsize, -1, dtype=label.dtype)
        vals = np.zeros(tsize, dtype=np.int32)
        used = np.empty(maxd, dtype=np.int32)
        glo = first + lo
        ahead = offs[hi]
        for i in range(lo, hi):
            u = first + i
            cur = label[u]
            if max_degree and offs[i + 1] - offs[i] > max_degree:
                prop[i] = cur
                gain[i] = 0
                continue
            # a node's labels hash into the first 2 x degree slots (rounded up to a power of two),
            # not the segment's whole table: a segment of hubs holds degrees of 30 to 10^5, and the
            # light nodes' probes then stay in a few cache lines (the choice below goes by first
            # appearance in the list, not by slot, so it is the same)
            d = offs[i + 1] - offs[i]
            step = 1
            if sample and d > sample:
                step = (d + sample - 1) // sample
            mask = 1
            while mask + 1 < 2 * ((d + step - 1) // step):
                mask = 2 * mask + 1
            nt = 0
            start = offs[i] + (np.int64(hash_node(u, seed) % np.uint64(step)) if step > 1 else 0)
            for j in range(start, offs[i + 1], step):
                if j + PREFETCH_DISTANCE * step < ahead:
                    prefetch_row(label, nbrs[j + PREFETCH_DISTANCE * step])
                v = nbrs[j]
                if v == u:
                    continue
                lab = prop[v - first] if glo <= v < u else label[v]
                h = _table_slot(keys, lab, mask)
                if keys[h] == -1:
                    keys[h] = lab
                    used[nt] = h
                    nt += 1
                vals[h] += 1
            cur_c = 0
            if nt > 0:
                h = _table_slot(keys, cur, mask)
                if keys[h] == cur:
                    cur_c = vals[h]
            # the count first: most labels lose on it, and then cost no read of their cluster's bit and
            # no hash (the hashes are computed at ties only): the same labels, five sweeps of R-MAT s21,
            # k = 32 in 4.12 s against 5.15 s (medians of nine alternating runs)
            best = cur
            best_c = cur_c
            best_h = np.uint64(0)
            hashed = False
            for t in range(nt):
                h = used[t]
                c = vals[h]
                if c < best_c:
                    continue
                lab = keys[h]
                if lab == cur or has_bit(full, 0, lab):
                    continue
                if c > best_c:
                    best = lab
                    best_c = c
                    hashed = False
                elif best != cur:
                    if not hashed:
                        best_h = hash_node(best ^ seed, 0)
                        hashed = True
                    hh = hash_node(lab ^ seed, 0)
                    if hh < best_h:
                        best = lab
                        best_h = hh
            for t in range(nt):
                keys[used[t]] = -1
                vals[used[t]] = 0
            prop[i] = best
            gain[i] = (best_c - cur_c) * step


@njit(cache=True, parallel=True)
def entries_past(offsets, count):
    """The neighbour entries past the first ``count`` of each list: those a proposal reading a sample of
    about ``count`` entries of a list leaves unread."""
    total = 0
    for u in prange(offsets.shape[0] - 1):
        total += max(offsets[u + 1] - offsets[u] - count, 0)
    return total


@njit(cache=True)
def lp_accept(nodes, targets, label, size, cap, full):
    """Apply proposals in the given order while the target cluster has room (size < cap, sizes kept
    up to date by every move, departures included, and ``full`` with them); returns how many moved."""
    moved = 0
    for t in range(nodes.shape[0]):
        u = nodes[t]
        b = targets[t]
        a = label[u]
        if a != b and size[b] < cap:
            size[a] -= 1
            size[b] += 1
            label[u] = b
            moved += 1
            if size[b] >= cap:
                set_bit(full, 0, b)
            if size[a] < cap:
                clear_bit(full, 0, a)
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

@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def coarse_halo_keys_block(first, offs, nbrs, cl, num_clusters, stamp, out):
    """Like :func:`coarse_keys_block`, but each node emits each neighbouring cluster once.

    Summed, the weight of (A, B) is the number of nodes of A with a
    neighbour in B plus those of B with a neighbour in A: the halo entries
    that cutting A from B creates, the replication factor's own currency.
    ``stamp`` (one int64 per cluster) is scratch; ``out`` has room for every entry of the block.

    Every entry writes its key and its stamp, and only a new one advances the count: whether a
    neighbour's cluster is new is a coin flip a branch would mispredict (R-MAT s21, k = 8: 0.79 ->
    0.58 s for the 67M entries).
    """
    m = 0
    ahead = offs[offs.shape[0] - 1]
    for i in range(offs.shape[0] - 1):
        u = first + i
        cu = cl[u]
        tag = u + 1
        for j in range(offs[i], offs[i + 1]):
            if j + PREFETCH_DISTANCE < ahead:
                prefetch_row(cl, nbrs[j + PREFETCH_DISTANCE])
            cv = cl[nbrs[j]]
            new = (cv != cu) & (stamp[cv] != tag)
            stamp[cv] = tag
            out[m] = pair_key(cu, cv, num_clusters)
            m += new
    return m


_WEIGHT_BINS = 1 << 16   # merge_heaviest's histogram; heavier weights share the top bin


@njit(cache=True, nogil=True)
def merge_heaviest(ak, ac, bk, bc, m, out_k, out_c):
    """The multiset sum of two key-sorted runs (counts above 0) into ``out_k``/``out_c`` (room for both),
    then cut to its ``m`` heaviest entries, key order kept, ties to the lowest key; returns (entries
    kept, weight dropped).

    Step 3's running table takes one such merge a block, a chain no thread can share: the weights'
    histogram is counted as the merge writes them (``merge_counts``), so the cut costs one pass over the
    table, not two (R-MAT s21: the merge and the cut 3.1 + 1.6 ms a block, 256 blocks).
    """
    hist = np.zeros(_WEIGHT_BINS + 1, dtype=np.int64)
    n = merge_counts(ak, ac, bk, bc, np.int64(1), out_k, out_c, hist)
    if n <= m:
        return n, 0
    # the m-th heaviest weight from the histogram (a sort of the few weights past it only when the
    # threshold lies among them): a selection by np.partition over the whole table for every block was
    # most of step 3's time
    weights = out_c[:n]
    above = 0   # entries heavier than bin t
    t = _WEIGHT_BINS
    while above + hist[t] < m:
        above += hist[t]
        t -= 1
    w_min = t   # the lightest weight kept
    if t == _WEIGHT_BINS:
        big = np.sort(weights[weights >= _WEIGHT_BINS])
        w_min = big[big.shape[0] - m]
        above = 0
        for q in range(big.shape[0]):
            above += big[q] > w_min
    ties = m - above
    kept = 0
    dropped = 0
    for q in range(n):
        w = weights[q]
        keep = (w > w_min) | ((w == w_min) & (ties > 0))
        ties -= keep & (w == w_min)
        out_k[kept] = out_k[q]
        out_c[kept] = w
        kept += keep
        dropped += 0 if keep else w
    return kept, dropped


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


# -- step 4b: whole clusters moved on the full graph ---------------------------------------------

# Lanes, for kernels whose threads split the rows they write (the whole-cluster moves' table by cluster,
# refine_apply's counters by node): row y belongs to lane (y >> LANE_SHIFT) mod lanes, so a lane owns
# runs of 64 rows (in refine_apply, 64 nodes share one cache line of ``stale`` and one word of the hub
# bitmap) and two threads rarely write the same cache line
LANE_SHIFT = 6
LANE_RUN = 1024   # entries of a moved node's list a lane sorts out at a time (4-8 KiB)


def thread_lanes() -> int:
    """How many lanes the kernels split by rows run: a power of two, at most numba's threads."""
    return 1 << (numba.get_num_threads().bit_length() - 1)


def cluster_part_table(entries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The whole-cluster moves' table for the clusters of ``entries`` (their lists' entries), zeroed:
    ``light`` (clusters x k, uint16: every cluster has a row, the heavy ones' unused), ``heavy`` (int32,
    a row for each cluster of LIGHT_CLUSTER_ENTRIES entries or more) and ``heavy_row`` (each cluster's row
    in ``heavy``, -1 for a light one). A count is of the cluster's own entries, so a light one's fits 2
    bytes (R-MAT s22, k = 32: 832,442 clusters, 102 MiB of counts when all took 4 bytes)."""
    heavy_ids = np.flatnonzero(entries >= LIGHT_CLUSTER_ENTRIES)
    heavy_row = np.full(len(entries), -1, dtype=np.int32)
    heavy_row[heavy_ids] = np.arange(len(heavy_ids), dtype=np.int32)
    return (np.zeros((len(entries), k), dtype=np.uint16), np.zeros((len(heavy_ids), k), dtype=np.int32),
            heavy_row)


@njit(cache=True, inline="always")
def _count_parts(row, start, stop, nbrs, node_part, ahead):
    """``row[p]`` += 1 for every entry of ``nbrs[start:stop]`` on a node of part p."""
    for j in range(start, stop):
        if j + PREFETCH_DISTANCE < ahead:
            prefetch_row(node_part, nbrs[j + PREFETCH_DISTANCE])
        p = node_part[nbrs[j]]
        if p >= 0:
            row[p] += 1


@njit(cache=True, parallel=True)
def cluster_part_entries(first, offs, nbrs, cl, node_part, light, heavy, heavy_row, lanes):
    """Cluster c's row (:func:`cluster_part_table`) += entries from the block's nodes of c to nodes of
    part p. ``node_part``: the clusters' parts projected on the nodes, -1 for isolated ones (one lookup
    an entry, not two). Only the clusters below ``light.shape[0]`` have a row (the others keep their part).

    One table, split by rows: ``lanes`` (a power of two) threads each count the nodes of the clusters
    of their own lane (runs of ``2^LANE_SHIFT`` cluster ids) and skip the others, so no two threads
    write one row and each list is read once. A table per thread, summed after, held ``threads`` x
    clusters x parts counters (R-MAT s22, k = 32: 121 MB for two, the partition's peak), and past
    half the tables' bound it left one thread to count alone (R-MAT s25-s26)."""
    nloc = offs.shape[0] - 1
    rows = light.shape[0]
    mask = lanes - 1
    ahead = offs[nloc]
    for lane in prange(lanes):
        for i in range(nloc):
            c = cl[first + i]
            if c < 0 or c >= rows or (c >> LANE_SHIFT) & mask != lane:
                continue
            h = heavy_row[c]
            if h >= 0:
                _count_parts(heavy[h], offs[i], offs[i + 1], nbrs, node_part, ahead)
            else:
                _count_parts(light[c], offs[i], offs[i + 1], nbrs, node_part, ahead)


@njit(cache=True, parallel=True)
def cluster_part_moved(first, offs, nbrs, cl, before, cpart, light, heavy, heavy_row, lanes):
    """:func:`cluster_part_entries`'s counts brought up to date after clusters moved from ``before`` to
    ``cpart``: the list of a node y of a moved cluster holds one entry for every entry to y in its
    neighbours' lists (the stream holds both directions), so each clustered neighbour's cluster has
    one entry fewer to y's old part and one more to its new one. Integers: the counts plus the change
    equal a recount (each entry counted in one part at every step, so a light count stays under
    LIGHT_CLUSTER_ENTRIES), and only the moved clusters' lists are scanned. Rows as
    :func:`cluster_part_entries`; the rows a change goes to are the neighbours' clusters, so the
    ``lanes`` threads each read every moved list and update the rows of their own lane, gathered a
    run at a time without a branch an entry (as :func:`refine_apply`)."""
    nloc = offs.shape[0] - 1
    rows = light.shape[0]
    mask = lanes - 1
    for lane in prange(lanes):
        mine = np.empty(LANE_RUN, dtype=cl.dtype)
        for i in range(nloc):
            c = cl[first + i]
            if c < 0 or before[c] == cpart[c]:
                continue
            a = before[c]
            b = cpart[c]
            for lo in range(offs[i], offs[i + 1], LANE_RUN):
                hi = min(lo + LANE_RUN, offs[i + 1])
                m = 0
                for j in range(lo, hi):
                    if j + PREFETCH_DISTANCE < hi:
                        prefetch_row(cl, nbrs[j + PREFETCH_DISTANCE])
                    cu = cl[nbrs[j]]
                    mine[m] = cu
                    m += (cu >= 0) & (cu < rows) & ((cu >> LANE_SHIFT) & mask == lane)
                for q in range(m):
                    cu = mine[q]
                    h = heavy_row[cu]
                    if h >= 0:
                        heavy[h, a] -= 1
                        heavy[h, b] += 1
                    else:
                        light[cu, a] -= 1
                        light[cu, b] += 1


@njit(cache=True)
def moved_entries(cl, offsets, before, cpart):
    """Entries in the lists of the nodes whose cluster moved from ``before`` to ``cpart``."""
    total = 0
    for v in range(cl.shape[0]):
        c = cl[v]
        if c >= 0 and before[c] != cpart[c]:
            total += offsets[v + 1] - offsets[v]
    return total


@njit(cache=True, inline="always")
def _row_gain(row, own):
    best = np.int64(0)
    for p in range(row.shape[0]):
        best = max(best, np.int64(row[p]))
    return best - np.int64(row[own])


@njit(cache=True, parallel=True)
def cluster_gains(light, heavy, heavy_row, cpart, gain):
    """``gain[c]`` = the most entries of cluster c in one part less those in its own."""
    for c in prange(light.shape[0]):
        h = heavy_row[c]
        gain[c] = _row_gain(heavy[h], cpart[c]) if h >= 0 else _row_gain(light[c], cpart[c])


@njit(cache=True, inline="always")
def _best_part(row, a, size, weight, cap):
    """The part holding the most of ``row``'s entries, more than part ``a``, with room for ``weight``
    (``a`` if none)."""
    best = a
    for p in range(row.shape[0]):
        if p != a and row[p] > row[best] and size[p] + weight <= cap:
            best = p
    return best


@njit(cache=True)
def cluster_moves(order, light, heavy, heavy_row, cpart, csizes, size, cap):
    """Move clusters (in ``order``) to the part holding most of their entries when that cuts fewer
    entries and the part has room; returns how many moved."""
    moved = 0
    for c in order:
        a = cpart[c]
        h = heavy_row[c]
        best = (_best_part(heavy[h], a, size, csizes[c], cap) if h >= 0
                else _best_part(light[c], a, size, csizes[c], cap))
        if best != a:
            cpart[c] = best
            size[a] -= csizes[c]
            size[best] += csizes[c]
            moved += 1
    return moved


# -- step 5: refinement for the replication factor ----------------------------------------------

def new_counters(owner: np.ndarray, k: int) -> np.ndarray:
    """Zeroed counters for the nodes of ``owner`` and k parts: one 8-, 16- or 32-bit word a node up to
    k = 16 (the narrowest that holds k 2-bit fields), then ceil(k / 32) 64-bit words; and a last word
    holding the node's owner (:func:`owner_word`), kept equal to ``owner`` by the caller.

    Why the owner twice: a proposal reads, for every neighbour, its owner and its counters, at random.
    In one row they are one cache line instead of two: R-MAT s24, k = 16 (134 MB of owner and
    counters), a proposal pass took 4.0 s instead of 7.8 s, for 4 bytes a node more."""
    word = counter_word_bytes(k)   # the memory model's figures, so the two cannot drift apart
    rows = np.zeros((len(owner), counter_bytes(k) // word), dtype=np.dtype(f"uint{8 * word}"))
    rows[:, -1] = owner
    return rows


@njit(cache=True, inline="always")
def owner_word(counters):
    """The column of a node's owner in its counters' row (the counts are in the ones before it)."""
    return counters.shape[1] - 1


_ZERO_FIELDS = np.uint64(0x5555555555555555)   # the low bit of every 2-bit field


@njit(cache=True, inline="always")
def _nonzero_fields(x):
    """The low bit of every nonzero 2-bit field of the counters' word ``x`` (uint64)."""
    return (x | (x >> np.uint64(1))) & _ZERO_FIELDS
_BYTES = np.uint64(0x0101010101010101)         # the low bit of every byte


@njit(cache=True, inline="always")
def _field(p, fpw):
    """Part p's 2-bit field in a counters' row of ``fpw`` fields a word: its word and its shift."""
    w = p // fpw
    return w, np.uint64(2 * (p - w * fpw))


@njit(cache=True)
def _get(counters, y, p):
    w, sh = _field(p, counters.itemsize * 4)
    return np.int64((np.uint64(counters[y, w]) >> sh) & np.uint64(3))


@njit(cache=True)
def _put(counters, y, p, val):
    w, sh = _field(p, counters.itemsize * 4)
    old = np.uint64(counters[y, w])
    counters[y, w] = (old & ~(np.uint64(3) << sh)) | (np.uint64(val) << sh)


# Exact neighbour-per-part counts for the nodes of highest degree: a move that takes a neighbour
# out of a part where a node's 2-bit count is saturated leaves that count unknown (see refine_apply),
# and on R-MAT those nodes held 62-92% of the entries a sweep would recount (s21, k = 32); with the
# top 2^16 kept exact, 2-19%. At most MAX_HUBS nodes and MAX_HUB_CELLS int32 counts (32 MiB; the
# memory model's figures, graphstream.estimate.hub_table_bytes).


def hub_table(offsets: np.ndarray, k: int, max_hubs: int = MAX_HUBS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hubs as (bits, ranks, counts): bit y of ``bits`` (uint64 words) set for a hub y, ``ranks[w]``
    the hubs before word w, so a hub's row in ``counts`` (hubs x k int32, filled by the first
    :func:`refine_summary`) is its rank by id (:func:`hub_row`; 0.19 bytes a node, and the two small
    arrays stay in cache where a hash table of the hubs did not: R-MAT s21, k = 32, the moves'
    updates took 2.4-2.6 s with one, 1.2-1.3 s with these, 0.7 s without hubs). Hubs: the nodes of
    degree at least 2^b for the smallest b >= 2 that leaves at most min(max_hubs, MAX_HUB_CELLS // k)
    of them."""
    most = min(max_hubs, MAX_HUB_CELLS // k)
    bins = _degree_bit_lengths(offsets)
    above = np.cumsum(bins[::-1])[::-1]        # above[b]: nodes of degree >= 2^(b - 1) (bit length >= b)
    b = 3                                       # bit length 3: degree >= 4
    while b < len(above) and above[b] > most:
        b += 1
    n = len(offsets) - 1
    bits = np.zeros((n + 63) // 64, dtype=np.uint64)
    ranks = np.zeros(len(bits), dtype=np.int32)   # at most MAX_HUB_CELLS hubs
    hubs = _mark_hubs(offsets, 1 << (b - 1), bits, ranks) if b < len(above) and above[b] else 0
    return bits, ranks, np.zeros((max(1, hubs), k), dtype=np.int32)   # one row at least: a cluster maps it


@njit(cache=True)
def _degree_bit_lengths(offsets):
    bins = np.zeros(65, dtype=np.int64)
    for v in range(offsets.shape[0] - 1):
        d = offsets[v + 1] - offsets[v]
        L = 0
        while d > 0:
            d >>= 1
            L += 1
        bins[L] += 1
    return bins


@njit(cache=True)
def _mark_hubs(offsets, low, bits, ranks):
    """Set the bits of the nodes of degree >= low, and the ranks; returns the hubs."""
    for v in range(offsets.shape[0] - 1):
        if offsets[v + 1] - offsets[v] >= low:
            bits[v >> 6] |= np.uint64(1) << np.uint64(v & 63)
    total = 0
    for w in range(bits.shape[0]):
        ranks[w] = total
        total += popcount64(bits[w])
    return total


@njit(cache=True, inline="always")
def hub_row(bits, ranks, y):
    """y's row in the hub counts, -1 when y is not a hub."""
    word = bits[y >> 6]
    sh = np.uint64(y & 63)
    if (word >> sh) & np.uint64(1) == 0:
        return -1
    return np.int64(ranks[y >> 6]) + np.int64(popcount64(word & ((np.uint64(1) << sh) - np.uint64(1))))


# refine_apply's marks in ``stale``: counters to recount from the node's list, or to set from the hub table
RECOUNT = 1
FROM_TABLE = 2


@njit(cache=True)
def refresh_hubs(hub_bits, hub_ranks, hub_counts, counters, stale):
    """The 2-bit counters of the hubs marked FROM_TABLE set from their exact counts (what a recount
    of their lists gives)."""
    for y in range(stale.shape[0]):
        if stale[y] != FROM_TABLE:
            continue
        r = hub_row(hub_bits, hub_ranks, y)
        counters[y, :owner_word(counters)] = 0
        for p in range(hub_counts.shape[1]):
            if hub_counts[r, p] > 0:
                _put(counters, y, p, min(hub_counts[r, p], 3))


@njit(cache=True, parallel=True)
def refine_summary(first, offs, nbrs, owner, counters, seg, stale, hub_bits, hub_ranks, hub_counts, row_base=0,
                   hub_base=0):
    """Fresh counters c_y(p) for the block's nodes (counts of neighbours per part, saturated at 3):
    every node when ``stale`` is empty, else only the nodes y with ``stale[y] == RECOUNT`` (the
    others' counters are exact already, or come from the hub table: :func:`refine_apply`); a hub's
    exact counts too (:func:`hub_table`). ``counters`` and ``hub_counts`` may hold a range of the rows
    only, the first being node ``row_base``'s and hub row ``hub_base``."""
    words = owner_word(counters)
    k = words * counters.itemsize * 4   # fields a row (>= the parts)
    nloc = offs.shape[0] - 1
    every = stale.shape[0] == 0
    for s in prange((nloc + seg - 1) // seg):
        cnt = np.zeros(k, dtype=np.int32)
        touched = np.empty(k, dtype=np.int32)
        ahead = offs[min(s * seg + seg, nloc)]
        for i in range(s * seg, min(s * seg + seg, nloc)):
            y = first + i
            if not every and stale[y] != RECOUNT:
                continue
            counters[y - row_base, :words] = 0
            nt = count_neighbour_labels(y, offs[i], offs[i + 1], nbrs, owner, cnt, touched, ahead)
            r = hub_row(hub_bits, hub_ranks, y)
            if r >= 0:
                r -= hub_base
                hub_counts[r, :] = 0
            for t in range(nt):
                p = touched[t]
                _put(counters, y - row_base, p, min(cnt[p], 3))
                if r >= 0:
                    hub_counts[r, p] = cnt[p]
                cnt[p] = 0


@njit(cache=True, parallel=True)
def replicas_from_counters(counters):
    """Sum over nodes of the parts holding them (its owner's, and every part where its count is above 0:
    a neighbour there holds it in its halo), from exact counters: what :func:`replicas_range` counts
    over the lists, without reading them."""
    words = owner_word(counters)
    total = 0
    for y in prange(counters.shape[0]):
        held = 0
        for w in range(words):
            x = np.uint64(counters[y, w])
            held += np.int64(popcount64(_nonzero_fields(x)))
        own = np.int64(counters[y, words])
        total += held + (0 if _get(counters, y, own) > 0 else 1)
    return total


@njit(cache=True, parallel=True)
def boundary_entries(counters, offsets):
    """The neighbour entries of the nodes with a neighbour in a part other than their own (a nonzero
    count there), from exact counters."""
    words = owner_word(counters)
    fpw = counters.itemsize * 4
    total = 0
    for y in prange(counters.shape[0]):
        ow, osh = _field(np.int64(counters[y, words]), fpw)
        for w in range(words):
            x = np.uint64(counters[y, w])
            held = _nonzero_fields(x)
            if w == ow:
                held &= ~(np.uint64(1) << osh)
            if held:
                total += offsets[y + 1] - offsets[y]
                break
    return total


# The parts' loads are the rows of ``load`` (2, k), each with its cap in ``caps``: the nodes a part owns,
# and its neighbour entries (the sum of its nodes' degrees, which bounds the edges it stores: the edge
# balance). An entries cap of NO_CAP leaves them free: every test below then reads as on nodes alone.
NODES = 0
ENTRIES = 1
NO_CAP = np.iinfo(np.int64).max // 4   # headroom: a load plus a degree never overflows


def part_loads(owner: np.ndarray, offsets: np.ndarray, k: int) -> np.ndarray:
    """(2, k) int64: the nodes and the neighbour entries of every part of ``owner`` (or cluster of a
    label array, whose -1 are left out)."""
    load = np.zeros((2, k), dtype=np.int64)
    _count_loads(owner, offsets, load)
    return load


@njit(cache=True)
def _count_loads(owner, offsets, load):
    for v in range(owner.shape[0]):
        p = owner[v]
        if p >= 0:
            load[NODES, p] += 1
            load[ENTRIES, p] += offsets[v + 1] - offsets[v]


@njit(cache=True, inline="always")
def _has_room(load, caps, p, d):
    """Part p can take one more node, of degree d."""
    return load[NODES, p] < caps[NODES] and load[ENTRIES, p] + d <= caps[ENTRIES]


@njit(cache=True, inline="always")
def _is_over(load, caps, p):
    return load[NODES, p] > caps[NODES] or load[ENTRIES, p] > caps[ENTRIES]


@njit(cache=True)
def _least_loaded(load, caps, d):
    """The part with the fewest nodes among those with room for a node of degree d (ties: lowest id);
    when none has, the one with the fewest nodes."""
    best = -1
    fewest = 0
    for p in range(load.shape[1]):
        if load[NODES, p] < load[NODES, fewest]:
            fewest = p
        if _has_room(load, caps, p, d) and (best < 0 or load[NODES, p] < load[NODES, best]):
            best = p
    return fewest if best < 0 else best


@njit(cache=True)
def _candidates(a, nt, touched, cnt, load, caps, d, cand):
    """Fill ``cand`` with the parts (other than a, with room for u, of degree d) holding most of u's
    neighbours; how many."""
    nc = 0
    for t in range(nt):
        b = touched[t]
        if b == a or not _has_room(load, caps, b, d):
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


# Kinds of refinement proposals, in the order they are accepted (coarse_rounds._Refinement.sweeps).
GAIN = 0      # fewer replicas (delta < 0), or as many and more of u's neighbours in b
BALANCE = 1   # as many replicas and neighbours, from a fuller part to an emptier one: room for later gains
SHED = 2      # u's part is above a cap: the best candidate at delta <= 0 (any delta when rebalancing)
FORCED = 3    # u's part is above a cap, no candidate: the least loaded part, chosen when accepted


@njit(cache=True, parallel=True)
def refine_propose(first, offs, nbrs, load, counters, caps, rebalance, max_candidates, seg, target, delta, kind,
                   max_degree=0):
    """Refinement proposals for the block's nodes, against the round's start (the parts' loads, the
    counters and the owner in the counters' rows).

    Moving u from part a to part b changes the number of replicas (the sum
    over parts of |inner ∪ halo|) by
        delta = A_b - R_a - [u has no neighbour in a]
    with A_b = #{y ~ u : owner[y] != b and c_y(b) = 0} (neighbours that
    become halo of b) and R_a = #{y ~ u : owner[y] != a and c_y(a) = 1}
    (neighbours that leave the halo of a, u being their only neighbour
    there). Candidates are the parts of u's neighbours that have room
    for u (under both caps, see NODES), at most ``max_candidates`` of them, those holding most of
    u's neighbours (every part's A_b is summed in the one scan of u's list,
    so the choice costs no second scan; 8 measured better than all of them:
    R-MAT s21, k = 32, RF 4.427 vs 4.434).
    ``kind[i]`` is -1 (stay) or one of GAIN, BALANCE, SHED, FORCED (see
    above); ``target[i]`` and ``delta[i]`` the part and the change.
    ``rebalance``: only the nodes of parts above a cap propose, each its cheapest move whatever its
    delta (SHED), or FORCED when it has no candidate.
    ``max_degree``: nodes of a higher degree propose nothing (0: no bound).
    """
    k = load.shape[1]
    nloc = offs.shape[0] - 1
    words = owner_word(counters)
    fpw = counters.itemsize * 4
    for s in prange((nloc + seg - 1) // seg):
        cnt = np.zeros(k, dtype=np.int32)
        touched = np.empty(k + 1, dtype=np.int32)   # +1: written before it is known to be new
        cand = np.empty(max_candidates, dtype=np.int32)
        added = np.empty(max_candidates, dtype=np.int64)
        # A_b for every part at once: per word, four accumulators of 8-bit sums of the "c_y(b) = 0"
        # bits (fields f = 4i + r in byte i of accumulator r), spilled into added_all every 255
        # neighbours, before a byte can overflow
        acc = np.zeros((words, 4), dtype=np.uint64)
        added_all = np.zeros(words * 32, dtype=np.int64)
        ahead = offs[min(s * seg + seg, nloc)]
        for i in range(s * seg, min(s * seg + seg, nloc)):
            u = first + i
            lo, hi = offs[i], offs[i + 1]
            a = np.int64(counters[u, words])
            aw, ash = _field(a, fpw)
            over = _is_over(load, caps, a)
            kind[i] = -1
            target[i] = a
            delta[i] = 0
            if rebalance and not over:
                continue
            if max_degree and hi - lo > max_degree:
                continue
            # a node whose neighbours' other parts have no room for it has no candidate, so it proposes
            # nothing: told by its own counters' row, without reading its list (whether a count is zero
            # is always exact, see refine_apply). Interior nodes (all their neighbours in their part)
            # are among them: most of a graph with communities (web-NotreDame, k = 32: 80% of the entries)
            if not over and not _room_among(counters, u, a, words, fpw, load, caps, hi - lo):
                continue
            # one scan of u's list: neighbours per part, R_a, and A_b for every b (branch-free: the
            # outcomes are data-dependent coin flips a mispredicted branch pays for)
            nt = 0
            r_a = 0
            pending = 0
            spilled = False
            for j in range(lo, hi):
                if j + PREFETCH_DISTANCE < ahead:
                    prefetch_row(counters, nbrs[j + PREFETCH_DISTANCE])
                y = nbrs[j]
                if y == u:
                    continue
                o = np.int64(counters[y, words])
                touched[nt] = o
                nt += cnt[o] == 0
                cnt[o] += 1
                r_a += (o != a) & ((np.uint64(counters[y, aw]) >> ash) & np.uint64(3) == 1)
                ow, osh = _field(o, fpw)
                own_bit = np.uint64(1) << osh   # y's own part never gains y as halo
                for w in range(words):
                    x = np.uint64(counters[y, w])
                    z = ~_nonzero_fields(x) & _ZERO_FIELDS & ~(own_bit * np.uint64(w == ow))
                    acc[w, 0] += z & _BYTES
                    acc[w, 1] += (z >> np.uint64(2)) & _BYTES
                    acc[w, 2] += (z >> np.uint64(4)) & _BYTES
                    acc[w, 3] += (z >> np.uint64(6)) & _BYTES
                pending += 1
                if pending == 255:
                    _spill(acc, added_all)
                    pending = 0
                    spilled = True
            if nt == 0 or (nt == 1 and touched[0] == a and not over):
                _clear(acc, added_all, spilled, cnt, touched, nt)
                if nt == 0 and over and rebalance:
                    kind[i] = FORCED
                continue
            nc = _candidates(a, nt, touched, cnt, load, caps, hi - lo, cand)
            own = 1 if cnt[a] == 0 else 0
            for c in range(nc):
                added[c] = added_all[cand[c]] + _lane(acc, cand[c], fpw)
            best = -1
            best_d = 0
            best_c = 0
            for c in range(nc):
                b = cand[c]
                d = added[c] - r_a - own
                cb = cnt[b]
                if (best < 0 or d < best_d or (d == best_d and (cb > best_c or (cb == best_c and (
                        load[NODES, b] < load[NODES, best] or (load[NODES, b] == load[NODES, best] and b < best)))))):
                    best = b
                    best_d = d
                    best_c = cb
            if best >= 0:
                if best_d < 0 or (best_d == 0 and best_c > cnt[a]):
                    kind[i] = GAIN
                elif best_d == 0 and best_c == cnt[a] and load[NODES, best] + 1 < load[NODES, a]:
                    kind[i] = BALANCE
                elif over and (best_d <= 0 or rebalance):
                    kind[i] = SHED
                if kind[i] >= 0:
                    target[i] = best
                    delta[i] = best_d
            elif over and rebalance:
                kind[i] = FORCED
            _clear(acc, added_all, spilled, cnt, touched, nt)


@njit(cache=True, inline="always")
def _room_among(counters, u, a, words, fpw, load, caps, d):
    """Whether a part other than ``a`` holding a neighbour of u (its field nonzero in u's counters' row)
    has room for u, of degree d: the parts ``_candidates`` would find in u's list."""
    for w in range(words):
        x = np.uint64(counters[u, w])
        held = _nonzero_fields(x)
        while held:
            low = held & (~held + np.uint64(1))
            p = w * fpw + np.int64(popcount64(low - np.uint64(1))) // 2
            if p != a and _has_room(load, caps, p, d):
                return True
            held ^= low
    return False


@njit(cache=True, inline="always")
def _lane(acc, p, fpw):
    """Part p's count in refine_propose's 8-bit accumulators."""
    w = p // fpw
    f = p - w * fpw
    return np.int64((acc[w, f & 3] >> np.uint64(8 * (f >> 2))) & np.uint64(255))


@njit(cache=True, inline="always")
def _spill(acc, added_all):
    """Every field's 8-bit sum into added_all (32 fields a word: those past k or past a narrow word
    hold garbage that is never read)."""
    for w in range(acc.shape[0]):
        for r in range(4):
            x = acc[w, r]
            for i in range(8):
                added_all[32 * w + 4 * i + r] += np.int64((x >> np.uint64(8 * i)) & np.uint64(255))
            acc[w, r] = 0


@njit(cache=True, inline="always")
def _clear(acc, added_all, spilled, cnt, touched, nt):
    """Scratch of refine_propose back to zero after a node (O(degree), O(k) only after a spill)."""
    acc[:, :] = 0
    if spilled:
        added_all[:] = 0
    for t in range(nt):
        cnt[touched[t]] = 0


@njit(cache=True)
def refine_accept(nodes, targets, kinds, owner, offsets, counters, load, caps, moved_from, moved_to):
    """Apply proposals in the given order under the caps, the loads kept up to date by every move (and
    the owner both in ``owner`` and in the counters' rows); ``offsets``: the vertex stream's, for the
    nodes' degrees.

    GAIN needs room in b; BALANCE also needs b to stay emptier than a; SHED
    and FORCED only while a is still above a cap. A FORCED move out of a part
    above the nodes' cap may break the entries' cap when no part has room for
    the node in both: the nodes' cap is the hard one. The accepted moves, m of
    them, end up in ``nodes[:m]`` (overwritten in place), ``moved_from[:m]``
    and ``moved_to[:m]``, in order; returns m.
    """
    m = 0
    for t in range(nodes.shape[0]):
        u = nodes[t]
        b = targets[t]
        kd = kinds[t]
        a = owner[u]
        d = offsets[u + 1] - offsets[u]
        if kd == FORCED:
            b = _least_loaded(load, caps, d)
        if b == a or load[NODES, b] >= caps[NODES]:
            continue
        if load[ENTRIES, b] + d > caps[ENTRIES] and not (kd == FORCED and load[NODES, a] > caps[NODES]):
            continue
        if kd == BALANCE and load[NODES, b] + 1 >= load[NODES, a]:
            continue
        if (kd == SHED or kd == FORCED) and not _is_over(load, caps, a):
            continue
        owner[u] = b
        counters[u, owner_word(counters)] = b
        load[NODES, a] -= 1
        load[NODES, b] += 1
        load[ENTRIES, a] -= d
        load[ENTRIES, b] += d
        nodes[m] = u
        moved_from[m] = a
        moved_to[m] = b
        m += 1
    return m


@njit(cache=True, parallel=True)
def refine_apply(first, offs, nbrs, moved, moved_from, moved_to, counters, stale, hub_bits, hub_ranks,
                 hub_counts, lanes):
    """Update the counters of the neighbours of the block's moved nodes: ``moved`` in increasing id
    order (all in the block), moved from ``moved_from[t]`` to ``moved_to[t]``.

    Every update is exact in the counters' own terms (3 = "3 or more") but one: a neighbour leaving
    a part counted 3, whose true count is then 2 or more, unknown. Such a node y is marked: a hub
    (:func:`hub_table`, whose exact counts are kept here) ``stale[y] = FROM_TABLE``, any other
    ``RECOUNT``. The next sweep starts by setting the first from the table (:func:`refresh_hubs`) and
    recounting the others from their lists; every other node's counters already equal a recount.
    Within a sweep the 2-bit counts move as they would without the table, so the table changes no
    move, only what the next sweep's refresh reads.

    The saturating updates do not commute, and moves of different nodes touch the same neighbours,
    so the work is split by neighbour, not by moved node: ``lanes`` (a power of two) threads each
    read every moved node's list and update only the neighbours of their own lane. Every neighbour
    then sees its updates in the order of ``moved``, as in one sequential pass, whatever ``lanes``.
    """
    mask = lanes - 1
    fpw = counters.itemsize * 4   # fields a word
    for lane in prange(lanes):
        mine = np.empty(LANE_RUN, dtype=nbrs.dtype)
        for t in range(moved.shape[0]):
            u = moved[t]
            i = u - first
            a = moved_from[t]
            b = moved_to[t]
            # the two fields' words and shifts, once a moved node (not a division an entry)
            wa, sa = _field(a, fpw)
            wb, sb = _field(b, fpw)
            for lo in range(offs[i], offs[i + 1], LANE_RUN):
                # this lane's neighbours of a run of the list gathered first, without a branch: "is it
                # mine" is a coin flip that a branch per entry mispredicts half the time (the same
                # counters; a whole run's updates: R-MAT s21, k = 32, 0.78-0.88 s against 1.06-1.09 s;
                # s24, k = 16, 10.1 s against 11.4 s)
                m = 0
                for j in range(lo, min(lo + LANE_RUN, offs[i + 1])):
                    y = nbrs[j]
                    mine[m] = y
                    m += ((y >> LANE_SHIFT) & mask == lane) & (y != u)
                _update_fields(mine, m, a, b, wa, sa, wb, sb, counters, stale, hub_bits, hub_ranks, hub_counts)


@njit(cache=True, inline="always")
def _update_fields(mine, m, a, b, wa, sa, wb, sb, counters, stale, hub_bits, hub_ranks, hub_counts):
    """refine_apply's updates for the neighbours ``mine[:m]`` of a node moved from a to b."""
    for q in range(m):
        if q + PREFETCH_DISTANCE < m:   # within the gathered run: the moved nodes' own lists only
            far = mine[q + PREFETCH_DISTANCE]
            prefetch_row(counters, far)
            rf = hub_row(hub_bits, hub_ranks, far)
            if rf >= 0:
                prefetch_row(hub_counts, rf)
        y = mine[q]
        r = hub_row(hub_bits, hub_ranks, y)
        if r >= 0:
            hub_counts[r, a] -= 1
            hub_counts[r, b] += 1
        x = np.uint64(counters[y, wa])
        ca = (x >> sa) & np.uint64(3)
        if ca == 1 or ca == 2:   # the field less one: no borrow from the next
            counters[y, wa] = x - (np.uint64(1) << sa)
        elif ca == 3:   # "3 or more" less one: still >= 2, kept at 3 until the next sweep
            stale[y] = FROM_TABLE if r >= 0 else RECOUNT
        x = np.uint64(counters[y, wb])
        if (x >> sb) & np.uint64(3) < 3:   # the field plus one: no carry into the next
            counters[y, wb] = x + (np.uint64(1) << sb)


@njit(cache=True, parallel=True)
def replicas_range(first, offs, nbrs, owners, k, seg):
    """Sum over the block's nodes of |{owner[v]} ∪ {owner[u] : u ~ v}|, for each column of ``owners``
    (num_nodes x T: T partitions counted in one read of the lists, a node's T parts in one cache line)."""
    nloc = offs.shape[0] - 1
    nseg = (nloc + seg - 1) // seg
    trials = owners.shape[1]
    part = np.zeros((nseg, trials), dtype=np.int64)
    for s in prange(nseg):
        stamp = np.zeros((trials, k), dtype=np.int64)
        count = np.zeros(trials, dtype=np.int64)
        ahead = offs[min(s * seg + seg, nloc)]
        for i in range(s * seg, min(s * seg + seg, nloc)):
            v = first + i
            tag = v + 1
            for t in range(trials):
                stamp[t, owners[v, t]] = tag
                count[t] += 1
            for j in range(offs[i], offs[i + 1]):
                if j + PREFETCH_DISTANCE < ahead:
                    prefetch_row(owners, nbrs[j + PREFETCH_DISTANCE])
                u = nbrs[j]
                for t in range(trials):
                    p = owners[u, t]
                    if stamp[t, p] != tag:
                        stamp[t, p] = tag
                        count[t] += 1
        part[s] = count
    total = np.zeros(trials, dtype=np.int64)
    for s in range(nseg):
        total += part[s]
    return total
