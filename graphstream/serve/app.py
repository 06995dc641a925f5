"""The HTTP API and the page (specs/service.md, API; docs/service.md has curl examples).

A FastAPI app over the job store and the dispatcher. Handlers are plain
functions (FastAPI runs them in its thread pool), since everything they do
is a short SQLite call or a small file read; jobs never run here. Every
``/api`` call needs ``Authorization: Bearer TOKEN``; a token sees and
cancels its own jobs, an admin token every job, and another's job is a 404
(its existence is not revealed). Errors are ``{"detail": "one line"}``:
400 for a refused path, 401, 404, 409 for an idempotency key reused with
other arguments, 413 for a body over the limit, 422 for other arguments
(with the CLI's own message where the CLI would have refused them).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

from .. import __version__
from ..errors import GraphStreamError
from ..report import plot_names
from .datasets import dataset_plot, dataset_report, list_datasets
from .dispatcher import Dispatcher
from .jobargs import JobArgsError, job_steps, without_root
from .jobs import STATES, TERMINAL, Caller, IdempotencyConflict, JobStore
from .runner import LOG

STATIC = Path(__file__).parent / "static"
LOG_CHUNK_BYTES = 1 << 20
# Buckets of the job duration histogram (seconds).
DURATION_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0)


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """What ``graphstream serve`` was started with (the parts the app needs)."""
    root: Path
    max_running: int = 2
    max_attempts: int = 3
    max_body_bytes: int = 256 * 1024
    cluster: dict[str, Any] | None = None


def _caller(request: Request) -> Caller:
    """The caller of an ``/api`` request, from its bearer token (401 without a valid one)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(401, "missing bearer token (Authorization: Bearer TOKEN)",
                            headers={"WWW-Authenticate": "Bearer"})
    who = request.app.state.store.caller(token.strip())
    if who is None:
        raise HTTPException(401, "unknown or revoked token", headers={"WWW-Authenticate": "Bearer"})
    return who


Who = Annotated[Caller, Depends(_caller)]


class JobRequest(BaseModel):
    """``POST /api/jobs``: ``args`` as the CLI takes them, JSON (positionals by name, options by long name
    with ``_`` for ``-``); ``kind`` ``pipeline`` takes ``{"steps": [{"kind": ..., "args": ...}, ...]}``."""
    model_config = ConfigDict(extra="forbid")
    kind: str = Field(max_length=32)
    args: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


