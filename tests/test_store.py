"""Graph store: round trips, chunk boundaries, the prefetching reader, id dtypes,
refusal of incomplete / foreign / existing / bad input, and `graphstream info`."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphstream.cli import main
from graphstream.errors import (
    CorruptDataError,
    IncompleteStoreError,
    InvalidIdError,
    OutputExistsError,
    ParameterError,
    StoreError,
)
from graphstream.store import GraphWriter, degree_pass, open_store, validate_store


def random_edges(n_edges: int, n_nodes: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n_nodes, n_edges)
    dst = rng.integers(0, n_nodes, n_edges)
    time = np.sort(rng.integers(1_000_000_000, 1_100_000_000, n_edges))
    weight = rng.standard_normal(n_edges).astype(np.float32)
    return src, dst, time, weight


def write(path, src, dst, time=None, weight=None, batches=(None,), **kw):
    """Append in batches of the given sizes (cycled; None = everything at once)."""
    with GraphWriter(path, with_time=time is not None, with_weight=weight is not None, **kw) as w:
        pos, i = 0, 0
        while pos < len(src) or (pos == 0 and len(src) == 0 and i == 0):
            size = batches[i % len(batches)] or len(src)
            sl = slice(pos, pos + size)
            w.append(src[sl], dst[sl],
                     None if time is None else time[sl], None if weight is None else weight[sl])
            pos += size
            i += 1
        return w.close()


def read(store, **kw):
    cols = kw.pop("columns", store.columns)
    batches = list(store.stream(columns=cols, **kw))
    out = {}
    for c in cols:
        parts = [getattr(b, c) for b in batches]
        out[c] = np.concatenate(parts) if parts else np.empty(0)
    return out, batches


# -- round trips -------------------------------------------------------------------------------

def test_round_trip_with_time_and_weight(tmp_path):
    src, dst, time, weight = random_edges(10_007, 500)
    store = write(tmp_path / "g.zarr", src, dst, time, weight, batches=(1, 999, 33, 4096),
                  chunk_size=1000, num_nodes=500, directed=False, source="unit test", attrs={"k": 1})
    assert store.num_edges == 10_007 and store.num_nodes == 500 and not store.directed
    assert store.columns == ("src", "dst", "time", "weight") and store.chunk_size == 1000
    assert store.source == "unit test" and store.attrs["k"] == 1 and store.attrs["complete"] is True
    assert store.id_dtype == np.int32 and store.array("src").dtype == np.int32
    assert store.array("time").dtype == np.int64 and store.array("weight").dtype == np.float32
    info = store.info.to_dict()
    assert info["has_time"] and info["has_weight"] and not info["has_id_map"]
    again = validate_store(tmp_path / "g.zarr", deep=True)
    data, batches = read(again)
    assert [len(b) for b in batches] == [1000] * 10 + [7]
    assert [b.start for b in batches] == list(range(0, 10_007, 1000))
    assert np.array_equal(data["src"], src) and np.array_equal(data["dst"], dst)
    assert np.array_equal(data["time"], time) and np.array_equal(data["weight"], weight)
    assert store.id_map() is None
    with pytest.raises(StoreError):
        store.array("nope")
    with pytest.raises(StoreError):
        list(write(tmp_path / "h.zarr", src, dst).stream(columns=("src", "time")))


def test_num_nodes_inferred_and_empty_store(tmp_path):
    store = write(tmp_path / "g.zarr", np.array([0, 5]), np.array([7, 1]))
    assert store.num_nodes == 8 and store.num_edges == 2
    empty = write(tmp_path / "e.zarr", np.array([], dtype=np.int64), np.array([], dtype=np.int64),
                  num_nodes=3)
    assert empty.num_edges == 0 and empty.num_nodes == 3
    assert list(empty.stream()) == []
    assert degree_pass(empty).total.tolist() == [0, 0, 0]


@pytest.mark.parametrize("prefetch", [0, 1, 3])
@pytest.mark.parametrize("batch_size,start,stop", [(None, 0, None), (777, 0, None), (1, 2990, 3005),
                                                   (2500, 123, 9876), (10**6, 5, 6), (64, 9999, None),
                                                   (5, 4000, 4000), (3, 50, 10)])
def test_stream_batches_start_stop(tmp_path_factory, prefetch, batch_size, start, stop):
    path = tmp_path_factory.getbasetemp() / "stream.zarr"
    src, dst, time, weight = random_edges(10_000, 300, seed=2)
    if not path.exists():
        write(path, src, dst, time, weight, chunk_size=1024)
    store = open_store(path)
    data, batches = read(store, batch_size=batch_size, start=start, stop=stop, prefetch=prefetch)
    end = 10_000 if stop is None else min(stop, 10_000)
    sl = slice(start, max(start, end))
    for name, ref in (("src", src), ("dst", dst), ("time", time), ("weight", weight)):
        assert np.array_equal(data[name], ref[sl]), name
    size = batch_size or 1024
    assert all(len(b) == size for b in batches[:-1])
    pos = sl.start
    for b in batches:
        assert b.start == pos and b.stop == pos + len(b)
        pos = b.stop
    # A subset of columns, and a stream of time only (still positioned).
    only_time, tb = read(store, columns=("time",), batch_size=batch_size, start=start, stop=stop,
                         prefetch=prefetch)
    assert np.array_equal(only_time["time"], time[sl]) and all(b.weight is None for b in tb)
    # its batches have the length and stop of the edges they hold (they counted the empty src: 0)
    assert [len(b) for b in tb] == [len(b) for b in batches] and [b.stop for b in tb] == [b.stop for b in batches]


def test_stream_rejects_negative_bounds_and_stops_early(tmp_path):
    src, dst, _, _ = random_edges(5000, 50)
    store = write(tmp_path / "g.zarr", src, dst, chunk_size=100)
    with pytest.raises(ParameterError):
        list(store.stream(start=-1))
    # batch_size 0 was read as "one chunk"; a negative one was numpy's ValueError, 2.5 a TypeError
    for bad in (0, -5, 2.5):
        with pytest.raises(ParameterError, match="batch_size"):
            store.stream(batch_size=bad)
    # Leaving the loop early must not hang or leak (the prefetch pool shuts down).
    for i, batch in enumerate(store.stream(batch_size=100, prefetch=4)):
        if i == 3:
            break
    it = store.stream(batch_size=100)
    first = next(it)
    it.close()
    assert np.array_equal(first.src, src[:100])


def test_to_dask(tmp_path):
    src, dst, time, _ = random_edges(5000, 64)
    store = write(tmp_path / "g.zarr", src, dst, time, chunk_size=512)
    arr = store.to_dask("dst")
    assert arr.chunks[0][:-1] == (512,) * 9 and sum(arr.chunks[0]) == 5000
    assert np.array_equal(arr.compute(), dst)
    assert int(store.to_dask("src").sum().compute()) == int(src.sum())
    assert np.array_equal(store.to_dask("time")[100:200].compute(), time[100:200])
    # read with the stream's checks: a missing chunk file is damage, not zeros (da.from_zarr's reading)
    (tmp_path / "g.zarr" / "dst" / "c" / "3").unlink()
    assert np.array_equal(store.to_dask("dst")[:512].compute(), dst[:512])
    with pytest.raises(CorruptDataError, match=r"array 'dst' chunk 3 .* the chunk file is missing"):
        store.to_dask("dst")[1500:1600].compute()


def test_writer_copies_reused_buffers(tmp_path):
    """A caller that refills one buffer between appends must not corrupt the store."""
    buf_s = np.empty(300, dtype=np.int32)        # the store's own id dtype: no cast, no implicit copy
    buf_d = np.empty(300, dtype=np.int32)
    expected = []
    with GraphWriter(tmp_path / "g.zarr", num_nodes=1000, chunk_size=256) as w:
        for i in range(10):
            buf_s[:] = np.arange(300) + i
            buf_d[:] = 999 - buf_s
            w.append(buf_s, buf_d)
            expected.append(buf_s.copy())
        store = w.close()
    data, _ = read(store)
    assert np.array_equal(data["src"], np.concatenate(expected))
    assert np.array_equal(data["dst"], 999 - np.concatenate(expected))


# -- id dtypes -----------------------------------------------------------------------------

def test_int64_when_declared_large(tmp_path):
    big = 2**31 + 10
    store = write(tmp_path / "g.zarr", np.array([0, big - 1]), np.array([2**31, 3]), num_nodes=big)
    assert store.id_dtype == np.int64 and store.array("src").dtype == np.int64
    data, _ = read(store)
    assert data["src"].tolist() == [0, big - 1] and data["dst"].tolist() == [2**31, 3]
    small = write(tmp_path / "s.zarr", np.array([0, 1]), np.array([1, 2]), num_nodes=2**31 - 1)
    assert small.id_dtype == np.int32


def test_auto_widening_keeps_earlier_chunks(tmp_path):
    src, dst, time, _ = random_edges(2500, 1000)
    with GraphWriter(tmp_path / "g.zarr", with_time=True, chunk_size=512) as w:
        w.append(src[:2000], dst[:2000], time[:2000])       # some chunks already written as int32
        assert w.id_dtype == np.int32
        w.append(np.array([2**31 + 5]), np.array([7]), time[2000:2001])
        assert w.id_dtype == np.int64
        w.append(src[2001:], dst[2001:], time[2001:])
        store = w.close()
    assert store.id_dtype == np.int64 and store.num_nodes == 2**31 + 6
    data, _ = read(store)
    exp_src = src.copy()
    exp_src[2000] = 2**31 + 5
    exp_dst = dst.copy()
    exp_dst[2000] = 7
    assert np.array_equal(data["src"], exp_src) and np.array_equal(data["dst"], exp_dst)
    assert np.array_equal(data["time"], time)
    assert sorted(zarr.open_group(str(tmp_path / "g.zarr"), mode="r").array_keys()) == ["dst", "src", "time"]
    # Widened at close when the declared node count needs int64.
    with GraphWriter(tmp_path / "c.zarr", chunk_size=4) as w:
        w.append(np.arange(10), np.arange(10)[::-1])
        store = w.close(num_nodes=2**31)
    assert store.id_dtype == np.int64 and read(store)[0]["src"].tolist() == list(range(10))


def test_forced_int32_refuses_large_ids(tmp_path):
    with pytest.raises(InvalidIdError):
        with GraphWriter(tmp_path / "g.zarr", id_dtype="int32") as w:
            w.append(np.array([2**31]), np.array([0]))
    assert not (tmp_path / "g.zarr").exists()      # a failed write removes the partial store
    with pytest.raises(InvalidIdError):
        with GraphWriter(tmp_path / "u.zarr") as w:
            w.append(np.array([2**63], dtype=np.uint64), np.array([0], dtype=np.uint64))


# -- refusals ------------------------------------------------------------------------------

def test_incomplete_store_refused(tmp_path):
    w = GraphWriter(tmp_path / "g.zarr", num_nodes=10, chunk_size=2)
    w.append(np.arange(5), np.arange(5))
    # Until close() the store is written into a hidden sibling: OUT does not exist yet,
    # and the sibling itself is refused as incomplete.
    assert not (tmp_path / "g.zarr").exists()
    partial = next(tmp_path.glob(".g.zarr.tmp-*"))
    with pytest.raises(IncompleteStoreError, match="incomplete"):
        open_store(partial)
    w.close()
    assert open_store(tmp_path / "g.zarr").num_edges == 5
    with pytest.raises(StoreError):
        w.append(np.arange(2), np.arange(2))
    with pytest.raises(StoreError):
        w.close()


def test_writer_killed_mid_write_is_refused(tmp_path):
    path = tmp_path / "killed.zarr"
    script = textwrap.dedent(f"""
        import os, numpy as np
        from graphstream.store import GraphWriter
        w = GraphWriter({str(path)!r}, num_nodes=1000, chunk_size=100, with_weight=True)
        for i in range(7):
            w.append(np.arange(150) % 1000, np.arange(150)[::-1], weight=np.ones(150, dtype=np.float32))
        w._wait()            # chunks are on disk, like a long run that dies half-way
        os._exit(3)          # no close(), no cleanup: a crash
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    assert not path.exists()   # a crash never leaves something at OUT
    partial = next(tmp_path.glob(".killed.zarr.tmp-*"))
    assert (partial / "src").exists()
    with pytest.raises(IncompleteStoreError):
        open_store(partial)
    with pytest.raises(IncompleteStoreError):
        validate_store(partial, deep=True)


