"""Input that used to pass ingest and break later (issue 14, item 7): each case is now a one-line error.

Times that are not finite or beyond int64 and weights beyond float32 are
refused with their line (text) or row (npy, parquet); ids near 2**63 and
sparse huge ids are refused at ingest when the node count they imply (the
largest id + 1) cannot be held in memory, and an existing such store is
refused by ``info`` and ``partition`` before they allocate; halo global ids
out of range stop ``export pyg``; a line with no end is capped; only a first
line whose id columns are words is a header.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import graphstream._resources as resources
from graphstream.cli import main as cli_main
from graphstream.errors import GraphStreamError, InputFormatError, InvalidIdError, NodeDataError
from graphstream.ingest import ingest
from graphstream.ingest.blocks import MAX_LINE_BYTES

GiB = 1 << 30


def write(path, text: str | bytes):
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def cli(*argv, capsys) -> tuple[int, str]:
    code = cli_main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.fixture
def memory_8gib(monkeypatch):
    """This machine has 8 GiB available, whatever it really has (the estimates read it at call time)."""
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 8 * GiB)


# ---------------------------------------------------------------------------
# 1. times and weights: finite, within int64 / float32
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1e30", "inf", "-inf", "nan", "9223372036854775808", "1e400"])
def test_text_time_out_of_range_or_not_finite(tmp_path, value):
    # on line 1 (where it used to make the line a header) and on line 2 (where 1e30 was cast to -2**63)
    for lines, bad in ((f"0 1 {value}\n1 2 5\n", 1), (f"0 1 5\n1 2 {value}\n", 2)):
        src = write(tmp_path / "t.txt", lines)
        with pytest.raises(InputFormatError, match=rf"t\.txt:{bad}: time {value} in column 2 .*within int64"):
            ingest(src, tmp_path / "t.zarr", time_column=2, overwrite=True)


def test_text_time_extremes_that_fit_are_kept(tmp_path):
    src = write(tmp_path / "t.txt", "0 1 -9223372036854775808\n1 2 9223372036854775807\n2 3 0e999\n3 4 -1.5\n")
    store = ingest(src, tmp_path / "t.zarr", time_column=2)
    np.testing.assert_array_equal(store.array("time")[:], [-2**63, 2**63 - 1, 0, -2])


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e39", "-3.5e38"])
def test_text_weight_must_be_finite_float32(tmp_path, value):
    src = write(tmp_path / "w.txt", f"0 1 1.5\n1 2 {value}\n")
    with pytest.raises(InputFormatError, match=rf"w\.txt:2: weight {value} in column 2 .*float32"):
        ingest(src, tmp_path / "w.zarr", weight_column=2)


def test_parquet_float_time_and_weight(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    for col, values, what in (("t", [1.0, float("nan")], "time"), ("t", [1e30, 2.0], "time"),
                              ("w", [0.5, float("inf")], "weight"), ("w", [1e39, 0.5], "weight")):
        table = pa.table({"s": [0, 1], "d": [1, 2], "t": [1.0, 2.0], "w": [0.5, 0.5]})
        table = table.set_column(table.schema.get_field_index(col), col, pa.array(values))
        pq.write_table(table, tmp_path / "e.parquet")
        row = 2 if not np.isfinite(values[1]) else 1
        with pytest.raises(InputFormatError, match=rf"e\.parquet: row {row}: {what} .* in column '{col}'"):
            ingest(tmp_path / "e.parquet", tmp_path / "e.zarr", src_column="s", dst_column="d",
                   time_column="t", weight_column="w", overwrite=True)
    # fractional times are floored, as in text
    pq.write_table(pa.table({"s": [0, 1], "d": [1, 2], "t": [1.5, -0.5]}), tmp_path / "f.parquet")
    store = ingest(tmp_path / "f.parquet", tmp_path / "f.zarr", src_column="s", dst_column="d", time_column="t")
    np.testing.assert_array_equal(store.array("time")[:], [1, -1])


def test_npy_uint64_time_beyond_int64(tmp_path):
    np.save(tmp_path / "e.npy", np.array([[0, 1, 5], [1, 2, 2**63 + 7]], dtype=np.uint64))
    with pytest.raises(InputFormatError, match=r"e\.npy: row 2: time 9223372036854775815 .*within int64"):
        ingest(tmp_path / "e.npy", tmp_path / "e.zarr", time_column=2)


# ---------------------------------------------------------------------------
# 2. ids near 2**63, negative ids
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("big", [2**63 - 1, 2**63 - 2, 2**62])
def test_ids_near_2_63_name_line_and_value(tmp_path, big):
    # the node count would be big + 1: 2**63 does not even fit int64 (info crashed with "Maximum allowed dimension")
    src = write(tmp_path / "g.txt", f"# c\n0 1\n\n2 {big}\n{big} 3\n")
    with pytest.raises(InvalidIdError, match=rf"g\.txt:4: node id {big} makes {big + 1} nodes .*--relabel"):
        ingest(src, tmp_path / "g.zarr")
    np.save(tmp_path / "e.npy", np.array([[0, 1], [2, big]], dtype=np.int64))
    with pytest.raises(InvalidIdError, match=rf"e\.npy: row 2: node id {big} .*--relabel"):
        ingest(tmp_path / "e.npy", tmp_path / "e.zarr")
    assert ingest(src, tmp_path / "r.zarr", relabel=True).num_nodes == 5  # what the message suggests


@pytest.mark.parametrize("text, match", [
    ("0 1\n9223372036854775808 2\n", r"g\.txt:2: source id 9223372036854775808 .*64-bit"),
    ("0 1\n2 -3\n", r"g\.txt:2: negative destination id -3"),
])
def test_ids_beyond_int64_and_negative(tmp_path, text, match):
    with pytest.raises(InvalidIdError, match=match):
        ingest(write(tmp_path / "g.txt", text), tmp_path / "g.zarr")


def test_npy_ids_name_their_row(tmp_path):
    np.save(tmp_path / "u.npy", np.array([[0, 1], [1, 2], [2**63 + 1, 0]], dtype=np.uint64))
    with pytest.raises(InvalidIdError, match=r"u\.npy: row 3: source id 9223372036854775809 does not fit"):
        ingest(tmp_path / "u.npy", tmp_path / "u.zarr")
    np.save(tmp_path / "n.npy", np.array([[0, 1], [1, -5], [-2, 0]], dtype=np.int64))
    with pytest.raises(InvalidIdError, match=r"n\.npy: row 2: negative node id -5"):
        ingest(tmp_path / "n.npy", tmp_path / "n.zarr")


# ---------------------------------------------------------------------------
# 3. sparse huge ids: refused at ingest, and by info / partition on an existing store
# ---------------------------------------------------------------------------
def test_sparse_huge_ids_refused_at_ingest(tmp_path, memory_8gib, capsys):
    src = write(tmp_path / "g.txt", "0 1\n5 3000000000\n3000000000 7\n")
    code, err = cli("ingest", src, tmp_path / "g.zarr", capsys=capsys)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "g.txt:2: node id 3000000000 makes 3000000001 nodes" in err and "--relabel" in err
    assert "8 GiB of memory available" in err
    assert not (tmp_path / "g.zarr").exists()
    # with --one-based the value is named as written
    with pytest.raises(InvalidIdError, match=r"o\.txt:2: node id 3000000000 makes 3000000000 nodes"):
        ingest(write(tmp_path / "o.txt", "1 2\n5 3000000000\n"), tmp_path / "o.zarr", one_based=True)
    assert ingest(src, tmp_path / "r.zarr", relabel=True).num_nodes == 5


def test_ids_justified_by_edges_or_memory_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 1 << 20)   # 1 MiB: 43690 nodes fit
    n = 100_000                                                                  # 2.4 MB of node state
    rng = np.random.default_rng(0)
    # dense enough (n <= 16 E): a real graph, only too big for this machine; ingest needs no node state
    e = rng.integers(0, n, size=(n // 16, 2))
    e[0] = (0, n - 1)
    np.save(tmp_path / "dense.npy", e)
    assert ingest(tmp_path / "dense.npy", tmp_path / "dense.zarr").num_nodes == n
    # too few edges for n: sparse ids, refused
    np.save(tmp_path / "few.npy", e[: n // 16 - 10])
    with pytest.raises(InvalidIdError, match=rf"few\.npy: row 1: node id {n - 1} makes {n} nodes \(the largest id \+ 1\) for"):
        ingest(tmp_path / "few.npy", tmp_path / "few.zarr")
    # sparse but small: fits in memory
    assert ingest(write(tmp_path / "s.txt", "0 40000\n"), tmp_path / "s.zarr").num_nodes == 40001
    # a declared node count is the user's choice: not refused at ingest (info refuses it, below)
    assert ingest(write(tmp_path / "d.txt", "0 1\n"), tmp_path / "d.zarr", num_nodes=10**10).num_nodes == 10**10


def test_threshold_passes_rmat_scale_26_on_24_gb(monkeypatch):
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 24 * 10**9)
    for per_node in (resources.INFO_BYTES_PER_NODE, resources.PARTITION_BYTES_PER_NODE):
        assert resources.node_state_shortfall(2**26, per_node) is None
        resources.check_node_state_fits(2**26, per_node, "partition", "rmat26.zarr")
    assert resources.node_state_shortfall(3 * 10**9, resources.INFO_BYTES_PER_NODE) is not None


def test_info_and_partition_refuse_huge_node_count(tmp_path, memory_8gib, capsys):
    store = tmp_path / "d.zarr"
    ingest(write(tmp_path / "d.txt", "0 1\n1 2\n"), store, num_nodes=3 * 10**9)
    for argv in (("info", store), ("partition", store, "-k", "2")):
        code, err = cli(*argv, capsys=capsys)
        assert code == 2, err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"{store}: {argv[0]}: 3000000000 nodes need at least" in err and "--relabel" in err


def test_available_memory_is_positive():
    assert 0 < resources.available_memory_bytes()


def _cgroup_file(root, *parts, text):
    path = root.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_memory_limits_v1_v2_and_their_ancestors_are_read(tmp_path):
    """Only /sys/fs/cgroup/memory.max (the v2 root) was read: a 250 MiB cgroup on a v1 host reported the
    machine's 22 GB, and the refusal that node state does not fit never came (the kernel killed the run)."""
    v1 = "12:memory:/kubepods/pod1/c1\n11:cpu,cpuacct:/kubepods/pod1/c1\n"
    _cgroup_file(tmp_path, "memory", "kubepods", "pod1", "c1", "memory.limit_in_bytes", text="9223372036854771712\n")
    _cgroup_file(tmp_path, "memory", "kubepods", "pod1", "memory.limit_in_bytes", text=f"{250 << 20}\n")
    _cgroup_file(tmp_path, "memory", "kubepods", "pod1", "memory.usage_in_bytes", text=f"{50 << 20}\n")
    assert resources.cgroup_memory_room(v1, str(tmp_path)) == 200 << 20   # the pod's, an ancestor's
    v2 = "0::/system.slice/run-u7.scope\n"   # systemd-run -p MemoryMax=: a nested v2 cgroup
    _cgroup_file(tmp_path, "system.slice", "run-u7.scope", "memory.max", text=f"{300 << 20}\n")
    _cgroup_file(tmp_path, "system.slice", "run-u7.scope", "memory.current", text=f"{100 << 20}\n")
    _cgroup_file(tmp_path, "system.slice", "memory.max", text="max\n")
    assert resources.cgroup_memory_room(v2, str(tmp_path)) == 200 << 20
    _cgroup_file(tmp_path, "memory.max", text=f"{150 << 20}\n")   # the root's (inside a container) tighter
    assert resources.cgroup_memory_room(v2, str(tmp_path)) == 150 << 20
    assert resources.cgroup_memory_room("0::/\n", str(tmp_path / "none")) is None