def create_app(config: ServiceConfig, store: JobStore, dispatcher: Dispatcher) -> FastAPI:
    app = FastAPI(title="graphstream serve", version=__version__,
                  description="The graphstream preprocessing service: jobs, logs, datasets, partition reports.")
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.state.store = store
    root = config.root

    @app.exception_handler(JobArgsError)
    def _args_error(request: Request, exc: JobArgsError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors())
        return JSONResponse({"detail": " ".join(f"invalid request: {problems}".split())}, status_code=422)

    def visible_job(job_id: str, who: Caller):
        job = store.get(job_id)
        if job is None or not (who.admin or job.owner == who.name):
            raise HTTPException(404, f"no job {job_id}")
        return job

    # -- the page, health and metrics (no token: nothing in them is a job's) ----------------------

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        alive = dispatcher.alive
        # no token here: the cluster's mode only, not its addresses
        body = {"status": "ok" if alive else "dispatcher stopped", "version": __version__,
                "cluster": (config.cluster or {}).get("mode"), "max_running": config.max_running}
        if dispatcher.error is not None:
            body["error"] = f"{type(dispatcher.error).__name__}: {dispatcher.error}"
        return JSONResponse(body, status_code=200 if alive else 503)

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(_metrics(store, dispatcher, config), media_type="text/plain; version=0.0.4")

    # -- jobs ---------------------------------------------------------------------------------------

    @app.post("/api/jobs", status_code=201)
    def submit(body: JobRequest, who: Who) -> JSONResponse:
        """Queue a job (201); the same idempotency key of the same caller gives the same job (200)."""
        steps = job_steps(body.kind, body.args, root)
        try:
            job, created = store.submit(who.name, body.kind, body.args, [s.to_dict() for s in steps],
                                        idempotency_key=body.idempotency_key, max_attempts=config.max_attempts)
        except IdempotencyConflict as exc:
            raise HTTPException(409, str(exc)) from None
        dispatcher.wake()
        return JSONResponse(job.to_api(), status_code=201 if created else 200)

    @app.get("/api/jobs")
    def jobs(who: Who, state: str | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
        """The caller's jobs (an admin's: everyone's), newest first."""
        if state is not None and state not in STATES:
            raise HTTPException(422, f"state {state!r}: expected one of {', '.join(STATES)}")
        found = store.jobs(owner=None if who.admin else who.name, state=state, limit=limit)
        return {"jobs": [j.to_api() for j in found]}

    @app.get("/api/jobs/{job_id}")
    def job(job_id: str, who: Who) -> dict[str, Any]:
        return visible_job(job_id, who).to_api()

    @app.get("/api/jobs/{job_id}/log", response_class=PlainTextResponse)
    def job_log(job_id: str, who: Who, offset: Annotated[int, Query(ge=0)] = 0) -> Response:
        """The job's log from byte ``offset`` (at most 1 MiB a call; ``X-Log-Size``: its size now); 410 once
        it was removed (``--keep-logs-days`` after the job ended)."""
        job = visible_job(job_id, who)
        keep = dispatcher.keep_logs_seconds
        if (keep is not None and job.finished_at is not None and job.finished_at < time.time() - keep
                and not dispatcher.job_dir(job_id).is_dir()):
            raise HTTPException(410, f"the log was removed {keep / 86400:g} days after the job ended "
                                     "(graphstream serve --keep-logs-days); its record and result stay")
        try:
            with open(dispatcher.job_dir(job_id) / LOG, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(min(offset, size))
                data = f.read(LOG_CHUNK_BYTES)
        except FileNotFoundError:
            size, data = 0, b""
        return Response(data, media_type="text/plain; charset=utf-8", headers={"X-Log-Size": str(size)})

    @app.post("/api/jobs/{job_id}/cancel")
    def cancel(job_id: str, who: Who) -> dict[str, Any]:
        """Stop a job: a queued one at once; a running one's command is terminated (its outputs unwound),
        waited for up to 10 s (the job says ``cancel_requested`` if it takes longer)."""
        visible_job(job_id, who)
        job = store.request_cancel(job_id)
        if job.state == "running":
            dispatcher.cancel(job_id)
            deadline = time.monotonic() + 10
            while job.state not in TERMINAL and time.monotonic() < deadline:
                time.sleep(0.1)
                job = store.get(job_id)
        return job.to_api()

    # -- datasets -----------------------------------------------------------------------------------

    @app.get("/api/datasets")
    def datasets(who: Who) -> dict[str, Any]:
        """Graph stores, snapshot stores and partitioned datasets under the root, with their description."""
        return {"datasets": list_datasets(root)}

    @app.get("/api/datasets/{path:path}/report")
    def report(path: str, who: Who) -> dict[str, Any]:
        """The partition report of a partitioned dataset, and the addresses of its plots."""
        found = _report_or_404(root, path)
        doc = found.to_dict()
        doc["plots"] = {name: {fmt: f"/api/datasets/{quote(path)}/plots/{name}.{fmt}" for fmt in ("png", "svg")}
                        for name in plot_names(found)}
        return doc

    @app.get("/api/datasets/{path:path}/plots/{plot}")
    def plot(path: str, plot: str, who: Who) -> Response:
        """One plot of the report: ``sizes``, ``edges`` or ``rf_vs_k``, as ``.png`` or ``.svg``."""
        name, _, fmt = plot.rpartition(".")
        if fmt not in ("png", "svg"):
            raise HTTPException(404, f"plot {plot!r}: expected NAME.png or NAME.svg")
        _report_or_404(root, path)
        try:
            data = dataset_plot(root, path, name, fmt)
        except KeyError:
            raise HTTPException(404, f"{path} has no plot {name!r}") from None
        return Response(data, media_type="image/png" if fmt == "png" else "image/svg+xml",
                        headers={"Cache-Control": "private, max-age=60"})

    return app


def _report_or_404(root: Path, path: str):
    try:
        return dataset_report(root, path)
    except JobArgsError:
        raise
    except (GraphStreamError, FileNotFoundError) as exc:
        message = " ".join(without_root(str(exc), root).split())
        missing = isinstance(exc, FileNotFoundError) or "no such" in message or "no manifest" in message
        raise HTTPException(404 if missing else 422, message) from None


def _metrics(store: JobStore, dispatcher: Dispatcher, config: ServiceConfig) -> str:
    """Prometheus text: jobs by state, the duration histogram of finished jobs, the dispatcher's state."""
    lines = ["# HELP graphstream_jobs Jobs in the store, by state.", "# TYPE graphstream_jobs gauge"]
    lines += [f'graphstream_jobs{{state="{state}"}} {n}' for state, n in store.counts().items()]
    lines += ["# HELP graphstream_job_duration_seconds Run time of finished jobs (last attempt), by final state.",
              "# TYPE graphstream_job_duration_seconds histogram"]
    for state, (cumulative, total, count) in sorted(store.duration_histogram(DURATION_BUCKETS).items()):
        for bound, n in zip(DURATION_BUCKETS, cumulative, strict=True):
            lines.append(f'graphstream_job_duration_seconds_bucket{{state="{state}",le="{bound:g}"}} {n}')
        lines.append(f'graphstream_job_duration_seconds_bucket{{state="{state}",le="+Inf"}} {count}')
        lines.append(f'graphstream_job_duration_seconds_sum{{state="{state}"}} {total:.3f}')
        lines.append(f'graphstream_job_duration_seconds_count{{state="{state}"}} {count}')
    lines += ["# HELP graphstream_max_running Jobs that may run at once (--max-running).",
              "# TYPE graphstream_max_running gauge", f"graphstream_max_running {config.max_running}",
              "# HELP graphstream_dispatcher_up Whether the dispatcher thread runs.",
              "# TYPE graphstream_dispatcher_up gauge", f"graphstream_dispatcher_up {int(dispatcher.alive)}"]
    return "\n".join(lines) + "\n"


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is a 413, by Content-Length or as it streams.

    The body is read here whole (it is small: the limit) and handed on in one message, so that a
    chunked body over the limit is refused before the app's parser sees it (raised from inside the
    app's ``receive``, the parser's own error handling made it a 400)."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers", ())).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await self._refuse(send)
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":   # the client left before sending it all
                return None
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                return await self._refuse(send)
            if not message.get("more_body", False):
                break
        pending = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay():
            return pending.pop() if pending else await receive()

        return await self.app(scope, replay, send)

    async def _refuse(self, send) -> None:
        body = json.dumps({"detail": f"request body over {self.max_bytes} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
