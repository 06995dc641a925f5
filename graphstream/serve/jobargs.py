"""A job's ``args``, from the API's JSON to the command's argv, checked before the job is accepted.

The mapping is read off the command's own argparse parser (the one
``graphstream KIND`` uses), so a new option is accepted the day it is added:
positionals by their dest (``store``, ``out``) or their name in the ``--help`` usage (``SRC``,
``src``), options by their long name
with ``_`` for ``-`` (``edge_factor``; the dest is accepted too where it
differs, e.g. ``k`` for ``--parts``), flags as booleans, repeatable options
as lists. The argv is then parsed by that parser, so types, choices and
required arguments fail here with the CLI's own one-line message.

Paths: every argument that names a file or folder must be relative to the
service root, free of ``..``, outside the service's own folder, and must
resolve (symlinks followed) inside the root; an output must not be, contain
or lie inside one of the step's inputs, nor a scratch folder (``work_dir``)
be or lie inside one (``check_outputs_apart``, as the CLI checks them); and
since the root is shared, no output or scratch folder may lie inside a graph
store or dataset (another user's, perhaps), nor a scratch folder be one. An
input must exist, or be (or lie inside) the output of an earlier step of the
pipeline. Which arguments are paths: every free string argument (no type, no
choices) that is not in :data:`TEXT_ARGS`, so that a new path option is
confined before anyone lists it. Defaults count too (``dataset --root``
defaults outside any root, so it must be given).

Then the command's own ``preflight(args)``, where it has one (``partition``:
k's range, the algorithm's name), the check the CLI runs before it opens
anything: a job the CLI would refuse at once is a 422, not a failed job.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .._atomic import blocking_file, check_output_name, check_outputs_apart
from ..commands.flags import json_flag, verbose_flag
from ..errors import GraphStreamError
from ..store.verify import detect_kind

# The commands a job may run (graphstream.commands.<kind>), and the step list of a pipeline.
KINDS = ("dataset", "export", "generate", "info", "ingest", "partition", "snapshots", "verify")
PIPELINE = "pipeline"
MAX_STEPS = 32
# Set by the service, never by a job: where it runs (the service's cluster) and how it reports.
RESERVED = frozenset({"help", "json", "verbose", "workers", "threads_per_worker", "scheduler"})
# Free string arguments that are not paths.
TEXT_ARGS = frozenset({"algo", "delimiter", "feature_dtype", "graph_name", "target"})
# Path arguments that a step writes whole (every other path argument is one of its inputs)...
OUTPUT_ARGS = frozenset({"out", "out_dir", "html"})
# ... and those it writes files into, which it neither makes whole nor removes.
SCRATCH_ARGS = frozenset({"work_dir"})
SERVICE_DIR = ".graphstream"   # the job store and job folders, under the root


class JobArgsError(GraphStreamError):
    """Arguments the service refuses: ``status`` 400 (a path) or 422 (anything else)."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(" ".join(message.split()))
        self.status = status


@dataclass(frozen=True, slots=True)
class Step:
    """One command of a job: ``graphstream KIND *argv`` (``cluster``: its parser takes ``--scheduler``;
    ``outputs``: the absolute paths it writes whole, which the runner claims: runner.py)."""
    kind: str
    argv: tuple[str, ...]
    cluster: bool
    outputs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "argv": list(self.argv), "cluster": self.cluster, "outputs": list(self.outputs)}


