"""Sniffing an edge file before it is read: its format, and for text its header and columns.

``detect_format`` tells npy and parquet by their magic bytes and csv/tsv/snap
by the file name. ``resolve_layout`` reads the first data lines of a text
file (with the kernel's field rules, in Python) to decide whether the first
one is a header, to turn column names into indices and to see whether ids
are strings.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._report import log
from ..errors import ParameterError
from ._text_kernels import ROLE_DST, ROLE_SRC, ROLE_TIME, ROLE_WEIGHT
from .blocks import open_text, read_block

NPY_MAGIC = b"\x93NUMPY"
PARQUET_MAGIC = b"PAR1"
SNIFF_BYTES = 1 << 16
_COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")


def detect_format(path: str | os.PathLike) -> str:
    """'npy' or 'parquet' from magic bytes, else csv/tsv/snap from the name."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(NPY_MAGIC):
        return "npy"
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    name = Path(path).name.lower()
    for suffix in _COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".tsv"):
        return "tsv"
    return "snap"


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


def _is_word(field: str) -> bool:
    """A header name: starts with a letter or ``_`` (``src``, ``FromNodeId``), unlike ``2x``, ``-1`` or ``""``."""
    name = _unquote(field)
    return bool(name) and (name[0].isalpha() or name[0] == "_")


# Names that edge-list headers give their id columns (compared lower-case, without ``_``/``-``/blanks,
# after dropping a trailing ``id``/``node``/``vertex``/``name`` or digits: ``FromNodeId`` -> ``from``,
# ``source_id`` -> ``source``, ``node1`` -> ``node``). With string ids a first line is a header only when
# both of its id fields are such names (and neither appears again as an id in the lines sniffed).
ID_COLUMN_WORDS = frozenset({
    "src", "dst", "source", "target", "from", "to", "node", "vertex", "id", "u", "v", "head", "tail",
    "sender", "receiver", "origin", "destination", "dest", "start", "end", "in", "out",
    # the relation's roles (a follower,followee first line was stored as an edge)
    "follower", "followee", "user", "friend", "person", "account", "citing", "cited", "parent", "child",
    "caller", "callee", "left", "right"})
_NAME_SUFFIX_RE = re.compile(r"(nodeid|vertexid|nodename|id|node|vertex|name|\d+)$")


def is_id_column_name(field: str) -> bool:
    """``src``, ``FromNodeId``, ``source_id``, ``node1``...: a name edge-list headers give an id column."""
    name = re.sub(r"[\s_\-]", "", _unquote(field).lower())
    return name in ID_COLUMN_WORDS or (_NAME_SUFFIX_RE.sub("", name) or name) in ID_COLUMN_WORDS


def sniff_lines(path: str | os.PathLike, limit: int = 20) -> list[tuple[int, str]]:
    """The first ``limit`` data lines (not blank, not comments) with their line numbers."""
    f, raw = open_text(path)
    with f, raw.raw:
        head = read_block(f, str(path), SNIFF_BYTES)
    text = head.decode("utf-8-sig", errors="replace")   # -sig: a byte order mark is not part of the header
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
    header_reason: str = ""   # why the first line is (or is not) a header, when that was a decision


def resolve_layout(path: str | os.PathLike, *, delimiter: str | None, header: str,
                   src_column: int | str, dst_column: int | str, time_column: int | str | None,
                   weight_column: int | str | None, relabel: bool) -> Sniffed:
    """Decide whether there is a header, and turn column names into indices.

    ``header="auto"``: the first data line is a header only when its id
    fields are words (they start with a letter or ``_``: ``src``,
    ``FromNodeId``); anything else is data, so a malformed first line such
    as ``1 2x`` or ``0 1 nan`` is an error naming line 1, not a header
    silently skipped. With ``relabel`` (ids may be words too) a first line
    of words is a header when a selected field of the next data line is a
    number where the first line's is not (``from to`` over ``1 2``); when
    the ids are words on every line, when both of its id fields are column
    names (:func:`is_id_column_name`: ``src``, ``to``, ``FromNodeId``) that
    do not occur again as ids in the lines sniffed. Anything else is data:
    ``header="yes"`` forces a header. The decision on a first line of words
    is logged on stderr and kept in ``Sniffed.header_reason``.
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
    reason = ""
    if header == "auto" and sample and not by_name:
        ids = [_unquote(first[cols[k]]) if cols[k] < len(first) else "" for k in ("src", "dst")]
        if all(_is_word(f) for f in ids):
            has_header, reason = _first_line_of_words(ids, first, sample[1:], relabel, delimiter, cols,
                                                      numeric_fields)
            verdict = "a header, skipped" if has_header else "data (an edge)"
            log(f"{Path(path).name}:{sample[0][0]}: first line {ids[0]!r} {ids[1]!r} read as {verdict}: {reason} "
                f"(--header {'no' if has_header else 'yes'} to read it otherwise)")
    data = sample[1:] if has_header else sample
    fields = len(split_fields(data[0][1], delimiter)) if data else 0
    if data and used and max(used) >= max(2, fields):
        # a column chosen past the line (past the first two: a line short of those is the kernel's
        # "malformed line"), named here: a header of words was taken for an edge, and blamed ("non-numeric
        # destination id 'b' in column 1", for a source column 5)
        key = max(cols, key=cols.get)
        delim = "whitespace or comma" if delimiter is None else repr(delimiter)
        raise ParameterError(f"{path}:{data[0][0]}: {key} column {cols[key]} is beyond the {fields} fields "
                             f"of the first line (separated by {delim}; columns count from 0)")
    string_ids = False
    if data:
        num = numeric_fields(split_fields(data[0][1], delimiter))
        string_ids = not (num["src"] and num["dst"])
    layout = TextLayout(delimiter=delimiter, src_column=cols["src"], dst_column=cols["dst"],
                        time_column=cols["time"], weight_column=cols["weight"],
                        header_line=sample[0][0] if (has_header and sample) else 0,
                        column_names=names if has_header else ())
    return Sniffed(layout, string_ids, reason)


def _first_line_of_words(ids: list[str], first: list[str], rest: list[tuple[int, str]], relabel: bool,
                         delimiter: str | None, cols: dict[str, int], numeric_fields) -> tuple[bool, str]:
    """Whether a first line whose id fields are words is a header, and why (see :func:`resolve_layout`)."""
    if not relabel:
        return True, "its id fields are words and ids must be numbers without --relabel"
    if not rest:
        return False, "it is the only line, so nothing tells a header from an edge between words"
    num1 = numeric_fields(first)
    num2 = numeric_fields(split_fields(rest[0][1], delimiter))
    numbered = [k for k in num1 if num2[k] and not num1[k]]
    if numbered:
        return True, f"its {numbered[0]} field is a word where the next line has a number"
    if not all(is_id_column_name(f) for f in ids):
        return False, "the ids are words on every line and its id fields are not column names such as src/dst"
    seen = {_unquote(fields[cols[k]]) for _, line in rest for fields in [split_fields(line, delimiter)]
            for k in ("src", "dst") if cols[k] < len(fields)}
    again = [f for f in ids if f in seen]
    if again:
        return False, f"{again[0]!r} is also an id on the following lines"
    return True, "its id fields are column names that are not ids on the following lines"
