"""Graph500 R-MAT generator: exact values against a slow reference, determinism
across seeds, chunk sizes and thread counts, R-MAT statistics, the vertex
permutation, and the `graphstream generate rmat` CLI."""
from __future__ import annotations

import json

import numba
import numpy as np
import pytest

from graphstream.cli import main
from graphstream.errors import OutputExistsError, ParameterError
from graphstream.ingest.rmat import RmatParams, generate_rmat, permute_ids, rmat_edges
from graphstream.store import open_store

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


# -- an independent, slow reference of the documented scheme ---------------------------------

def ref_mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def ref_edge(seed: int, scale: int, e: int, a=0.57, b=0.19, c=0.19, permute=True) -> tuple[int, int]:
    """Edge e, one level at a time, exactly as the module docstring describes."""
    keys = []
    state = seed
    for _ in range(9):                       # edge key, then 4 xor keys, then 4 multipliers
        state = (state + GOLDEN) & MASK
        keys.append(ref_mix(state))
    ta, tab, tabc = (round(p * 2**21) for p in (a, a + b, a + b + c))
    words = (scale + 2) // 3
    s = d = 0
    for level in range(scale):
        h = ref_mix((keys[0] + (e * words + level // 3) * GOLDEN) & MASK)
        u = (h >> (21 * (level % 3))) & (2**21 - 1)
        quadrant = 0 if u < ta else 1 if u < tab else 2 if u < tabc else 3   # A B C D
        s = (s << 1) | (quadrant >> 1)
        d = (d << 1) | (quadrant & 1)
    if permute:
        mask = (1 << scale) - 1
        shift = max(1, (scale + 1) // 2)
        out = []
        for x in (s, d):
            for k, m in zip(keys[1:5], keys[5:9]):
                x = ((x ^ (k & mask)) * ((m | 1) & mask)) & mask
                x ^= x >> shift
            out.append(x)
        s, d = out
    return s, d


def params(scale=16, edge_factor=16, seed=1, a=0.57, b=0.19, c=0.19) -> RmatParams:
    return RmatParams(scale=scale, edge_factor=edge_factor, seed=seed, a=a, b=b, c=c)


@pytest.mark.parametrize("scale", [1, 2, 3, 4, 5, 16, 17, 31, 33, 48])
@pytest.mark.parametrize("permute", [False, True])
def test_kernel_matches_reference(scale, permute):
    p = params(scale=scale, edge_factor=4, seed=12345)
    first = p.num_edges - 40 if p.num_edges > 40 else 0
    src, dst = rmat_edges(p, first, min(40, p.num_edges), permute=permute)
    expected = [ref_edge(12345, scale, e, permute=permute) for e in range(first, first + len(src))]
    assert list(zip(src.tolist(), dst.tolist())) == expected
    assert src.dtype == (np.int64 if scale >= 31 else np.int32)


def test_permutation_is_a_bijection_and_matches_kernel():
    for scale in (1, 2, 3, 7, 12):
        p = params(scale=scale, seed=7)
        perm = permute_ids(p, np.arange(p.num_nodes))
        assert sorted(perm.tolist()) == list(range(p.num_nodes)), scale
    p = params(scale=16, seed=3)
    raw_s, raw_d = rmat_edges(p, 1000, 5000, permute=False)
    s, d = rmat_edges(p, 1000, 5000)
    assert np.array_equal(s, permute_ids(p, raw_s)) and np.array_equal(d, permute_ids(p, raw_d))
    # Different seeds give different permutations.
    assert not np.array_equal(permute_ids(params(scale=12, seed=1), np.arange(4096)),
                              permute_ids(params(scale=12, seed=2), np.arange(4096)))


def read_all(store):
    batches = list(store.stream())
    return (np.concatenate([b.src for b in batches]), np.concatenate([b.dst for b in batches]))


def test_deterministic_across_runs_chunks_and_threads(tmp_path):
    ref = generate_rmat(tmp_path / "a.zarr", scale=12, edge_factor=16, seed=5, chunk_size=1 << 20)
    ref_src, ref_dst = read_all(ref)
    assert ref.num_nodes == 4096 and ref.num_edges == 65536 and len(ref_src) == 65536
    for i, chunk in enumerate([1000, 4096, 12345]):
        other = generate_rmat(tmp_path / f"c{i}.zarr", scale=12, edge_factor=16, seed=5, chunk_size=chunk)
        assert other.chunk_size == chunk
        s, d = read_all(other)
        assert np.array_equal(s, ref_src) and np.array_equal(d, ref_dst)
    # Whatever the thread count (the kernel hands blocks of edges to threads).
    saved = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        s1, d1 = rmat_edges(params(scale=12, seed=5), 0, 65536)
    finally:
        numba.set_num_threads(saved)
    assert np.array_equal(s1, ref_src) and np.array_equal(d1, ref_dst)
    for threads in (1, 3, 7):
        s_t, d_t = rmat_edges(params(scale=12, seed=5), 0, 65536, threads=threads)
        assert np.array_equal(s_t, ref_src) and np.array_equal(d_t, ref_dst)
    # Any sub-range is the same slice of the stream.
    s2, d2 = rmat_edges(params(scale=12, seed=5), 777, 3000)
    assert np.array_equal(s2, ref_src[777:3777]) and np.array_equal(d2, ref_dst[777:3777])
    # Another seed gives another graph.
    s3, _ = rmat_edges(params(scale=12, seed=6), 0, 65536)
    assert np.count_nonzero(s3 != ref_src) > 60000


def test_rmat_statistics_before_permutation():
    """Each level picks quadrants A, B, C, D with probabilities a, b, c, d."""
    p = params(scale=16, edge_factor=16, seed=1)
    n = p.num_edges
    src, dst = rmat_edges(p, 0, n, permute=False)
    sd = 4.0 * np.sqrt(0.25 / n)         # 4 binomial standard deviations, at worst
    for level in (0, 7, 15):
        bit = p.scale - 1 - level
        quadrant = ((src >> bit) & 1) * 2 + ((dst >> bit) & 1)
        freq = np.bincount(quadrant, minlength=4) / n
        assert np.allclose(freq, [0.57, 0.19, 0.19, 0.05], atol=sd), (level, freq)
    # Vertex 0 (all levels in the upper-left quadrant) is the hub before permutation.
    deg = np.bincount(src, minlength=p.num_nodes) + np.bincount(dst, minlength=p.num_nodes)
    assert deg.argmax() == 0
    # Other probabilities move the frequencies: the check above can fail.
    q = params(scale=16, seed=1, a=0.45, b=0.25, c=0.15)
    s, d = rmat_edges(q, 0, n, permute=False)
    freq = np.bincount(((s >> 15) & 1) * 2 + ((d >> 15) & 1), minlength=4) / n
    assert np.allclose(freq, [0.45, 0.25, 0.15, 0.15], atol=sd)
    assert not np.allclose(freq, [0.57, 0.19, 0.19, 0.05], atol=sd)
    # a = 1: every edge is the self loop on vertex 0.
    s, d = rmat_edges(params(scale=10, a=1.0, b=0.0, c=0.0), 0, 1000, permute=False)
    assert not s.any() and not d.any()


def test_degree_distribution_and_no_id_correlation(tmp_path):
    store = generate_rmat(tmp_path / "g.zarr", scale=16, edge_factor=16, seed=1)
    src, dst = read_all(store)
    n = store.num_nodes
    deg = np.bincount(src, minlength=n) + np.bincount(dst, minlength=n)
    mean = deg.mean()
    assert mean == 32.0
    assert deg.max() > 200 * mean               # a heavy tail, unlike an Erdos-Renyi graph
    assert np.count_nonzero(deg == 0) > 0.1 * n  # R-MAT leaves many vertices isolated
    ids = np.arange(n)
    # Before permutation, degree falls with every set bit of the id ((a+b)/(c+d) ~ 3 per bit);
    # after it, no id bit tells anything about the degree. (Log degrees: the mean of
    # raw degrees over half the nodes is dominated by a few hubs.)
    raw_s, raw_d = rmat_edges(params(scale=16, seed=1), 0, store.num_edges, permute=False)
    raw_log = np.log1p(np.bincount(raw_s, minlength=n) + np.bincount(raw_d, minlength=n))
    log_deg = np.log1p(deg)
    for bit in range(16):
        on = ((ids >> bit) & 1).astype(bool)
        assert raw_log[on].mean() < 0.7 * raw_log[~on].mean()
        ratio = log_deg[on].mean() / log_deg[~on].mean()
        assert 0.97 < ratio < 1.03, (bit, ratio)
    # Nor does the position of the heaviest vertices.
    top = np.argsort(deg)[-64:]
    assert 0.2 * n < np.median(top) < 0.8 * n
    assert store.attrs["generator"]["scale"] == 16 and store.directed


def test_undirected_and_errors(tmp_path):
    store = generate_rmat(tmp_path / "u.zarr", scale=8, edge_factor=4, seed=0, undirected=True)
    assert not store.directed and store.num_edges == 1024
    with pytest.raises(OutputExistsError):
        generate_rmat(tmp_path / "u.zarr", scale=8, edge_factor=4)
    again = generate_rmat(tmp_path / "u.zarr", scale=8, edge_factor=2, overwrite=True)
    assert again.num_edges == 512
    for bad in ({"scale": 0}, {"scale": 8, "edge_factor": 0}, {"scale": 8, "seed": -1},
                {"scale": 8, "a": 0.9, "b": 0.1, "c": 0.1}, {"scale": 8, "chunk_size": 0}):
        with pytest.raises(ParameterError):
            generate_rmat(tmp_path / "bad.zarr", **bad)
        assert not (tmp_path / "bad.zarr").exists()


def test_cli_generate_rmat(tmp_path, capsys):
    out = tmp_path / "g.zarr"
    assert main(["generate", "rmat", str(out), "--scale", "16", "--edge-factor", "16", "--seed", "1",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["num_edges"] == 1048576 and result["num_nodes"] == 65536
    assert result["directed"] is True and result["path"] == str(out)
    for key in ("seconds", "edges_per_second", "peak_rss_bytes"):
        assert result[key] > 0
    first = read_all(open_store(out))
    # The same seed again (other chunk size, overwriting) gives identical arrays.
    assert main(["generate", "rmat", str(out), "--scale", "16", "--edge-factor", "16", "--seed", "1",
                 "--chunk-size", "100000", "--overwrite", "--json"]) == 0
    capsys.readouterr()
    second = read_all(open_store(out))
    assert all(np.array_equal(x, y) for x, y in zip(first, second))
    # Existing output without --overwrite, and a bad scale: exit 2, one line on stderr.
    assert main(["generate", "rmat", str(out), "--scale", "4"]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["generate", "rmat", str(tmp_path / "x.zarr"), "--scale", "0"]) == 2
    err = capsys.readouterr().err
    assert "scale" in err and len(err.strip().splitlines()) == 1
    assert main(["generate", "rmat", str(tmp_path / "u.zarr"), "--scale", "5", "--undirected"]) == 0
    assert not open_store(tmp_path / "u.zarr").directed
