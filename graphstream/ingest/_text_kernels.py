"""The numba kernels of the text reader: number parsers and the line parser.

``parse_lines`` walks the raw bytes of a block once:

1. skip blank lines, ``#`` and ``%`` comment lines and the header line;
2. split the line into fields: with ``delim < 0`` any run of spaces or
   tabs, or one comma with optional blanks around it, separates fields;
   with an explicit delimiter exactly one delimiter does (blanks around a
   field are trimmed, a field may be wrapped in double quotes);
3. parse the selected fields: ids as integers (or, for string ids, their
   byte spans), time as int64 (a fractional time is floored; it must be
   finite and fit int64), weight as float32 (finite);
4. check ids (negative, ``--one-based`` zero, beyond ``--num-nodes``) and
   stop at the first problem with its line number, so errors name
   ``file:line``.

It parses at most ``len(out.src)`` rows per call and returns where it
stopped, so its output arrays have a fixed size too. Its inputs come as two
NamedTuples (numba passes them as structs): :class:`LineFormat`, what the
lines look like, fixed for a file; :class:`ParseOut`, the output arrays and
the ``state`` slots it writes.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..store.graph import FLOAT32_LIMIT

# Roles of a field (index = field number in the line).
ROLE_NONE, ROLE_SRC, ROLE_DST, ROLE_TIME, ROLE_WEIGHT = 0, 1, 2, 3, 4
ROLE_NAMES = {ROLE_SRC: "source id", ROLE_DST: "destination id", ROLE_TIME: "time", ROLE_WEIGHT: "weight"}

# Kernel status codes (E_RANGE: a time beyond int64, a weight beyond float32, or not finite).
OK, E_FIELDS, E_NONNUMERIC, E_NEGATIVE, E_BEYOND, E_OVERFLOW, E_ONE_BASED, E_EMPTY, E_RANGE, E_LONE_CR = range(10)

# state[] slots written by the kernel.
S_POS, S_LINES, S_ERR, S_ERR_LINE, S_ERR_FIELD, S_ERR_A, S_ERR_B = range(7)
STATE_SLOTS = 8

# Byte codes.
_NL, _CR, _TAB, _SPACE, _QUOTE, _HASH, _PERCENT, _PLUS, _COMMA, _MINUS, _DOT = 10, 13, 9, 32, 34, 35, 37, 43, 44, 45, 46
_ZERO, _NINE, _E_UPPER, _E_LOWER = 48, 57, 69, 101

_MANTISSA_CAP = 100000000000000000  # beyond 18 significant digits only the magnitude is kept
_EXPONENT_CAP = 10000
# Times are int64: a float time must floor into [-2**63, 2**63) (float64 bounds, exact powers of two).
_TIME_LO, _TIME_HI = -9.223372036854775808e18, 9.223372036854775808e18
_FLOAT32_LIMIT = FLOAT32_LIMIT  # weights are float32: magnitudes from here on would become inf


class LineFormat(NamedTuple):
    """What the lines of one file look like (fixed for the whole file)."""
    delim: int              # delimiter byte, or -1: runs of blanks or one comma
    roles: np.ndarray       # int8, ROLE_* of each field
    max_needed: int         # highest field index that must be present
    skip_line: int          # 1-based line number of the header, 0 = none
    as_spans: bool          # ids as byte spans (string ids) instead of integers
    id_offset: int          # subtracted from every id (1 with --one-based)
    id_limit: int           # ids must be below it; -1 = no limit
    allow_negative: bool    # --relabel: any integer is an id


class ParseOut(NamedTuple):
    """Output arrays of one call (``len(src)`` rows at most) and the kernel's state slots."""
    src: np.ndarray         # int64
    dst: np.ndarray         # int64
    time: np.ndarray        # int64 (empty without a time column)
    weight: np.ndarray      # float32 (empty without a weight column)
    spans: np.ndarray       # int64 rows x [s_a, s_b, d_a, d_b] (empty unless as_spans)
    state: np.ndarray       # int64[STATE_SLOTS]: S_* slots


# ---------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _is_blank(c):
    return c == _SPACE or c == _TAB


@njit(cache=True, nogil=True)
def _is_digit(c):
    return _ZERO <= c <= _NINE