def test_an_address_space_limit_caps_the_available_memory():
    """`ulimit -v` (prlimit --as) was not seen either: the sizing took the machine's memory."""
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY)); "
            "from graphstream import _resources; print(_resources.available_memory_bytes())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 0 < int(out) < 3 << 30


# ---------------------------------------------------------------------------
# 4. halo global ids out of range before export pyg
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [-1, 60, 10**6])
def test_export_pyg_refuses_halo_global_id_out_of_range(tmp_path, bad):
    pytest.importorskip("torch")
    from test_export_pyg import toy_dataset

    from graphstream.export import check_global_ids, export
    from graphstream.store.partitions import open_partitions

    parts, _ = toy_dataset(tmp_path / "parts", num_nodes=60)
    dataset = open_partitions(parts)
    part = dataset[1]
    assert part.num_halo > 0
    path = part.path / "global_ids.npy"
    gids = np.load(path)
    gids[part.num_inner + part.num_halo - 1] = bad      # the last halo node
    np.save(path, gids)
    with pytest.raises(NodeDataError, match=rf"part 1: .*part-00001/global_ids\.npy: halo global id {bad} "
                                            r".*outside \[0, 60\)"):
        check_global_ids(open_partitions(parts)[1], 60)
    # end to end: refused before any output (a checksum error from the store layer is also acceptable)
    with pytest.raises(GraphStreamError, match=r"global_ids"):
        export(parts, tmp_path / "pyg", "pyg")
    assert not (tmp_path / "pyg").exists()


