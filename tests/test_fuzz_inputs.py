"""Fuzz of every edge-file reader (issue 14): whatever the bytes, ingest succeeds or raises GraphStreamError.

Random bytes and random lines (plain and gzip) go through the text reader,
``.npy`` files with the real magic and a random header (dtype, shape,
fortran order, header text) and random data through the npy reader, and
parquet files with random column types and values through the parquet
reader, all by :func:`graphstream.ingest.ingest` with random options. Any
other exception (a traceback for the user) fails the test; hypothesis
shrinks it to a minimal file. A few files go through the installed CLI to
check the exit code 2 and the one-line message.

Runtime: about a minute in all (the numba kernels compile once; examples
are small files, ``deadline=None`` because the first example pays the
compile).
"""
from __future__ import annotations

import gzip
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphstream.errors import GraphStreamError
from graphstream.ingest import ingest


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def ingest_or_refuse(path, out, **options) -> None:
    """The property: the file is ingested, or refused with a GraphStreamError (anything else propagates)."""
    try:
        store = ingest(path, out, overwrite=True, **options)
    except GraphStreamError as exc:
        msg = str(exc)
        assert msg and "\n" not in msg.strip(), msg   # one line, as the CLI prints it
        return
    assert store.num_edges > 0


# ---------------------------------------------------------------------------
# text: random bytes and random lines
# ---------------------------------------------------------------------------
text_options = st.fixed_dictionaries({
    "relabel": st.booleans(),
    "one_based": st.booleans(),
    "undirected": st.booleans(),
    "header": st.sampled_from(["auto", "yes", "no"]),
    "time_column": st.sampled_from([None, 2]),
    "weight_column": st.sampled_from([None, 3]),
    "block_bytes": st.sampled_from([1, 7, 64, 4096, 1 << 20]),
    "rows_per_block": st.sampled_from([1, 3, 1 << 20]),
    "num_nodes": st.sampled_from([None, None, 0, 5, 2**40]),
})

NUMBERS = st.one_of(
    st.integers(-10, 10), st.integers(-2**64, 2**64), st.sampled_from([2**63 - 1, 2**63, -2**63, 3 * 10**9]),
).map(str)
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                   st.sampled_from(["1e30", "1e400", "-1e39", "0e999", ".5", "5.", "1e", "+-1", "nan", "inf"]))
WORDS = st.sampled_from(["src", "dst", "a b", '"0"', '"', '""', "x1", "2x", "#", "%", "ünï", "\x00", "\r", ""])
FIELD = st.one_of(NUMBERS, FLOATS, WORDS, st.text(max_size=6))
SEP = st.sampled_from([" ", "\t", ",", " , ", ";", "  ", "\t\t"])
LINE = st.tuples(st.lists(FIELD, min_size=0, max_size=5), SEP, st.sampled_from(["\n", "\r\n", "", "\n\n"])).map(
    lambda t: t[1].join(t[0]) + t[2])
LINES = st.lists(LINE, min_size=0, max_size=12).map("".join)


@fuzz(120)
@given(data=st.binary(max_size=600), suffix=st.sampled_from([".txt", ".csv", ".tsv"]), options=text_options)
def test_fuzz_text_random_bytes(work, data, suffix, options):
    path = work / f"bytes{suffix}"
    path.write_bytes(data)
    ingest_or_refuse(path, work / "bytes.zarr", **options)


@fuzz(200)
@given(text=LINES, suffix=st.sampled_from([".txt", ".csv", ".tsv"]), gz=st.booleans(),
       delimiter=st.sampled_from([None, None, ",", "\t", ";", " "]), options=text_options)
def test_fuzz_text_random_lines(work, text, suffix, gz, delimiter, options):
    data = text.encode("utf-8", errors="surrogatepass")
    if gz:
        data = gzip.compress(data)
        suffix += ".gz"
    path = work / f"lines{suffix}"
    path.write_bytes(data)
    ingest_or_refuse(path, work / "lines.zarr", delimiter=delimiter, **options)


