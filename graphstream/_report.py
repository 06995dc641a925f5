"""The one reporting helper: progress bars and log lines go to stderr.

Library code never prints; the CLI owns stdout (``--json``). Progress is
shown only when stderr is a terminal, unless GRAPHSTREAM_PROGRESS=1 forces it
(or GRAPHSTREAM_PROGRESS=0 silences it).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tqdm import tqdm


def _progress_enabled() -> bool:
    forced = os.environ.get("GRAPHSTREAM_PROGRESS")
    if forced is not None:
        return forced not in ("", "0", "false", "no")
    return sys.stderr.isatty()


@contextmanager
def progress(total: int | None, desc: str, unit: str = "edge") -> Iterator[tqdm]:
    """A tqdm bar on stderr, disabled when nobody is watching."""
    bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=True,
               file=sys.stderr, disable=not _progress_enabled(), leave=False)
    try:
        yield bar
    finally:
        bar.close()


def log(message: str) -> None:
    """One line of information on stderr (suppressed with GRAPHSTREAM_PROGRESS=0)."""
    if os.environ.get("GRAPHSTREAM_PROGRESS", "1") not in ("0", "false", "no"):
        print(f"graphstream: {message}", file=sys.stderr, flush=True)
