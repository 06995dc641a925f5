"""Ingest of edge files: formats, options, relabelling, bad input, and the CLI."""
from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from graphstream.cli import main as cli_main
from graphstream.errors import (
    IncompleteStoreError,
    InputFormatError,
    InputNotFoundError,
    InvalidIdError,
    OutputExistsError,
)
from graphstream.ingest import ingest
from graphstream.ingest.pipeline import detect_format
from graphstream.store import open_store

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
NOTREDAME = DATASETS / "snap" / "web-NotreDame.txt.gz"
COLLEGE = DATASETS / "temporal" / "CollegeMsg.txt"
BITCOIN = DATASETS / "temporal" / "soc-sign-bitcoinotc.csv"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared dataset {path} not present")
    return path


def columns(store) -> dict[str, np.ndarray]:
    return {c: store.array(c)[:] for c in store.columns}


def reference_parse(text: str, sep=None, skip_header=False) -> np.ndarray:
    """Slow, independent reference: Python string splitting, line by line."""
    rows = []
    lines = text.splitlines()
    seen_data = False
    for line in lines:
        s = line.strip()
        if not s or s[0] in "#%":
            continue
        if skip_header and not seen_data:
            seen_data = True
            continue
        seen_data = True
        fields = s.replace(",", " ").split() if sep is None else [f.strip() for f in s.split(sep)]
        rows.append([int(f) for f in fields[:2]])
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------
# text formats
# ---------------------------------------------------------------------------
def test_snap_text_matches_reference(tmp_path):
    rng = np.random.default_rng(0)
    e = rng.integers(0, 1000, size=(5000, 2))
    seps = ["\t", " ", "  \t ", ",", " , "]
    lines = ["# comment", "% other comment", ""]
    for i, (a, b) in enumerate(e):
        lines.append(f"{a}{seps[i % len(seps)]}{b}")
        if i % 97 == 0:
            lines.append("   # indented comment")
        if i % 89 == 0:
            lines.append("")
    text = "\r\n".join(lines[:2000]) + "\n" + "\n".join(lines[2000:])  # mixed line endings, no final newline
    src = write(tmp_path / "g.txt", text)
    store = ingest(src, tmp_path / "g.zarr")
    ref = reference_parse(text)
    assert store.num_edges == len(ref) == 5000
    assert store.num_nodes == int(ref.max()) + 1
    assert store.directed
    cols = columns(store)
    np.testing.assert_array_equal(cols["src"], ref[:, 0])
    np.testing.assert_array_equal(cols["dst"], ref[:, 1])
    assert cols["src"].dtype == np.int32
    assert store.source == str(src)
    assert store.attrs["complete"] is True


def test_block_and_chunk_size_do_not_change_the_store(tmp_path):
    rng = np.random.default_rng(1)
    e = rng.integers(0, 50_000, size=(20_000, 3))
    text = "# header comment\n" + "".join(f"{a}\t{b}\t{t}\n" for a, b, t in e)
    src = write(tmp_path / "g.txt", text)
    ref = None
    for i, (chunk, block, rows) in enumerate([(1 << 20, 16 << 20, 1 << 20), (1000, 64, 7),
                                              (4096, 1000, 333), (777, 1 << 12, 5000)]):
        store = ingest(src, tmp_path / f"g{i}.zarr", time_column=2, chunk_size=chunk, block_bytes=block,
                       rows_per_block=rows)
        assert store.chunk_size == chunk
        cols = columns(store)
        if ref is None:
            ref = cols
            np.testing.assert_array_equal(cols["src"], e[:, 0])
            np.testing.assert_array_equal(cols["time"], e[:, 2])
        for c in ref:
            np.testing.assert_array_equal(cols[c], ref[c])


