"""Text edge lists: SNAP, CSV and TSV, optionally .gz/.bz2/.xz compressed.

The file is read in bounded blocks of bytes (``block_bytes``, default 16 MB
of decompressed text), each cut after its last newline; a background thread
reads and decompresses the next block while a numba kernel parses the
current one, so memory is a few blocks whatever the file size.

One kernel, ``_parse_lines``, walks the raw bytes once:

1. skip blank lines, ``#`` and ``%`` comment lines and the header line;
2. split the line into fields: with ``delimiter=None`` any run of spaces or
   tabs, or one comma with optional blanks around it, separates fields;
   with an explicit delimiter exactly one delimiter does (blanks around a
   field are trimmed, a field may be wrapped in double quotes);
3. parse the selected fields: ids as integers (or, for string ids, their
   byte spans), time as int64 (a fractional time is floored), weight as
   float;
4. check ids (negative, ``--one-based`` zero, beyond ``--num-nodes``) and
   stop at the first problem with its line number, so errors name
   ``file:line``.

The kernel parses at most ``len(out)`` rows per call and returns where it
stopped, so its output arrays have a fixed size too.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import math
import os
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator

import numpy as np
from numba import njit

from ..errors import InputFormatError, InvalidIdError, ParameterError

DEFAULT_BLOCK_BYTES = 16 << 20
DEFAULT_ROWS_PER_CALL = 1 << 20
SNIFF_BYTES = 1 << 16

# Roles of a field (index = field number in the line).
ROLE_NONE, ROLE_SRC, ROLE_DST, ROLE_TIME, ROLE_WEIGHT = 0, 1, 2, 3, 4
ROLE_NAMES = {ROLE_SRC: "source id", ROLE_DST: "destination id", ROLE_TIME: "time", ROLE_WEIGHT: "weight"}

# Kernel status codes.
OK, E_FIELDS, E_NONNUMERIC, E_NEGATIVE, E_BEYOND, E_OVERFLOW, E_ONE_BASED, E_EMPTY = range(8)

# state[] slots written by the kernel.
S_POS, S_LINES, S_ERR, S_ERR_LINE, S_ERR_FIELD, S_ERR_A, S_ERR_B = range(7)

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))


# ---------------------------------------------------------------------------
# numba kernels
# ---------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _strip_quotes(buf, a, b):
    if b - a >= 2 and buf[a] == 34 and buf[b - 1] == 34:
        return a + 1, b - 1
    return a, b


@njit(cache=True, nogil=True)
def _sign(buf, a, b):
    """Strip quotes and a leading sign of buf[a:b] -> (a, b, negative, status)."""
    a, b = _strip_quotes(buf, a, b)
    if a >= b:
        return a, b, False, E_EMPTY
    neg = buf[a] == 45
    if neg or buf[a] == 43:
        a += 1
    return a, b, neg, (OK if a < b else E_NONNUMERIC)


@njit(cache=True, nogil=True)
def _parse_int(buf, a, b):
    """Signed decimal integer in buf[a:b] -> (value, status)."""
    a, b, neg, status = _sign(buf, a, b)
    if status != OK:
        return 0, status
    v = 0
    check = b - a > 18  # shorter numbers cannot overflow: no division per digit
    for i in range(a, b):
        c = np.int64(buf[i]) - 48
        if c < 0 or c > 9:
            return 0, E_NONNUMERIC
        if check and v > (9223372036854775807 - c) // 10:
            return 0, E_OVERFLOW
        v = v * 10 + c
    if neg:
        v = -v
    return v, OK


@njit(cache=True, nogil=True)
def _parse_float(buf, a, b):
    """Decimal number with optional fraction and exponent -> (value, status)."""
    a, b, neg, status = _sign(buf, a, b)
    if status != OK:
        return 0.0, status
    mant = 0
    exp10 = 0
    digits = 0
    i = a
    while i < b and 48 <= buf[i] <= 57:
        if mant < 100000000000000000:
            mant = mant * 10 + (np.int64(buf[i]) - 48)
        else:
            exp10 += 1  # beyond 18 significant digits: keep the magnitude only
        digits += 1
        i += 1
    if i < b and buf[i] == 46:
        i += 1
        while i < b and 48 <= buf[i] <= 57:
            if mant < 100000000000000000:
                mant = mant * 10 + (np.int64(buf[i]) - 48)
                exp10 -= 1
            digits += 1
            i += 1
    if digits == 0:
        return 0.0, E_NONNUMERIC
    if i < b and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < b and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        e = 0
        edigits = 0
        while i < b and 48 <= buf[i] <= 57:
            if e < 10000:
                e = e * 10 + (np.int64(buf[i]) - 48)
            edigits += 1
            i += 1
        if edigits == 0:
            return 0.0, E_NONNUMERIC
        exp10 += -e if eneg else e
    if i != b:
        return 0.0, E_NONNUMERIC
    # Dividing by an exact power of ten keeps e.g. 0.1 and 1289241912.5 exact to the last bit.
    v = mant / 10.0 ** (-exp10) if exp10 < 0 else mant * 10.0 ** exp10
    return (-v if neg else v), OK


@njit(cache=True, nogil=True)
def _is_blank(c):
    return c == 32 or c == 9


@njit(cache=True, nogil=True)
def _parse_lines(buf, pos, end, delim, roles, max_needed, line_base, skip_line, as_spans,
                 id_offset, id_limit, allow_negative, out_src, out_dst, out_time, out_weight,
                 out_spans, state):
    """Parse lines of buf[pos:end] into the out arrays; return the number of rows.

    ``roles[f]`` says what field f holds (ROLE_*); ``max_needed`` is the
    highest field index that must be present. Stops after ``len(out_src)``
    rows, at the end, or at the first error; ``state`` receives the
    position reached, the lines consumed and the error (code, line, field,
    byte span of the bad field).
    """
    cap = len(out_src)
    nroles = len(roles)
    rows = 0
    lines = 0
    state[S_ERR] = OK
    while pos < end and rows < cap:
        lines += 1
        line_no = line_base + lines
        while pos < end and _is_blank(buf[pos]):
            pos += 1
        if pos >= end:
            break
        c = buf[pos]
        # 1. blank, comment and header lines
        if c == 10 or c == 13 or c == 35 or c == 37 or line_no == skip_line:
            while pos < end and buf[pos] != 10:
                pos += 1
            pos += 1
            continue
        # 2. fields
        field = 0
        while True:
            a = pos
            role = roles[field] if field < nroles else ROLE_NONE
            # Fast path for plain decimal ids: digits are parsed while scanning,
            # one pass over the bytes; anything unusual takes the general path.
            quick = False
            v = 0
            if (role == ROLE_SRC or role == ROLE_DST) and not as_spans:
                while pos < end:
                    c = buf[pos]
                    if c < 48 or c > 57:
                        break
                    v = v * 10 + (np.int64(c) - 48)
                    pos += 1
                b = pos
                if 0 < b - a <= 18:
                    if delim >= 0:  # trailing blanks before an explicit delimiter belong to the field
                        while pos < end and _is_blank(buf[pos]) and buf[pos] != delim:
                            pos += 1
                    if pos >= end:
                        quick = True
                    else:
                        c = buf[pos]
                        if delim < 0:
                            quick = c == 10 or c == 13 or c == 32 or c == 9 or c == 44
                        else:
                            quick = c == 10 or c == 13 or c == delim
                if not quick:
                    pos = a
            if quick:
                pass  # a, b, pos and v are set
            elif delim < 0:
                while pos < end:
                    c = buf[pos]
                    if c == 32 or c == 9 or c == 44 or c == 10 or c == 13:
                        break
                    pos += 1
                b = pos
            else:
                while pos < end:
                    c = buf[pos]
                    if c == delim or c == 10 or c == 13:
                        break
                    pos += 1
                b = pos
                while b > a and _is_blank(buf[b - 1]):
                    b -= 1
            # 3. parse the selected fields
            if role != ROLE_NONE:
                status = OK
                if role == ROLE_SRC or role == ROLE_DST:
                    if as_spans:
                        qa, qb = _strip_quotes(buf, a, b)
                        if qa >= qb:
                            status = E_EMPTY
                        else:
                            k = 0 if role == ROLE_SRC else 2
                            out_spans[rows, k] = qa
                            out_spans[rows, k + 1] = qb
                    else:
                        if not quick:
                            v, status = _parse_int(buf, a, b)
                        # 4. check the id
                        if status == OK:
                            if v < 0 and not allow_negative:
                                status = E_NEGATIVE
                            else:
                                v -= id_offset
                                if v < 0 and not allow_negative:
                                    status = E_ONE_BASED
                                elif id_limit >= 0 and v >= id_limit:
                                    status = E_BEYOND
                        if role == ROLE_SRC:
                            out_src[rows] = v
                        else:
                            out_dst[rows] = v
                elif role == ROLE_TIME:
                    t, status = _parse_int(buf, a, b)
                    if status == E_NONNUMERIC:
                        f, status = _parse_float(buf, a, b)
                        if status == OK:
                            t = np.int64(math.floor(f))
                    out_time[rows] = t
                else:
                    w, status = _parse_float(buf, a, b)
                    out_weight[rows] = w
                if status != OK:
                    state[S_POS] = pos
                    state[S_LINES] = lines
                    state[S_ERR] = status
                    state[S_ERR_LINE] = line_no
                    state[S_ERR_FIELD] = field
                    state[S_ERR_A] = a
                    state[S_ERR_B] = b
                    return rows
            field += 1
            if pos >= end or buf[pos] == 10 or buf[pos] == 13:
                break
            # separator
            if delim < 0:
                while pos < end and _is_blank(buf[pos]):
                    pos += 1
                if pos < end and buf[pos] == 44:
                    pos += 1
                    while pos < end and _is_blank(buf[pos]):
                        pos += 1
                if pos >= end or buf[pos] == 10 or buf[pos] == 13:
                    break
            else:
                pos += 1
                if not _is_blank(delim):
                    while pos < end and _is_blank(buf[pos]):
                        pos += 1
        while pos < end and buf[pos] != 10:
            pos += 1
        pos += 1
        if field <= max_needed:
            state[S_POS] = pos
            state[S_LINES] = lines
            state[S_ERR] = E_FIELDS
            state[S_ERR_LINE] = line_no
            state[S_ERR_FIELD] = field
            state[S_ERR_A] = 0
            state[S_ERR_B] = 0
            return rows
        rows += 1
    state[S_POS] = min(pos, end)
    state[S_LINES] = lines
    return rows


# ---------------------------------------------------------------------------
# opening files
# ---------------------------------------------------------------------------
def compression_of(path: str | os.PathLike) -> str | None:
    """'gzip', 'bz2', 'xz' from the file's magic bytes (not its name), or None."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


