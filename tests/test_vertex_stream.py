"""The vertex stream: each node's neighbour list, exactly, whatever the chunk and bucket sizes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphstream.errors import StoreError
from graphstream.partition.vertex_stream import build_vertex_stream, open_vertex_stream
from graphstream.store import GraphWriter


def _store(path, src, dst, n, chunk=1 << 20, directed=False):
    with GraphWriter(path, num_nodes=n, directed=directed, chunk_size=chunk) as w:
        w.append(np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))
    from graphstream.store import open_store
    return open_store(path)


def _reference(src, dst, n):
    """Independent reference: a stable argsort of both directions (forward entries first, edge order)."""
    keys = np.concatenate([src, dst]).astype(np.int64)
    vals = np.concatenate([dst, src]).astype(np.int64)
    order = np.argsort(keys, kind="stable")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=offsets[1:])
    return offsets, vals[order]


def _read_all(vs, block_entries):
    offs, nbrs, firsts = [0], [], []
    for blk in vs.blocks(block_entries):
        firsts.append(blk.first)
        nbrs.append(blk.neighbours.astype(np.int64))
        offs.extend((blk.offsets[1:] + offs[-1]).tolist())
    return np.array(offs), (np.concatenate(nbrs) if nbrs else np.empty(0, np.int64)), firsts


def _random_graph(rng, n, m):
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    dst[: m // 10] = src[: m // 10]            # self-loops
    src[m // 5: m // 5 + m // 10] = src[:m // 10]   # duplicates
    dst[m // 5: m // 5 + m // 10] = dst[:m // 10]
    return src, dst


@pytest.mark.parametrize("bucket_entries", [1 << 25, 97, 1])
@pytest.mark.parametrize("chunk", [1, 13, 1 << 20])
def test_exact_lists_against_reference(tmp_path, bucket_entries, chunk):
    rng = np.random.default_rng(7)
    n, m = 300, 2000
    src, dst = _random_graph(rng, n, m)
    store = _store(tmp_path / "g.zarr", src, dst, n, chunk=max(chunk, 64))
    vs = build_vertex_stream(store, tmp_path / "vs", batch_size=chunk, bucket_entries=bucket_entries)
    ref_off, ref_nbr = _reference(src, dst, n)
    np.testing.assert_array_equal(vs.offsets, ref_off)
    for block_entries in (1, 50, 1 << 22):
        off, nbr, firsts = _read_all(vs, block_entries)
        np.testing.assert_array_equal(off, ref_off)
        np.testing.assert_array_equal(nbr, ref_nbr)
    assert not (tmp_path / "vs" / "spill").exists()
    # reopen from disk gives the same
    vs2 = open_vertex_stream(tmp_path / "vs")
    np.testing.assert_array_equal(_read_all(vs2, 77)[1], ref_nbr)
    v = int(np.argmax(np.diff(ref_off)))
    np.testing.assert_array_equal(vs2.neighbours_of(v), ref_nbr[ref_off[v]:ref_off[v + 1]])


@pytest.mark.parametrize("bucket_entries", [1 << 25, 97])
def test_hubs_first_is_the_same_stream_renumbered(tmp_path, bucket_entries):
    """With hubs_first, node new_id[v] has v's list of the store-order stream, each neighbour renumbered;
    new_id numbers the nodes of degree above the mean first, then the others, each in id order."""
    rng = np.random.default_rng(3)
    n, m = 300, 2000
    src, dst = _random_graph(rng, n, m)
    src[:400] = rng.integers(0, 12, 400)       # a few hubs
    store = _store(tmp_path / "g.zarr", src, dst, n, chunk=64)
    vs = build_vertex_stream(store, tmp_path / "vs", batch_size=50, bucket_entries=bucket_entries, hubs_first=True)
    ref_off, ref_nbr = _reference(src, dst, n)
    degree = np.diff(ref_off)
    hubs = np.flatnonzero(degree > degree.mean())
    others = np.flatnonzero(degree <= degree.mean())
    assert 0 < len(hubs) < n
    np.testing.assert_array_equal(vs.new_id[np.concatenate([hubs, others])], np.arange(n))
    off, nbr, _ = _read_all(vs, 50)
    for v in range(n):
        u = vs.new_id[v]
        np.testing.assert_array_equal(nbr[off[u]:off[u + 1]], vs.new_id[ref_nbr[ref_off[v]:ref_off[v + 1]]])
    reopened = open_vertex_stream(tmp_path / "vs", mmap=True)
    np.testing.assert_array_equal(reopened.new_id, vs.new_id)
    del reopened
    np.save(tmp_path / "vs" / "new_id.npy", vs.new_id[:-1])   # a map that lost ids is refused
    with pytest.raises(StoreError, match="new_id.npy holds 299 ids for 300 nodes"):
        open_vertex_stream(tmp_path / "vs")
    assert build_vertex_stream(store, tmp_path / "vs2").new_id is None   # the store's ids by default


@pytest.mark.parametrize("prefetch", [1, 2])
def test_blocks_read_ahead_no_more_than_prefetch(tmp_path, monkeypatch, prefetch):
    """While the caller holds block i, blocks up to i + ``prefetch`` are read (their pages mapped and
    populated, so in the process's memory), not one more; and every block comes, in order."""
    import time

    from graphstream.partition.vertex_stream import VertexStream

    rng = np.random.default_rng(5)
    n, m = 400, 4000
    src, dst = _random_graph(rng, n, m)
    vs = build_vertex_stream(_store(tmp_path / "g.zarr", src, dst, n, chunk=512), tmp_path / "vs")
    bounds = vs.block_bounds(500)
    read = []
    real = VertexStream._read
    monkeypatch.setattr(VertexStream, "_read", lambda self, f, a, b: read.append(a) or real(self, f, a, b))
    seen = []
    for i, blk in enumerate(vs.blocks(500, prefetch=prefetch)):
        time.sleep(0.02)   # the reader thread's time to run ahead, were it allowed to
        assert blk.first == bounds[i][0] and len(read) <= i + 1 + prefetch, (i, read)
        seen.append(blk.first)
    assert seen == [a for a, _ in bounds] and len(bounds) > 4


def test_multiset_matches_scipy_csr(tmp_path):
    sp = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(3)
    n, m = 500, 3000
    src, dst = _random_graph(rng, n, m)
    store = _store(tmp_path / "g.zarr", src, dst, n, chunk=256)
    vs = build_vertex_stream(store, tmp_path / "vs", bucket_entries=500)
    coo = sp.coo_matrix((np.ones(2 * m), (np.r_[src, dst], np.r_[dst, src])), shape=(n, n))
    csr = coo.tocsr()   # sums duplicates: value = multiplicity
    for blk in vs.blocks(333, prefetch=0):
        for i in range(len(blk)):
            v = blk.first + i
            got = np.bincount(blk.neighbours[blk.offsets[i]:blk.offsets[i + 1]], minlength=n)
            want = np.zeros(n)
            row = csr.getrow(v)
            want[row.indices] = row.data
            np.testing.assert_array_equal(got, want)


def test_buckets_grow_past_their_bound_with_the_same_lists(tmp_path, monkeypatch):
    """Every bucket's spill files stay open through the spill pass: with more buckets than MAX_BUCKETS
    the buckets grow instead, and the lists are the same."""
    from graphstream.partition import vertex_stream as V
    rng = np.random.default_rng(3)
    n, m = 300, 2000
    src, dst = _random_graph(rng, n, m)
    store = _store(tmp_path / "g.zarr", src, dst, n)
    cuts = []
    real = V.cut_ranges
    monkeypatch.setattr(V, "cut_ranges", lambda offsets, entries: cuts.append(real(offsets, entries)) or cuts[-1])
    monkeypatch.setattr(V, "MAX_BUCKETS", 5)
    vs = build_vertex_stream(store, tmp_path / "vs", bucket_entries=1)
    # greedy cuts: two neighbouring buckets hold more than one bucket's share, so at most 2 x 5 + 1
    assert 1 < len(cuts[-1]) <= 2 * 5 + 1 < len(real(vs.offsets, 1))
    np.testing.assert_array_equal(_read_all(vs, 1 << 22)[1], _reference(src, dst, n)[1])


def test_isolated_and_empty(tmp_path):
    store = _store(tmp_path / "g.zarr", [0, 0], [5, 5], 9)
    vs = build_vertex_stream(store, tmp_path / "vs", bucket_entries=1)
    assert vs.num_entries == 4
    np.testing.assert_array_equal(vs.degree(), [2, 0, 0, 0, 0, 2, 0, 0, 0])
    assert vs.neighbours_of(5).tolist() == [0, 0]
    assert vs.neighbours_of(3).tolist() == []
    store0 = _store(tmp_path / "e.zarr", [], [], 4)
    vs0 = build_vertex_stream(store0, tmp_path / "vs0")
    assert vs0.num_entries == 0
    assert sum(len(b) for b in vs0.blocks()) == 4


def test_blocks_are_read_only_windows_that_outlive_the_pass(tmp_path):
    """A block's neighbours are the file's bytes mapped read-only; a block kept past its pass stays
    valid (the window is unmapped with its last array), and a truncated file is named, not a fault."""
    rng = np.random.default_rng(3)
    src, dst = _random_graph(rng, 300, 5000)
    store = _store(tmp_path / "g.zarr", src, dst, 300)
    vs = build_vertex_stream(store, tmp_path / "vs")
    offsets, nbrs = _reference(src, dst, 300)
    kept = list(vs.blocks(1000, prefetch=1))   # every block held at once
    assert len(kept) > 3
    for blk in kept:
        assert not blk.neighbours.flags.writeable
        np.testing.assert_array_equal(blk.neighbours, nbrs[offsets[blk.first]:offsets[blk.stop]])
    path = vs.path / "neighbours.npy"
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 4)
    with pytest.raises(StoreError, match="neighbours.npy is truncated"):
        list(vs.blocks(1000))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_property_chunk_and_bucket_independent(tmp_path_factory, data):
    n = data.draw(st.integers(1, 40))
    m = data.draw(st.integers(0, 120))
    src = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), dtype=np.int64)
    dst = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), dtype=np.int64)
    chunk = data.draw(st.integers(1, 50))
    bucket = data.draw(st.integers(1, 300))
    tmp = tmp_path_factory.mktemp("vsprop")
    store = _store(tmp / "g.zarr", src, dst, n, chunk=chunk)
    vs = build_vertex_stream(store, tmp / "vs", batch_size=data.draw(st.integers(1, 60)), bucket_entries=bucket)
    ref_off, ref_nbr = _reference(src, dst, n)
    off, nbr, _ = _read_all(vs, data.draw(st.integers(1, 100)))
    np.testing.assert_array_equal(off, ref_off)
    np.testing.assert_array_equal(nbr, ref_nbr)