@pytest.mark.parametrize("opener,suffix", [(gzip.open, ".gz"), (bz2.open, ".bz2"), (lzma.open, ".xz")])
def test_compressed_inputs(tmp_path, opener, suffix):
    text = "".join(f"{i} {(i * 7) % 100}\n" for i in range(1000))
    path = tmp_path / f"g.txt{suffix}"
    with opener(path, "wt") as f:
        f.write(text)
    store = ingest(path, tmp_path / "g.zarr", block_bytes=999)
    ref = reference_parse(text)
    np.testing.assert_array_equal(store.array("dst")[:], ref[:, 1])
    assert store.num_nodes == 1000


def test_one_based_and_undirected(tmp_path):
    src = write(tmp_path / "g.txt", "1 2\n2 3\n3 1\n")
    store = ingest(src, tmp_path / "g.zarr", one_based=True, undirected=True)
    assert store.num_nodes == 3 and not store.directed
    np.testing.assert_array_equal(store.array("src")[:], [0, 1, 2])
    np.testing.assert_array_equal(store.array("dst")[:], [1, 2, 0])


def test_num_nodes_declared_and_isolated(tmp_path):
    src = write(tmp_path / "g.txt", "0 1\n1 2\n")
    store = ingest(src, tmp_path / "g.zarr", num_nodes=10)
    assert store.num_nodes == 10


def test_time_and_weight_columns_and_floats(tmp_path):
    src = write(tmp_path / "g.csv", "a,b,w,t\n0,1,0.5,100\n1,2,-2e-1,101.9\n2,0,3,\"102\"\n")
    store = ingest(src, tmp_path / "g.zarr", time_column=3, weight_column=2)
    cols = columns(store)
    np.testing.assert_array_equal(cols["time"], [100, 101, 102])
    assert cols["time"].dtype == np.int64 and cols["weight"].dtype == np.float32
    np.testing.assert_array_equal(cols["weight"], np.array([0.5, -0.2, 3.0], dtype=np.float32))
    assert store.attrs["ingest"]["header"] is True


def test_header_detection_and_column_names(tmp_path):
    text = "weight,to,from\n0.5,1,0\n1.5,2,1\n"
    src = write(tmp_path / "g.csv", text)
    store = ingest(src, tmp_path / "a.zarr", src_column="from", dst_column="to", weight_column="weight")
    np.testing.assert_array_equal(store.array("src")[:], [0, 1])
    np.testing.assert_array_equal(store.array("dst")[:], [1, 2])
    np.testing.assert_array_equal(store.array("weight")[:], [0.5, 1.5])
    # no header: the first line is data
    src2 = write(tmp_path / "h.csv", "5,6\n7,8\n")
    assert ingest(src2, tmp_path / "b.zarr").num_edges == 2
    # header forced off: a non-numeric first line is an error naming line 1
    with pytest.raises(InvalidIdError, match=r"g\.csv:1: non-numeric"):
        ingest(src, tmp_path / "c.zarr", header="no", src_column=2, dst_column=1)
    # forced on: the first data line is skipped
    assert ingest(src2, tmp_path / "d.zarr", header="yes").num_edges == 1
    # SNAP-style: comments then a header line
    src3 = write(tmp_path / "s.txt", "# c\nFromNodeId\tToNodeId\n0\t1\n")
    assert ingest(src3, tmp_path / "e.zarr").num_edges == 1


def test_explicit_delimiters_and_quotes(tmp_path):
    src = write(tmp_path / "g.txt", '"0";"1"\n 2 ; 3 \n')
    store = ingest(src, tmp_path / "g.zarr", delimiter=";")
    np.testing.assert_array_equal(store.array("src")[:], [0, 2])
    np.testing.assert_array_equal(store.array("dst")[:], [1, 3])
    tsv = write(tmp_path / "g.tsv", "0\t\t1\n")  # empty middle field under tsv
    store = ingest(tsv, tmp_path / "t.zarr", src_column=0, dst_column=2)
    np.testing.assert_array_equal(store.array("dst")[:], [1])


def test_detect_format(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros((1, 2), dtype=np.int32))
    assert detect_format(tmp_path / "e.npy") == "npy"
    assert detect_format(write(tmp_path / "x.csv.gz", "")) == "csv"
    assert detect_format(write(tmp_path / "x.tsv", "")) == "tsv"
    assert detect_format(write(tmp_path / "x.txt", "")) == "snap"


