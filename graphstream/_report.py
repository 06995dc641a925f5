"""The one reporting helper: progress on stderr, and the formatting of figures for people.

Library code never prints; the CLI owns stdout (``--json``). Every long step
reports through :func:`progress` (or :func:`track`, its loop wrapper, or a
:func:`phase_logger` fed by a ``Stopwatch``), which behaves by where stderr goes:

* a terminal: a tqdm bar while the step runs, then one line with its time;
* not a terminal (a log file, CI): no bar, one line per step with its time;
* ``GRAPHSTREAM_PROGRESS=0`` (tests, benchmarks): nothing at all, log lines included; only the
  :func:`warn` lines (data left out, a bound not reached, a fallback taken) are still written.

``GRAPHSTREAM_PROGRESS=1`` forces the bar where stderr is not a terminal.

The ``format_*`` functions and :func:`summary_lines` turn result figures into
text (sizes in MB/GB, rates as ``12.3M edges/s``, rounded seconds), driven by
the key names of the results (``*_bytes``, ``*_per_second``, ``*seconds``), so
that the progress lines and the CLI's human output read the same.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from tqdm import tqdm

_OFF = ("0", "false", "no", "off")


def _mode() -> str:
    """'off', 'bar' (a terminal, or forced) or 'lines' (stderr is a file or a pipe)."""
    forced = os.environ.get("GRAPHSTREAM_PROGRESS", "").strip().lower()
    if forced in _OFF:
        return "off"
    if forced:
        return "bar"
    return "bar" if sys.stderr.isatty() else "lines"


def _progress_enabled() -> bool:
    return _mode() == "bar"


class _Count:
    """What a step's code sees when no bar is drawn: counts, so that the closing line can give a rate."""

    def __init__(self, total: int | None):
        self.total, self.n = total, 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, *args, **kwargs) -> None:
        pass

    def set_postfix(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def progress(total: int | None, desc: str, unit: str = "edge", line: bool = True,
             initial: int = 0) -> Iterator[tqdm | _Count]:
    """A step that reports ``bar.update(n)``: a tqdm bar on a terminal, and one line with its time at the end.

    ``line=False``: the bar only (the step's time is logged by an enclosing
    phase, e.g. a ``Stopwatch`` lap). No line is written when the step fails.
    ``initial``: units done before this run (a resumed one): shown in the bar, not counted in the line's
    rate (a run resumed at epoch 25 of 40 reported 40 epochs at 79.6 epochs/s for its 15).
    """
    mode = _mode()
    if mode == "bar":
        bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=sys.stderr, leave=False,
                   dynamic_ncols=True, initial=initial)
    else:
        bar = _Count(total)
        bar.n = initial
    start = time.perf_counter()
    try:
        yield bar
    finally:
        bar.close()
    if line and mode != "off":
        log(_done(desc, bar.n - initial, unit, time.perf_counter() - start))


def track(items: Iterable, total: int | None, desc: str, unit: str = "edge",
          size: Callable[[object], int] | None = None, line: bool = False) -> Iterator:
    """``for x in track(items, ...)``: :func:`progress` as a loop wrapper, a one-line edit in a loop.

    ``size(x)``: how many ``unit`` an item counts for (default 1). ``line``
    defaults to False: loops are usually parts of a phase that logs its time.
    """
    with progress(total, desc, unit, line=line) as bar:
        for item in items:
            yield item
            bar.update(1 if size is None else size(item))


def phase_logger(prefix: str) -> Callable[[str, float], None]:
    """``Stopwatch(on_lap=phase_logger("spring"))``: one line per finished phase, ``spring: degrees 1.2 s``."""
    def on_lap(name: str, seconds: float) -> None:
        log(f"{prefix}: {name.replace('_', ' ')} {format_seconds(seconds)}")
    return on_lap


def log(message: str) -> None:
    """One line of information on stderr (suppressed with GRAPHSTREAM_PROGRESS=0)."""
    if _mode() != "off":
        # tqdm.write keeps a bar that is being drawn below the line instead of breaking it
        tqdm.write(f"graphstream: {message}", file=sys.stderr)
        sys.stderr.flush()


def warn(message: str) -> None:
    """One line on stderr about a result that is not what the user may assume (data left out, a bound not
    reached, a fallback taken): printed whatever GRAPHSTREAM_PROGRESS says, which silences progress only."""
    tqdm.write(f"graphstream: warning: {message}", file=sys.stderr)
    sys.stderr.flush()


def _done(desc: str, n: int, unit: str, seconds: float) -> str:
    if n <= 0:
        return f"{desc}: {format_seconds(seconds)}"
    if unit == "B":
        amount, rate = format_bytes(n), f"{format_bytes(n / seconds)}/s" if seconds > 0 else ""
    else:
        units = unit if unit.endswith("s") or n == 1 else unit + "s"
        amount = f"{format_count(n)} {units}"
        rate = format_rate(n / seconds, units) if seconds > 0 else ""
    return f"{desc}: {amount} in {format_seconds(seconds)}" + (f" ({rate})" if rate else "")