def test_aligned_ranges_read_the_same_lists(tmp_path):
    """ranges() over aligned_bounds() (memory-mapped offsets, as a task opens the stream) reads every
    list of the range, and the bounds are multiples of the alignment whatever the block size."""
    rng = np.random.default_rng(3)
    n, m = 1000, 6000
    src, dst = _random_graph(rng, n, m)
    store = _store(tmp_path / "g.zarr", src, dst, n)
    build_vertex_stream(store, tmp_path / "vs")
    vs = open_vertex_stream(tmp_path / "vs", mmap=True)
    ref_off, ref_nbr = _reference(src, dst, n)
    for start, stop, block_entries, align in [(0, n, 100, 64), (128, 900, 7, 32), (0, n, 1 << 22, 1000)]:
        bounds = vs.aligned_bounds(start, stop, block_entries, align)
        assert bounds[0][0] == start and bounds[-1][1] == stop
        assert all(b % align == 0 for _, b in bounds[:-1])
        got = np.concatenate([blk.neighbours.astype(np.int64) for blk in vs.ranges(bounds)])
        np.testing.assert_array_equal(got, ref_nbr[ref_off[start]:ref_off[stop]])


def test_renumbering_refuses_an_id_the_degree_pass_did_not_see():
    """The hubs-first renumbering reads the store a second time: an id outside the nodes there (the
    store changed since the degree pass) is an error naming the edge, not a read past new_id."""
    from graphstream.errors import InvalidIdError
    from graphstream.partition.vertex_stream import _edge_batches
    from graphstream.store.stream import EdgeBatch

    class Changed:
        path = "changed.zarr"

        def stream(self, batch_size=None):
            yield EdgeBatch(start=0, src=np.array([0, 1]), dst=np.array([2, 0]))
            yield EdgeBatch(start=2, src=np.array([1, 2, 0]), dst=np.array([0, 1, 7]))

    new_id = np.array([2, 0, 1], dtype=np.int32)
    batches = _edge_batches(Changed(), None, new_id)
    src, dst = next(batches)
    np.testing.assert_array_equal(src, [2, 0])
    np.testing.assert_array_equal(dst, [1, 2])
    with pytest.raises(InvalidIdError, match=r"changed.zarr: edge 4 = \(0, 7\)"):
        next(batches)


