"""The dispatcher: one thread of the server that moves jobs from the queue onto the cluster.

Every :data:`TICK_SECONDS` (or at once when woken by a submission or a
cancel) it copies the stage and progress of running jobs from their
``status.json`` into the store, records the jobs whose run ended, and
starts queued jobs, oldest first, while fewer than ``max_running`` run. A
job runs as one dask task (:func:`graphstream.serve.runner.run_job`) whose
key names the job and the attempt.

Restart (specs/service.md, Durability): jobs found ``running`` at startup
are adopted, not rerun blindly. A run that finished while no server
watched has its ``result.json``: that is its outcome. A run whose heartbeat
is fresh is still going (an external ``--scheduler`` cluster outlives the
server): it is watched until it ends. Any other run died with the server:
the job is queued again (outputs are atomic, so a rerun is safe; finished
pipeline steps are skipped), or failed once ``max_attempts`` runs started.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .jobs import Job, JobStore
from .runner import CANCEL, INTERRUPTED, LOG, read_outcome, read_status, run_job

if TYPE_CHECKING:
    from distributed import Client, Future

TICK_SECONDS = 0.25
# How often the job folders of finished jobs are looked through for those past their keeping time.
PRUNE_EVERY_SECONDS = 3600.0
# A heartbeat older than this means its run is dead (beats come every runner.HEARTBEAT_SECONDS).
STALE_SECONDS = 10.0


@dataclass(slots=True)
class _Run:
    job: Job
    future: Future | None   # None: adopted from a server that died
    progress: tuple[Any, Any] = (None, None)


class Dispatcher:
    """Starts and watches jobs; ``client`` is the service's cluster, ``scheduler`` its address (given to
    the commands of a job, so that their own tasks run there too)."""

    def __init__(self, store: JobStore, client: Client, *, root: Path, jobs_dir: Path, max_running: int,
                 scheduler: str | None, keep_logs_seconds: float | None = None):
        self.keep_logs_seconds = keep_logs_seconds   # None: every finished job's folder is kept
        self._pruned_at: float | None = None
        self.store = store
        self.client = client
        self.root = root
        self.jobs_dir = jobs_dir
        self.max_running = max_running
        self.scheduler = scheduler
        self._runs: dict[str, _Run] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="graphstream-dispatcher", daemon=True)
        self.error: BaseException | None = None   # what stopped the loop, for /healthz

    def job_dir(self, job_id: str) -> Path:
        return self.jobs_dir / job_id

    def start(self) -> None:
        for job in self.store.in_state("running"):
            self._runs[job.id] = _Run(job, None)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def wake(self) -> None:
        self._wake.set()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def cancel(self, job_id: str) -> None:
        """Ask a running job's runner to stop its child (the store has marked the job already). The file
        is made even when the run has not made its folder yet: a run checks it before every step."""
        job_dir = self.job_dir(job_id)
        job_dir.mkdir(parents=True, exist_ok=True)
        (job_dir / CANCEL).touch()
        self.wake()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._tick()
                self._wake.wait(TICK_SECONDS)
                self._wake.clear()
        except BaseException as exc:   # shown by /healthz (503): a dead dispatcher starts nothing more
            self.error = exc
            raise

    def _tick(self) -> None:
        for job_id, run in list(self._runs.items()):
            try:
                self._watch(job_id, run)
            except Exception as exc:   # noqa: BLE001 - one job's trouble is that job's, not every job's
                self._runs.pop(job_id, None)
                first = (str(exc).strip().splitlines() or [""])[0]
                self.store.finish(job_id, "failed", error=f"the service could not follow the job "
                                                          f"({type(exc).__name__}: {first})")
        while len(self._runs) < self.max_running and not self._stop.is_set():
            job = self.store.claim_next()
            if job is None:
                break
            self._launch(job)
        if self.keep_logs_seconds is not None and (
                self._pruned_at is None or time.monotonic() - self._pruned_at >= PRUNE_EVERY_SECONDS):
            self._pruned_at = time.monotonic()
            self.prune_logs()

    def prune_logs(self) -> list[str]:
        """Remove the folders (log, status, result files) of the jobs that ended more than
        ``keep_logs_seconds`` ago; their records, results and outputs stay. A long-lived service's
        folder otherwise grew by every job's log for ever."""
        import shutil

        pruned = []
        for job_id in self.store.finished_before(time.time() - (self.keep_logs_seconds or 0.0)):
            folder = self.job_dir(job_id)
            if folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)
                pruned.append(job_id)
        return pruned

    def _launch(self, job: Job) -> None:
        job_dir = self.job_dir(job.id)
        job_dir.mkdir(parents=True, exist_ok=True)
        spec = {"job_id": job.id, "attempt": job.attempts, "root": str(self.root), "job_dir": str(job_dir),
                "steps": job.steps, "scheduler": self.scheduler, "max_running": self.max_running}
        future = self.client.submit(run_job, spec, key=f"graphstream-job-{job.id}-{job.attempts}", pure=False)
        self._runs[job.id] = _Run(job, future)

    def _watch(self, job_id: str, run: _Run) -> None:
        status = read_status(self.job_dir(job_id))
        if status is not None and status.get("attempt") == run.job.attempts:
            progress = (status.get("stage"), status.get("progress"))
            if progress != run.progress:
                self.store.set_progress(job_id, *progress)
                run.progress = progress
        if run.future is not None:
            if run.future.done():
                self._ended(job_id, run)
            return
        # adopted: the run of a server that died
        outcome = read_outcome(self.job_dir(job_id))
        if outcome is not None and outcome.get("attempt") == run.job.attempts:
            self._record(job_id, outcome)
        elif not _alive(status, run.job.attempts):
            self._interrupted(job_id, run.job, "the server stopped while it ran")

    def _ended(self, job_id: str, run: _Run) -> None:
        future = run.future
        try:
            outcome = future.result()
        except Exception as exc:   # the task itself failed (its worker died, the cluster was lost)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            self._interrupted(job_id, run.job, f"{type(exc).__name__}: {first}")
        else:
            if outcome.get("state") == INTERRUPTED:   # dask ran it again after its worker died (runner.py)
                self._interrupted(job_id, run.job, outcome.get("error") or "its worker was lost")
            else:
                self._record(job_id, outcome)
        future.release()

    def _record(self, job_id: str, outcome: dict[str, Any]) -> None:
        self.store.finish(job_id, outcome["state"], result=outcome.get("result"), error=outcome.get("error"))
        del self._runs[job_id]

    def _interrupted(self, job_id: str, job: Job, reason: str) -> None:
        """A run that died: the job queued again, or failed after its last attempt."""
        del self._runs[job_id]
        if job.cancel_requested or (self.store.get(job_id) or job).cancel_requested:
            self.store.finish(job_id, "cancelled", error=f"cancelled ({reason})")
            return
        if job.attempts < job.max_attempts:
            self._note(job_id, f"attempt {job.attempts} interrupted ({reason}); queued again")
            self.store.requeue(job_id)
        else:
            self._note(job_id, f"attempt {job.attempts} interrupted ({reason}); no attempts left")
            _clear_leftovers(job, read_status(self.job_dir(job_id)))
            self.store.finish(job_id, "failed", error=f"interrupted {job.attempts} times, last: {reason} "
                                                      f"(max_attempts {job.max_attempts})")

    def _note(self, job_id: str, message: str) -> None:
        job_dir = self.job_dir(job_id)
        job_dir.mkdir(parents=True, exist_ok=True)
        with open(job_dir / LOG, "a", encoding="utf-8") as log:
            log.write(f"graphstream serve: {message}\n")


def _clear_leftovers(job: Job, status: dict[str, Any] | None) -> None:
    """What the job's last run left beside its outputs (a killed command's temporary siblings and lock, and
    its scratch folders there), for a job that will not run again; nothing while a command still holds an
    output's lock."""
    from .._atomic import clear_after_writers, remove_scratch_of

    outputs = [out for step in job.steps for out in step.get("outputs", [])]
    for out in outputs:
        clear_after_writers(out)
    child = (status or {}).get("child")
    if isinstance(child, int) and (status or {}).get("host") == socket.gethostname():
        for parent in {os.path.dirname(out) for out in outputs}:
            remove_scratch_of(child, parent)


def _alive(status: dict[str, Any] | None, attempt: int) -> bool:
    """Whether the run of ``attempt`` still beats: its heartbeat is fresh and, on this host, its
    worker process exists."""
    if status is None or status.get("attempt") != attempt:
        return False
    if time.time() - float(status.get("heartbeat", 0)) > STALE_SECONDS:
        return False
    if status.get("host") == socket.gethostname() and isinstance(status.get("pid"), int):
        try:
            os.kill(status["pid"], 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
    return True
