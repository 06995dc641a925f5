"""The service's job store and tokens: one SQLite file in WAL mode (specs/service.md, Durability).

Every change is one transaction committed before the call returns
(``synchronous=FULL``), so a job the API answered 201 for survives a
SIGKILL of the server and a power cut. Each thread gets its own connection
(the API's thread pool, the dispatcher); WAL lets readers go on while one
writer commits, and the busy timeout queues writers instead of failing them.

Tokens are stored as the SHA-256 of the token (a ``secrets.token_urlsafe(32)``,
256 random bits, so a plain hash is enough: nothing to brute-force); the token
itself is shown once, by ``graphstream serve token create``.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import GraphStreamError, ParameterError

STATES = ("queued", "running", "succeeded", "failed", "cancelled")
TERMINAL = ("succeeded", "failed", "cancelled")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    name        TEXT PRIMARY KEY,
    sha256      TEXT NOT NULL UNIQUE,
    admin       INTEGER NOT NULL,
    created_at  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,   -- FIFO order of the queue
    id               TEXT NOT NULL UNIQUE,
    owner            TEXT NOT NULL,
    kind             TEXT NOT NULL,
    args             TEXT NOT NULL,                       -- as submitted (JSON)
    steps            TEXT NOT NULL,                       -- checked argv of every step (JSON)
    idempotency_key  TEXT,
    state            TEXT NOT NULL,
    stage            TEXT,
    progress         REAL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at       REAL NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    result           TEXT,
    error            TEXT,
    UNIQUE (owner, idempotency_key)
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, seq);
CREATE INDEX IF NOT EXISTS jobs_owner ON jobs (owner, seq);
"""


class TokenError(GraphStreamError):
    """A token name that exists already (create) or does not exist (revoke)."""


class IdempotencyConflict(GraphStreamError):
    """An idempotency key used again by the same caller for a different job."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a bearer token belongs to: its name (the owner of the jobs it submits) and whether it is an admin."""
    name: str
    admin: bool


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    seq: int
    owner: str
    kind: str
    args: Any
    steps: list[dict[str, Any]]
    idempotency_key: str | None
    state: str
    stage: str | None
    progress: float | None
    attempts: int
    max_attempts: int
    cancel_requested: bool
    created_at: float
    started_at: float | None
    finished_at: float | None
    result: Any
    error: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Job:
        values = dict(row)
        for key in ("args", "steps", "result"):
            values[key] = None if values[key] is None else json.loads(values[key])
        values["cancel_requested"] = bool(values["cancel_requested"])
        return cls(**values)

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None:
            return None
        return (self.finished_at or time.time()) - self.started_at

    @property
    def api_progress(self) -> float:
        """The current stage's fraction, 0..1 as service.md promises: 0 before a stage's first bar (or
        while queued), 1 once the job succeeded (it was null where no bar had been seen)."""
        if self.progress is not None:
            return self.progress
        return 1.0 if self.state == "succeeded" else 0.0

    def to_api(self) -> dict[str, Any]:
        """The job as the API shows it (times in ISO 8601 UTC)."""
        return {
            "id": self.id, "kind": self.kind, "args": self.args, "state": self.state, "stage": self.stage,
            "progress": self.api_progress, "attempts": self.attempts, "max_attempts": self.max_attempts,
            "cancel_requested": self.cancel_requested, "owner": self.owner,
            "idempotency_key": self.idempotency_key, "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at), "finished_at": _iso(self.finished_at),
            "duration_seconds": self.duration_seconds, "result": self.result, "error": self.error,
        }


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def unwritable(path: Path, exc: BaseException) -> GraphStreamError:
    """The one line for a job database that cannot be written (a full disk, a read-only file)."""
    return GraphStreamError(f"{path}: the job database cannot be written ({exc}); free space, or make it and "
                            "its folder writable")


