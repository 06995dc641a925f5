"""Flags that several commands share, defined once.

``--json`` and ``--verbose`` are every command's (the CLI contract): :mod:`graphstream.cli` gives
each subparser the :func:`json_flag` and :func:`verbose_flag` parents. The others vary in their help
text per command, so commands add them with a function from here.
"""
from __future__ import annotations

import argparse


def json_flag() -> argparse.ArgumentParser:
    """Parent parser of ``--json``: one JSON object on stdout, logs on stderr."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return parent


def verbose_flag() -> argparse.ArgumentParser:
    """Parent parser of ``--verbose``: the human summary shows every figure and setting, not only the headline."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("-v", "--verbose", action="store_true",
                        help="show every figure and setting (without --json; --json always has them all)")
    return parent


def add_overwrite(parser: argparse.ArgumentParser, what: str = "an existing output") -> None:
    """``--overwrite``: replace the command's output (``what`` names it in the help)."""
    parser.add_argument("--overwrite", action="store_true", help=f"replace {what}")


def add_threads(parser: argparse.ArgumentParser, help: str) -> None:  # noqa: A002 - argparse's word
    """``--threads N``: CPU threads (None: the command's default)."""
    parser.add_argument("--threads", type=int, default=None, help=help)