@njit(cache=True, nogil=True)
def _strip_quotes(buf, a, b):
    if b - a >= 2 and buf[a] == _QUOTE and buf[b - 1] == _QUOTE:
        return a + 1, b - 1
    return a, b


@njit(cache=True, nogil=True)
def _quoted_end(buf, pos, end):
    """Past the closing quote of the quoted field opening at ``pos`` (``""`` inside is a quote); at
    the line's end if it is not closed there (a field does not span lines)."""
    i = pos + 1
    while i < end:
        c = buf[i]
        if c == _QUOTE:
            if i + 1 < end and buf[i + 1] == _QUOTE:
                i += 2
                continue
            return i + 1
        if c == _NL or c == _CR:
            return i
        i += 1
    return i


@njit(cache=True, nogil=True)
def ids_with_doubled_quotes(buf, spans):
    """The string ids (``parse_lines``' spans, flattened: 2 * row for the source, 2 * row + 1 for the
    destination) that are quoted fields holding a doubled quote ``""``, which stands for one quote."""
    out = np.zeros(2 * spans.shape[0], dtype=np.bool_)
    for r in range(spans.shape[0]):
        for j in range(2):
            a, b = spans[r, 2 * j], spans[r, 2 * j + 1]
            if a > 0 and b < buf.shape[0] and buf[a - 1] == _QUOTE and buf[b] == _QUOTE:
                for i in range(a, b - 1):
                    if buf[i] == _QUOTE and buf[i + 1] == _QUOTE:
                        out[2 * r + j] = True
                        break
    return np.flatnonzero(out)


@njit(cache=True, nogil=True)
def _sign(buf, a, b):
    """Strip quotes and a leading sign of buf[a:b] -> (a, b, negative, status)."""
    a, b = _strip_quotes(buf, a, b)
    if a >= b:
        return a, b, False, E_EMPTY
    neg = buf[a] == _MINUS
    if neg or buf[a] == _PLUS:
        a += 1
    return a, b, neg, (OK if a < b else E_NONNUMERIC)


@njit(cache=True, nogil=True)
def _digits(buf, i, b, v, cap):
    """Accumulate the decimal digits from buf[i] while ``v < cap`` -> (end, v, digits, kept)."""
    digits = 0
    kept = 0
    while i < b and _is_digit(buf[i]):
        if v < cap:
            v = v * 10 + (np.int64(buf[i]) - _ZERO)
            kept += 1
        digits += 1
        i += 1
    return i, v, digits, kept


@njit(cache=True, nogil=True)
def parse_int(buf, a, b):
    """Signed decimal integer in buf[a:b] -> (value, status)."""
    a, b, neg, status = _sign(buf, a, b)
    if status != OK:
        return 0, status
    # Accumulated with the sign, so that -2**63 (whose magnitude is no int64) parses too.
    v = 0
    sign = -1 if neg else 1
    check = b - a > 18  # shorter numbers cannot overflow: no test per digit
    for i in range(a, b):
        c = np.int64(buf[i]) - _ZERO
        if c < 0 or c > 9:
            return 0, E_NONNUMERIC
        # 2**63 - 1 = 922337203685477580 * 10 + 7; -2**63 = -922337203685477580 * 10 - 8
        if check and (v * sign > 922337203685477580
                      or (v * sign == 922337203685477580 and c > (8 if neg else 7))):
            return 0, E_OVERFLOW
        v = v * 10 + sign * c
    return v, OK


@njit(cache=True, nogil=True)
def parse_decimal_floor(buf, a, b):
    """A decimal with a fraction and no exponent ("-12.75") floored exactly -> (int64 value, status):
    E_NONNUMERIC for any other form, E_OVERFLOW past int64. (Through a float64, a time above 2^53 lost
    its last digits: 1700000000000000001.5 was stored as 1700000000000000000.)"""
    a, b = _strip_quotes(buf, a, b)
    dot = a
    while dot < b and buf[dot] != _DOT:
        dot += 1
    if dot >= b:
        return 0, E_NONNUMERIC
    fraction = False   # a non-zero digit after the point
    for i in range(dot + 1, b):
        if not _is_digit(buf[i]):
            return 0, E_NONNUMERIC
        fraction = fraction or np.int64(buf[i]) != _ZERO
    neg = a < dot and buf[a] == _MINUS
    signed = a < dot and (neg or buf[a] == _PLUS)
    if dot == a + signed:   # no whole digits (".5", "-.5"): a fraction digit is needed
        if dot + 1 >= b:
            return 0, E_NONNUMERIC
        v = 0
    else:
        v, status = parse_int(buf, a, dot)
        if status != OK:
            return 0, status
    if neg and fraction:   # floor
        if v == -9223372036854775807 - 1:
            return 0, E_OVERFLOW
        v -= 1
    return v, OK