class JobStore:
    """The SQLite file at ``path`` (created with its folder on first use)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._local = threading.local()
        with self.errors_named():
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            db = self._db()
            db.executescript(_SCHEMA)   # (executescript commits on its own)
            # a write, whatever the schema needed: a read-only database started, and its first job was a 500
            version = db.execute("PRAGMA user_version").fetchone()[0]
            db.execute(f"PRAGMA user_version = {int(version)}")

    @contextmanager
    def errors_named(self) -> Iterator[None]:
        """SQLite's and the file system's errors as one line naming the database (a full disk or a read-only
        database was a traceback: "sqlite3.OperationalError: database or disk is full", no path)."""
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise unwritable(self.path, exc) from exc

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            # autocommit (isolation_level None): every statement outside BEGIN is its own transaction
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")   # committed means on disk: a 201 is never lost
            self._local.db = db
        return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE: the read-modify-write inside sees no other writer)."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # -- tokens ---------------------------------------------------------------------------------

    def create_token(self, name: str, admin: bool = False) -> str:
        """A new token for ``name`` (returned once; only its hash is kept)."""
        if not name or len(name) > 100 or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ParameterError(f"token name {name!r}: use 1 to 100 letters, digits, '-', '_' or '.'")
        token = secrets.token_urlsafe(32)
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM tokens WHERE name = ?", (name,)).fetchone():
                raise TokenError(f"token {name!r} exists already (revoke it first to replace it)")
            db.execute("INSERT INTO tokens (name, sha256, admin, created_at) VALUES (?, ?, ?, ?)",
                       (name, _sha256(token), int(admin), time.time()))
        return token

    def revoke_token(self, name: str) -> None:
        with self._transaction() as db:
            if db.execute("DELETE FROM tokens WHERE name = ?", (name,)).rowcount == 0:
                raise TokenError(f"no token named {name!r}")

    def list_tokens(self) -> list[dict[str, Any]]:
        rows = self._db().execute("SELECT name, admin, created_at FROM tokens ORDER BY name").fetchall()
        return [{"name": r["name"], "admin": bool(r["admin"]), "created_at": _iso(r["created_at"])} for r in rows]

    def caller(self, token: str) -> Caller | None:
        """The caller a bearer token stands for (None: unknown or revoked)."""
        row = self._db().execute("SELECT name, admin FROM tokens WHERE sha256 = ?", (_sha256(token),)).fetchone()
        return None if row is None else Caller(row["name"], bool(row["admin"]))

    # -- jobs -------------------------------------------------------------------------------------

    def submit(self, owner: str, kind: str, args: Any, steps: list[dict[str, Any]], *,
               idempotency_key: str | None, max_attempts: int) -> tuple[Job, bool]:
        """Queue a job; (the job, True) once its row is committed. With an idempotency key the caller
        used before for the same kind and args: (that job, False); for other ones: IdempotencyConflict."""
        args_json = json.dumps(args, sort_keys=True)
        with self._transaction() as db:
            if idempotency_key is not None:
                row = db.execute("SELECT * FROM jobs WHERE owner = ? AND idempotency_key = ?",
                                 (owner, idempotency_key)).fetchone()
                if row is not None:
                    if row["kind"] != kind or row["args"] != args_json:
                        raise IdempotencyConflict(f"idempotency key {idempotency_key!r} was used for job "
                                                  f"{row['id']} with other arguments")
                    return Job.from_row(row), False
            job_id = uuid.uuid4().hex[:16]
            db.execute("INSERT INTO jobs (id, owner, kind, args, steps, idempotency_key, state, max_attempts, "
                       "created_at) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
                       (job_id, owner, kind, args_json, json.dumps(steps), idempotency_key, max_attempts,
                        time.time()))
            row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return Job.from_row(row), True

    def get(self, job_id: str) -> Job | None:
        row = self._db().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else Job.from_row(row)

    def jobs(self, owner: str | None = None, state: str | None = None, limit: int = 100) -> list[Job]:
        """Jobs, newest first; ``owner`` None: everyone's (an admin)."""
        where, params = [], []
        if owner is not None:
            where.append("owner = ?")
            params.append(owner)
        if state is not None:
            where.append("state = ?")
            params.append(state)
        sql = "SELECT * FROM jobs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY seq DESC LIMIT ?"
        return [Job.from_row(r) for r in self._db().execute(sql, (*params, limit)).fetchall()]

    def in_state(self, state: str) -> list[Job]:
        return [Job.from_row(r) for r in
                self._db().execute("SELECT * FROM jobs WHERE state = ? ORDER BY seq", (state,)).fetchall()]

    def claim_next(self) -> Job | None:
        """The oldest queued job, now running (its attempt counted); None when the queue is empty."""
        with self._transaction() as db:
            row = db.execute("SELECT id FROM jobs WHERE state = 'queued' ORDER BY seq LIMIT 1").fetchone()
            if row is None:
                return None
            db.execute("UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at = ?, stage = NULL, "
                       "progress = NULL WHERE id = ?", (time.time(), row["id"]))
            return Job.from_row(db.execute("SELECT * FROM jobs WHERE id = ?", (row["id"],)).fetchone())

    def set_progress(self, job_id: str, stage: str | None, progress: float | None) -> None:
        self._db().execute("UPDATE jobs SET stage = ?, progress = ? WHERE id = ? AND state = 'running'",
                           (stage, progress, job_id))

    def finish(self, job_id: str, state: str, *, result: Any = None, error: str | None = None) -> None:
        assert state in TERMINAL, state
        progress = 1.0 if state == "succeeded" else None
        self._db().execute(
            "UPDATE jobs SET state = ?, result = ?, error = ?, finished_at = ?, "
            "progress = COALESCE(?, progress) WHERE id = ? AND state = 'running'",
            (state, None if result is None else json.dumps(result), error, time.time(), progress, job_id))

    def finished_before(self, cutoff: float) -> list[str]:
        """The ids of the jobs that ended before ``cutoff`` (seconds since the epoch)."""
        return [r["id"] for r in self._db().execute(
            f"SELECT id FROM jobs WHERE state IN {TERMINAL!r} AND finished_at < ?", (cutoff,)).fetchall()]

    def requeue(self, job_id: str) -> None:
        """A running job back in the queue, at its place (its seq) and with its attempts counted."""
        self._db().execute("UPDATE jobs SET state = 'queued', stage = NULL, progress = NULL "
                           "WHERE id = ? AND state = 'running'", (job_id,))

    def request_cancel(self, job_id: str) -> Job:
        """A queued job is cancelled at once; a running one is marked (its runner stops it)."""
        with self._transaction() as db:
            # as a running job's cancel reads once it has stopped: asked for, and said why
            db.execute("UPDATE jobs SET state = 'cancelled', finished_at = ?, cancel_requested = 1, "
                       "error = 'cancelled before it started' WHERE id = ? AND state = 'queued'",
                       (time.time(), job_id))
            db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND state = 'running'", (job_id,))
            return Job.from_row(db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    # -- metrics ----------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        rows = self._db().execute("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state").fetchall()
        counts = dict.fromkeys(STATES, 0)
        counts.update({r["state"]: r["n"] for r in rows})
        return counts

    def duration_histogram(self, bounds: tuple[float, ...]) -> dict[str, tuple[list[int], float, int]]:
        """Per terminal state: (cumulative counts at each bound, sum of seconds, count) of finished jobs."""
        buckets = ", ".join(f"SUM(finished_at - started_at <= {b!r})" for b in bounds)
        rows = self._db().execute(
            f"SELECT state, {buckets}, SUM(finished_at - started_at), COUNT(*) FROM jobs "
            "WHERE finished_at IS NOT NULL AND started_at IS NOT NULL GROUP BY state").fetchall()
        out = {}
        for row in rows:
            values = tuple(row)
            out[values[0]] = ([int(v or 0) for v in values[1:-2]], float(values[-2] or 0.0), int(values[-1]))
        return out