def job_steps(kind: str, args: Any, root: Path) -> list[Step]:
    """The checked steps of a job (one, or a pipeline's ``args["steps"]`` in order)."""
    if kind != PIPELINE:
        return [step(kind, args, root)]
    if not isinstance(args, dict) or set(args) != {"steps"} or not isinstance(args["steps"], list) \
            or not args["steps"]:
        raise JobArgsError('pipeline: args must be {"steps": [{"kind": ..., "args": {...}}, ...]} (at least one)')
    if len(args["steps"]) > MAX_STEPS:
        raise JobArgsError(f"pipeline: {len(args['steps'])} steps; at most {MAX_STEPS}")
    steps: list[Step] = []
    for i, entry in enumerate(args["steps"]):
        if not isinstance(entry, dict) or not set(entry) <= {"kind", "args"} or "kind" not in entry:
            raise JobArgsError(f'pipeline step {i + 1}: expected {{"kind": ..., "args": {{...}}}}, got {entry!r}')
        try:
            if entry["kind"] == PIPELINE:
                raise JobArgsError(f"kind {PIPELINE!r}: a step is one command ({', '.join(KINDS)}), not a pipeline")
            produced = tuple(Path(p) for s in steps for p in s.outputs)
            # what the earlier steps write whole (a `dataset` folder is the one meant to take more files)
            sealed = tuple(Path(p) for s in steps if s.kind != "dataset" for p in s.outputs)
            # the kind of store an earlier step will write, for a preflight that goes by it (partition:
            # pgc needs a snapshot store, which is not there yet to be opened)
            pending = {p: ("snapshots" if s.kind == "snapshots" else "other") for s in steps for p in s.outputs}
            steps.append(step(entry["kind"], entry.get("args", {}), root, produced, sealed, pending))
        except JobArgsError as exc:
            raise JobArgsError(f"pipeline step {i + 1}: {exc}", exc.status) from None
    return steps


def step(kind: Any, args: Any, root: Path, produced: tuple[Path, ...] = (), sealed: tuple[Path, ...] = (),
         pending: dict[str, str] | None = None) -> Step:
    """One command's checked argv (see the module's docstring for the rules); ``produced``: the outputs
    of the pipeline's earlier steps (absolute), which need not exist yet; ``sealed``: those of them that no
    output may lie inside (stores and datasets, written whole); ``pending``: the kind of each of those
    outputs ("snapshots" or "other"), for the command's preflight."""
    if kind not in KINDS:
        raise JobArgsError(f"kind {kind!r}: expected one of {', '.join(KINDS + (PIPELINE,))}")
    if not isinstance(args, dict):
        raise JobArgsError(f"{kind}: args must be a JSON object, got {type(args).__name__}")
    parser = command_parser(kind)
    remaining = dict(args)
    argv, leaf = _argv(parser, remaining)
    if remaining:
        known = sorted(_keys(a, leaf)[0] for a in leaf._actions if a.dest not in RESERVED)
        raise JobArgsError(f"{kind}: unknown args {sorted(remaining)} (this command takes {known})")
    try:
        namespace = parser.parse_args([*argv, "--json"])
    except _ParseError as exc:
        raise JobArgsError(str(exc)) from None
    root = Path(root).resolve()
    resolved, outputs = _check_paths(leaf, namespace, root, kind, produced, sealed)
    # The checked paths, absolute: a command on a dask cluster hands them to workers whose working
    # folder is not the root (the child's is, for the paths the service did not rewrite: defaults).
    absolute = dict(args)
    for action in leaf._actions:
        for key in _keys(action, leaf):
            if key in absolute and action.dest in resolved:
                full = resolved[action.dest]
                absolute[key] = [str(p) for p in full] if isinstance(absolute[key], list) else str(full[0])
    _preflight(kind, namespace, resolved, root, pending or {})
    argv, _ = _argv(parser, absolute)
    return Step(kind, tuple(argv), cluster=any(a.dest == "scheduler" for a in leaf._actions),
                outputs=tuple(str(p) for p in outputs))


def _preflight(kind: str, namespace: argparse.Namespace, resolved: dict[str, list[Path]], root: Path,
               pending: dict[str, str]) -> None:
    """The command's own first checks (``graphstream.commands.KIND.preflight``), on its arguments with the
    paths resolved, told the kind of the inputs an earlier step has yet to write (``pending``); refused
    with the CLI's message."""
    check = getattr(importlib.import_module(f"graphstream.commands.{kind}"), "preflight", None)
    if check is None:
        return
    args = argparse.Namespace(**vars(namespace))
    for dest, paths in resolved.items():
        setattr(args, dest, [str(p) for p in paths] if isinstance(getattr(args, dest), list) else str(paths[0]))
    try:
        check(args, pending=pending)
    except GraphStreamError as exc:
        raise JobArgsError(f"graphstream {kind}: error: {without_root(str(exc), root)}") from None