@njit(cache=True, nogil=True)
def parse_float(buf, a, b):
    """Decimal number with optional fraction and exponent -> (value, status)."""
    a, b, neg, status = _sign(buf, a, b)
    if status != OK:
        return 0.0, status
    i, mant, digits, kept = _digits(buf, a, b, 0, _MANTISSA_CAP)
    exp10 = digits - kept  # integer digits beyond the mantissa's precision scale it up
    if i < b and buf[i] == _DOT:
        i, mant, fraction, kept = _digits(buf, i + 1, b, mant, _MANTISSA_CAP)
        exp10 -= kept
        digits += fraction
    if digits == 0:
        return 0.0, E_NONNUMERIC
    if i < b and (buf[i] == _E_LOWER or buf[i] == _E_UPPER):
        i += 1
        eneg = False
        if i < b and (buf[i] == _MINUS or buf[i] == _PLUS):
            eneg = buf[i] == _MINUS
            i += 1
        i, e, edigits, _ = _digits(buf, i, b, 0, _EXPONENT_CAP)
        if edigits == 0:
            return 0.0, E_NONNUMERIC
        exp10 += -e if eneg else e
    if i != b:
        return 0.0, E_NONNUMERIC
    if mant == 0:  # 0e999 is 0, not 0 * inf = nan
        return 0.0, OK
    # Dividing by an exact power of ten keeps e.g. 0.1 and 1289241912.5 exact to the last bit.
    v = mant / 10.0 ** (-exp10) if exp10 < 0 else mant * 10.0 ** exp10
    return (-v if neg else v), OK


# ---------------------------------------------------------------------------
# fields and lines
# ---------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _line_end(buf, pos, end):
    """The position after the newline that ends the line at ``pos`` (or past ``end``)."""
    while pos < end and buf[pos] != _NL:
        pos += 1
    return pos + 1

















@njit(cache=True, nogil=True)
def _store_value(buf, a, b, role, row, out):
    """Parse and store a time (floored if fractional) or weight field -> status.

    A time must fit int64 and a weight float32 (finite either way): casting
    1e30 or inf would store an arbitrary value instead (E_RANGE).
    """
    if role == ROLE_TIME:
        t, status = parse_int(buf, a, b)
        if status == E_NONNUMERIC or status == E_OVERFLOW:
            t, status = parse_decimal_floor(buf, a, b)
        if status == E_NONNUMERIC or status == E_OVERFLOW:  # an exponent; -9223372036854775808 overflows
            f, status = parse_float(buf, a, b)
            if status == OK:
                f = np.floor(f)
                if f >= _TIME_LO and f < _TIME_HI:
                    t = np.int64(f)
                else:
                    status = E_RANGE
        out.time[row] = t
        return status
    w, status = parse_float(buf, a, b)
    if status == OK and not abs(w) < _FLOAT32_LIMIT:
        status = E_RANGE
    out.weight[row] = w
    return status


@njit(cache=True, nogil=True)
def _stop(state, pos, lines, status, line_no, field, a, b):
    """Record where parsing stopped and why (status ``OK``: the rows ran out or the block ended)."""
    state[S_POS] = pos
    state[S_LINES] = lines
    state[S_ERR] = status
    if status != OK:
        state[S_ERR_LINE] = line_no
        state[S_ERR_FIELD] = field
        state[S_ERR_A] = a
        state[S_ERR_B] = b


@njit(cache=True, inline="always")
def _holds_no_row(c):
    """Whether a line whose first byte after its leading blanks is ``c`` holds no row (empty, CR, "#", "%"):
    the one rule of parse_lines and of the count of edge lines (scan_edge_lines)."""
    return c == _NL or c == _CR or c == _HASH or c == _PERCENT


