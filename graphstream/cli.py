"""The ``graphstream`` command.

Each subcommand lives in ``graphstream/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``run`` to a function
``run(args) -> dict``. The CLI owns stdout: with ``--json`` it prints exactly
one JSON object; otherwise ``key: value`` lines. Errors caused by input
(:class:`GraphStreamError`, missing files) print one line on stderr and exit 2.
"""
from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from typing import Sequence

from . import __version__, commands
from .errors import GraphStreamError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphstream",
        description="Partition and store graphs larger than memory, and feed them to GNN trainers.")
    parser.add_argument("--version", action="version", version=f"graphstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{commands.__name__}.{mod.name}").register(sub)
    return parser


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _print_human(result: dict, indent: str = "") -> None:
    for key, value in result.items():
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _print_human(value, indent + "  ")
        elif isinstance(value, float):
            print(f"{indent}{key}: {value:.6g}")
        elif isinstance(value, list) and len(value) > 8:
            print(f"{indent}{key}: [{len(value)} items]")
        else:
            print(f"{indent}{key}: {value}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.run(args)
    except GraphStreamError as exc:
        print(f"graphstream {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        print(f"graphstream {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"graphstream {args.command}: interrupted", file=sys.stderr)
        return 130
    if result is not None:
        if getattr(args, "json", False):
            print(json.dumps(result, default=_json_default))
        else:
            _print_human(result)
    return 0


def _json_default(obj):
    import numpy as np
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


if __name__ == "__main__":
    sys.exit(main())
