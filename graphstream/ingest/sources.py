"""Binary edge sources: ``.npy`` (E x k integer array) and parquet.

Both are read in blocks of rows (memory-mapped for npy, row batches for
parquet), so memory stays bounded whatever the file size. Ids are checked
here, vectorised, with the row number in the message (rows are 1-based).
"""
from __future__ import annotations

import math
import os
import tokenize
from collections.abc import Iterator

import numpy as np

from ..errors import InputFormatError, InvalidIdError, ParameterError
from ..store.graph import FLOAT32_LIMIT
from .config import IngestConfig
from .sniff import NPY_MAGIC, PARQUET_MAGIC  # noqa: F401  (their home is sniff; kept importable here)
from .text import TIME_RULE, WEIGHT_RULE, IdBeyondError, NonNumericIdError, TextBlock


def check_ids(path: str, src: np.ndarray, dst: np.ndarray, first_row: int, config: IngestConfig
              ) -> tuple[np.ndarray, np.ndarray]:
    """Shift 1-based ids and refuse negative ones or ids beyond ``num_nodes`` (nothing with ``relabel``)."""
    one_based, num_nodes = config.one_based, config.num_nodes
    if config.relabel or len(src) == 0:
        return src, dst
    if one_based:
        src = src - 1
        dst = dst - 1
    lo = min(int(src.min()), int(dst.min()))
    if lo < 0:
        i = int(np.flatnonzero((src < 0) | (dst < 0))[0])
        row, value = first_row + i, min(int(src[i]), int(dst[i])) + int(one_based)
        if one_based:
            raise InvalidIdError(f"{path}: row {row}: node id {value} is below 1 with --one-based")
        raise InvalidIdError(f"{path}: row {row}: negative node id {value} (pass --relabel for arbitrary ids)")
    if num_nodes is not None:
        hi = max(int(src.max()), int(dst.max()))
        if hi >= num_nodes:
            i = int(np.flatnonzero((src >= num_nodes) | (dst >= num_nodes))[0])
            value = str(max(int(src[i]), int(dst[i])) + int(one_based))
            raise IdBeyondError(f"{path}: row {first_row + i}: node id {value} is beyond the declared "
                                f"node count {num_nodes}", f"{path}: row {first_row + i}", value)
    return src, dst


_INT64_MAX = np.iinfo(np.int64).max


def time_values(path: str, a: np.ndarray, first_row: int, column) -> np.ndarray:
    """int64 times: integers within int64, or finite floats floored into it (as the text reader does)."""
    if a.dtype.kind == "f":
        f = np.floor(a.astype(np.float64))
        with np.errstate(invalid="ignore"):
            bad = ~((f >= -2.0**63) & (f < 2.0**63))  # nan fails both
        out = f
    elif a.dtype.kind == "u" and a.dtype.itemsize == 8:
        bad = a > _INT64_MAX
        out = a
    else:
        return a.astype(np.int64)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputFormatError(f"{path}: row {first_row + i}: time {a[i]} in column {column!r} is out of range "
                               f"or not finite: {TIME_RULE}")
    return out.astype(np.int64)


def weight_values(path: str, a: np.ndarray, first_row: int, column) -> np.ndarray:
    """float32 weights, finite (a float64 beyond float32's range would become inf)."""
    if a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(a.astype(np.float64)) < FLOAT32_LIMIT)  # nan fails it
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputFormatError(f"{path}: row {first_row + i}: weight {a[i]} in column {column!r} is out of "
                                   f"range or not finite: {WEIGHT_RULE}")
    return a.astype(np.float32)


def _int64_ids(path: str, a: np.ndarray, what: str, first_row: int) -> np.ndarray:
    if a.dtype == np.uint64 and len(a) and int(a.max()) > np.iinfo(np.int64).max:
        i = int(np.flatnonzero(a > np.iinfo(np.int64).max)[0])
        raise InvalidIdError(f"{path}: row {first_row + i}: {what} id {int(a[i])} does not fit a 64-bit "
                             "signed integer")
    return a.astype(np.int64, copy=False)


# ---------------------------------------------------------------------------
# .npy
# ---------------------------------------------------------------------------
# What numpy's header parser raises on a damaged header (it tokenizes and evaluates the header text).
_NPY_HEADER_ERRORS = (ValueError, TypeError, SyntaxError, tokenize.TokenError, UnicodeDecodeError, OverflowError,
                      EOFError)