def test_foreign_and_missing_stores_refused(tmp_path):
    with pytest.raises(StoreError, match="no such"):
        open_store(tmp_path / "missing.zarr")
    foreign = zarr.open_group(str(tmp_path / "foreign.zarr"), mode="w")
    foreign.attrs["format"] = "something.else"
    foreign.create_array("src", shape=(3,), dtype=np.int32)
    with pytest.raises(StoreError, match="not a graphstream"):
        open_store(tmp_path / "foreign.zarr")
    zarr.open_group(str(tmp_path / "bare.zarr"), mode="w")
    with pytest.raises(StoreError):
        open_store(tmp_path / "bare.zarr")
    zarr.create_array(str(tmp_path / "array.zarr"), shape=(3,), dtype=np.int32)
    with pytest.raises(StoreError):
        open_store(tmp_path / "array.zarr")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.txt").write_text("hello")
    with pytest.raises(StoreError):
        open_store(tmp_path / "plain")
    # A complete-looking store with a truncated column.
    store = write(tmp_path / "g.zarr", np.arange(10), np.arange(10))
    zarr.open_array(str(tmp_path / "g.zarr" / "dst"), mode="r+").resize((5,))
    with pytest.raises(StoreError, match="shape"):
        open_store(store.path)


def test_existing_output_refused_without_overwrite(tmp_path):
    path = tmp_path / "g.zarr"
    write(path, np.arange(4), np.arange(4))
    with pytest.raises(OutputExistsError):
        GraphWriter(path)
    assert open_store(path).num_edges == 4           # the refused writer touched nothing
    (tmp_path / "file.zarr").write_text("not a store")
    with pytest.raises(OutputExistsError):
        GraphWriter(tmp_path / "file.zarr")
    store = write(path, np.arange(3), np.arange(3), overwrite=True)
    assert store.num_edges == 3
    with pytest.raises(StoreError, match="parent"):
        GraphWriter(tmp_path / "no" / "such" / "g.zarr")