# -- the command's parser --------------------------------------------------------------------------

class _ParseError(Exception):
    pass


@functools.cache
def command_parser(kind: str) -> argparse.ArgumentParser:
    """``graphstream KIND``'s parser as graphstream.cli builds it (same module, same shared flags), with
    errors raised instead of printed-and-exited. Built here from the command module because the CLI
    module is the layer above this one."""
    module = importlib.import_module(f"graphstream.commands.{kind}")
    parser = argparse.ArgumentParser(prog=f"graphstream {kind}", parents=[json_flag(), verbose_flag()])
    module.configure(parser)
    for p in _parsers(parser):
        p.error = functools.partial(_raise, p.prog)   # argparse's error() prints usage and exits
    return parser


def _raise(prog: str, message: str):
    raise _ParseError(f"{prog}: error: {message}")


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def _keys(action: argparse.Action, parser: argparse.ArgumentParser) -> list[str]:
    """The JSON names of an argument: a positional's dest and its name in the ``--help`` usage (``SRC``
    or ``src`` for ingest's ``source``); an option's long names with ``_`` for ``-``, and its dest where
    no other argument shares it (``--sorted``/``--unsorted`` do)."""
    if not action.option_strings:
        shown = action.metavar if isinstance(action.metavar, str) else action.dest
        return list(dict.fromkeys([action.dest, shown, shown.lower()]))
    keys = [o[2:].replace("-", "_") for o in action.option_strings if o.startswith("--")]
    if sum(a.dest == action.dest for a in parser._actions) == 1 and action.dest not in keys:
        keys.append(action.dest)
    return keys


def _argv(parser: argparse.ArgumentParser, args: dict[str, Any]) -> tuple[list[str], argparse.ArgumentParser]:
    """Argv for ``parser`` from ``args`` (used keys are popped); the parser that owns the last arguments
    (a sub-command's, e.g. ``generate rmat``)."""
    options: list[str] = []
    positionals: list[str] = []
    sub: tuple[str, argparse.ArgumentParser] | None = None
    for action in parser._actions:
        keys = _keys(action, parser)
        given = [k for k in keys if k in args]
        if action.dest in RESERVED or isinstance(action, argparse._HelpAction):
            if given:
                raise JobArgsError(f"{parser.prog}: {given[0]!r} is set by the service, not by a job")
            continue
        if len(given) > 1:
            raise JobArgsError(f"{parser.prog}: {given} name the same argument; give one")
        if not given:
            # a required positional left out: said by its names (the ones after it moved into its place,
            # and argparse named another one as missing, or took a value for the wrong argument)
            if not action.option_strings and action.nargs not in ("?", "*") and getattr(action, "required", True):
                raise JobArgsError(f"{parser.prog}: missing {' or '.join(map(repr, keys))} (a positional argument)")
            continue
        key = given[0]
        value = args.pop(key)
        if isinstance(action, argparse._SubParsersAction):
            if value not in action.choices:
                raise JobArgsError(f"{parser.prog}: {key} {value!r}: expected one of {sorted(action.choices)}")
            sub = (value, action.choices[value])
            continue
        option = next((o for o in action.option_strings if o.startswith("--")), None)
        if action.nargs == 0:   # a flag: true gives it, false leaves it out
            if not isinstance(value, bool):
                raise JobArgsError(f"{parser.prog}: {key} is a flag: true or false, got {value!r}")
            if value:
                options.append(option)
            continue
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in values):
            raise JobArgsError(f"{parser.prog}: {key}: expected a string or a number, got {value!r}")
        words = [str(v) for v in values]
        if option is None:
            bad = [w for w in words if w.startswith("-")]
            if bad:
                raise JobArgsError(f"{parser.prog}: {key} {bad[0]!r} must not start with '-'", 400)
            positionals += words
        elif isinstance(action, argparse._AppendAction) or action.nargs not in (None, "?"):
            options += [f"{option}={w}" for w in words] if isinstance(action, argparse._AppendAction) \
                else [option, *words]
        else:
            if len(words) != 1:
                raise JobArgsError(f"{parser.prog}: {key} takes one value, got {value!r}")
            options.append(f"{option}={words[0]}")   # '=': a value starting with '-' stays a value
    if sub is not None:   # the sub-command's name, then its own arguments, after the parent's
        sub_argv, leaf = _argv(sub[1], args)
        return [*options, *positionals, sub[0], *sub_argv], leaf
    return [*options, *positionals], parser