class _Counted:
    """The raw file, remembering how many bytes were read (for progress)."""

    def __init__(self, path: str | os.PathLike, arrow):
        self.raw = arrow.OSFile(str(path), "rb") if arrow is not None else open(path, "rb")

    def position(self) -> int:
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0


def open_text(path: str | os.PathLike) -> tuple[IO[bytes], _Counted]:
    """Open a possibly compressed file as decompressed bytes, plus its raw handle.

    gzip and bz2 are decompressed by pyarrow (faster than the standard
    library, and it releases the GIL); xz by :mod:`lzma`.
    """
    pa = _pyarrow()
    kind = compression_of(path)
    if kind in ("gzip", "bz2") and pa is not None and pa.Codec.is_available(kind):
        raw = _Counted(path, arrow=pa)
        return pa.CompressedInputStream(raw.raw, kind), raw
    raw = _Counted(path, arrow=None)
    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw.raw, mode="rb"), raw
    if kind == "bz2":
        return bz2.BZ2File(raw.raw, mode="rb"), raw
    if kind == "xz":
        return lzma.LZMAFile(raw.raw, mode="rb"), raw
    return raw.raw, raw


def _pyarrow():
    """pyarrow if it imports (it decompresses faster), else None: the standard library is used."""
    try:
        import pyarrow
    except ImportError:
        return None
    return pyarrow


