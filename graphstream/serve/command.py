"""graphstream serve --root DIR ...: the preprocessing service; graphstream serve token ...: its tokens.

``serve`` binds its socket first (a taken port fails before anything
starts), opens the dask cluster (``--workers N`` starts a local one of N
workers, ``--scheduler ADDR`` joins a running one, neither: a local one of
1 worker; graphstream.cluster), starts the dispatcher and serves the app on
uvicorn until SIGINT or SIGTERM. It prints its address on stderr, always
(a script started with ``--port 0`` reads the port there).

``serve token create NAME [--admin]`` prints the new token once, alone on
the last line of stdout (``--json``: in the object); ``token list`` and
``token revoke NAME`` manage the rest. The store is ``--db`` or
ROOT/.graphstream/jobs.sqlite, as for ``serve``.
"""
from __future__ import annotations

import argparse
import math
import socket
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from .._atomic import output_lock
from ..errors import GraphStreamError, OutputLockedError, ParameterError
from .jobargs import SERVICE_DIR

DEFAULT_PORT = 8765


def configure(p) -> None:
    from ..commands.flags import add_cluster, json_flag

    p.description = ("Run the preprocessing service: an HTTP job API and a web page in front of a dask "
                     "cluster (docs/service.md). `serve token ...` manages its bearer tokens.")
    _add_store(p, None)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; put a TLS reverse proxy in front for more)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("--max-running", type=int, default=2, metavar="M", help="jobs running at once (default 2)")
    p.add_argument("--max-attempts", type=int, default=3, metavar="A",
                   help="runs a job may start: a job interrupted by a server restart or a lost worker is queued "
                        "again until then (default 3)")
    p.add_argument("--max-body-bytes", type=int, default=256 * 1024, metavar="BYTES",
                   help="largest request body accepted (default 256 KiB)")
    p.add_argument("--keep-logs-days", type=float, default=30.0, metavar="D",
                   help="remove a finished job's log D days after it ended (its record, result and outputs "
                        "stay; default 30; 0 keeps every log)")
    add_cluster(p)
    sub = p.add_subparsers(dest="serve_command", metavar="{token}")
    token = sub.add_parser("token", help="create, list or revoke the service's bearer tokens")
    actions = token.add_subparsers(dest="token_command", required=True, metavar="{create,list,revoke}")
    # --root/--db given after the sub-command; SUPPRESS keeps one given before it
    create = actions.add_parser("create", parents=[json_flag()], help="create a token; printed once")
    create.add_argument("name", help="the token's name: the owner of the jobs it submits")
    create.add_argument("--admin", action="store_true", help="an admin token: sees and cancels every job")
    _add_store(create, argparse.SUPPRESS)
    listing = actions.add_parser("list", parents=[json_flag()], help="list the tokens (names, never the tokens)")
    _add_store(listing, argparse.SUPPRESS)
    revoke = actions.add_parser("revoke", parents=[json_flag()], help="revoke a token (its jobs stay)")
    revoke.add_argument("name", help="the token to revoke")
    _add_store(revoke, argparse.SUPPRESS)
    p.set_defaults(run=run)


def _add_store(p, default) -> None:
    p.add_argument("--root", default=default, metavar="DIR",
                   help="the data folder: every job path is relative to it and stays inside it")
    p.add_argument("--db", default=default, metavar="FILE",
                   help=f"job and token store (SQLite; default ROOT/{SERVICE_DIR}/jobs.sqlite)")


def _paths(args) -> tuple[Path, Path]:
    root = getattr(args, "root", None)
    if root is None:
        raise ParameterError("--root DIR is required (the data folder the service works in)")
    root = Path(root).resolve()
    if not root.is_dir():
        raise ParameterError(f"--root {root}: no such folder")
    db = getattr(args, "db", None)
    return root, Path(db).resolve() if db is not None else root / SERVICE_DIR / "jobs.sqlite"


def run(args) -> dict | None:
    if getattr(args, "token_command", None) is not None:
        import sqlite3

        from .jobs import unwritable
        try:
            return _token(args)
        except sqlite3.Error as exc:   # a full disk or a read-only database: one line naming it
            raise unwritable(_token_store_path(args), exc) from exc
    return _serve(args)


def _token_store_path(args) -> Path:
    """The store a ``token`` command works on: ``--db`` alone will do (no root is needed to manage
    tokens); only ``create`` makes a new store, the others name the missing one."""
    db = getattr(args, "db", None)
    if db is None:
        _, path = _paths(args)
    else:
        path = Path(db).resolve()
    if args.token_command != "create" and not path.is_file():
        raise ParameterError(f"{path}: no job store here (give the --root or --db the service runs with)")
    return path