@fuzz(40)
@given(text=LINES, cut=st.integers(0, 200), magic=st.sampled_from([b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"]))
def test_fuzz_damaged_compressed_text(work, text, cut, magic):
    """A compressed file truncated or damaged, or a compression magic followed by garbage."""
    import bz2
    import lzma
    comp = {b"\x1f\x8b": gzip.compress, b"BZh": bz2.compress, b"\xfd7zXZ\x00": lzma.compress}[magic]
    whole = comp(text.encode("utf-8", errors="surrogatepass"))
    path = work / "damaged.txt"
    for data in (whole[: max(len(magic), len(whole) - cut)], magic + text.encode("utf-8", errors="replace")):
        path.write_bytes(data)
        ingest_or_refuse(path, work / "damaged.zarr")


# ---------------------------------------------------------------------------
# npy: the real magic, a random header, random data
# ---------------------------------------------------------------------------
DESCRS = st.one_of(
    st.sampled_from(["<i8", "<i4", ">i8", "|i1", "<u8", "<u2", "|u1", "<f8", "<f4", "|b1", "|O", "<U3", "|S4",
                     "<c16", "<M8[s]", "V8", "<i16", "xx", ""]),
    st.just([("a", "<i8"), ("b", "<i8")]), st.just(("<i8", (2,))), st.text(max_size=5))
SHAPES = st.one_of(
    st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple),
    st.tuples(st.integers(-3, 2**62), st.integers(-3, 2**62)),
    st.sampled_from([(2**40, 2), (1, 2**40), (3, 10**15), (-1, 2), "(3, 2)", None, [3, 2], (2.5, 2)]))


@st.composite
def npy_files(draw) -> bytes:
    version = draw(st.sampled_from([(1, 0), (2, 0), (3, 0), (0, 0), (9, 9)]))
    if draw(st.integers(0, 9)) == 0:
        header = draw(st.text(max_size=80))            # not a dict at all
    else:
        d = {"descr": draw(DESCRS), "fortran_order": draw(st.sampled_from([False, True, 0, "no"])),
             "shape": draw(SHAPES)}
        if draw(st.booleans()):
            d.pop(draw(st.sampled_from(sorted(d))))
        header = repr(d)
    raw = header.encode("utf-8", errors="replace")
    size = len(raw) + draw(st.sampled_from([1, 0, -1, 5]))  # the declared header length, sometimes wrong
    length = (size.to_bytes(2, "little") if version[0] < 2 else size.to_bytes(4, "little")) if size >= 0 else b""
    body = draw(st.one_of(st.binary(max_size=200),
                          st.lists(st.integers(-2**63, 2**63 - 1), max_size=24).map(
                              lambda v: np.array(v, dtype="<i8").tobytes())))
    return b"\x93NUMPY" + bytes(version) + length + raw + b"\n" + body


@fuzz(150)
@given(data=npy_files(), cols=st.sampled_from([{}, {"time_column": 2}, {"weight_column": 2}, {"src_column": 1,
                                                                                              "dst_column": 0}]),
       relabel=st.booleans())
def test_fuzz_npy_headers(work, data, cols, relabel):
    path = work / "e.npy"
    path.write_bytes(data)
    ingest_or_refuse(path, work / "npy.zarr", relabel=relabel, **cols)


@fuzz(60)
@given(values=st.lists(st.integers(-2**63, 2**64 - 1), min_size=0, max_size=30),
       dtype=st.sampled_from(["<i8", ">i4", "<u8", "|u1", "<i2"]), width=st.integers(1, 4),
       fortran=st.booleans(), relabel=st.booleans(), time=st.booleans())
def test_fuzz_npy_valid_arrays(work, values, dtype, width, fortran, relabel, time):
    """Well-formed arrays of random integers: ids and times beyond what fits are refused, never cast."""
    info = np.iinfo(np.dtype(dtype))
    a = np.array([v for v in values if info.min <= v <= info.max], dtype=dtype)
    a = a[: len(a) // width * width].reshape(-1, width)
    np.save(work / "v.npy", np.asfortranarray(a) if fortran else a)
    options = {"time_column": 2} if time else {}
    ingest_or_refuse(work / "v.npy", work / "v.zarr", relabel=relabel, **options)


# ---------------------------------------------------------------------------
# parquet: random schemas
# ---------------------------------------------------------------------------
def _arrow_column(draw, n: int):
    import pyarrow as pa
    kind = draw(st.sampled_from(["int8", "int32", "int64", "uint8", "uint64", "float16", "float32", "float64",
                                 "bool", "string", "large_string", "binary", "timestamp", "date32", "decimal",
                                 "null", "list", "dictionary", "struct"]))
    nulls = draw(st.booleans())

    def maybe_null(v):
        return [None if nulls and draw(st.integers(0, 4)) == 0 else x for x in v]

    if kind in ("int8", "int32", "int64", "uint8", "uint64"):
        t = getattr(pa, kind)()
        lo, hi = (np.iinfo(kind).min, np.iinfo(kind).max)
        v = draw(st.lists(st.one_of(st.integers(lo, hi), st.integers(0, 10)), min_size=n, max_size=n))
        return pa.array(maybe_null(v), type=t)
    if kind.startswith("float"):
        width = {"float16": 16, "float32": 32}.get(kind, 64)
        v = draw(st.lists(st.floats(width=width), min_size=n, max_size=n))
        if kind == "float16":
            return pa.array(np.array(v, dtype=np.float16))
        return pa.array(maybe_null(v), type=getattr(pa, kind)())
    if kind == "bool":
        return pa.array(maybe_null(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
    if kind in ("string", "large_string"):
        v = draw(st.lists(st.text(max_size=4), min_size=n, max_size=n))
        return pa.array(maybe_null(v), type=getattr(pa, kind)())
    if kind == "binary":
        return pa.array(maybe_null(draw(st.lists(st.binary(max_size=4), min_size=n, max_size=n))), type=pa.binary())
    if kind == "timestamp":
        v = draw(st.lists(st.integers(-2**62, 2**62), min_size=n, max_size=n))
        return pa.array(maybe_null(v), type=pa.timestamp("ns"))
    if kind == "date32":
        return pa.array(maybe_null(draw(st.lists(st.integers(-10**6, 10**6), min_size=n, max_size=n))),
                        type=pa.date32())
    if kind == "decimal":
        from decimal import Decimal
        return pa.array([Decimal(x) for x in draw(st.lists(st.integers(-999, 999), min_size=n, max_size=n))],
                        type=pa.decimal128(5, 1))
    if kind == "null":
        return pa.nulls(n)
    if kind == "list":
        return pa.array(draw(st.lists(st.lists(st.integers(0, 9), max_size=2), min_size=n, max_size=n)))
    if kind == "dictionary":
        return pa.array(draw(st.lists(st.sampled_from(["a", "b"]), min_size=n, max_size=n))).dictionary_encode()
    return pa.array([{"x": i} for i in range(n)])


@st.composite
def parquet_tables(draw):
    import pyarrow as pa
    n = draw(st.integers(0, 8))
    width = draw(st.integers(1, 5))
    return pa.table({f"c{i}": _arrow_column(draw, n) for i in range(width)})


@fuzz(120)
@given(table=parquet_tables(), relabel=st.booleans(),
       cols=st.sampled_from([{}, {"time_column": 2}, {"weight_column": 2}, {"time_column": 2, "weight_column": 3},
                             {"src_column": "c1", "dst_column": "c0"}, {"src_column": "nope"}]),
       rows=st.sampled_from([1, 3, 1 << 20]))
def test_fuzz_parquet_schemas(work, table, relabel, cols, rows):
    import pyarrow.parquet as pq
    pq.write_table(table, work / "t.parquet", row_group_size=max(1, table.num_rows // 2 or 1))
    ingest_or_refuse(work / "t.parquet", work / "pq.zarr", relabel=relabel, rows_per_block=rows, **cols)


@fuzz(40)
@given(table=parquet_tables(), cut=st.integers(1, 400), flip=st.integers(0, 10**6))
def test_fuzz_parquet_damaged(work, table, cut, flip):
    """A parquet file truncated, or with one byte flipped: refused, never a traceback."""
    import pyarrow.parquet as pq
    path = work / "d.parquet"
    pq.write_table(table, path)
    data = bytearray(path.read_bytes())
    for damaged in (bytes(data[: max(4, len(data) - cut)]),
                    bytes(data[:flip % len(data)]) + bytes([data[flip % len(data)] ^ 0xFF])
                    + bytes(data[flip % len(data) + 1:])):
        path.write_bytes(damaged)
        ingest_or_refuse(path, work / "d.zarr", relabel=True)


# ---------------------------------------------------------------------------
# the CLI: exit code 2, one line, no traceback
# ---------------------------------------------------------------------------
CLI_CASES = {
    "garbage.txt": b"\x00\xff\x10garbage\n1 2x\n",
    "header.npy": b"\x93NUMPY\x01\x00\x10\x00{'descr': '<i8'}\n" + b"\x00" * 16,
    "huge.npy": b"\x93NUMPY\x01\x00\x46\x00" + b"{'descr': '<i8', 'fortran_order': False, 'shape': (1000000000000, 2), }"
    .ljust(0x45) + b"\n",
    "bad.parquet": b"PAR1" + b"\x00" * 40 + b"PAR1",
    "time.csv": b"0,1,1e30\n",
}


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_cli_exit_code_2(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(CLI_CASES[name])
    extra = ["--time-column", "2"] if name == "time.csv" else []
    r = subprocess.run([sys.executable, "-m", "graphstream", "ingest", str(path), str(tmp_path / "o.zarr"), *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("graphstream ingest: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "o.zarr").exists()
