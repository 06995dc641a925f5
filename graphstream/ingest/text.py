"""Text edge lists: SNAP, CSV and TSV, optionally .gz/.bz2/.xz compressed.

``iter_text`` reads the file in blocks of whole lines (:mod:`.blocks`: a
background thread reads and decompresses the next block) and hands each to
the numba line parser (:mod:`._text_kernels`), at most ``rows_per_block``
rows per call, so its output arrays have a fixed size and memory is a few
blocks whatever the file size. The first problem stops the parse; it is
reported here as ``file:line: ...``. The layout (delimiter, header line,
columns) comes from :mod:`.sniff`.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputFormatError, InvalidIdError
from ._text_kernels import (
    E_BEYOND,
    E_EMPTY,
    E_FIELDS,
    E_LONE_CR,
    E_NEGATIVE,
    E_NONNUMERIC,
    E_ONE_BASED,
    E_OVERFLOW,
    E_RANGE,
    OK,
    ROLE_DST,
    ROLE_NAMES,
    ROLE_NONE,
    ROLE_SRC,
    ROLE_TIME,
    S_ERR,
    S_ERR_A,
    S_ERR_B,
    S_ERR_FIELD,
    S_ERR_LINE,
    S_LINES,
    S_POS,
    STATE_SLOTS,
    LineFormat,
    ParseOut,
    ids_with_doubled_quotes,
    parse_lines,
)
from .blocks import DEFAULT_BLOCK_BYTES, LineTooLongError, count_lines, iter_blocks
from .config import DEFAULT_ROWS_PER_BLOCK, IngestConfig
from .sniff import TextLayout

DEFAULT_ROWS_PER_CALL = DEFAULT_ROWS_PER_BLOCK  # the name this module used before the split


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


class IdOverflowError(InvalidIdError):
    """An id field is a number beyond int64 (an unsigned 64-bit hash, say): with --relabel the caller
    retries with string ids, as for a word."""


class IdBeyondError(InvalidIdError):
    """An id at or beyond the node count; ``where`` ("file:line" or "file: row N") and ``value`` locate it."""

    def __init__(self, message: str, where: str, value: str):
        super().__init__(message)
        self.where = where
        self.value = value

    def __reduce__(self):   # raised in a task of a cluster, it is pickled back to the client whole
        return type(self), (str(self), self.where, self.value)


# What a time or weight must be, said by every reader's error message.
TIME_RULE = "times must be integers or finite numbers (floored) within int64, -2**63 .. 2**63-1"
WEIGHT_RULE = "weights must be finite numbers within float32, |w| <= 3.4e38"
_NOT_FINITE = ("nan", "inf", "infinity")


LONE_CR = ("a carriage return (\\r) ends the line, and no line feed (\\n) follows: old Mac line endings? convert "
           "the file first, e.g. tr '\\r' '\\n' < IN > OUT")


def no_edges_error(name: str, paths: list[str]) -> InputFormatError:
    """The error of a text input without a row: "no edges found", unless the start of a file holds a lone
    carriage return (a header or comment line of old Mac line endings read as one line, the rows in it)."""
    from .blocks import open_text
    from .sniff import detect_format
    for path in paths:
        try:
            if detect_format(path) in ("npy", "parquet"):   # binary: a 13 byte is data
                continue
            stream, raw = open_text(path)
            with raw.raw, stream:
                head = stream.read(1 << 16)
        except (OSError, ValueError, EOFError):
            continue
        # what the parse kernel refuses (E_LONE_CR), but on a skipped line: a "\r" whose next character
        # other than "\r", space and tab is not "\n"
        lone = re.search(rb"\r[\r \t]*[^\r\n \t]", head)
        if lone is not None:
            line = head.count(b"\n", 0, lone.start()) + 1
            return InputFormatError(f"{path}:{line}: {LONE_CR}")
    return InputFormatError(f"{name}: no edges found (empty file, or only comments/header)")


def _raise(path: str, state: np.ndarray, buf: np.ndarray, layout: TextLayout, roles: np.ndarray,
           config: IngestConfig) -> None:
    """Raise the error the kernel stopped at, naming ``file:line`` and the column."""
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
    if code == E_LONE_CR:
        raise InputFormatError(f"{where}: {LONE_CR}")
    not_finite = text.strip('"+-').lower() in _NOT_FINITE
    if role not in (ROLE_SRC, ROLE_DST) and (code == E_RANGE or not_finite):
        rule = TIME_RULE if role == ROLE_TIME else WEIGHT_RULE
        problem = "is not a finite number" if not_finite else "is out of range"
        raise InputFormatError(f"{where}: {what} {text} in column {field} {problem}: {rule}")
    if role in (ROLE_SRC, ROLE_DST):
        if code == E_NONNUMERIC:
            hint = "" if config.relabel else " (pass --relabel for string ids)"
            raise NonNumericIdError(f"{where}: non-numeric {what} {text!r} in column {field}{hint}")
        if code == E_NEGATIVE:
            raise InvalidIdError(f"{where}: negative {what} {text} in column {field} "
                                 "(pass --relabel for arbitrary ids)")
        if code == E_ONE_BASED:
            raise InvalidIdError(f"{where}: {what} {text} in column {field} is below 1 with --one-based")
        if code == E_BEYOND:
            raise IdBeyondError(f"{where}: {what} {text} in column {field} is beyond the declared "
                                f"node count {config.num_nodes}" + (" (ids are 1-based)" if config.one_based else ""),
                                where, text)
        if code == E_OVERFLOW:
            hint = "" if config.relabel else " (pass --relabel for arbitrary ids)"
            raise IdOverflowError(f"{where}: {what} {text} in column {field} does not fit a 64-bit signed "
                                  f"integer{hint}")
    raise InputFormatError(f"{where}: cannot parse {what} {text!r} in column {field} as a number")


def line_format(layout: TextLayout, config: IngestConfig, *, as_spans: bool) -> LineFormat:
    """The kernel's view of the layout and the id rules."""
    roles = layout.roles()
    limit = config.id_limit
    return LineFormat(delim=layout.delim_code(), roles=roles, max_needed=len(roles) - 1,
                      skip_line=int(layout.header_line), as_spans=bool(as_spans), id_offset=config.id_offset,
                      id_limit=-1 if limit is None else int(limit), allow_negative=bool(config.relabel))