def _token(args) -> dict | None:
    from .jobs import JobStore

    store = JobStore(_token_store_path(args))
    if args.token_command == "create":
        token = store.create_token(args.name, admin=args.admin)
        if args.json:
            return {"name": args.name, "admin": args.admin, "token": token}
        print(f"created {'admin ' if args.admin else ''}token {args.name!r}; it is shown once, keep it:")
        print(token)
        return None
    if args.token_command == "revoke":
        store.revoke_token(args.name)
        if args.json:
            return {"revoked": args.name}
        print(f"revoked token {args.name!r}")
        return None
    tokens = store.list_tokens()
    if args.json:
        return {"tokens": tokens}
    for t in tokens:
        print(f"{t['name']:<24} {'admin' if t['admin'] else 'user ':<6} created {t['created_at']}")
    return None


def _serve(args) -> None:
    from ..cluster import ClusterConfig
    from .jobs import JobStore

    root, db = _paths(args)
    for name, value in (("--max-running", args.max_running), ("--max-attempts", args.max_attempts),
                        ("--max-body-bytes", args.max_body_bytes)):
        if value < 1:
            raise ParameterError(f"{name} must be at least 1, got {value}")
    if not (args.keep_logs_days >= 0 and math.isfinite(args.keep_logs_days)):
        raise ParameterError(f"--keep-logs-days must be a number of days >= 0, got {args.keep_logs_days}")
    if not 0 <= args.port <= 65535:   # the socket's OverflowError was a traceback
        raise ParameterError(f"--port must be in [0, 65535], got {args.port}")
    cluster = ClusterConfig.from_args(args)
    if cluster.in_process:   # jobs never run in the web process: a local cluster of one worker by default
        cluster = ClusterConfig(workers=1, threads_per_worker=cluster.threads_per_worker)
    store = JobStore(db)
    with ExitStack() as held:
        # the root's and the job database's, whichever way each was given (a server on the default database
        # and another given it by --db from another root)
        held.enter_context(_served(root / SERVICE_DIR / "serve", f"--root {root}"))
        held.enter_context(_served(db, f"--db {db}"))
        _run_server(args, root, store, cluster)
    return None


def _run_server(args, root: Path, store, cluster) -> None:
    import uvicorn

    from ..cluster import open_client
    from .app import ServiceConfig, create_app
    from .dispatcher import Dispatcher

    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    with open_client(cluster) as client:
        scheduler = client.scheduler.address
        config = ServiceConfig(root=root, max_running=args.max_running, max_attempts=args.max_attempts,
                               max_body_bytes=args.max_body_bytes,
                               cluster={**cluster.to_dict(), "scheduler": scheduler,
                                        "dashboard": client.dashboard_link})
        dispatcher = Dispatcher(store, client, root=root, jobs_dir=root / SERVICE_DIR / "jobs",
                                max_running=args.max_running, scheduler=scheduler,
                                keep_logs_seconds=args.keep_logs_days * 86400 if args.keep_logs_days else None)
        dispatcher.start()
        try:
            app = create_app(config, store, dispatcher)
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                                   timeout_graceful_shutdown=5))
            print(f"graphstream serve: listening on http://{host}:{port} (root {root}, "
                  f"dask scheduler {scheduler})", file=sys.stderr, flush=True)
            server.run(sockets=[sock])
        finally:
            dispatcher.stop()


@contextmanager
def _served(path: Path, what: str) -> Iterator[None]:
    """``path``'s lock (graphstream._atomic.output_lock, as every output's: a file system without flock
    goes by the holder's pid) for the server's life: a second server on the same root or job database is
    refused. Two had run side by side, each dispatching from one queue (more jobs at once than either's
    --max-running), one's log pruning removing the other's logs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    held = ExitStack()
    try:   # the taking only: the server's own errors pass through as they are
        held.enter_context(output_lock(path))
    except OutputLockedError as exc:
        other = what.split()[0]   # --root or --db: the way out is another of the same
        raise GraphStreamError(f"{what}: another graphstream serve runs there ({exc.holder or 'this process'}); "
                               f"stop it first, or give this one another {other}") from None
    with held:
        yield


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and without it
    # every keep-alive reply waits ~40 ms for the client's delayed ACK (Nagle)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ParameterError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(2048)   # from now on connections wait in the backlog until uvicorn accepts them
    sock.set_inheritable(False)
    return sock