# -- figures for people -----------------------------------------------------------------------------

def format_bytes(n: float) -> str:
    """Decimal units: ``213.6 MB``, ``1.24 GB`` (1 MB = 10**6 bytes, as disks are sold)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}" if n / scale < 100 else f"{n / scale:.0f} {unit}"
    return f"{int(n)} B"


def format_count(n: float) -> str:
    """3 significant digits with K/M/G: ``12.3M``; plain below 10 000 (``4300``, ``6180``, ``12.5``)."""
    if abs(n) < 10_000:
        # not ``.3g`` from 1000 on: it writes 6180.4 as 6.18e+03
        return f"{n:.0f}" if float(n).is_integer() or abs(n) >= 100 else f"{n:.3g}"
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{suffix}" if n / scale < 1000 else f"{n / scale:.0f}{suffix}"
    return f"{n:.0f}"


def format_rate(per_second: float, units: str) -> str:
    """``12.3M edges/s``."""
    return f"{format_count(per_second)} {units}/s"


def format_seconds(s: float) -> str:
    """``0.42 s``, ``12.3 s``, ``41 s``, ``2 min 05 s``, ``1 h 02 min``."""
    if s < 1:
        return f"{s:.2f} s"
    if s < 20:
        return f"{s:.1f} s"
    if s < 120:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def format_value(key: str, value: object) -> str:
    """One result value, by what its key says it measures."""
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "-"}[value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        if key.endswith("_bytes") or key.startswith("bytes_"):
            return format_bytes(value)
        if key.endswith("_per_second"):
            return format_rate(value, key[: -len("_per_second")].replace("_", " "))
        if key == "window_seconds":   # named so in --json, but in the store's time unit (ns from datetimes)
            shown = int(value) if float(value).is_integer() else value
            return f"{shown:,} (in the store's time unit)"
        if key == "seconds" or key.endswith("_seconds"):
            return format_seconds(value)
        if isinstance(value, float):
            # four significant digits showed 6198.3 as "6198.0" and 42136.0 as "4.214e+04"
            text = f"{value:.1f}" if 100 <= abs(value) < 1e15 else f"{value:.4g}"
            return text + ".0" if text.lstrip("-").isdigit() else text   # 1.0 stays a ratio, not a count
        return f"{value:,}"
    if isinstance(value, list | tuple):
        if len(value) <= 8 and all(not isinstance(v, dict | list) for v in value):
            # counts compactly (12.3K): a thousands separator would read as the list's comma
            return ", ".join(format_count(v) if isinstance(v, int) and not isinstance(v, bool)
                             and _is_plain(key) else format_value(key, v) for v in value) if value else "(none)"
        numbers = [v for v in value if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(numbers) == len(value):
            return f"{len(value)} values, {format_value(key, min(numbers))} .. {format_value(key, max(numbers))}"
        return f"[{len(value)} items]"
    return str(value)


def _is_plain(key: str) -> bool:
    """A count, not a size, rate or time."""
    return not (key.endswith(("_bytes", "_per_second", "seconds")) or key.startswith("bytes_"))


def _is_table(value: object) -> bool:
    """Nested settings and long per-item lists: shown with --verbose only."""
    return isinstance(value, dict) or (isinstance(value, list | tuple) and len(value) > 8)


def _nested(key: str, table: dict, indent: str) -> list[tuple[str, str]]:
    rows = [(indent + key, "")]
    for k, v in table.items():
        unit = "seconds" if key.endswith("seconds") else k   # phase_seconds: {"metis": 0.15, ...}
        rows += _nested(k, v, indent + "  ") if isinstance(v, dict) else [(indent + "  " + k, format_value(unit, v))]
    return rows


def summary_lines(result: dict, headline: Sequence[str] | None = None, verbose: bool = False) -> list[str]:
    """A command's result as aligned ``key  value`` lines.

    ``headline``: the keys a user decides on, shown in that order; the others
    (settings, per-phase times, per-part lists) only with ``verbose``. Without
    a headline every plain value is shown and nested tables only with ``verbose``.
    A result with ``num_edges`` and ``seconds`` but no rate gets its rate on the ``seconds`` line.
    """
    if headline is None:
        keys = [k for k, v in result.items() if verbose or not _is_table(v)]
    else:
        keys = [k for k in headline if k in result]
        if verbose:
            keys += [k for k in result if k not in keys]
    rows: list[tuple[str, str]] = []
    for key in keys:
        value = result[key]
        if isinstance(value, dict):
            rows += _nested(key, value, "")
            continue
        text = format_value(key, value)
        if key == "seconds" and "edges_per_second" not in result and isinstance(value, int | float) \
                and value > 0 and isinstance(result.get("num_edges"), int) and result["num_edges"] > 0:
            text += f"  ({format_rate(result['num_edges'] / value, 'edges')})"
        rows.append((key, text))
    width = max((len(k) for k, _ in rows), default=0) + 1
    return [f"{k + ':':<{width}} {v}".rstrip() for k, v in rows]