# -- paths ------------------------------------------------------------------------------------------

def _is_path(action: argparse.Action) -> bool:
    return (action.nargs != 0 and action.type is None and action.choices is None
            and action.dest not in TEXT_ARGS and action.dest not in RESERVED
            and not isinstance(action, argparse._SubParsersAction | argparse._HelpAction))


def _check_paths(parser: argparse.ArgumentParser, namespace: argparse.Namespace, root: Path,
                 kind: str, produced: tuple[Path, ...] = (), sealed: tuple[Path, ...] = ()
                 ) -> tuple[dict[str, list[Path]], list[Path]]:
    """Confine every path argument (:func:`confine`), keep outputs and scratch folders apart from inputs
    and out of the root's stores and datasets, and find every input (or an earlier step's output
    holding it); the resolved paths by dest, and the outputs."""
    outputs: dict[str, Path] = {}
    scratch: dict[str, Path] = {}
    folders: list[tuple[Path, str]] = []   # the outputs' and scratch folders' own folders, checked last
    inputs: dict[str, Path] = {}
    resolved: dict[str, list[Path]] = {}
    for action in parser._actions:
        if not _is_path(action):
            continue
        value = getattr(namespace, action.dest, None)
        if value is None:
            continue
        name = action.option_strings[-1] if action.option_strings else action.dest
        default = value == action.default
        words = value if isinstance(value, list) else [value]
        for i, word in enumerate(words):
            where = f"{kind} {name} {word!r}" + (" (the default)" if default else "")
            full = confine(root, str(word), where)
            resolved.setdefault(action.dest, []).append(full)
            key = name if len(words) == 1 else f"{name}[{i}]"
            if action.dest in OUTPUT_ARGS or action.dest in SCRATCH_ARGS:
                if full == root:
                    raise JobArgsError(f"{where}: an output cannot be the service root itself", 400)
                try:
                    check_output_name(full)
                except GraphStreamError as exc:   # (the name itself is too long to repeat in full)
                    raise JobArgsError(f"{kind} {name}: {exc}", 400) from None
                folders.append((full, where))
                # a scratch folder is written into: not a store's or dataset's own folder either
                _outside_datasets(full, root, where, itself=action.dest in SCRATCH_ARGS)
                # an output an earlier step writes too: the second step failed on it ("output exists")
                inside = [p for p in sealed if p in full.parents or (action.dest in SCRATCH_ARGS and p == full)] \
                    or [p for p in produced if p == full]
                if inside:   # the earlier step's store or dataset, not there yet to be recognised above
                    relation = "is" if inside[0] == full else "lies inside"
                    raise JobArgsError(f"{where}: {relation} {inside[0].relative_to(root).as_posix()!r}, the output "
                                       "of an earlier step; choose a folder of its own", 400)
                (outputs if action.dest in OUTPUT_ARGS else scratch)[key] = full
            else:
                if not full.exists() and not any(full == p or p in full.parents for p in produced):
                    raise JobArgsError(f"{where}: not found under the service root", 400)
                inputs[key] = full
    try:
        check_outputs_apart(outputs, inputs, scratch)
    except GraphStreamError as exc:
        raise JobArgsError(f"{kind}: {without_root(str(exc), root)}", 400) from None
    for full, where in folders:   # after the overlaps, which say more ("lies inside the output --out")
        _check_folder_of(full, root, where, produced)
    return resolved, list(outputs.values())


