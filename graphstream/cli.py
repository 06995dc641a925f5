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
otherwise a short aligned summary (``--verbose``: every figure and setting). Errors caused by input
(:class:`GraphStreamError`, missing files) print one line on stderr and exit 2.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from types import ModuleType
from typing import NoReturn

from . import __version__
from ._atomic import file_size_limit_reason
from ._resources import one_malloc_arena, quiet_openmp
from .commands.flags import json_flag, verbose_flag
from .errors import GraphStreamError

PLUGIN_GROUP = "graphstream.commands"

COMMANDS: dict[str, tuple[str, str]] = {
    "dataset": ("graphstream.commands.dataset",
                "write a shared real dataset (cora, citeseer, facebook, twitch-de, twitch-engb) as "
                "OUT_DIR/graph.zarr + features/labels/masks .npy"),
    "estimate": ("graphstream.commands.estimate",
                 "estimate disk, peak memory and time of ingest, generate, partition, build and feature split"),
    "export": ("graphstream.commands.export",
               "write a partitioned dataset in DistDGL's or PyG's partition format"),
    "generate": ("graphstream.commands.generate", "generate a synthetic graph into a graph store"),
    "info": ("graphstream.commands.info", "describe a graph store (degrees by streaming), a snapshot store, "
             "a partitioned dataset, dynamic partitions or a node data folder"),
    "ingest": ("graphstream.commands.ingest",
               "read an edge file (SNAP/CSV/TSV[.gz|.bz2|.xz], npy, parquet) into a graph store"),
    "partition": ("graphstream.commands.partition", "partition a graph store by streaming its edges"),
    "report": ("graphstream.commands.report",
               "report a partitioned dataset: part sizes, edges, balance, RF (and RF against k), as JSON or HTML "
               "with plots"),
    "serve": ("graphstream.serve.command",
              "run the preprocessing service (HTTP job API and web page over a dask cluster); manage its tokens"),
    "snapshots": ("graphstream.commands.snapshots",
                  "cut a timestamped graph store into snapshots (keyframes + deltas)"),
    "verify": ("graphstream.commands.verify",
               "check a graph store, snapshot store, partitioned dataset or node data folder end to end "
               "(checksums, counts, ids)"),
}