def _read_block(f: IO[bytes], path: str, block_bytes: int) -> bytes:
    pa = _pyarrow()
    arrow_errors = (pa.ArrowException,) if pa is not None else ()
    try:
        return f.read(block_bytes)
    except EOFError as exc:
        raise InputFormatError(f"{path}: compressed data is truncated ({exc})") from exc
    except (OSError, zlib.error, lzma.LZMAError, *arrow_errors) as exc:
        what = "truncated" if "runcated" in str(exc) else "corrupt"
        raise InputFormatError(f"{path}: compressed data is {what} ({exc})") from exc


def iter_blocks(path: str | os.PathLike, block_bytes: int = DEFAULT_BLOCK_BYTES
                ) -> Iterator[tuple[np.ndarray, int]]:
    """Yield (block, raw bytes read so far); every block but the last ends with a newline.

    The next block is read (and decompressed, which releases the GIL) in a
    background thread while the caller parses the current one.
    """
    if block_bytes < 1:
        raise ParameterError(f"block_bytes must be >= 1, got {block_bytes}")
    name = str(path)
    f, raw = open_text(path)
    with f, raw.raw, ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstream-read") as pool:
        carry = b""
        fut = pool.submit(_read_block, f, name, block_bytes)
        while True:
            data = fut.result()
            if not data:
                if carry:
                    yield np.frombuffer(carry, dtype=np.uint8), raw.position()
                return
            fut = pool.submit(_read_block, f, name, block_bytes)
            if carry:
                data = carry + data
            cut = data.rfind(b"\n")
            if cut < 0:  # a line longer than a block: keep reading
                carry = data
                continue
            carry = data[cut + 1:]
            yield np.frombuffer(data, dtype=np.uint8, count=cut + 1), raw.position()