def _outputs(rows: int, fmt: LineFormat, layout: TextLayout, state: np.ndarray) -> ParseOut:
    """Fresh output arrays for one call; np.empty does not touch its pages: unused outputs cost nothing."""
    return ParseOut(src=np.empty(rows, dtype=np.int64), dst=np.empty(rows, dtype=np.int64),
                    time=np.empty(rows if layout.time_column >= 0 else 0, dtype=np.int64),
                    weight=np.empty(rows if layout.weight_column >= 0 else 0, dtype=np.float32),
                    spans=np.empty((rows if fmt.as_spans else 0, 4), dtype=np.int64), state=state)


def iter_text(path: str | os.PathLike, layout: TextLayout, config: IngestConfig, *, as_spans: bool = False,
              on_bytes=None, start: int = 0, stop: int | None = None) -> Iterator[TextBlock]:
    """Yield parsed rows in file order, at most ``config.rows_per_block`` at a time.

    Ids are int64 (``one_based`` subtracted, checked against ``num_nodes``)
    or, with ``as_spans``, byte spans into the block (valid until the next
    block is yielded). ``relabel`` allows negative and huge ids.

    ``start``/``stop``: only the lines in bytes [start, stop) of a plain file
    (:func:`.blocks.line_cuts`; a task of a cluster). A range after the first
    holds no header (the header is within the sniffed head, inside the first
    range); an error in it is still named by its line in the whole file.
    """
    name = str(path)
    if start:
        layout = replace(layout, header_line=0)
    fmt = line_format(layout, config, as_spans=as_spans)
    has_time = layout.time_column >= 0
    has_weight = layout.weight_column >= 0
    state = np.zeros(STATE_SLOTS, dtype=np.int64)
    line_base = 0
    blocks = iter_blocks(path, config.block_bytes, start=start, stop=stop)
    while True:
        try:
            buf, raw_pos = next(blocks)
        except StopIteration:
            return
        except LineTooLongError as exc:  # the blocks before were parsed: the unfinished line is the next one
            line = line_base + 1 + (count_lines(path, start) if start else 0)
            raise InputFormatError(f"{name}:{line}: {exc.message}") from None
        pos, end = 0, len(buf)
        while pos < end:
            out = _outputs(config.rows_per_block, fmt, layout, state)
            rows = parse_lines(buf, pos, end, line_base, fmt, out)
            if state[S_ERR] != OK:
                if start:   # lines were counted from the range's start: name the file's line
                    state[S_ERR_LINE] += count_lines(path, start)
                _raise(name, state, buf, layout, fmt.roles, config)
            first_line = line_base + 1
            pos = int(state[S_POS])
            line_base += int(state[S_LINES])
            if rows:
                spans, text = unescape_quotes(buf, out.spans[:rows]) if as_spans else (None, buf)
                yield TextBlock(src=None if as_spans else out.src[:rows], dst=None if as_spans else out.dst[:rows],
                                time=out.time[:rows] if has_time else None,
                                weight=out.weight[:rows] if has_weight else None,
                                spans=spans, buf=text, first_line=first_line)
        if on_bytes is not None:
            on_bytes(raw_pos)


def unescape_quotes(buf: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """String id spans with each quoted field's ``""`` read as one quote (as CSV has it), and the bytes
    they point into: ``buf`` itself, or where an id needs it, ``buf`` with the unescaped ids after it
    (the block is a read-only view of the file's bytes, so they cannot be rewritten in place)."""
    ids = ids_with_doubled_quotes(buf, spans)
    if not ids.size:
        return spans, buf
    spans, extra = spans.copy(), bytearray()
    for r, column in zip(*np.divmod(ids, 2), strict=True):
        a, b = spans[r, 2 * column:2 * column + 2].tolist()
        spans[r, 2 * column] = len(buf) + len(extra)
        extra += bytes(buf[a:b]).replace(b'""', b'"')
        spans[r, 2 * column + 1] = len(buf) + len(extra)
    return spans, np.concatenate([buf, np.frombuffer(bytes(extra), dtype=np.uint8)])


__all__ = ["DEFAULT_BLOCK_BYTES", "DEFAULT_ROWS_PER_CALL", "IdBeyondError", "NonNumericIdError", "TIME_RULE",
           "WEIGHT_RULE", "TextBlock", "TextLayout",
           "iter_text", "line_format"]