@njit(cache=True, nogil=True)
def parse_lines(buf, pos, end, line_base, fmt, out):
    """Parse lines of buf[pos:end] into ``out`` (a :class:`ParseOut`); return the number of rows.

    ``fmt`` is a :class:`LineFormat`; ``line_base`` the number of lines
    before ``pos`` in the file. Stops after ``len(out.src)`` rows, at the
    end, or at the first error; ``out.state`` receives the position reached,
    the lines consumed and the error (code, line, field, byte span of the
    bad field).

    One loop on purpose: written as calls to small field helpers
    (quick id, field end, separator, id check) it parsed 2.4x fewer rows
    per second, inlined or not; the cold paths (comment lines, time and
    weight fields, stopping) are helpers.
    """
    delim, roles, max_needed, skip_line = fmt.delim, fmt.roles, fmt.max_needed, fmt.skip_line
    as_spans, id_offset, id_limit, allow_negative = fmt.as_spans, fmt.id_offset, fmt.id_limit, fmt.allow_negative
    out_src, out_dst, out_spans, state = out.src, out.dst, out.spans, out.state
    cap = len(out_src)
    nroles = len(roles)
    rows = 0
    lines = 0
    state[S_ERR] = OK
    while pos < end and rows < cap:
        lines += 1
        line_no = line_base + lines
        if line_no == 1 and pos + 2 < end and buf[pos] == 0xEF and buf[pos + 1] == 0xBB and buf[pos + 2] == 0xBF:
            pos += 3   # a UTF-8 byte order mark opens the file: not part of its first id
        while pos < end and _is_blank(buf[pos]):
            pos += 1
        if pos >= end:
            break
        c = buf[pos]
        # 1. blank, comment and header lines
        if _holds_no_row(c) or line_no == skip_line:
            pos = _line_end(buf, pos, end)
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
                if pos < end and buf[pos] == _QUOTE:   # a quoted field: its blanks and commas are its own
                    pos = _quoted_end(buf, pos, end)
                while pos < end:
                    c = buf[pos]
                    if c == 32 or c == 9 or c == 44 or c == 10 or c == 13:
                        break
                    pos += 1
                b = pos
            else:
                if pos < end and buf[pos] == _QUOTE:   # a quoted field: its delimiters are its own
                    pos = _quoted_end(buf, pos, end)
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
                            v, status = parse_int(buf, a, b)
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
                else:
                    status = _store_value(buf, a, b, role, rows, out)
                if status != OK:
                    _stop(state, pos, lines, status, line_no, field, a, b)
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
        if pos < end and buf[pos] == _CR:
            # lines end at "\n" ("\r\n" too); a "\r" followed by more of a line is a file of old Mac line
            # endings, whose lines _line_end would skip to the next "\n" (the whole file: one edge, exit 0)
            q = pos
            while q < end and (buf[q] == _CR or _is_blank(buf[q])):
                q += 1
            if q < end and buf[q] != _NL:
                _stop(state, pos, lines, E_LONE_CR, line_no, field, pos, pos)
                return rows
        pos = _line_end(buf, pos, end)
        if field <= max_needed:
            _stop(state, pos, lines, E_FIELDS, line_no, field, 0, 0)
            return rows
        rows += 1
    _stop(state, min(pos, end), lines, OK, 0, 0, 0, 0)
    return rows


# ---------------------------------------------------------------------------
# edge lines: which lines parse_lines turns into rows, without parsing them
# ---------------------------------------------------------------------------
# A cluster's ingest counts the rows of every byte range first, so that each parse task knows where its
# rows go in the store and writes whole chunks itself (ingest/distributed.py). The rule is step 1 of
# parse_lines: after leading blanks, a line that is empty, starts with CR, "#" or "%", or is the header
# line holds no row; every other line holds one (or is an error, which the parse reports).

@njit(cache=True, nogil=True)
def scan_edge_lines(buf, pos, line_base, skip_line, max_edges, max_lines):
    """Walk whole lines of ``buf`` from ``pos`` (the first being line ``line_base + 1`` of the file);
    stop after ``max_edges`` edge lines or ``max_lines`` lines (either < 0: no bound) or at the end.
    Returns (edge lines, lines, the position after the last line walked)."""
    end = len(buf)
    edges = 0
    lines = 0
    while pos < end and edges != max_edges and lines != max_lines:
        lines += 1
        while pos < end and _is_blank(buf[pos]):
            pos += 1
        if pos >= end:
            break
        c = buf[pos]
        if not (_holds_no_row(c) or line_base + lines == skip_line):
            edges += 1
        pos = _line_end(buf, pos, end)
    return edges, lines, min(pos, end)