# ---------------------------------------------------------------------------
# layout: delimiter, header, columns
# ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TextLayout:
    """Which fields hold what. Columns are 0-based field indices; -1 = absent."""
    delimiter: str | None = None
    src_column: int = 0
    dst_column: int = 1
    time_column: int = -1
    weight_column: int = -1
    header_line: int = 0          # 1-based line number of the header, 0 = none
    column_names: tuple[str, ...] = ()

    def roles(self) -> np.ndarray:
        cols = {self.src_column: ROLE_SRC, self.dst_column: ROLE_DST,
                self.time_column: ROLE_TIME, self.weight_column: ROLE_WEIGHT}
        cols.pop(-1, None)
        roles = np.zeros(max(cols) + 1, dtype=np.int8)
        for c, r in cols.items():
            roles[c] = r
        return roles

    def delim_code(self) -> int:
        return -1 if self.delimiter is None else ord(self.delimiter)


_INT_RE = re.compile(r'^"?[+-]?\d+"?$')
_NUM_RE = re.compile(r'^"?[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?"?$')


def split_fields(line: str, delimiter: str | None) -> list[str]:
    """The kernel's field rules, in Python, for the few lines sniffed."""
    line = line.strip(" \t\r\n")
    if delimiter is None:
        return re.split(r"[ \t]*,[ \t]*|[ \t]+", line) if line else []
    return [f.strip(" \t") for f in line.split(delimiter)]


def _unquote(s: str) -> str:
    return s[1:-1] if len(s) >= 2 and s[0] == s[-1] == '"' else s


def sniff_lines(path: str | os.PathLike, limit: int = 20) -> list[tuple[int, str]]:
    """The first ``limit`` data lines (not blank, not comments) with their line numbers."""
    f, raw = open_text(path)
    with f, raw.raw:
        head = _read_block(f, str(path), SNIFF_BYTES)
    text = head.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if len(head) == SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last one may be cut
    out = []
    for i, line in enumerate(lines, start=1):
        s = line.strip(" \t\r")
        if not s or s[0] in "#%":
            continue
        out.append((i, line))
        if len(out) >= limit:
            break
    return out


@dataclass(frozen=True, slots=True)
class Sniffed:
    layout: TextLayout
    string_ids: bool      # the first data line has non-numeric ids