# ---------------------------------------------------------------------------
# relabel
# ---------------------------------------------------------------------------
def _first_seen(pairs) -> dict:
    ids = {}
    for a, b in pairs:
        for x in (a, b):
            ids.setdefault(x, len(ids))
    return ids


def test_relabel_sparse_64bit_ids_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    pool = np.concatenate([rng.integers(-2**62, 2**62, 3000), [2**63 - 1, -2**63 + 1, 0]])
    e = pool[rng.integers(0, len(pool), size=(20_000, 2))]
    src = write(tmp_path / "g.txt", "".join(f"{a} {b}\n" for a, b in e))
    store = ingest(src, tmp_path / "g.zarr", relabel=True, block_bytes=4096, rows_per_block=1000)
    ref = _first_seen(e.tolist())
    assert store.num_nodes == len(ref)
    id_map = store.id_map()
    assert id_map.dtype == np.int64
    np.testing.assert_array_equal(id_map, np.array(list(ref), dtype=np.int64))
    np.testing.assert_array_equal(id_map[store.array("src")[:]], e[:, 0])
    np.testing.assert_array_equal(id_map[store.array("dst")[:]], e[:, 1])
    assert store.info.has_id_map


def test_relabel_string_ids_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    names = [f"user_{i}" for i in range(500)] + ["ünïcode", "x", "a b"]
    e = [(names[i], names[j]) for i, j in rng.integers(0, len(names), size=(5000, 2))]
    text = "src\tdst\n" + "".join(f"{a}\t{b}\n" for a, b in e)
    src = write(tmp_path / "g.tsv", text)
    store = ingest(src, tmp_path / "g.zarr", relabel=True, header="yes", block_bytes=1000,
                   rows_per_block=100)
    ref = _first_seen(e)
    id_map = store.id_map()
    assert list(id_map) == list(ref)
    got = list(zip(id_map[store.array("src")[:]], id_map[store.array("dst")[:]]))
    assert got == e


def test_relabel_switches_to_strings_late(tmp_path):
    lines = [f"{i} {i + 1}" for i in range(3000)] + ["alice 5", "5 bob"]
    src = write(tmp_path / "g.txt", "\n".join(lines) + "\n")
    store = ingest(src, tmp_path / "g.zarr", relabel=True, block_bytes=512)
    id_map = store.id_map()
    assert id_map.dtype.kind in "UTO"  # str: numpy's StringDType with numpy 2
    assert [str(x) for x in id_map[store.array("src")[:]][-2:]] == ["alice", "5"]
    assert store.num_nodes == 3003


def test_relabel_num_nodes_too_small(tmp_path):
    src = write(tmp_path / "g.txt", "10 20\n30 40\n")
    with pytest.raises(InvalidIdError, match="4 distinct ids"):
        ingest(src, tmp_path / "g.zarr", relabel=True, num_nodes=3)
    assert not (tmp_path / "g.zarr").exists()


def test_relabel_num_nodes_larger_than_the_ids_is_refused_before_publishing(tmp_path):
    """The store used to be published with 100 nodes and an id_map of 4, then refused by every command."""
    src = write(tmp_path / "g.txt", "10 20\n30 40\n")
    with pytest.raises(InvalidIdError, match="--num-nodes 100 with --relabel, but the edges hold 4 distinct ids"):
        ingest(src, tmp_path / "g.zarr", relabel=True, num_nodes=100)
    assert not (tmp_path / "g.zarr").exists() and list(tmp_path.iterdir()) == [src]
    assert ingest(src, tmp_path / "g.zarr", relabel=True, num_nodes=4).num_nodes == 4