@njit(cache=True, nogil=True)
def _line_starts(buf):
    """The lines of ``buf``, and those of them whose first byte is a blank, "#", "%" or a control byte
    (an empty line, CR): lines that may hold no row. One loop without branches, from index 0, which
    numba vectorizes: 0.20 s a GB on one core, against 0.84 s for the walk of :func:`scan_edge_lines`."""
    if len(buf) == 0:
        return 0, 0
    lines = 0
    odd = 0
    for i in range(len(buf) - 1):
        nl = buf[i] == _NL
        lead = buf[i + 1]
        lines += nl
        odd += nl & ((lead < 14) | (lead == _SPACE) | (lead == _HASH) | (lead == _PERCENT))
    first = buf[0]   # the first line
    return lines + 1, odd + ((first < 14) | (first == _SPACE) | (first == _HASH) | (first == _PERCENT))


@njit(cache=True, nogil=True)
def _lines_without_rows(buf):
    """Of the lines of ``buf``: those that hold no row by their first byte (empty, CR, "#", "%"), and
    those that start with a blank, which may or may not hold one (0.34 s a GB)."""
    if len(buf) == 0:
        return 0, 0
    no_row = 0
    blank = 0
    for i in range(len(buf) - 1):
        nl = np.int64(buf[i] == _NL)
        lead = buf[i + 1]
        no_row += nl & np.int64((lead == _NL) | (lead == _CR) | (lead == _HASH) | (lead == _PERCENT))
        blank += nl & np.int64((lead == _SPACE) | (lead == _TAB))
    first = buf[0]
    return (no_row + ((first == _NL) | (first == _CR) | (first == _HASH) | (first == _PERCENT)),
            blank + ((first == _SPACE) | (first == _TAB)))


@njit(cache=True, nogil=True)
def _edge_lines_of(buf):
    """The edge lines of ``buf`` (whole lines, no header among them), or -1 when a line starts with a
    blank (then they are walked). Counted branch-free: the lines; and, only when some may hold no row
    (a comment line, say), those that do not."""
    lines, odd = _line_starts(buf)
    if odd == 0:
        return lines
    no_row, blank = _lines_without_rows(buf)
    return -1 if blank else lines - no_row


@njit(cache=True, nogil=True)
def count_edge_lines(buf, skip_line):
    """The rows parse_lines finds in ``buf`` (whole lines, the first being line 1 of the file when
    ``skip_line`` > 0, the header's line number; 0: no header)."""
    edges, _, pos = scan_edge_lines(buf, 0, 0, skip_line, -1, skip_line)
    rest = _edge_lines_of(buf[pos:])
    return edges + (rest if rest >= 0 else scan_edge_lines(buf, pos, 0, 0, -1, -1)[0])


LOCATE_BLOCK = 1 << 20   # bytes counted at a time by after_edge_lines before it walks one


@njit(cache=True, nogil=True)
def after_edge_lines(buf, skip_line, n):
    """The position just after the ``n``-th edge line of ``buf`` (whole lines, the first being line 1
    of the file when ``skip_line`` > 0; the end when it holds fewer). Blocks of LOCATE_BLOCK bytes are
    counted branch-free and passed over; the one that holds the line (or lines led by blanks) is
    walked."""
    edges, _, pos = scan_edge_lines(buf, 0, 0, skip_line, n, skip_line)
    end = len(buf)
    while edges < n and pos < end:
        cut = min(end, pos + LOCATE_BLOCK)
        if cut < end:   # back to the block's last newline: whole lines (a longer line: to its end)
            while cut > pos and buf[cut - 1] != _NL:
                cut -= 1
            if cut == pos:
                cut = min(end, _line_end(buf, pos + LOCATE_BLOCK, end))
        found = _edge_lines_of(buf[pos:cut])
        if 0 <= found and edges + found < n:
            edges += found
            pos = cut
        else:
            found, _, pos = scan_edge_lines(buf[:cut], pos, 0, 0, n - edges, -1)
            edges += found
    return pos