def test_bad_ids_and_columns_refused(tmp_path):
    cases = [
        (np.array([0.0, 1.0]), np.array([1, 2]), InvalidIdError, "integers"),
        (np.array([0, 1]), np.array(["a", "b"]), InvalidIdError, "integers"),
        (np.array([0, -1]), np.array([1, 2]), InvalidIdError, "negative"),
        (np.array([0, 1]), np.array([1, 10]), InvalidIdError, "beyond"),
        (np.array([0, 1]), np.array([1, 2, 3]), ParameterError, "equal length"),
        (np.array([[0, 1]]), np.array([[1, 2]]), ParameterError, "1-D"),
    ]
    for i, (s, d, exc, msg) in enumerate(cases):
        path = tmp_path / f"bad{i}.zarr"
        with pytest.raises(exc, match=msg):
            with GraphWriter(path, num_nodes=10) as w:
                w.append(s, d)
        assert not path.exists()
    with GraphWriter(tmp_path / "cols.zarr", with_time=True) as w:
        with pytest.raises(ParameterError, match="time"):
            w.append(np.arange(3), np.arange(3))
        with pytest.raises(ParameterError, match="weight"):
            w.append(np.arange(3), np.arange(3), np.arange(3), np.ones(3))
        with pytest.raises(ParameterError, match="shape"):
            w.append(np.arange(3), np.arange(3), np.arange(4))
        w.append(np.arange(3), np.arange(3), np.arange(3))
        # Closing with a node count below the largest id is refused.
        with pytest.raises(InvalidIdError):
            w.close(num_nodes=2)
    for kw in ({"chunk_size": 0}, {"num_nodes": -1}, {"id_dtype": "float32"}):
        with pytest.raises(ParameterError):
            GraphWriter(tmp_path / "p.zarr", **kw)
    # Ids beyond num_nodes written by someone else are caught by a deep validation.
    store = write(tmp_path / "g.zarr", np.arange(10), np.arange(10), chunk_size=4)
    arr = zarr.open_array(str(tmp_path / "g.zarr" / "dst"), mode="r+")
    arr[6] = 10
    validate_store(store.path)
    with pytest.raises(InvalidIdError, match=r"dst\[6\] = 10"):
        validate_store(store.path, deep=True)
    with pytest.raises(InvalidIdError, match="edge 6"):
        degree_pass(open_store(store.path))