# ---------------------------------------------------------------------------
# npy and parquet
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_npy(tmp_path, dtype):
    rng = np.random.default_rng(4)
    e = rng.integers(0, 3000, size=(10_000, 2)).astype(dtype)
    np.save(tmp_path / "e.npy", e)
    store = ingest(tmp_path / "e.npy", tmp_path / "g.zarr", rows_per_block=777, chunk_size=1000)
    np.testing.assert_array_equal(store.array("src")[:], e[:, 0])
    np.testing.assert_array_equal(store.array("dst")[:], e[:, 1])
    assert store.num_nodes == int(e.max()) + 1
    assert store.attrs["ingest"]["format"] == "npy"


def test_npy_bad_dtype_and_shape(tmp_path):
    np.save(tmp_path / "f.npy", np.zeros((3, 2), dtype=np.float64))
    with pytest.raises(InputFormatError, match="integer array.*float64"):
        ingest(tmp_path / "f.npy", tmp_path / "g.zarr")
    np.save(tmp_path / "v.npy", np.zeros(3, dtype=np.int64))
    with pytest.raises(InputFormatError, match="2-D"):
        ingest(tmp_path / "v.npy", tmp_path / "g.zarr")
    np.save(tmp_path / "n.npy", np.array([[0, 1], [2, -1]], dtype=np.int64))
    with pytest.raises(InvalidIdError, match="row 2: negative"):
        ingest(tmp_path / "n.npy", tmp_path / "g.zarr")
    assert not (tmp_path / "g.zarr").exists()


def test_parquet(tmp_path):
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # the parquet extra is optional
        pytest.skip(f"pyarrow not usable: {exc}")
    rng = np.random.default_rng(5)
    e = rng.integers(0, 100, size=(3000, 2))
    t = rng.integers(0, 10**9, size=3000)
    pq.write_table(pa.table({"t": t, "u": e[:, 0], "v": e[:, 1]}), tmp_path / "e.parquet", row_group_size=500)
    store = ingest(tmp_path / "e.parquet", tmp_path / "g.zarr", src_column="u", dst_column="v", time_column="t",
                   rows_per_block=256)
    np.testing.assert_array_equal(store.array("src")[:], e[:, 0])
    np.testing.assert_array_equal(store.array("time")[:], t)
    # strings need --relabel
    names = np.array([f"n{i}" for i in range(50)])
    pq.write_table(pa.table({"a": names[e[:, 0] % 50], "b": names[e[:, 1] % 50]}), tmp_path / "s.parquet")
    with pytest.raises(InvalidIdError, match="relabel"):
        ingest(tmp_path / "s.parquet", tmp_path / "s.zarr")
    store = ingest(tmp_path / "s.parquet", tmp_path / "s.zarr", relabel=True)
    id_map = store.id_map()
    np.testing.assert_array_equal(id_map[store.array("src")[:]], names[e[:, 0] % 50])


# ---------------------------------------------------------------------------
# bad input: a specific exception, a message naming the problem, no complete-looking store
# ---------------------------------------------------------------------------
def assert_no_store(path: Path) -> None:
    if path.exists():
        with pytest.raises(IncompleteStoreError):
            open_store(path)
    siblings = [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]
    assert not siblings, siblings


@pytest.mark.parametrize("text,exc,pattern", [
    ("0 1\n2\n", InputFormatError, r"g\.txt:2: malformed line: expected at least 2 fields.*found 1"),
    ("# c\n0 1\n\n1 x7\n", InvalidIdError, r"g\.txt:4: non-numeric destination id 'x7'"),
    ("0 1\n-3 1\n", InvalidIdError, r"g\.txt:2: negative source id -3"),
    ("0 1\n1 99999999999999999999\n", InvalidIdError, r"g\.txt:2: .*does not fit a 64-bit"),
    ("", InputFormatError, r"g\.txt: no edges found"),
    ("# only\n# comments\n\n", InputFormatError, r"no edges found"),
    ("0 1\n1 2.5\n", InvalidIdError, r"g\.txt:2: non-numeric destination id '2\.5'"),
])
def test_bad_text(tmp_path, text, exc, pattern):
    src = write(tmp_path / "g.txt", text)
    out = tmp_path / "g.zarr"
    with pytest.raises(exc, match=pattern):
        ingest(src, out)
    assert_no_store(out)


