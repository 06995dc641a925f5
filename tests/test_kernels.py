"""graphstream.kernels against plain-Python references."""
import numpy as np
import pytest
from numba import njit

from graphstream.kernels.bitsets import count_bits, has_bit, new_bitsets, num_words, set_bit
from graphstream.kernels.hashing import hash_node, mix64, py_hash_node, py_mix64
from graphstream.kernels.merge import KeyCounter, collapse_sorted, merge_sorted, radix_sort
from graphstream.kernels.packing import pack_least_loaded
from graphstream.kernels.pairs import pair_key, pairs_to_csr
from graphstream.kernels.prefetch import PREFETCH_DISTANCE, prefetch_ends, prefetch_row


@pytest.mark.parametrize("x", [0, 1, 2**31, 2**63 - 1, 2**64 - 1, 0x9E3779B97F4A7C15])
def test_mix64_matches_python(x):
    assert int(mix64(np.uint64(x))) == py_mix64(x)


@pytest.mark.parametrize("v,seed", [(0, 0), (5, 3), (2**40, 7), (123456789, 2**20)])
def test_hash_node_matches_python(v, seed):
    assert int(hash_node(v, seed)) == py_hash_node(v, seed)


def test_pack_least_loaded_is_least_loaded_lowest_id_first():
    rng = np.random.default_rng(0)
    weights = rng.integers(1, 50, 300)
    loads = rng.integers(0, 20, 7).astype(np.int64)
    ref_loads = loads.copy()
    out = pack_least_loaded(weights, loads)
    for i, w in enumerate(weights):
        p = min(range(len(ref_loads)), key=lambda q: (ref_loads[q], q))
        assert out[i] == p
        ref_loads[p] += w
    np.testing.assert_array_equal(loads, ref_loads)


def test_bitsets_any_k():
    bits = new_bitsets(5, 130)
    assert bits.shape == (5, num_words(130)) == (5, 3)
    for v, p in [(0, 0), (0, 129), (3, 64), (3, 64), (4, 63)]:
        set_bit(bits, v, p)
    assert has_bit(bits, 0, 129) and has_bit(bits, 3, 64) and not has_bit(bits, 1, 0)
    assert count_bits(bits) == (4, 3)


def test_pairs_and_symmetric_csr():
    n = 6
    pairs = [(4, 1), (0, 5), (2, 3), (1, 4)]
    keys = np.array(sorted({int(pair_key(a, b, n)) for a, b in pairs}), dtype=np.int64)
    assert list(keys) == [0 * n + 5, 1 * n + 4, 2 * n + 3]
    w = np.array([7, 8, 9], dtype=np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    indices = np.empty(6, dtype=np.int64)
    weights = np.empty(6, dtype=np.int64)
    pairs_to_csr(keys, w, n, indptr, indices, weights)
    rows = {r: list(zip(indices[indptr[r]:indptr[r + 1]], weights[indptr[r]:indptr[r + 1]], strict=True))
            for r in range(n)}
    assert rows == {0: [(5, 7)], 1: [(4, 8)], 2: [(3, 9)], 3: [(2, 9)], 4: [(1, 8)], 5: [(0, 7)]}


def test_merge_and_counter_match_a_multiset():
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 40, 1000)
    counter = KeyCounter(buffer=97)         # many folds
    for chunk in np.array_split(raw, 13):
        counter.add(chunk)
    keys, counts = counter.result()
    ref_keys, ref_counts = np.unique(raw, return_counts=True)
    np.testing.assert_array_equal(keys, ref_keys)
    np.testing.assert_array_equal(counts, ref_counts)
    a_k, a_c = collapse_sorted(np.sort(raw[:500]))
    b_k, b_c = collapse_sorted(np.sort(raw[:200]))
    d_k, d_c = merge_sorted(a_k, a_c, b_k, b_c, sign=-1)     # the multiset difference raw[200:500]
    r_k, r_c = np.unique(raw[200:500], return_counts=True)
    np.testing.assert_array_equal(d_k, r_k)
    np.testing.assert_array_equal(d_c, r_c)


def test_prefetch_compiles_for_the_state_layouts_and_changes_nothing():
    """The prefetch hint lowers for 1-D and 2-D rows of every state dtype, with int32 or int64 ids
    (an LLVM that rejected the intrinsic would fail here, not deep inside a partitioner)."""
    @njit
    def gather(rows, ids):
        total = 0
        for j in range(ids.shape[0]):
            if j + PREFETCH_DISTANCE < ids.shape[0]:
                prefetch_row(rows, ids[j + PREFETCH_DISTANCE])
            prefetch_ends(ids, ids[::-1], j, rows)
            total += np.int64(rows[ids[j]].sum()) if rows.ndim == 2 else np.int64(rows[ids[j]])
        return total

    rng = np.random.default_rng(0)
    for id_dtype in (np.int32, np.int64):
        ids = rng.integers(0, 1000, 5000).astype(id_dtype)
        for rows in (rng.integers(0, 9, 1000).astype(np.int32), rng.integers(0, 9, (1000, 3)).astype(np.uint64),
                     rng.integers(0, 9, (1000, 1)).astype(np.uint16), rng.integers(0, 9, (1000, 4)).astype(np.int64)):
            expect = int(rows[ids].sum())
            assert gather(rows, ids) == expect


@pytest.mark.parametrize("bits", [1, 11, 12, 22, 35, 41, 63])
@pytest.mark.parametrize("n", [0, 1, 7, 5000])
def test_radix_sort_matches_numpy(bits, n):
    """Odd and even pass counts (the result ends in scratch or in place), keys up to 2^bits - 1."""
    rng = np.random.default_rng(bits * 31 + n)
    keys = rng.integers(0, 1 << bits, n, dtype=np.int64)
    if n:
        keys[0] = (1 << bits) - 1
    want = np.sort(keys)
    scratch = np.full(n + 3, -1, dtype=np.int64)    # longer than needed, as the coarse graph's is
    radix_sort(keys, scratch, bits)
    assert np.array_equal(keys, want)