@pytest.mark.parametrize("hubs_first", [False, True])
def test_directed_stream_keeps_where_the_in_neighbours_start(tmp_path, hubs_first):
    """A directed store's stream: ``out_degree()[v]`` entries of v's list are the heads of its out-edges,
    the rest the tails of its in-edges; a count file of the wrong length is refused; undirected, None."""
    rng = np.random.default_rng(4)
    n = 300
    src, dst = _random_graph(rng, n, 2000)
    vs = build_vertex_stream(_store(tmp_path / "d.zarr", src, dst, n, chunk=97, directed=True), tmp_path / "vs",
                             batch_size=50, hubs_first=hubs_first)
    new_id = np.arange(n) if vs.new_id is None else vs.new_id
    out_degree = vs.out_degree()
    off, nbr, _ = _read_all(vs, 64)
    for v in range(n):
        u = new_id[v]
        row = nbr[off[u]:off[u + 1]]
        np.testing.assert_array_equal(row[:out_degree[u]], new_id[dst[src == v]])
        np.testing.assert_array_equal(row[out_degree[u]:], new_id[src[dst == v]])
    np.save(tmp_path / "vs" / "out_degree.npy", out_degree[:-1])
    with pytest.raises(StoreError, match="out_degree.npy holds"):
        vs.out_degree()
    undirected = build_vertex_stream(_store(tmp_path / "u.zarr", src, dst, n), tmp_path / "vs-u")
    assert undirected.out_degree() is None