def resolve_layout(path: str | os.PathLike, *, delimiter: str | None, header: str,
                   src_column: int | str, dst_column: int | str, time_column: int | str | None,
                   weight_column: int | str | None, relabel: bool) -> Sniffed:
    """Decide whether there is a header, and turn column names into indices.

    ``header="auto"``: the first data line is a header when one of its
    selected fields is not a number while the same field of the next data
    line is (with numeric ids, any non-numeric selected field in the first
    line makes it a header). Files with string ids and a header need
    ``header="yes"``.
    """
    if header not in ("auto", "yes", "no"):
        raise ParameterError(f"header must be auto, yes or no, got {header!r}")
    if delimiter is not None and len(delimiter) != 1:
        if delimiter in ("\\t", "tab"):
            delimiter = "\t"
        else:
            raise ParameterError(f"delimiter must be one character, got {delimiter!r}")
    if delimiter is not None and (delimiter in "\r\n\"#%" or ord(delimiter) > 127):
        raise ParameterError(f"delimiter {delimiter!r} is not supported")
    sample = sniff_lines(path)
    first = split_fields(sample[0][1], delimiter) if sample else []
    names = tuple(_unquote(f) for f in first)

    def index(col, what) -> int:
        if col is None:
            return -1
        if isinstance(col, str) and not col.lstrip("-").isdigit():
            if header == "no":
                raise ParameterError(f"{what} {col!r} is a name but the file has no header (--header no)")
            if col not in names:
                raise ParameterError(f"{path}: {what} {col!r} is not in the header {list(names)}")
            return names.index(col)
        i = int(col)
        if i < 0:
            raise ParameterError(f"{what} must be >= 0, got {i}")
        return i

    by_name = any(isinstance(c, str) and not c.lstrip("-").isdigit()
                  for c in (src_column, dst_column, time_column, weight_column) if c is not None)
    cols = {"src": index(src_column, "src column"), "dst": index(dst_column, "dst column"),
            "time": index(time_column, "time column"), "weight": index(weight_column, "weight column")}
    used = [c for c in cols.values() if c >= 0]
    if len(set(used)) != len(used):
        raise ParameterError(f"columns must differ, got {cols}")

    def numeric_fields(fields: list[str]) -> dict[str, bool]:
        out = {}
        for key, c in cols.items():
            if c >= 0:
                v = fields[c] if c < len(fields) else ""
                out[key] = bool((_INT_RE if key in ("src", "dst") else _NUM_RE).match(v))
        return out

    has_header = header == "yes" or by_name
    if header == "auto" and sample and not by_name:
        num1 = numeric_fields(first)
        if not all(num1.values()):
            if not relabel:
                has_header = True
            elif len(sample) > 1:
                num2 = numeric_fields(split_fields(sample[1][1], delimiter))
                has_header = any(num2[k] and not num1[k] for k in num1)
    data = sample[1:] if has_header else sample
    string_ids = False
    if data:
        num = numeric_fields(split_fields(data[0][1], delimiter))
        string_ids = not (num["src"] and num["dst"])
    layout = TextLayout(delimiter=delimiter, src_column=cols["src"], dst_column=cols["dst"],
                        time_column=cols["time"], weight_column=cols["weight"],
                        header_line=sample[0][0] if (has_header and sample) else 0,
                        column_names=names if has_header else ())
    return Sniffed(layout, string_ids)


# ---------------------------------------------------------------------------
# the reader
# ---------------------------------------------------------------------------
@dataclass(slots=True)
class TextBlock:
    """Parsed rows of one kernel call; ``spans`` (row x [s_a, s_b, d_a, d_b]) index ``buf``."""
    src: np.ndarray | None
    dst: np.ndarray | None
    time: np.ndarray | None
    weight: np.ndarray | None
    spans: np.ndarray | None
    buf: np.ndarray
    first_line: int


class NonNumericIdError(InvalidIdError):
    """An id field is not a number (the caller may retry with string ids)."""