def _plugins() -> dict[str, str]:
    """Plug-in commands: name -> module, from installed entry points (built-in names win)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value.split(":")[0] for ep in entry_points(group=PLUGIN_GROUP) if ep.name not in COMMANDS}


def _selected(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


class _OneLineParser(argparse.ArgumentParser):
    """argparse, its errors in one line as every other error of the CLI (exit 2): the usage block it
    prints by default (16 lines for train) buries the line that says what is wrong."""

    command_parsers: dict[str, argparse.ArgumentParser]   # the top parser's: each command's, by name

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser(argv: Sequence[str] | None = None) -> _OneLineParser:
    """The parser, with full arguments for the command ``argv`` names (every command if None).

    The other commands get a bare parser with their help line, enough for
    ``graphstream --help`` and for argparse's "invalid choice" message.
    """
    parser = _OneLineParser(
        prog="graphstream",
        description="Partition and store graphs larger than memory, and feed them to GNN trainers.")
    parser.add_argument("--version", action="version", version=f"graphstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.command_parsers = sub.choices
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
        command = sub.add_parser(name, help=help_line, parents=[json_flag(), verbose_flag()])
        if full:
            module.configure(command)
    return parser


def _print_human(result: dict, args: argparse.Namespace) -> None:
    """The short summary: the command module's ``SUMMARY`` keys (all plain values if it has none),
    everything with ``--verbose``; the formatting rules are in :func:`graphstream._report.summary_lines`."""
    from ._report import summary_lines

    module = sys.modules.get(getattr(args.run, "__module__", ""))
    headline = getattr(module, "SUMMARY", None)
    if callable(headline):  # a command whose headline depends on what it did (e.g. with or without --out)
        headline = headline(result)
    for line in summary_lines(result, headline, verbose=getattr(args, "verbose", False)):
        print(line)


# how long after a signal's exception was dropped in a finalizer it is sent again: the hook that sends
# it and the finalizer have returned by then (microseconds)
REDELIVER_SECONDS = 0.01


class Terminated(BaseException):
    """SIGTERM as an exception: it unwinds through the atomic-output contexts, which remove
    their temporary siblings and scratch folders (a BaseException, so ``except Exception``
    in between does not swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_signal(signum: int, frame) -> None:
    # The first signal unwinds; later ones are ignored so that the cleanup it starts can finish
    # (SIGKILL still ends the process, and the next run clears what it leaves).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


@contextmanager
def _signals_to(handler) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` in the main thread while the block runs (handlers restored
    after): :func:`_on_signal` for the command's duration, which unwinds it; :func:`_raise_late` around
    it and its report. With the default action back once the command was done, a signal while its result
    was printed killed the process without a word, a finished run then reading as a failed one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    previous_hook = sys.unraisablehook
    sys.unraisablehook = partial(_deliver_again, handler, previous_hook)
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for s, before in previous.items():
            signal.signal(s, before)


def _deliver_again(handler, previous_hook, unraisable) -> None:
    """``sys.unraisablehook`` while a signal handler of ours is set: the exception the handler raised is
    raised where the main thread is, and when that is a finalizer (an object's ``__del__`` run by the
    garbage collector, llvmlite's among them) Python prints it and goes on. The command then ran to its
    end, the signal lost (1 SIGTERM in 17 of a test's runs, exit 0). So its handler is set back and the
    signal sent again, by a thread a moment later: sent from here, its handler would run as this hook
    returns, and an exception raised in the hook is dropped for good. Should it land in a finalizer
    again, this hook sends it again. Other exceptions go to ``previous_hook``."""
    exc = unraisable.exc_value
    signum = (signal.SIGINT if isinstance(exc, KeyboardInterrupt)
              else getattr(exc, "signum", None) if isinstance(exc, (Terminated, _LateSignal)) else None)
    if signum is None or threading.current_thread() is not threading.main_thread():
        previous_hook(unraisable)
        return
    signal.signal(signum, handler)
    again = threading.Timer(REDELIVER_SECONDS, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()


class _LateSignal(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_late(signum, frame) -> None:
    raise _LateSignal(signum)


@contextmanager
def _stdout_kept_for_json(json_mode: bool) -> Iterator[None]:
    """With ``--json``, file descriptor 1 points at stderr while the command runs, so that stdout holds
    the one JSON object alone: C libraries print there whatever our code does (METIS's "***Cannot
    bisect a graph with 0 vertices!" lines came before the object, breaking every parser of it)."""
    if not json_mode:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        _flush_c_stdio()   # what a library's printf still buffers goes to stderr, not to the object's stdout
        os.dup2(saved, 1)
        os.close(saved)


def _flush_c_stdio() -> None:
    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):   # no C library to ask (not POSIX): nothing of its buffers to flush
        pass


# the commands that write nothing: a stop leaves nothing to remove ("serve" said "partial output removed"
# every time it was stopped)
_NO_OUTPUT = ("serve", "info", "verify", "estimate")


def _cleared(command: str) -> str:
    return "" if command in _NO_OUTPUT else "; partial output removed"


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else [str(word) for word in argv]
    if _selected(argv) in COMMANDS:   # before any kernel runs; inherited by the workers and jobs it starts
        quiet_openmp(os.environ)      # (not for plug-ins such as train: torch has OpenMP threads of its own)
        one_malloc_arena(os.environ)
    try:   # the commands' modules load here (up to a second): Ctrl-C then has nothing to unwind
        parser = build_parser(argv)
        args, unknown = parser.parse_known_args(argv)
        if unknown:   # named by the command's own parser (the top one would say "graphstream: error")
            parser.command_parsers[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    except KeyboardInterrupt:
        name = " ".join(filter(None, ("graphstream", _selected(argv))))
        print(f"{name}: interrupted (SIGINT) while starting; nothing was written", file=sys.stderr)
        return 130
    try:
        with _signals_to(_raise_late):
            return _run_and_report(args)
    except _LateSignal as late:   # the result's printing stopped (a stalled reader must not hold it off)
        name = signal.Signals(late.signum).name
        print(f"graphstream {args.command}: {name} received once the command had finished: its output is "
              "complete, the result printed may be cut short", file=sys.stderr)
        return 128 + late.signum


def _run_and_report(args) -> int:
    try:
        with _signals_to(_on_signal), _stdout_kept_for_json(getattr(args, "json", False)):
            result = args.run(args)
    except (GraphStreamError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        # One line whatever the message holds (a library's multi-line text must not break the contract).
        print(f"graphstream {args.command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        report = getattr(exc, "json_result", None)   # a result that says what failed (verify's problems)
        if report is not None and getattr(args, "json", False):
            print(json.dumps(_finite(report), default=_json_default, allow_nan=False))
        return 2
    except BrokenPipeError:   # stdout's reader left (| head): what was written stands, and there is no one to tell
        return _stdout_closed()
    except MemoryError as exc:   # numpy's "Unable to allocate 1.00 GiB for an array ..." says how much
        print(f"graphstream {args.command}: error: {_out_of_memory(exc)}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        if "can't start new thread" not in str(exc):
            raise
        print(f"graphstream {args.command}: error: cannot start a thread: out of memory, or a limit on threads "
              "(ulimit -u, a cgroup's pids.max); nothing was written: free memory, raise the limit, or give fewer "
              "threads (NUMBA_NUM_THREADS)", file=sys.stderr)
        return 2
    except OSError as exc:
        # Outputs are written atomically, so nothing valid-looking was left behind.
        output = getattr(args, "out", None) or getattr(args, "out_dir", None)
        where = f" ({exc.filename})" if exc.filename else (f" (writing {output})" if output else "")
        if exc.errno == errno.ENOMEM:   # it said "I/O error: [Errno 12] Cannot allocate memory"
            print(f"graphstream {args.command}: error: {_out_of_memory(exc)}", file=sys.stderr)
            return 2
        if exc.errno is None and "load shared object" in str(exc):   # llvmlite's mapping refused (ulimit -v)
            print(f"graphstream {args.command}: error: could not load a library ({' '.join(str(exc).split())}): "
                  "out of memory under a limit (ulimit -v, a cgroup), or a broken install; nothing was written",
                  file=sys.stderr)
            return 2
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            reason = f"disk full ({exc}); nothing was written, free space and run again"
        elif exc.errno == errno.EFBIG:   # it said "[Errno 27] File too large" without a path or the limit
            reason = f"{file_size_limit_reason()}{where}; nothing was written: raise the limit"
        else:   # a read-only file system, a short write (numpy's has no errno), ...
            reason = f"I/O error: {exc}{'' if exc.filename else where}; nothing was written"
        print(f"graphstream {args.command}: error: {' '.join(reason.split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"graphstream {args.command}: interrupted (SIGINT){_cleared(args.command)}", file=sys.stderr)
        return 130
    except Terminated as exc:
        print(f"graphstream {args.command}: terminated ({exc}){_cleared(args.command)}", file=sys.stderr)
        return 128 + exc.signum
    if result is not None and sys.stdout is not None:   # None: started with stdout closed (>&-)
        try:
            if getattr(args, "json", False):
                print(json.dumps(_finite(result), default=_json_default, allow_nan=False))
            else:
                _print_human(result, args)
            sys.stdout.flush()
        except BrokenPipeError:
            return _stdout_closed()
        except OSError as exc:   # >/dev/full: the work is done and kept; the report could not be written
            print(f"graphstream {args.command}: error: cannot write the result to stdout ({exc.strerror or exc})",
                  file=sys.stderr)
            _stdout_closed()
            return 2
    return 0


def _out_of_memory(exc: BaseException) -> str:
    """One line for a command that ran out of memory (its outputs are atomic: none was left half-written)."""
    from ._report import format_bytes
    from ._resources import available_memory_bytes
    detail = " ".join(str(exc).split())
    try:   # what is left now, under the machine's, a cgroup's or ulimit -v's limit
        left = f"{format_bytes(available_memory_bytes())} left to this process"
    except Exception:   # noqa: BLE001 - the report of an out-of-memory error must not fail in turn
        left = "no more memory for this process"
    return (f"out of memory{f' ({detail})' if detail else ''}: {left} (the machine's, a cgroup's or ulimit -v's "
            "limit); nothing was written. `graphstream estimate` gives each step's peak: free memory, raise the "
            "limit, or give fewer threads (NUMBA_NUM_THREADS)")


def _stdout_closed() -> int:
    """The exit of a command whose stdout was closed by its reader (``graphstream info g.zarr | head -1``):
    no traceback, stdout pointed at /dev/null so that Python's flush at exit does not raise again, and
    the status a shell gives a command ended by SIGPIPE (128 + 13)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    return 128 + signal.SIGPIPE


def _finite(obj):
    """``obj`` with NaN and infinities as None: JSON has no such numbers (Python's ``NaN`` is not JSON, and
    strict parsers refuse it), and a figure that cannot be measured is null in every --json output."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {key: _finite(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(value) for value in obj]
    return obj


def _json_default(obj):
    import numpy as np
    if isinstance(obj, np.generic):
        return _finite(obj.item())
    if isinstance(obj, np.ndarray):
        return _finite(obj.tolist())
    return str(obj)


if __name__ == "__main__":
    sys.exit(main())
