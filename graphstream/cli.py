"""The ``graphstream`` command.

Subcommands are listed once, in :data:`COMMANDS` (name -> module, one-line
help). A command module exposes ``configure(parser)``, which adds its
arguments and sets ``run`` to a function ``run(args) -> dict``; argparse
stays in these modules, the library below them takes typed configs.

Dispatch is lazy: ``graphstream info ...`` imports only
``graphstream.commands.info``; ``graphstream --help`` imports no command
module. Commands of other packages plug in through the entry-point group
``graphstream.commands`` (name = "module"; the module exposes ``HELP`` and
``configure``): the trainer registers ``graphstream train`` that way, so the
core never imports it. Entry points are only looked up for a name that is not
built in, or to list every command.

The CLI owns stdout: with ``--json`` it prints exactly one JSON object;
otherwise ``key: value`` lines. Errors caused by input
(:class:`GraphStreamError`, missing files) print one line on stderr and exit 2.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from types import ModuleType

from . import __version__
from .commands.flags import json_flag
from .errors import GraphStreamError

PLUGIN_GROUP = "graphstream.commands"

COMMANDS: dict[str, tuple[str, str]] = {
    "dataset": ("graphstream.commands.dataset",
                "write a shared real dataset (cora, citeseer, facebook) as "
                "OUT_DIR/graph.zarr + features/labels/masks .npy"),
    "export": ("graphstream.commands.export",
               "write a partitioned dataset in DistDGL's or PyG's partition format"),
    "generate": ("graphstream.commands.generate", "generate a synthetic graph into a graph store"),
    "info": ("graphstream.commands.info", "describe a graph store (degrees computed by streaming)"),
    "ingest": ("graphstream.commands.ingest",
               "read an edge file (SNAP/CSV/TSV[.gz|.bz2|.xz], npy, parquet) into a graph store"),
    "partition": ("graphstream.commands.partition", "partition a graph store by streaming its edges"),
    "snapshots": ("graphstream.commands.snapshots",
                  "cut a timestamped graph store into snapshots (keyframes + deltas)"),
}


def _plugins() -> dict[str, str]:
    """Plug-in commands: name -> module, from installed entry points (built-in names win)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value.split(":")[0] for ep in entry_points(group=PLUGIN_GROUP) if ep.name not in COMMANDS}


def _selected(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with full arguments for the command ``argv`` names (every command if None).

    The other commands get a bare parser with their help line, enough for
    ``graphstream --help`` and for argparse's "invalid choice" message.
    """
    parser = argparse.ArgumentParser(
        prog="graphstream",
        description="Partition and store graphs larger than memory, and feed them to GNN trainers.")
    parser.add_argument("--version", action="version", version=f"graphstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    selected = None if argv is None else _selected(argv)
    modules: dict[str, str | ModuleType] = {name: module for name, (module, _) in COMMANDS.items()}
    if selected is None or selected not in COMMANDS:
        modules.update(_plugins())
    for name in sorted(modules):
        full = argv is None or name == selected
        module = modules[name]
        if name in COMMANDS:
            help_line = COMMANDS[name][1]
            if full:
                module = importlib.import_module(module)
        else:  # a plug-in's help line is in its module: import it (plug-ins keep their imports light)
            module = importlib.import_module(module)
            help_line = module.HELP
        command = sub.add_parser(name, help=help_line, parents=[json_flag()])
        if full:
            module.configure(command)
    return parser


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
    argv = sys.argv[1:] if argv is None else [str(word) for word in argv]
    parser = build_parser(argv)
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