def _raise(path: str, state: np.ndarray, buf: np.ndarray, layout: TextLayout, roles: np.ndarray,
           one_based: bool, num_nodes: int | None, relabel: bool) -> None:
    code, line, field = int(state[S_ERR]), int(state[S_ERR_LINE]), int(state[S_ERR_FIELD])
    text = bytes(buf[int(state[S_ERR_A]):int(state[S_ERR_B])]).decode("utf-8", errors="replace")
    if len(text) > 40:
        text = text[:40] + "..."
    role = int(roles[field]) if field < len(roles) else ROLE_NONE
    what = ROLE_NAMES.get(role, "field")
    where = f"{path}:{line}"
    if code == E_FIELDS:
        need = len(roles)
        delim = "whitespace or comma" if layout.delimiter is None else repr(layout.delimiter)
        raise InputFormatError(f"{where}: malformed line: expected at least {need} fields separated by "
                               f"{delim}, found {field}")
    if code == E_EMPTY:
        raise InputFormatError(f"{where}: empty {what} in column {field}")
    if role in (ROLE_SRC, ROLE_DST):
        if code == E_NONNUMERIC:
            hint = "" if relabel else " (pass --relabel for string ids)"
            raise NonNumericIdError(f"{where}: non-numeric {what} {text!r} in column {field}{hint}")
        if code == E_NEGATIVE:
            raise InvalidIdError(f"{where}: negative {what} {text} in column {field} "
                                 "(pass --relabel for arbitrary ids)")
        if code == E_ONE_BASED:
            raise InvalidIdError(f"{where}: {what} {text} in column {field} is below 1 with --one-based")
        if code == E_BEYOND:
            raise InvalidIdError(f"{where}: {what} {text} in column {field} is beyond the declared "
                                 f"node count {num_nodes}" + (" (ids are 1-based)" if one_based else ""))
        if code == E_OVERFLOW:
            raise InvalidIdError(f"{where}: {what} {text} in column {field} does not fit a 64-bit integer")
    raise InputFormatError(f"{where}: cannot parse {what} {text!r} in column {field} as a number")


def iter_text(path: str | os.PathLike, layout: TextLayout, *, as_spans: bool = False,
              one_based: bool = False, num_nodes: int | None = None, relabel: bool = False,
              block_bytes: int = DEFAULT_BLOCK_BYTES, rows_per_call: int = DEFAULT_ROWS_PER_CALL,
              on_bytes=None) -> Iterator[TextBlock]:
    """Yield parsed rows in file order, at most ``rows_per_call`` at a time.

    Ids are int64 (``one_based`` subtracted, checked against ``num_nodes``)
    or, with ``as_spans``, byte spans into the block (valid until the next
    block is yielded). ``relabel`` allows negative and huge ids.
    """
    name = str(path)
    roles = layout.roles()
    max_needed = len(roles) - 1
    delim = layout.delim_code()
    offset = 1 if (one_based and not relabel) else 0
    limit = -1 if (num_nodes is None or relabel) else int(num_nodes)
    has_time = layout.time_column >= 0
    has_weight = layout.weight_column >= 0
    state = np.zeros(8, dtype=np.int64)
    empty_i = np.empty(0, dtype=np.int64)
    empty_f = np.empty(0, dtype=np.float32)
    empty_s = np.empty((0, 4), dtype=np.int64)
    line_base = 0
    for buf, raw_pos in iter_blocks(path, block_bytes):
        pos, end = 0, len(buf)
        while pos < end:
            # np.empty does not touch its pages: unused outputs cost nothing.
            src = np.empty(rows_per_call, dtype=np.int64)
            dst = np.empty(rows_per_call, dtype=np.int64)
            spans = np.empty((rows_per_call, 4), dtype=np.int64) if as_spans else empty_s
            time = np.empty(rows_per_call, dtype=np.int64) if has_time else empty_i
            weight = np.empty(rows_per_call, dtype=np.float32) if has_weight else empty_f
            rows = _parse_lines(buf, pos, end, delim, roles, max_needed, line_base, layout.header_line,
                                as_spans, offset, limit, relabel, src, dst, time, weight, spans, state)
            if state[S_ERR] != OK:
                _raise(name, state, buf, layout, roles, one_based, num_nodes, relabel)
            first_line = line_base + 1
            pos = int(state[S_POS])
            line_base += int(state[S_LINES])
            if rows:
                yield TextBlock(src=None if as_spans else src[:rows], dst=None if as_spans else dst[:rows],
                                time=time[:rows] if has_time else None,
                                weight=weight[:rows] if has_weight else None,
                                spans=spans[:rows] if as_spans else None, buf=buf, first_line=first_line)
        if on_bytes is not None:
            on_bytes(raw_pos)


def file_size(path: str | os.PathLike) -> int:
    return Path(path).stat().st_size