def _npy_header(path: str) -> tuple[tuple[int, ...], np.dtype, bool, int]:
    """(shape, dtype, fortran_order, data offset) of a .npy file, without reading its data.

    The data must be exactly what the header declares (no more, no less):
    checked here, before a block or a memory map of that size is made.
    """
    fmt = np.lib.format
    with open(path, "rb") as f:
        try:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(f)
            else:
                shape, fortran, dtype = fmt.read_array_header_2_0(f)
        except _NPY_HEADER_ERRORS as exc:
            raise InputFormatError(f"{path}: not a readable .npy array ({exc})") from exc
        offset = f.tell()
    size = os.path.getsize(path) - offset
    expected = math.prod(shape) * dtype.itemsize
    if len(shape) == 2 and dtype.kind in "iu" and size != expected:
        what = "truncated" if size < expected else "longer than its header says"
        raise InputFormatError(f"{path}: file is {what}: shape {shape} of {dtype} is {expected} bytes of data, "
                               f"the file holds {size}")
    return shape, dtype, fortran, offset


def _int_col(col, what: str) -> int:
    """A column of a .npy array: an index >= 0, or -1 for None."""
    if col is None:
        return -1
    try:
        i = int(col)
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a column index for .npy input, got {col!r}") from None
    if i < 0:
        raise ParameterError(f"{what} must be >= 0, got {i}")
    return i


def npy_rows(path: str | os.PathLike) -> int:
    """The number of rows (edges) of a ``.npy`` edge array, from its header."""
    return _npy_header(str(path))[0][0]


def iter_npy(path: str | os.PathLike, config: IngestConfig, *, start: int = 0,
             stop: int | None = None) -> Iterator[TextBlock]:
    """Blocks of an integer E x k ``.npy`` array (E x 2 is src, dst), ``config.rows_per_block`` rows each.

    C-ordered arrays are read block by block with plain reads (a memory map
    would count the whole file in the resident set); Fortran-ordered ones
    through a memory map. ``start``/``stop``: only rows [start, stop) (a task of a cluster).
    """
    src_column = _int_col(config.src_column, "src column")
    dst_column = _int_col(config.dst_column, "dst column")
    time_column = _int_col(config.time_column, "time column")
    weight_column = _int_col(config.weight_column, "weight column")
    rows = config.rows_per_block
    name = str(path)
    shape, dtype, fortran, offset = _npy_header(name)
    if len(shape) != 2:
        raise InputFormatError(f"{name}: expected a 2-D array of edges (E x 2), got shape {shape}")
    if dtype.kind not in "iu":
        raise InputFormatError(f"{name}: expected an integer array (int32/int64), got dtype {dtype}")
    cols = [c for c in (src_column, dst_column, time_column, weight_column) if c >= 0]
    if max(cols) >= shape[1]:
        raise ParameterError(f"{name}: column {max(cols)} selected but the array has {shape[1]} columns")
    width = shape[1]
    num_rows = shape[0] if stop is None else min(stop, shape[0])
    mm = np.load(name, mmap_mode="r") if fortran else None
    with open(name, "rb") as f:
        f.seek(offset + start * width * dtype.itemsize)
        for row in range(start, num_rows, rows):
            count = min(rows, num_rows - row)
            if mm is not None:
                block = np.asarray(mm[row:row + count])
            else:
                block = np.empty((count, width), dtype=dtype)
                got = f.readinto(memoryview(block).cast("B"))
                if got != block.nbytes:
                    raise InputFormatError(f"{name}: file is truncated (expected {shape[0]} rows)")
            src = _int64_ids(name, block[:, src_column], "source", row + 1)
            dst = _int64_ids(name, block[:, dst_column], "destination", row + 1)
            src, dst = check_ids(name, src, dst, row + 1, config)
            yield TextBlock(src=np.ascontiguousarray(src), dst=np.ascontiguousarray(dst),
                            time=time_values(name, block[:, time_column], row + 1, time_column)
                            if time_column >= 0 else None,
                            weight=weight_values(name, block[:, weight_column], row + 1, weight_column)
                            if weight_column >= 0 else None,
                            spans=None, buf=np.empty(0, np.uint8), first_line=row + 1)


# ---------------------------------------------------------------------------
# parquet
# ---------------------------------------------------------------------------
def _parquet_column(schema_names: list[str], col: int | str | None, what: str, path: str) -> str | None:
    if col is None or (isinstance(col, int) and col < 0):
        return None
    if isinstance(col, str) and not col.isdigit():
        if col not in schema_names:
            raise ParameterError(f"{path}: {what} {col!r} not in the parquet columns {schema_names}")
        return col
    i = int(col)
    if i >= len(schema_names):
        raise ParameterError(f"{path}: {what} {i} selected but the file has {len(schema_names)} columns")
    return schema_names[i]