# ---------------------------------------------------------------------------
# 5. a line with no end
# ---------------------------------------------------------------------------
def test_line_without_newline_is_capped(tmp_path):
    head = b"0 1\n# comment\n1 2\n"
    src = write(tmp_path / "g.txt", head + b"7" * (2 * MAX_LINE_BYTES))
    for block in (64 << 10, 16 << 20):
        with pytest.raises(InputFormatError, match=rf"g\.txt:4: line starting at byte {len(head)} has no newline "
                                                   rf"within {MAX_LINE_BYTES} bytes"):
            ingest(src, tmp_path / "g.zarr", block_bytes=block)


def test_long_line_that_ends_within_the_cap_is_read(tmp_path):
    src = write(tmp_path / "g.txt", b"0 1" + b" " * (MAX_LINE_BYTES // 2) + b"\n1 2\n")
    assert ingest(src, tmp_path / "g.zarr", block_bytes=4096).num_edges == 2


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero(tmp_path, capsys):
    """A device is refused before it is read (it would be read forever; a line without an end in a regular
    file is capped: test_line_without_newline_is_capped)."""
    code, err = cli("ingest", "/dev/zero", tmp_path / "z.zarr", capsys=capsys)
    assert code == 2
    assert "/dev/zero: not a regular file" in err and err.count("\n") == 1


def test_pipe_and_fifo_inputs_are_refused_not_misread(tmp_path, capsys):
    """The input is sniffed, then parsed: a pipe gave 'no edges found (empty file...)' and a FIFO hung."""
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    code, err = cli("ingest", fifo, tmp_path / "f.zarr", capsys=capsys)   # returns: nothing opens the FIFO
    assert code == 2 and f"{fifo}: not a regular file" in err and "save it to a file first" in err
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"0 1\n1 2\n")
        code, err = cli("ingest", f"/dev/fd/{read_end}", tmp_path / "p.zarr", capsys=capsys)
        assert code == 2 and "not a regular file" in err
    finally:
        os.close(read_end)
        os.close(write_end)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ff"]


# ---------------------------------------------------------------------------
# 6. only a first line whose id columns are words is a header
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("first, options, match", [
    ("1 2x", {}, r"g\.txt:1: non-numeric destination id '2x'"),
    ("x1 2", {}, r"g\.txt:1: non-numeric source id 'x1'"),
    ("0 1 nan", {"time_column": 2}, r"g\.txt:1: time nan in column 2 is not a finite number"),
    ("0,1,abc", {"weight_column": 2}, r"g\.txt:1: cannot parse weight 'abc'"),
    ("0 1 nan", {"time_column": 2, "relabel": True}, r"g\.txt:1: time nan"),
])
def test_malformed_first_line_is_an_error(tmp_path, first, options, match):
    src = write(tmp_path / "g.txt", f"{first}\n3 4 5\n")
    with pytest.raises(InputFormatError, match=match):
        ingest(src, tmp_path / "g.zarr", **options)


@pytest.mark.parametrize("text, options", [
    ("src dst\n3 4\n", {}),
    ("# comment\nFromNodeId\tToNodeId\n3\t4\n", {}),
    ('"from","to","t"\n3,4,5\n', {"time_column": 2}),
    ("_a b w\n3 4 0.5\n", {"weight_column": 2}),
    ("src dst time\nalice bob 5\n", {"time_column": 2, "relabel": True}),
])
def test_word_headers_still_work(tmp_path, text, options):
    store = ingest(write(tmp_path / "g.txt", text), tmp_path / "g.zarr", **options)
    assert store.num_edges == 1 and store.attrs["ingest"]["header"] is True


# -- a store whose bytes are sound and whose ids are not ------------------------------------------

@pytest.fixture
def store_with_bad_id(tmp_path):
    """A generated store edited through zarr (which checksums what it is given): src[5] beyond num_nodes."""
    import zarr
    path = tmp_path / "oor.zarr"
    assert cli_main(["generate", "rmat", str(path), "--scale", "8", "--edge-factor", "4", "--chunk-size", "256"]) == 0
    zarr.open_array(str(path / "src"), mode="r+")[5] = 50_000
    return path


@pytest.mark.parametrize("algo", [["hash"], ["hash", "--hash-mode", "edge"], ["hdrf"], ["dbh"], ["spring"],
                                  ["2ps-l"], ["coarse-refine"]])
def test_every_partitioner_refuses_an_id_beyond_the_node_count(store_with_bad_id, tmp_path, capsys, algo):
    """hash and hdrf have no degree pass, where ids were checked: they crashed (SIGSEGV) or wrote a dataset
    that verified. Every read of the edges checks them now."""
    out = tmp_path / "parts"
    rc, err = cli("partition", store_with_bad_id, "-k", 2, "--algo", *algo, "--out", out, capsys=capsys)
    assert rc == 2 and "src[5] = 50000 (edge 5) is outside [0, 256)" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_verify_still_lists_the_bad_ids(store_with_bad_id, capsys):
    rc, err = cli("verify", store_with_bad_id, capsys=capsys)
    assert rc == 2 and "src[5] = 50000 is outside [0, 256)" in err


def test_snapshot_store_ids_are_checked_on_read(tmp_path, capsys):
    import zarr

    from graphstream import GraphWriter
    from graphstream.dynamic import build_snapshots
    rng = np.random.default_rng(0)
    with GraphWriter(tmp_path / "ev.zarr", with_time=True, chunk_size=512) as w:
        w.append(rng.integers(0, 100, 2000), rng.integers(0, 100, 2000), np.sort(rng.integers(0, 10_000, 2000)))
    build_snapshots(tmp_path / "ev.zarr", tmp_path / "s.zarr", num_snapshots=8, edge_life=2, keyframe_every=4)
    zarr.open_array(str(tmp_path / "s.zarr" / "add_src"), mode="r+")[3] = 10**6
    for algo in ("snapshot", "pgc", "sequence"):
        rc, err = cli("partition", tmp_path / "s.zarr", "-k", 2, "--algo", algo, capsys=capsys)
        assert rc == 2 and "add_src[3] = 1000000 is outside [0, 100)" in err, err
    rc, err = cli("verify", tmp_path / "s.zarr", capsys=capsys)
    assert rc == 2 and "add_src[3] = 1000000 is outside [0, 100)" in err


def test_numbers_beyond_what_the_kernels_hold_are_refused(tmp_path, capsys):
    """A seed past int64 reached numba ('Int value is too large'), an infinite balance int(); both tracebacks."""
    assert cli_main(["generate", "rmat", str(tmp_path / "g.zarr"), "--scale", "6"]) == 0
    capsys.readouterr()
    for algo in ("coarse-refine", "hash", "2ps-l", "dbh"):
        rc, err = cli("partition", tmp_path / "g.zarr", "-k", 2, "--algo", algo, "--seed", 2**64, capsys=capsys)
        assert rc == 2 and "seed must be an integer in [0, 2**63)" in err, (algo, err)
    for algo in ("coarse-refine", "2ps-l"):
        rc, err = cli("partition", tmp_path / "g.zarr", "-k", 2, "--algo", algo, "--balance", "inf", capsys=capsys)
        assert rc == 2 and "balance must be a finite number >= 1.0, got inf" in err, (algo, err)


def test_an_algorithm_flag_is_refused_by_the_flag_a_user_typed(tmp_path, capsys):
    """`--lambda 2` with coarse-refine said "unknown parameter(s) ['lam']"; `--algo spring --edge-balance 1.1`
    named tau_factor and beta, which have no flag; out-of-range values named lam and edge_balance."""
    assert cli_main(["generate", "rmat", str(tmp_path / "g.zarr"), "--scale", "6"]) == 0
    capsys.readouterr()
    for flags, said in (
            (("--lambda", 2), "--lambda does not apply to --algo coarse-refine (its own flags: --passes, "
                              "--edge-balance, --preset"),
            (("--algo", "spring", "--edge-balance", 1.1), "--edge-balance does not apply to --algo spring "
                                                          "(its own flags: --tau;"),
            (("--algo", "dbh", "--passes", 2), "--passes does not apply to --algo dbh (its own flags: none;"),
            (("--algo", "hdrf", "--lambda", -1), "--lambda -1.0: expected a finite number >= 0 (--algo hdrf)"),
            (("--edge-balance", 0.5), "--edge-balance 0.5: expected 0 (no cap on the entries) or a finite"),
            (("--passes", -1), "--passes -1: expected a whole number >= 0")):
        rc, err = cli("partition", tmp_path / "g.zarr", "-k", 2, *flags, capsys=capsys)
        assert rc == 2 and said in err, (flags, err)


def test_a_window_wider_than_the_time_span_is_one_snapshot(tmp_path):
    from graphstream.dynamic.snapshots import WindowSpec
    spec = WindowSpec.make(100, 5_000, 1e23, None)
    assert spec.num_windows == 1 and spec.index(np.array([100, 5_000])).tolist() == [0, 0]
    assert spec.seconds == 1e23   # the window asked for is recorded (it said 4901, the span + 1)


def test_num_snapshots_over_a_nanosecond_year():
    """A year in nanoseconds cut into 1000 snapshots was refused ("overflows int64 window arithmetic")
    although W = 3.15e13 ns: the index is exact without forming time * a, boundaries included."""
    from graphstream.dynamic.snapshots import WindowSpec
    t0, span, num = 1_700_000_000 * 10**9, 365 * 86400 * 10**9, 1000
    spec = WindowSpec.make(t0, t0 + span, None, num)
    starts = [t0 + -(-t * (span + 1) // num) for t in range(num)]   # ceil(t * W), Python integers
    x = np.array(sorted({t0, t0 + span, *starts, *(s - 1 for s in starts[1:])}), dtype=np.int64)
    want = [(int(v) - t0) * num // (span + 1) for v in x]
    assert spec.index(x).tolist() == want and want[-1] == num - 1


def test_flags_that_contradict_each_other_are_refused(tmp_path, capsys):
    assert cli_main(["generate", "rmat", str(tmp_path / "g.zarr"), "--scale", "6"]) == 0
    capsys.readouterr()
    rc, err = cli("partition", tmp_path / "g.zarr", "-k", 2, "--gpus", 2, "--gpu-memory", 10**9, capsys=capsys)
    assert rc == 2 and "not both" in err
    rc, err = cli("estimate", tmp_path / "g.zarr", "-k", 5000, capsys=capsys)
    assert rc == 2 and "k must be in [1, 1024], got 5000" in err
    rc, err = cli("dataset", "cora", tmp_path / "c", "--target", "partner", capsys=capsys)
    assert rc == 2 and "Twitch datasets' label only" in err and not (tmp_path / "c").exists()


def test_write_errors_other_than_a_full_disk_are_one_line(tmp_path):
    """A file size limit (EFBIG) and numpy's short write (no errno) gave tracebacks, exit 1."""
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
    for argv in (["generate", "rmat", str(tmp_path / "u.zarr"), "--scale", "16", "--chunk-size", "65536"],):
        run = subprocess.run([sys.executable, "-m", "graphstream", *argv], capture_output=True, text=True,
                             preexec_fn=limit, timeout=300)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        # named: the limit and the output (it said "I/O error: [Errno 27] File too large", no path)
        assert "file size limit (65,536 bytes; ulimit -f)" in lines[-1] and "nothing was written" in lines[-1]
        assert str(tmp_path / "u.zarr") in lines[-1], lines[-1]
        assert not (tmp_path / "u.zarr").exists()


@pytest.mark.parametrize("text, name", [
    (b"".join(b"%d %d\r" % (i, i + 1) for i in range(10_000)), "mac.txt"),
    (b"0\t1\r1\t2\r2\t3\r", "mac.tsv"),
    (b"0,1\r999\n", "cr.csv"),
])
def test_old_mac_line_endings_are_refused(tmp_path, capsys, text, name):
    """Lines ended by a lone CR were read as one line: one edge stored of 10,000, exit 0."""
    (tmp_path / name).write_bytes(text)
    for extra in ((), ("--relabel",), ("--workers", "2")):
        code, err = cli("ingest", tmp_path / name, tmp_path / "g.zarr", *extra, capsys=capsys)
        assert code == 2 and f"{name}:1: a carriage return (\\r) ends the line" in err, (extra, err)
        assert not (tmp_path / "g.zarr").exists()


@pytest.mark.parametrize("text, name", [
    ("src,dst\r" + "".join(f"{i},{i + 1}\r" for i in range(1000)), "hdr.csv"),
    ("# a comment\r0 1\r1 2\r", "cm.txt"),
])
def test_old_mac_line_endings_after_a_header_or_comment_are_named(tmp_path, capsys, text, name):
    """The header or comment line took the whole file: "no edges found", which sent the user the wrong way."""
    (tmp_path / name).write_bytes(text.encode())
    for extra in ((), ("--workers", "2")):
        code, err = cli("ingest", tmp_path / name, tmp_path / "g.zarr", *extra, capsys=capsys)
        assert code == 2 and f"{name}:1: a carriage return (\\r) ends the line" in err, (extra, err)


def test_a_header_ended_by_cr_and_blanks_is_not_called_a_lone_cr(tmp_path, capsys):
    """The kernel reads "\\r \\n" as a line end; the no-edges message called it old Mac line endings."""
    (tmp_path / "h.csv").write_bytes(b"src,dst\r \n# nothing else\r\t\r\n")
    code, err = cli("ingest", tmp_path / "h.csv", tmp_path / "g.zarr", capsys=capsys)
    assert code == 2 and "no edges found" in err and "carriage return" not in err, err


def test_crlf_and_trailing_carriage_returns_still_read(tmp_path):
    (tmp_path / "e.txt").write_bytes(b"0 1\r\n1 2\r\r\n2 3 \r\n3 4\r")
    assert ingest(tmp_path / "e.txt", tmp_path / "g.zarr").num_edges == 4


@pytest.mark.parametrize("args, said", [
    (("ingest", "{e}", "{out}", "--chunk-size", str(1 << 40)), "--chunk-size must be in [1, 16777216]"),
    (("generate", "rmat", "{out}", "--scale", "4", "--chunk-size", str(1 << 40)), "--chunk-size must be in [1, 16777216]"),
    (("generate", "rmat", "{out}", "--scale", "64"), "scale must be an integer in [1, 48], got 64"),
    (("generate", "rmat", "{out}", "--scale", "6", "--seed", str(2**64)), "seed must be an integer in [0, 2**64)"),
])
def test_generate_and_ingest_bounds_are_named(tmp_path, capsys, args, said):
    """A chunk of 2^40 edges was a 4 TiB allocation (a traceback, exit 1), 10^9 a codec error after 8 GB;
    --scale 64 was refused as needing 3e17 TB of disk; --seed 2^64 made seed 0's graph under its own name."""
    e = tmp_path / "e.txt"
    e.write_text("0 1\n")
    code, err = cli(*(a.format(e=e, out=tmp_path / "g.zarr") for a in args), capsys=capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "g.zarr").exists()


def test_relabelled_ids_that_are_not_utf8_stay_distinct(tmp_path):
    """Latin-1 'José' and 'Josè' became two nodes whose id_map entries both read 'Jos\\ufffd'."""
    import zarr
    (tmp_path / "lat.txt").write_bytes(b"Jos\xe9 a\nJos\xe8 a\n")
    ingest(tmp_path / "lat.txt", tmp_path / "g.zarr", relabel=True)
    assert list(zarr.open_group(tmp_path / "g.zarr", mode="r")["id_map"][:]) == ["Jos\\xe9", "a", "Jos\\xe8"]
    # an escape that reads as another id written out: refused, not an id_map with one name twice
    (tmp_path / "clash.txt").write_bytes(b"Jos\xe9 a\nJos\\xe9 a\n")
    with pytest.raises(InputFormatError, match="not UTF-8 text"):
        ingest(tmp_path / "clash.txt", tmp_path / "c.zarr", relabel=True)
    assert not (tmp_path / "c.zarr").exists()


def test_float32s_largest_weight_is_read_as_written(tmp_path):
    """'3.4028235e+38', numpy's own print of float32's largest, was refused as out of range in text
    (parquet took it): the limit is where a number rounds to inf, not float32's largest as a double."""
    import zarr
    (tmp_path / "w.txt").write_text("0 1 3.4028235e38\n1 2 3.4028234663852886e+38\n2 3 -3.4028235e38\n")
    ingest(tmp_path / "w.txt", tmp_path / "g.zarr", weight_column=2)
    w = zarr.open_group(tmp_path / "g.zarr", mode="r")["weight"][:]
    assert list(w) == [np.finfo(np.float32).max] * 2 + [-np.finfo(np.float32).max]
    (tmp_path / "big.txt").write_text("0 1 3.41e38\n")
    with pytest.raises(InputFormatError, match="out of range"):
        ingest(tmp_path / "big.txt", tmp_path / "b.zarr", weight_column=2)


@pytest.mark.parametrize("head, name", [(b"\x28\xb5\x2f\xfd\x00\x00", "zstd"), (b"PK\x03\x04\x00\x00", "zip")])
def test_a_compressor_that_is_not_read_is_named(tmp_path, capsys, head, name):
    """A zstd file was parsed as text: "non-numeric source id '(\\ufffd/\\ufffd...'"."""
    (tmp_path / "e.bin").write_bytes(head + b"0 1\n" * 4)
    code, err = cli("ingest", tmp_path / "e.bin", tmp_path / "g.zarr", capsys=capsys)
    assert code == 2 and f"e.bin: a {name} file; text is read plain or compressed with gzip, bzip2 or xz" in err


def test_num_nodes_is_named_as_its_flag(tmp_path, capsys):
    (tmp_path / "e.txt").write_text("0 1\n")
    code, err = cli("ingest", tmp_path / "e.txt", tmp_path / "g.zarr", "--num-nodes", "-1", capsys=capsys)
    assert code == 2 and "--num-nodes must be >= 0, got -1" in err


@pytest.mark.parametrize("error", [MemoryError("Unable to allocate 1.00 GiB for an array with shape (134217728,)"),
                                   RuntimeError("can't start new thread"), OSError(12, "Cannot allocate memory"),
                                   OSError("Could not find/load shared object file 'libllvmlite.so' from resource "
                                           "location: 'llvmlite.binding'")])
def test_running_out_of_memory_is_one_line_exit_2(capsys, monkeypatch, error):
    """A MemoryError (numcodecs, numpy's _ArrayMemoryError), a thread that could not start, and ENOMEM were
    tracebacks with exit 1, and ENOMEM an "I/O error" (prlimit --as and a cgroup's limit, several commands)."""
    import graphstream.commands.info as info

    def run(args):
        raise error
    monkeypatch.setattr(info, "run", run)
    code, err = cli("info", "whatever.zarr", capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    line = err.strip()
    if isinstance(error, RuntimeError):
        assert "cannot start a thread" in line and "ulimit -u" in line
    elif isinstance(error, OSError) and error.errno is None:   # numba's LLVM could not be mapped under ulimit -v: an "I/O error" it was not
        assert "could not load a library" in line and "ulimit -v" in line and "I/O error" not in line
    else:
        assert line.startswith("graphstream info: error: out of memory") and "nothing was written" in line
        assert "I/O error" not in line and ("1.00 GiB" in line) == isinstance(error, MemoryError)


def test_other_runtime_errors_are_not_taken_for_memory(capsys, monkeypatch):
    import graphstream.commands.info as info

    def run(args):
        raise RuntimeError("a bug")
    monkeypatch.setattr(info, "run", run)
    with pytest.raises(RuntimeError, match="a bug"):
        cli("info", "whatever.zarr", capsys=capsys)