def test_a_rebuilt_stream_keeps_nothing_of_the_last_one(tmp_path):
    """A folder that held a directed store's stream, hubs first, then gets an undirected store of as many
    nodes, in id order: no out_degree (whose counts would mark the wrong entries as halos, with no error),
    no new ids, and the figures counted from the new lists."""
    from graphstream.partition.metrics import vertex_partition_metrics, vertex_stream_metrics
    rng = np.random.default_rng(8)
    n = 400
    src, dst = _random_graph(rng, n, 3000)
    directed = build_vertex_stream(_store(tmp_path / "d.zarr", src, dst, n, directed=True), tmp_path / "vs",
                                   hubs_first=True)
    assert directed.out_degree() is not None and directed.new_id is not None
    store = _store(tmp_path / "u.zarr", src, dst, n)
    again = build_vertex_stream(store, tmp_path / "vs")
    assert again.out_degree() is None and again.new_id is None
    assert not (tmp_path / "vs" / "out_degree.npy").exists() and not (tmp_path / "vs" / "new_id.npy").exists()
    owner = rng.integers(0, 6, n).astype(np.int32)
    got = vertex_stream_metrics(again, owner, 6)
    want = vertex_partition_metrics(store, owner, 6)
    assert got["replication_factor"] == want["replication_factor"] and got["part_halo"] == want["part_halo"]