def _check_folder_of(full: Path, root: Path, where: str, produced: tuple[Path, ...]) -> None:
    """An output's folder must be there (or be an earlier step's output, or inside one), and no folder on
    its way a file: else the job failed after it was accepted ("parent folder ... does not exist")."""
    for folder in [full.parent, *full.parent.parents]:
        if folder == root or root not in folder.parents:
            return
        if any(folder == p or p in folder.parents for p in produced):
            return
        if folder.is_dir():
            return
        # the nearest one on the way that is a file, if any ('afile/sub' was called missing); under the
        # root, which is a folder
        blocking = blocking_file(folder)
        if blocking is not None:
            raise JobArgsError(f"{where}: its folder {blocking.relative_to(root).as_posix()!r} is a file", 400)
        raise JobArgsError(f"{where}: its folder {folder.relative_to(root).as_posix()!r} does not exist", 400)


def _outside_datasets(full: Path, root: Path, where: str, itself: bool) -> None:
    """Refuse a path inside a graph store, snapshot store or partitioned dataset under the root (or, with
    ``itself``, one that is such a folder): writing there would change data the job did not name."""
    folders = ([full] if itself else []) + [p for p in full.parents if p != root and root in p.parents]
    for folder in folders:
        if not folder.is_dir():
            continue
        try:
            kind = detect_kind(folder)
        except GraphStreamError:
            continue
        rel = folder.relative_to(root).as_posix()
        relation = "is" if folder == full else "lies inside"
        raise JobArgsError(f"{where}: {relation} the {_KIND_NAMES.get(kind, kind)} {rel!r}; choose a folder of "
                           "its own", 400)


_KIND_NAMES = {"graph": "graph store", "snapshots": "snapshot store", "partitions": "partitioned dataset",
               "dynamic_partitions": "dynamic partitions folder", "node_data": "node data folder"}

def without_root(message: str, root: Path) -> str:
    """A message without the server's root folder in it (callers see root-relative paths only)."""
    return message.replace(str(root) + "/", "")


def doc_without_root(doc: Any, root: str) -> Any:
    """``doc`` (a command's JSON result) with every path under ``root`` made relative to it (the root
    itself ``.``), as the job's arguments were given."""
    if isinstance(doc, dict):
        return {k: doc_without_root(v, root) for k, v in doc.items()}
    if isinstance(doc, list):
        return [doc_without_root(v, root) for v in doc]
    if isinstance(doc, str):
        if doc == root:
            return "."
        # anywhere in the text, not only at its start: ingest's source names several inputs ("a, /root/b");
        # the root alone only where the text ends or a separator follows ("/root+old/y" is another folder)
        return re.sub(r"(?<![\w./-])" + re.escape(root) + r"(/+|(?=$|[,;:)\]'\"]))",
                      lambda m: "" if m.group(1) else ".", doc)
    return doc


def confine(root: Path, value: str, where: str) -> Path:
    """The resolved path of ``value`` under the resolved ``root``; a 400 :class:`JobArgsError` naming
    ``where`` for an absolute path, ``..``, a URL, the service folder or a symlink leading out."""
    def refuse(why: str) -> JobArgsError:
        return JobArgsError(f"{where}: {why}; paths are relative to the service root and stay inside it", 400)

    if not value or "\x00" in value:
        raise refuse("empty or malformed path")
    if "://" in value:
        raise refuse("URLs are not accepted")
    rel = PurePosixPath(value)
    if rel.is_absolute() or value.startswith("~"):
        raise refuse("absolute path")
    if ".." in rel.parts:
        raise refuse("'..' is not allowed")
    full = (root / rel).resolve()   # follows every symlink on the way, existing or not
    if full != root and root not in full.parents:
        raise refuse("it leads out of the root through a symlink")
    service = root / SERVICE_DIR
    if full == service or service in full.parents:
        raise refuse(f"{SERVICE_DIR}/ is the service's own folder")
    return full
