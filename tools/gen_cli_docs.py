"""Write docs/cli.md, the reference of every graphstream command and flag, from the CLI's own parser.

    .venv/bin/python tools/gen_cli_docs.py           # rewrite docs/cli.md
    .venv/bin/python tools/gen_cli_docs.py --check   # exit 1 if docs/cli.md is out of date

The page is generated, never edited by hand, so it cannot drift from the
parser: tests/test_polish.py regenerates it and compares. Usage lines are
formatted at a fixed width (not the terminal's), so the output is the same
everywhere. Plug-in commands (``graphstream train``) are included when
installed, as ``graphstream --help`` lists them.
"""
from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "cli.md"
WIDTH = 100

HEADER = """# Command-line reference

Generated from the parser by `tools/gen_cli_docs.py`; do not edit by hand
(`tests/test_polish.py` compares it with the parser: after changing a flag,
run `.venv/bin/python tools/gen_cli_docs.py`). `graphstream COMMAND --help`
prints the same text. A first walk through the commands:
[getting-started.md](getting-started.md).

Every command takes `--json` (exactly one JSON object on stdout; logs and
progress on stderr) and exits 2 with one line naming the problem on bad input.
"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


SHARED_DESTS = {"json", "verbose"}   # the flags every parser gets from its parents


def _own_arguments(parser: argparse.ArgumentParser) -> bool:
    """Whether a parser with sub-commands takes arguments of its own (``serve --root ...`` does,
    ``generate`` only names its generator)."""
    return any(not isinstance(a, argparse._HelpAction | argparse._SubParsersAction) and a.dest not in SHARED_DESTS
               for a in parser._actions)


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of every command, nested ones (``generate rmat``) as "generate rmat", in name order;
    a command with both arguments of its own and sub-commands (``serve``) before its sub-commands."""
    for name, sub in sorted(_subparsers(parser).items()):
        full = f"{prefix}{name}"
        nested = _subparsers(sub)
        if nested:
            if _own_arguments(sub):
                yield full, sub
            yield from subcommands(sub, f"{full} ")
        else:
            yield full, sub


def _all_help_lines(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, str]:
    """The one-line help of every command at any depth, by its full name ("serve token create")."""
    out = {}
    for name, text in _help_lines(parser).items():
        out[f"{prefix}{name}"] = text
    for name, sub in _subparsers(parser).items():
        out.update(_all_help_lines(sub, f"{prefix}{name} "))
    return out


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The one-line help of each subcommand, as ``graphstream --help`` shows it."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                out[choice.dest] = choice.help or ""
    return out


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _flag(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest
        if action.choices and not action.metavar:
            name = "{" + ",".join(map(str, action.choices)) + "}"
        return f"`{name}`"
    if action.nargs == 0:
        value = ""
    elif action.metavar:
        value = f" {action.metavar}"
    elif action.choices:
        value = " {" + ",".join(map(str, action.choices)) + "}"
    else:
        value = f" {action.dest.upper()}"
    return ", ".join(f"`{flag}{value}`" for flag in action.option_strings)


def _default(action: argparse.Action) -> str:
    if not action.option_strings or action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _usage(sub: argparse.ArgumentParser) -> str:
    sub.formatter_class = functools.partial(argparse.HelpFormatter, width=WIDTH)
    usage = sub.format_usage().strip()
    # argparse indents continuation lines under the text after "usage: ", which is dropped here
    return "\n".join(line[len("usage: "):] if line.startswith(" ") else line.removeprefix("usage: ")
                     for line in usage.splitlines())


def render() -> str:
    """The whole page, from ``graphstream.cli.build_parser()``."""
    from graphstream.cli import build_parser

    parser = build_parser()
    lines = [HEADER, "| command | what it does |", "|---|---|"]
    commands = list(subcommands(parser))
    help_lines = _all_help_lines(parser)
    for name, _ in commands:
        text = help_lines.get(name, "")
        anchor = f"graphstream-{name.replace(' ', '-')}"
        lines.append(f"| [`{name}`](#{anchor}) | {_cell(text)} |")
    for name, sub in commands:
        lines += ["", f"## graphstream {name}", "", "```", _usage(sub), "```", ""]
        if sub.description:
            lines += [" ".join(sub.description.split()), ""]
        lines += ["| argument | default | meaning |", "|---|---|---|"]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            meaning = (action.help or "").replace("%%", "%")   # argparse's escape, as --help prints it
            if isinstance(action, argparse._SubParsersAction) and not meaning:
                meaning = "sub-commands: " + ", ".join(f"`{name} {c}`" for c in action.choices) + " (below)"
            lines.append(f"| {_flag(action)} | {_default(action)} | {_cell(meaning)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md differs from the parser")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT}: out of date; run .venv/bin/python tools/gen_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(text)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