# -- property: stream() returns exactly what was appended -------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_edges=st.integers(0, 400), chunk=st.integers(1, 97), appends=st.lists(st.integers(1, 150), min_size=1,
       max_size=6), batch=st.integers(1, 500), prefetch=st.integers(0, 3), start=st.integers(0, 450),
       span=st.one_of(st.none(), st.integers(0, 450)), seed=st.integers(0, 2**32 - 1))
def test_stream_returns_what_was_appended(tmp_path_factory, n_edges, chunk, appends, batch, prefetch,
                                          start, span, seed):
    src, dst, time, weight = random_edges(n_edges, 2**31 - 1, seed)
    path = tmp_path_factory.mktemp("prop") / "g.zarr"
    store = write(path, src, dst, time, weight, batches=tuple(appends), chunk_size=chunk)
    assert store.num_edges == n_edges and store.chunk_size == chunk
    stop = None if span is None else start + span
    data, batches = read(store, batch_size=batch, start=start, stop=stop, prefetch=prefetch)
    sl = slice(min(start, n_edges), n_edges if stop is None else max(min(start, n_edges), min(stop, n_edges)))
    for name, ref in (("src", src), ("dst", dst), ("time", time), ("weight", weight)):
        assert np.array_equal(data[name], ref[sl])
    assert all(len(b) == batch for b in batches[:-1])