def test_bad_line_number_across_blocks(tmp_path):
    lines = [f"{i} {i + 1}" for i in range(10_000)]
    lines[7777] = "12 oops"
    src = write(tmp_path / "g.txt", "# head\n" + "\n".join(lines) + "\n")
    with pytest.raises(InvalidIdError, match=r"g\.txt:7779: non-numeric"):
        ingest(src, tmp_path / "g.zarr", block_bytes=1000, rows_per_block=333)


def test_ids_beyond_num_nodes(tmp_path):
    src = write(tmp_path / "g.txt", "0 1\n2 10\n")
    with pytest.raises(InvalidIdError, match=r"g\.txt:2: destination id 10 .*beyond the declared node count 10"):
        ingest(src, tmp_path / "g.zarr", num_nodes=10)
    with pytest.raises(InvalidIdError, match=r"g\.txt:1: source id 0 .*below 1 with --one-based"):
        ingest(src, tmp_path / "g.zarr", one_based=True)
    assert_no_store(tmp_path / "g.zarr")


def test_one_based_with_relabel_refused(tmp_path, capsys):
    """relabel numbers ids from 0 whatever their base: --one-based would be ignored."""
    src = write(tmp_path / "g.txt", "1 2\n2 3\n")
    rc, _out, err = run_cli(["ingest", src, tmp_path / "g.zarr", "--relabel", "--one-based"], capsys)
    assert rc == 2 and "--one-based does not apply with --relabel" in err
    assert_no_store(tmp_path / "g.zarr")


def test_truncated_gzip(tmp_path):
    data = gzip.compress("".join(f"{i} {i + 1}\n" for i in range(100_000)).encode())
    src = tmp_path / "g.txt.gz"
    src.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputFormatError, match=r"g\.txt\.gz: compressed data is truncated"):
        ingest(src, tmp_path / "g.zarr")
    assert_no_store(tmp_path / "g.zarr")


def test_gzip_padded_with_zero_bytes_is_read(tmp_path):
    """gzip and the standard library read a member padded with zeros (tape blocks); pyarrow's reader
    called it corrupt, exit 2."""
    src = tmp_path / "g.txt.gz"
    src.write_bytes(gzip.compress(b"0 1\n1 2\n2 3\n") + bytes(512))
    assert ingest(src, tmp_path / "g.zarr").num_edges == 3
    src.write_bytes(gzip.compress(b"0 1\n") + b"\x00\x07")   # not padding: still refused
    with pytest.raises(InputFormatError, match=r"g\.txt\.gz: compressed data is corrupt"):
        ingest(src, tmp_path / "h.zarr")


def test_missing_file(tmp_path):
    with pytest.raises(InputNotFoundError, match="nope.txt: no such file"):
        ingest(tmp_path / "nope.txt", tmp_path / "g.zarr")
    assert_no_store(tmp_path / "g.zarr")


def test_output_exists(tmp_path):
    src = write(tmp_path / "g.txt", "0 1\n")
    out = tmp_path / "g.zarr"
    ingest(src, out)
    write(src, "0 1\n1 2\n")
    with pytest.raises(OutputExistsError, match="exists"):
        ingest(src, out)
    assert open_store(out).num_edges == 1
    assert ingest(src, out, overwrite=True).num_edges == 2


def test_failed_overwrite_keeps_the_old_store(tmp_path):
    out = tmp_path / "g.zarr"
    ingest(write(tmp_path / "a.txt", "0 1\n"), out)
    with pytest.raises(InvalidIdError):
        ingest(write(tmp_path / "b.txt", "0 1\n-1 2\n"), out, overwrite=True)
    assert open_store(out).num_edges == 1