def _one_line(exc: BaseException) -> str:
    """Arrow's messages span lines (thrift errors): the CLI prints one."""
    return " ".join(str(exc).split())


def parquet_string_ids(path: str | os.PathLike, src_column, dst_column) -> bool:
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # damaged metadata: all three
        raise InputFormatError(f"{path}: not a readable parquet file ({_one_line(exc)})") from exc
    names = schema.names
    for col, what in ((src_column, "src column"), (dst_column, "dst column")):
        t = schema.field(_parquet_column(names, col, what, str(path))).type
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
                or pa.types.is_large_binary(t):
            return True
    return False


def parquet_row_groups(path: str | os.PathLike) -> list[int]:
    """The number of rows of each row group of a parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        meta = pq.read_metadata(path)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise InputFormatError(f"{path}: not a readable parquet file ({_one_line(exc)})") from exc
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def iter_parquet(path: str | os.PathLike, config: IngestConfig, *,
                 row_groups: tuple[int, int] | None = None) -> Iterator[TextBlock]:
    """Row batches of ``config.rows_per_block`` rows of a parquet file; string/binary id columns need ``relabel``.

    ``row_groups``: only row groups [a, b) (a task of a cluster); rows are still numbered in the whole file.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .relabel import spans_from_arrow

    name = str(path)
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # damaged metadata: all three
        raise InputFormatError(f"{name}: not a readable parquet file ({_one_line(exc)})") from exc
    names = pf.schema_arrow.names
    cols = {"src": _parquet_column(names, config.src_column, "src column", name),
            "dst": _parquet_column(names, config.dst_column, "dst column", name),
            "time": _parquet_column(names, config.time_column, "time column", name),
            "weight": _parquet_column(names, config.weight_column, "weight column", name)}
    wanted = [c for c in cols.values() if c is not None]
    first = 1
    groups = None
    if row_groups is not None:
        groups = list(range(*row_groups))
        first += sum(pf.metadata.row_group(i).num_rows for i in range(row_groups[0]))
    try:
        batches = pf.iter_batches(batch_size=config.rows_per_block, columns=list(dict.fromkeys(wanted)),
                                  row_groups=groups)
        for batch in batches:
            for col in cols.values():
                if col is not None and batch.column(col).null_count:
                    bad = first + int(np.flatnonzero(batch.column(col).is_null().to_numpy(
                        zero_copy_only=False))[0])
                    raise InputFormatError(f"{name}: row {bad}: missing value in column {col!r}")
            s, d = batch.column(cols["src"]), batch.column(cols["dst"])
            time = weight = None
            if cols["time"] is not None:
                t = batch.column(cols["time"])
                if pa.types.is_timestamp(t.type):
                    t = t.cast(pa.int64())
                time = time_values(name, _numeric(t, name, cols["time"]), first, cols["time"])
            if cols["weight"] is not None:
                weight = weight_values(name, _numeric(batch.column(cols["weight"]), name, cols["weight"]), first,
                                       cols["weight"])
            if pa.types.is_integer(s.type) and pa.types.is_integer(d.type):
                src = _int64_ids(name, s.to_numpy(), "source", first)
                dst = _int64_ids(name, d.to_numpy(), "destination", first)
                src, dst = check_ids(name, src, dst, first, config)
                yield TextBlock(src=src, dst=dst, time=time, weight=weight, spans=None,
                                buf=np.empty(0, np.uint8), first_line=first)
            elif config.relabel and all(pa.types.is_string(x.type) or pa.types.is_large_string(x.type)
                                 or pa.types.is_binary(x.type) or pa.types.is_large_binary(x.type)
                                 or pa.types.is_integer(x.type) for x in (s, d)):
                buf, spans = spans_from_arrow(pc.cast(s, pa.large_string()), pc.cast(d, pa.large_string()))
                yield TextBlock(src=None, dst=None, time=time, weight=weight, spans=spans, buf=buf,
                                first_line=first)
            else:
                kind = s.type if not pa.types.is_integer(s.type) else d.type
                if pa.types.is_string(kind) or pa.types.is_large_string(kind):
                    raise NonNumericIdError(f"{name}: id columns hold strings ({kind}); pass --relabel")
                raise InputFormatError(f"{name}: id columns must be integers (or strings with --relabel), "
                                       f"got {s.type} and {d.type}")
            first += batch.num_rows
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # damaged metadata: all three
        raise InputFormatError(f"{name}: corrupt parquet data ({_one_line(exc)})") from exc


def _numeric(col, path: str, name: str) -> np.ndarray:
    import pyarrow as pa
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise InputFormatError(f"{path}: column {name!r} must be numeric, got {col.type}")
    return col.to_numpy()