def test_a_kept_stream_is_reused_for_the_same_data_only(tmp_path, capsys, monkeypatch):
    """``keep``: a second build from the same store's data opens the stream (its lists and files as
    built); another store's data, another node order or a damaged file of the stream gets it rebuilt,
    saying why, and the lists are then the new store's."""
    import shutil
    monkeypatch.setenv("GRAPHSTREAM_PROGRESS", "1")   # the reasons are log lines
    rng = np.random.default_rng(11)
    n = 300
    src, dst = _random_graph(rng, n, 2000)
    store = _store(tmp_path / "a.zarr", src, dst, n, chunk=97)
    first = build_vertex_stream(store, tmp_path / "vs", hubs_first=True, keep=True)
    assert not first.reused
    kept = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "vs").iterdir()}
    again = build_vertex_stream(store, tmp_path / "vs", hubs_first=True, keep=True)
    assert again.reused
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "vs").iterdir()} == kept
    np.testing.assert_array_equal(_read_all(again, 64)[1], _read_all(first, 64)[1])
    np.testing.assert_array_equal(again.new_id, first.new_id)
    # the same data in a copy of the store elsewhere: reused too (the fingerprint is of the data)
    shutil.copytree(tmp_path / "a.zarr", tmp_path / "copy.zarr")
    from graphstream.store import open_store
    assert build_vertex_stream(open_store(tmp_path / "copy.zarr"), tmp_path / "vs", hubs_first=True, keep=True).reused

    def rebuilt(store, hubs_first, why):
        capsys.readouterr()
        vs = build_vertex_stream(store, tmp_path / "vs", hubs_first=hubs_first, keep=True)
        assert not vs.reused
        assert why in capsys.readouterr().err
        return vs

    rebuilt(store, False, "hubs_first differ")
    rebuilt(store, True, "hubs_first differ")
    # one edge changed, the same counts: another fingerprint
    dst2 = dst.copy()
    dst2[5] = (dst2[5] + 1) % n
    shutil.rmtree(tmp_path / "a.zarr")
    other = _store(tmp_path / "a.zarr", src, dst2, n, chunk=97)
    vs = rebuilt(other, True, "another store, or from this one before its data changed")
    want_off, want_nbr = _reference(src, dst2, n)
    off, nbr, _ = _read_all(vs, 64)
    for v in range(n):
        u = vs.new_id[v]
        np.testing.assert_array_equal(np.sort(nbr[off[u]:off[u + 1]]),
                                      np.sort(vs.new_id[want_nbr[want_off[v]:want_off[v + 1]]]))
    # a flipped byte in the kept lists
    path = tmp_path / "vs" / "neighbours.npy"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x40
    path.write_bytes(bytes(data))
    rebuilt(other, True, "neighbours.npy fails its checksum")
    assert build_vertex_stream(other, tmp_path / "vs", hubs_first=True, keep=True).reused


def test_a_stream_built_without_keep_is_never_reused(tmp_path, capsys, monkeypatch):
    """A stream of a temporary folder records no checksums, so a later ``keep`` build rebuilds it."""
    monkeypatch.setenv("GRAPHSTREAM_PROGRESS", "1")
    rng = np.random.default_rng(12)
    store = _store(tmp_path / "a.zarr", *_random_graph(rng, 100, 500), 100)
    build_vertex_stream(store, tmp_path / "vs")
    assert not build_vertex_stream(store, tmp_path / "vs", keep=True).reused
    assert "records no checksums" in capsys.readouterr().err
    assert build_vertex_stream(store, tmp_path / "vs", keep=True).reused