@pytest.mark.parametrize("exc_type", [RuntimeError, KeyboardInterrupt])
def test_interrupted_write(tmp_path, monkeypatch, exc_type):
    """An exception in the middle of the ingest leaves no complete-looking store."""
    from graphstream.store import GraphWriter
    calls = {"n": 0}
    real_append = GraphWriter.append

    def failing_append(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise exc_type("boom")
        return real_append(self, *a, **k)

    monkeypatch.setattr(GraphWriter, "append", failing_append)
    src = write(tmp_path / "g.txt", "".join(f"{i} {i + 1}\n" for i in range(5000)))
    with pytest.raises(exc_type):
        ingest(src, tmp_path / "g.zarr", rows_per_block=1000, chunk_size=500)
    assert calls["n"] == 3
    assert_no_store(tmp_path / "g.zarr")


def test_sigkill_mid_ingest_leaves_nothing_valid(tmp_path):
    """A process killed mid-write leaves no OUT and a hidden partial store that open_store refuses."""
    src = write(tmp_path / "g.txt", "".join(f"{i} {i + 1}\n" for i in range(5000)))
    out = tmp_path / "g.zarr"
    code = f"""
import os, signal
from graphstream.store import GraphWriter
from graphstream.ingest import ingest
real = GraphWriter.append
calls = []
def append(self, *a, **k):
    calls.append(1)
    if len(calls) == 3:
        self._wait()
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, *a, **k)
GraphWriter.append = append
ingest({str(src)!r}, {str(out)!r}, rows_per_block=1000, chunk_size=500)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    assert not out.exists()
    partial = [p for p in tmp_path.iterdir() if p.name.startswith(".g.zarr.tmp-")]
    assert len(partial) == 1
    assert zarr.open_group(str(partial[0]), mode="r")["src"].shape[0] == 2000  # two blocks were written
    with pytest.raises(IncompleteStoreError, match="incomplete"):
        open_store(partial[0])


def test_killed_write_is_refused(tmp_path):
    """A writer that never closes (a killed process) leaves a store open_store refuses."""
    from graphstream.store import GraphWriter
    w = GraphWriter(tmp_path / "k.zarr", chunk_size=10)
    w.append(np.arange(100), np.arange(100))
    w._wait()
    assert not (tmp_path / "k.zarr").exists()   # written into a hidden sibling until close()
    with pytest.raises(IncompleteStoreError, match="incomplete"):
        open_store(next(tmp_path.glob(".k.zarr.tmp-*")))
    w.abort()


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------
def run_cli(args, capsys) -> tuple[int, str, str]:
    rc = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_json(tmp_path, capsys):
    src = write(tmp_path / "g.csv", "s,d,t\n1,2,10\n2,3,11\n")
    rc, out, err = run_cli(["ingest", src, tmp_path / "g.zarr", "--one-based", "--time-column", "2",
                            "--chunk-size", "4", "--json"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    for key in ("num_nodes", "num_edges", "directed", "path", "seconds", "edges_per_second", "peak_rss_bytes"):
        assert key in res
    assert res["num_nodes"] == 3 and res["num_edges"] == 2 and res["directed"] is True and res["has_time"]
    assert res["chunk_size"] == 4


@pytest.mark.parametrize("case", ["malformed", "negative", "nonnumeric", "beyond", "empty", "truncated",
                                  "missing", "exists", "npyfloat"])
def test_cli_bad_input_exit_2(tmp_path, capsys, case):
    out = tmp_path / "g.zarr"
    extra = []
    src = tmp_path / "g.txt"
    if case == "malformed":
        write(src, "0 1\n0\n")
    elif case == "negative":
        write(src, "0 -1\n")
    elif case == "nonnumeric":
        write(src, "a b\n0 1\nc 1\n")
    elif case == "beyond":
        write(src, "0 5\n")
        extra = ["--num-nodes", "5"]
    elif case == "empty":
        write(src, "")
    elif case == "truncated":
        src = tmp_path / "g.txt.gz"
        src.write_bytes(gzip.compress(b"0 1\n" * 1000)[:30])
    elif case == "missing":
        src = tmp_path / "missing.txt"
    elif case == "exists":
        write(src, "0 1\n")
        out.mkdir()
    elif case == "npyfloat":
        src = tmp_path / "e.npy"
        np.save(src, np.zeros((2, 2)))
    rc, stdout, err = run_cli(["ingest", src, out, *extra], capsys)
    assert rc == 2
    assert stdout == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphstream ingest: error: ")
    assert str(src.name) in lines[0] or case == "exists"
    if case != "exists":
        assert_no_store(out)


# ---------------------------------------------------------------------------
# real datasets
# ---------------------------------------------------------------------------
def test_notredame(tmp_path, capsys):
    path = need(NOTREDAME)
    rc, out, err = run_cli(["ingest", path, tmp_path / "nd.zarr", "--json"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    assert res["num_nodes"] == 325729 and res["num_edges"] == 1497134
    store = open_store(tmp_path / "nd.zarr")
    # independent reference: numpy's text reader
    with gzip.open(path, "rt") as f:
        ref = np.loadtxt(f, dtype=np.int64)
    np.testing.assert_array_equal(store.array("src")[:], ref[:, 0])
    np.testing.assert_array_equal(store.array("dst")[:], ref[:, 1])


def test_college_msg(tmp_path):
    path = need(COLLEGE)
    store = ingest(path, tmp_path / "c.zarr", one_based=True, time_column=2)
    ref = np.loadtxt(path, dtype=np.int64)
    assert store.num_edges == len(ref) == 59835
    assert store.num_nodes == 1899
    np.testing.assert_array_equal(store.array("src")[:], ref[:, 0] - 1)
    np.testing.assert_array_equal(store.array("time")[:], ref[:, 2])


def test_bitcoin_csv(tmp_path):
    path = need(BITCOIN)
    store = ingest(path, tmp_path / "b.zarr", time_column=3, weight_column=2)
    ref = np.loadtxt(path, delimiter=",", dtype=np.int64)
    assert store.num_edges == len(ref) == 35592
    np.testing.assert_array_equal(store.array("dst")[:], ref[:, 1])
    np.testing.assert_array_equal(store.array("weight")[:], ref[:, 2].astype(np.float32))
    np.testing.assert_array_equal(store.array("time")[:], ref[:, 3])
    assert store.attrs["ingest"]["header"] is False


def test_cli_subprocess_exit_code(tmp_path):
    """The installed entry point, end to end, exits 2 on bad input."""
    src = write(tmp_path / "g.txt", "0 1\nfoo\n")
    proc = subprocess.run([sys.executable, "-m", "graphstream", "ingest", str(src), str(tmp_path / "o.zarr")],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "g.txt:2" in proc.stderr and proc.stdout == ""


# ---------------------------------------------------------------------------
# plain text parsed in threads, pieces appended in file order
# ---------------------------------------------------------------------------

def _threads(monkeypatch, n: int) -> None:
    from graphstream.ingest import pipeline
    monkeypatch.setattr(pipeline, "usable_cores", lambda: n)


@pytest.mark.parametrize("relabel", [False, True])
def test_text_parsed_in_threads_is_the_same_store(tmp_path, monkeypatch, relabel):
    rng = np.random.default_rng(3)
    lines = ["src dst time weight"]
    for i in range(60_000):
        if i % 997 == 0:
            lines.append("# a comment line")
        if i % 1409 == 0:
            lines.append("")
        u, v = rng.integers(0, 5000 if not relabel else 10**12, 2)
        lines.append(f"{u}\t{v}\t{1_600_000_000 + i}\t{rng.random():.3f}")
    src = write(tmp_path / "g.tsv", "\n".join(lines) + "\n")
    assert src.stat().st_size > 8 * 65536     # several pieces of one 64 KiB block each
    from graphstream.ingest import pipeline
    pieces = []
    real_blocks = pipeline.blocks
    monkeypatch.setattr(pipeline, "blocks", lambda *a, piece=None, **kw: pieces.append(piece) or real_blocks(
        *a, piece=piece, **kw))
    stores = {}
    for threads in (1, 4):
        _threads(monkeypatch, threads)
        pieces.clear()
        stores[threads] = ingest(src, tmp_path / f"g{threads}.zarr", header="yes", time_column=2, weight_column=3,
                                 relabel=relabel, block_bytes=65536, rows_per_block=5000, chunk_size=7000)
        assert len(pieces) == (1 if threads == 1 else len(set(pieces))) and (threads == 1 or len(pieces) > 8)
    one, four = (columns(stores[t]) for t in (1, 4))
    assert one.keys() == four.keys() >= {"src", "dst", "time", "weight"}
    for c in one:
        assert np.array_equal(one[c], four[c]), c
    assert stores[1].num_edges == stores[4].num_edges == 60_000
    if relabel:
        assert np.array_equal(stores[1].id_map(), stores[4].id_map())


def test_text_parsed_in_threads_names_the_first_bad_line(tmp_path, monkeypatch):
    lines = [f"{i} {i + 1}" for i in range(200_000)]
    lines[150_001] = "12 oops"    # in a later piece
    lines[190_000] = "13 worse"   # a later piece's error is not the one raised
    src = write(tmp_path / "g.txt", "# head\n" + "\n".join(lines) + "\n")
    _threads(monkeypatch, 4)
    with pytest.raises(InvalidIdError, match=r"g\.txt:150003: non-numeric"):
        ingest(src, tmp_path / "g.zarr", block_bytes=65536)
    assert_no_store(tmp_path / "g.zarr")


def test_fractional_times_are_floored_exactly(tmp_path):
    """A fractional time went through a float64: above 2^53 it lost its last digits (9007199254740993.0
    became ...994, 1700000000000000001.5 became ...000). A plain decimal is now floored in integers."""
    text = tmp_path / "t.txt"
    times = ["9007199254740993.0", "1700000000000000001.5", "-0.5", "-7.25", "-7.0", "1.7e3", "12.", ".5"]
    text.write_text("".join(f"{i} {i + 1} {t}\n" for i, t in enumerate(times)))
    ingest(str(text), str(tmp_path / "t.zarr"), time_column=2)
    assert open_store(tmp_path / "t.zarr").array("time")[:].tolist() == [
        9007199254740993, 1700000000000000001, -1, -8, -7, 1700, 12, 0]


def test_byte_order_mark_quoted_delimiters_and_the_lowest_id(tmp_path):
    """A UTF-8 byte order mark became part of the first id (--relabel: node "\\ufeff0" beside "0";
    a header's first name "\\ufeffsrc"); a quoted CSV field was cut at the comma inside it, and its
    doubled quotes were kept; and the id
    -2**63 was refused as "does not fit a 64-bit integer"."""
    def store_of(name: str, data: bytes, *args) -> tuple[list, list, list | None]:
        (tmp_path / name).write_bytes(data)
        assert cli_main(["ingest", str(tmp_path / name), str(tmp_path / f"{name}.zarr"), *args]) == 0
        g = zarr.open_group(str(tmp_path / f"{name}.zarr"), mode="r")
        return g["src"][:].tolist(), g["dst"][:].tolist(), g["id_map"][:].tolist() if "id_map" in g else None

    assert store_of("bom.csv", b"\xef\xbb\xbf0,1\n1,0\n", "--relabel") == ([0, 1], [1, 0], [0, 1])
    assert store_of("bomh.csv", b"\xef\xbb\xbfsrc,dst\n5,6\n", "--src-column", "src", "--dst-column", "dst")[:2] \
        == ([5], [6])
    assert store_of("q.csv", b'"a,b",c\nc,"d"\n"x""y",c\n"""q""",x""y\n', "--relabel", "--header", "no") \
        == ([0, 1, 3, 4], [1, 2, 1, 5], ["a,b", "c", "d", 'x"y', '"q"', 'x""y'])   # "" is a quote when quoted
    assert store_of("q.txt", b'"a b" c\n', "--relabel", "--header", "no") == ([0], [1], ["a b", "c"])
    assert store_of("low.txt", b"-9223372036854775808 1\n", "--relabel") == ([0], [1], [-2**63, 1])
