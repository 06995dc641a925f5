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


def add_cluster(parser: argparse.ArgumentParser) -> None:
    """``--workers N [--threads-per-worker T]`` / ``--scheduler ADDR``: run on dask.distributed
    (:class:`graphstream.cluster.ClusterConfig`; docs/distributed.md). Neither: in-process."""
    group = parser.add_argument_group("cluster (dask.distributed; default: in this process)")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None, metavar="N",
                       help="start a local dask cluster of N worker processes for this command")
    where.add_argument("--scheduler", default=None, metavar="ADDR",
                       help="run on the dask cluster whose scheduler is ADDR (tcp://host:8786); "
                            "default $GRAPHSTREAM_SCHEDULER; every path must be visible to every worker")
    group.add_argument("--threads-per-worker", type=int, default=None, metavar="T",
                       help="threads of each local worker (default 1)")


def cluster_config(args: argparse.Namespace, *paths: str):
    """The command's :class:`graphstream.cluster.ClusterConfig`, and the path arguments named in ``paths``
    made absolute: a worker would resolve a relative path against its own working folder, and the paths
    a command reports (``--json``'s ``out``) are absolute in-process too."""
    from .._atomic import for_workers
    from ..cluster import ClusterConfig

    config = ClusterConfig.from_args(args)
    for name in paths:
        value = getattr(args, name, None)
        setattr(args, name, [for_workers(v) for v in value] if isinstance(value, list) else for_workers(value))
    return config