# -- graphstream info --------------------------------------------------------------------------

def test_info_cli_matches_numpy(tmp_path, capsys):
    rng = np.random.default_rng(4)
    n = 3000
    src = rng.integers(0, 2000, 20_000)                 # nodes 2000.. are isolated
    dst = rng.zipf(1.8, 20_000) % 2000
    src[::50] = dst[::50]                               # some self-loops
    path = tmp_path / "g.zarr"
    write(path, src, dst, chunk_size=3333, num_nodes=n)
    assert main(["info", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out)
    deg = np.bincount(src, minlength=n) + np.bincount(dst, minlength=n)
    assert result["num_nodes"] == n and result["num_edges"] == 20_000 and result["directed"] is True
    assert result["max_degree"] == int(deg.max())
    assert result["mean_degree"] == pytest.approx(deg.mean())
    assert result["max_out_degree"] == int(np.bincount(src).max())
    assert result["max_in_degree"] == int(np.bincount(dst).max())
    assert result["isolated_nodes"] == int(np.count_nonzero(deg == 0)) >= 1000
    assert result["self_loops"] == int(np.count_nonzero(src == dst)) >= 400
    assert result["path"] == str(path) and result["seconds"] > 0 and result["bytes_on_disk"] > 0
    # Human-readable output: key: value lines.
    assert main(["info", str(path)]) == 0
    assert "max_degree: " in capsys.readouterr().out


def test_info_cli_exit_code_2(tmp_path, capsys):
    assert main(["info", str(tmp_path / "missing.zarr")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "missing.zarr" in captured.err and len(captured.err.strip().splitlines()) == 1
    w = GraphWriter(tmp_path / "partial.zarr", chunk_size=2)
    w.append(np.arange(5), np.arange(5))
    w._wait()
    partial = next(tmp_path.glob(".partial.zarr.tmp-*"))
    assert main(["info", str(partial), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "incomplete" in captured.err
    w.abort()
    assert not (tmp_path / "partial.zarr").exists() and not list(tmp_path.glob(".partial.zarr*"))


def test_fsspec_url_store():
    """Any zarr store path works, fsspec URLs included (here the in-memory filesystem)."""
    pytest.importorskip("fsspec")
    url = f"memory://graphstream-test-{np.random.default_rng().integers(1 << 62)}/g.zarr"
    src, dst, time, _ = random_edges(1000, 100)
    store = write(url, src, dst, time, chunk_size=128, num_nodes=100)
    again = open_store(url)
    assert again.path == url and again.num_edges == 1000
    data, _ = read(again, batch_size=300)
    assert np.array_equal(data["src"], src) and np.array_equal(data["time"], time)
    with pytest.raises(OutputExistsError):
        GraphWriter(url)
    with pytest.raises(StoreError):
        open_store(url.replace("g.zarr", "none.zarr"))
    w = GraphWriter(url, overwrite=True, chunk_size=10)
    w.append(np.arange(25), np.arange(25))
    with pytest.raises(IncompleteStoreError):
        open_store(url)
    w.abort()
    assert store.num_nodes == 100


def test_graph_manifest_is_the_one_reader_of_the_attributes(tmp_path):
    import zarr

    from graphstream.errors import StoreError
    from graphstream.store.graph import GraphManifest
    from graphstream.store.integrity import chunks_digests

    with GraphWriter(tmp_path / "g.zarr", num_nodes=5, directed=False, source="s", attrs={"k": 1}) as w:
        w.append(np.array([0, 1]), np.array([1, 4]))
    store = open_store(tmp_path / "g.zarr")
    digests = chunks_digests(zarr.open_group(str(tmp_path / "g.zarr"), mode="r"), str(tmp_path / "g.zarr"))
    assert store.manifest == GraphManifest(num_nodes=5, num_edges=2, directed=False, id_dtype="int32",
                                           source="s", chunk_size=store.chunk_size, extra={"k": 1},
                                           arrays=("dst", "src"), chunks_crc32c=digests)
    assert store.manifest.to_attrs() == store.attrs and list(store.manifest.to_attrs()) == list(store.attrs)
    zarr.open_group(str(tmp_path / "g.zarr"), mode="r+").attrs["version"] = 7
    with pytest.raises(StoreError, match="version 7"):
        open_store(tmp_path / "g.zarr")
