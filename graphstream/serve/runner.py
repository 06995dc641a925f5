"""What runs a job: a dask task that runs each step as a ``graphstream`` child process.

The task (:func:`run_job`) runs on a worker of the service's cluster, never
in the web process. It secedes from the worker's thread pool at once (a job
mostly waits for its child; the thread is free for the child's own dask
tasks), then runs every step as ``python -m graphstream KIND ARGV --json``
(no shell; the working directory is the service root, so the checked
relative paths mean what they meant at submission):

* stdout is the step's result (the CLI prints one JSON object);
* stderr goes to the job's ``log`` file, less the progress bars, which
  become the job's stage and progress (``GRAPHSTREAM_PROGRESS=1`` forces
  the bars; a bar update ends with ``\\r``, a log line with ``\\n``);
* the child gets SIGTERM when the worker dies (``PR_SET_PDEATHSIG``), and
  when the job's ``cancel`` file appears: the CLI unwinds its atomic outputs
  and exits 143, nothing half-written.

Everything the server needs from a run is a file in the job's folder (on
the root, which every worker sees): ``status.json`` (stage, progress and a
heartbeat every :data:`HEARTBEAT_SECONDS`), ``step-N.json`` (a finished
step's result: a rerun after a crash skips it), ``result.json`` (the
outcome). A server that restarts finds a live run by its heartbeat and a
finished one by its ``result.json``, so a run never needs the server that
started it.

A step's outputs are claimed before its first run (``step-N.claim.json``:
those that did not exist then), and the step's commands note each output
they swap into place, with its inode (``step-N.published``,
``graphstream._atomic.PUBLISHED_LOG_ENV``). So the runner knows its own
outputs from another job's of the same name:

* A server that dies after a step's command swapped its output into place
  but before ``step-N.json`` was written leaves a complete output that the
  rerun's command would refuse as existing: a claimed output noted by an
  earlier attempt is the job's own, and the rerun writes it again
  (``--overwrite``, atomic). Any other existing output is left alone, and
  the step fails naming it.
* A cancelled step whose command had already swapped a claimed output into
  place has that output removed, whole (a cancelled job leaves nothing);
  an output another job put there stays.
* A step that fails has the leftovers beside its outputs cleared (the
  temporary siblings and lock of a killed command, its scratch folders).

A dask worker that dies mid-run makes dask run the task again under the same
attempt: the runner finds that attempt's ``status.json`` and ends at once as
``interrupted``, so the dispatcher counts the attempt (``max_attempts``).
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from .jobargs import doc_without_root

LOG = "log"
STATUS = "status.json"
RESULT = "result.json"
CLAIM_SHAPE = {"time": (int, float), "fresh": list}   # a step's claim file (_claim)
PUBLISHED = "published"    # step-N.published: the outputs the step's commands swapped into place
INTERRUPTED = "interrupted"   # a run's outcome (never written as result.json) when its worker was lost
CANCEL = "cancel"
HEARTBEAT_SECONDS = 0.5
# How long a cancelled child may take to unwind its outputs before it is killed (the next run on the
# same output clears what a kill leaves: graphstream._atomic.recover_leftovers).
KILL_AFTER_SECONDS = 60.0
# A rerun after a server died may start while the previous attempt's command still unwinds (it got
# SIGTERM with its worker and removes its temporary output, holding the output's lock until it ends):
# the rerun's command then fails at once with the lock error, and is started again for this long.
LOCKED_RETRY_SECONDS = 120.0
_LOCKED = "wait for that run to end"   # graphstream._atomic's OutputLockedError message

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# tqdm's bar: "DESC:  45%|####      | 450/1000 [...]", or without a total "DESC: 1.2Medge [00:01, ...]"
_BAR = re.compile(r"^(?P<desc>[^|]*?):\s+(?:(?P<pct>\d{1,3})%\||[\d.]+[kMGTPE]?\w*\s+\[\d)")
_ERROR = re.compile(r"^graphstream [\w -]+: (error|terminated|interrupted)")
# graphstream._atomic's lock error names the holder's pid, host and command line: another job's, maybe
_HOLDER = re.compile(r"output is in use by .*? \(lock file ")


def run_job(spec: dict[str, Any]) -> dict[str, Any]:
    """Run a job's steps in order; the outcome ``{"state", "result", "error", "attempt"}``, also
    written as ``result.json``. ``spec``: job_id, attempt, root, job_dir, steps, scheduler."""
    with contextlib.suppress(ValueError):   # not on a worker (called directly): nothing to leave
        from distributed import secede
        secede()
    job_dir = Path(spec["job_dir"])
    try:
        return _run_steps(spec, job_dir)
    except JobFileError as exc:
        return _outcome(job_dir, spec, "failed", error=str(exc))
    except Exception as exc:   # noqa: BLE001 - the job's own failure, said in one line
        # Raised out of the task, it read as a lost worker: the job was run again, the same way, up to
        # max_attempts, and the last attempt's clean-up could stop the dispatcher for every job
        # (an output name too long for its lock file).
        first = (str(exc).strip().splitlines() or [""])[0]
        return _outcome(job_dir, spec, "failed", error=f"{type(exc).__name__}: {first}")


def _run_steps(spec: dict[str, Any], job_dir: Path) -> dict[str, Any]:
    done = _read_job_file(job_dir / RESULT, {"state": str, "attempt": int})
    if done is not None and (done["state"] == "succeeded" or done["attempt"] == spec["attempt"]):
        # an earlier attempt finished, and the server that ran it died before recording it; or this
        # attempt did, and dask ran its task again (the worker died after the result was written)
        return done
    if done is not None:
        # An earlier attempt's failure, written after the job was queued again: its run outlived the
        # scheduler the dispatcher lost, and failed for that ("lost the dask scheduler"). Taken as this
        # attempt's outcome, one scheduler restart failed the job with attempts left. Run again: a
        # failure of the job's own comes back the same.
        (job_dir / RESULT).unlink(missing_ok=True)
    earlier = read_status(job_dir)
    if earlier is not None and earlier.get("attempt") == spec["attempt"]:
        # dask ran the task again after its worker died: an attempt the dispatcher must count
        return {"state": INTERRUPTED, "result": None, "attempt": spec["attempt"],
                "error": f"its worker (pid {earlier.get('pid')} on {earlier.get('host')}) was lost"}
    for leftover in job_dir.glob(".stdout-*"):   # a dead worker's
        leftover.unlink(missing_ok=True)
    steps = spec["steps"]
    results = []
    with open(job_dir / LOG, "a", encoding="utf-8") as log, _Status(job_dir, spec["attempt"]) as status:
        _log(log, f"attempt {spec['attempt']} on {socket.gethostname()} (worker pid {os.getpid()})")
        for i, step in enumerate(steps):
            name = step["kind"] if len(steps) == 1 else f"step {i + 1}/{len(steps)} {step['kind']}"
            previous = _read_job_file(job_dir / f"step-{i}.json")
            if previous is not None:
                _log(log, f"{name}: done by an earlier attempt, skipped")
                results.append(previous)
                continue
            if (job_dir / CANCEL).exists():
                _discard_earlier_steps(job_dir, spec, i, log)
                return _outcome(job_dir, spec, "cancelled", error=f"cancelled before {name}")
            status.start_step(name)
            claim = _claim(job_dir / f"step-{i}.claim.json", step.get("outputs", []))
            published = job_dir / f"step-{i}.{PUBLISHED}"
            adopted = _own_outputs(claim, published)
            if adopted:
                shown = ", ".join(doc_without_root(adopted, spec["root"].rstrip("/")))
                _log(log, f"{name}: {shown} written by the attempt before, which ended before recording it; "
                          "written again")
            retry_until = time.monotonic() + (LOCKED_RETRY_SECONDS if spec["attempt"] > 1 else 0.0)
            while True:
                state, result, error = _run_step(step, spec, job_dir, log, status, name, claim, bool(adopted),
                                                 published)
                if state != "failed" or _LOCKED not in (error or "") or time.monotonic() > retry_until:
                    break
                _log(log, f"{name}: the output is still locked by the previous attempt's command; retrying")
                status.error_line = None
                time.sleep(1.0)
            if state == "cancelled":
                _discard_earlier_steps(job_dir, spec, i, log)
            if state != "succeeded":
                return _outcome(job_dir, spec, state, error=error if len(steps) == 1 else f"{name}: {error}")
            _write_json(job_dir / f"step-{i}.json", result)
            results.append(result)
    return _outcome(job_dir, spec, "succeeded", result=results[0] if len(steps) == 1 else {"steps": results})


def step_env(spec: dict[str, Any]) -> dict[str, str]:
    """The environment of a step's process: the worker's, without the service's scheduler variable, and a
    thread budget of this machine's cores shared by the jobs that may run at once (``max_running``). The
    worker's own NUMBA_NUM_THREADS counts its task threads, which a job's process is not one of."""
    from .._resources import machine_cores

    env = {k: v for k, v in os.environ.items() if k != "GRAPHSTREAM_SCHEDULER"}
    threads = str(max(1, machine_cores() // max(1, int(spec.get("max_running") or 1))))
    env.update(GRAPHSTREAM_PROGRESS="1", PYTHONUNBUFFERED="1", NUMBA_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
    return env


def _claim(path: Path, outputs: list[str]) -> dict[str, Any]:
    """The step's claim: written before its first run (which of ``outputs`` did not exist, and when), read
    back on every later one."""
    claim = _read_job_file(path, CLAIM_SHAPE)
    if claim is not None and not all(isinstance(out, str) for out in claim["fresh"]):
        raise JobFileError(f"the job's {path.name} is damaged (fresh holds a non-path); remove it to run again")
    if claim is None:
        claim = {"time": time.time(), "fresh": [o for o in outputs if not os.path.lexists(o)]}
        _write_json(path, claim)
    return claim


def _discard_earlier_steps(job_dir: Path, spec: dict[str, Any], steps: int, log) -> None:
    """A cancelled pipeline leaves nothing: the outputs its first ``steps`` steps put in place are removed
    (those the steps' commands noted; an output that was there before the job, or another's, is not)."""
    from .._atomic import discard_output
    for j in range(steps):
        claim = _read_job_file(job_dir / f"step-{j}.claim.json", CLAIM_SHAPE)
        if claim is None:
            continue
        for out in _own_outputs(claim, job_dir / f"step-{j}.{PUBLISHED}"):
            if discard_output(out):
                _log(log, f"step {j + 1}: removed {doc_without_root(out, spec['root'].rstrip('/'))} (the job was "
                          "cancelled)")


def _own_outputs(claim: dict[str, Any], published: Path) -> list[str]:
    """The claimed outputs now in place that this step's commands put there (noted in ``published``): an
    earlier attempt's, on a rerun; this attempt's, after a cancel."""
    from .._atomic import published_here
    return [out for out in claim["fresh"] if published_here(published, out)]


def _run_step(step: dict[str, Any], spec: dict[str, Any], job_dir: Path, log, status: _Status, name: str,
              claim: dict[str, Any] | None = None, overwrite: bool = False, published: Path | None = None
              ) -> tuple[str, Any, str | None]:
    """One child process; (state, result, error). ``overwrite``: its outputs replaced (an earlier attempt's).
    ``published``: the file the command notes its outputs in (the step's, kept across attempts)."""
    from .._atomic import PUBLISHED_LOG_ENV, clear_after_writers, discard_output, remove_scratch_of
    argv = list(step["argv"])
    if overwrite and "--overwrite" not in argv:
        argv.append("--overwrite")
    if step.get("cluster") and spec.get("scheduler"):
        argv += ["--scheduler", spec["scheduler"]]   # the command's own tasks run on the service's cluster
    cmd = [sys.executable, "-m", "graphstream", step["kind"], *argv, "--json"]
    env = step_env(spec)
    published = published if published is not None else job_dir / f"step.{PUBLISHED}"
    env[PUBLISHED_LOG_ENV] = str(published)
    _log(log, f"{name}: graphstream {' '.join([step['kind'], *argv])}")
    start = time.monotonic()
    out_path = job_dir / f".stdout-{uuid.uuid4().hex[:8]}"
    try:
        with open(out_path, "w+b") as out:
            child = subprocess.Popen(cmd, cwd=spec["root"], env=env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.PIPE, close_fds=True,
                                     preexec_fn=functools.partial(_die_with_parent, os.getpid()))
            status.doc = {**status.doc, "child": child.pid}   # its scratch folders are named by it
            pump = threading.Thread(target=_pump, args=(child.stderr, log, status), daemon=True)
            pump.start()
            cancelled = _wait(child, job_dir / CANCEL)
            pump.join()
            out.seek(0)
            stdout = out.read().decode("utf-8", "replace")
    finally:
        out_path.unlink(missing_ok=True)
    rc = child.returncode
    _log(log, f"{name}: exit status {rc} after {time.monotonic() - start:.1f} s")
    fresh = (claim or {}).get("fresh", [])
    if rc != 0:
        # what a killed command leaves beside its outputs, and its scratch folders there (cluster runs)
        for out in step.get("outputs", []):
            clear_after_writers(out)
        for parent in {spec["root"], *(os.path.dirname(out) for out in step.get("outputs", []))}:
            remove_scratch_of(child.pid, parent)
    if cancelled and rc != 0:   # (a command that ended before the signal took effect succeeded)
        # the signal may have come after the command swapped an output into place: nothing of its stays
        for out in _own_outputs({"fresh": fresh}, published):
            if discard_output(out):
                shown = doc_without_root(out, spec["root"].rstrip("/"))
                _log(log, f"{name}: removed {shown}, written before the cancel took effect")
        return "cancelled", None, "cancelled"
    if rc < 0:   # killed by a signal it could not handle: its last line is whatever it was doing
        return "failed", None, status.error_line or f"the command was killed by {_signal_name(-rc)} (exit status {rc})"
    if rc != 0:
        # the CLI's one-line error; else the last line (a traceback's last line names the exception)
        return "failed", None, status.error_line or status.last_line or f"exit status {rc}"
    try:
        return "succeeded", json.loads(stdout) if stdout.strip() else None, None
    except json.JSONDecodeError:
        return "failed", None, f"the command printed no JSON result (exit status 0): {stdout[:200]!r}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _wait(child: subprocess.Popen, cancel_file: Path) -> bool:
    """Wait for the child; SIGTERM it when the cancel file appears (SIGKILL after KILL_AFTER_SECONDS).
    Whether it was cancelled."""
    signalled_at = None
    while True:
        try:
            child.wait(timeout=0.2)
            return signalled_at is not None
        except subprocess.TimeoutExpired:
            pass
        if signalled_at is None and cancel_file.exists():
            child.send_signal(signal.SIGTERM)
            signalled_at = time.monotonic()
        elif signalled_at is not None and time.monotonic() - signalled_at > KILL_AFTER_SECONDS:
            child.kill()


# prctl(2), looked up here so that the child, between fork and exec, only calls it (Linux only).
_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    """In the child, before exec: SIGTERM when the worker that started it dies, so that a killed
    server's worker leaves no orphan writing an output that the next attempt will write again."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != parent_pid:   # the worker died before the prctl took effect
        os._exit(143)


def _pump(stream, log, status: _Status) -> None:
    """Copy the child's stderr into the log, line by line; bar updates go to ``status`` instead."""
    pending = ""
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            break
        pending += chunk.decode("utf-8", "replace")
        *segments, pending = re.split(r"[\r\n]", pending)
        for segment in segments:
            _segment(segment, log, status)
    _segment(pending, log, status)
    stream.close()


def _segment(text: str, log, status: _Status) -> None:
    text = _ANSI.sub("", text).rstrip()
    if not text.strip():
        return
    text = _HOLDER.sub("output is in use by another run (lock file ", text)
    bar = _BAR.match(text)
    if bar is not None:
        status.bar(bar["desc"].strip(), None if bar["pct"] is None else min(int(bar["pct"]), 100) / 100)
        return
    log.write(text + "\n")
    log.flush()
    status.last_line = text
    if _ERROR.match(text):
        status.error_line = text


def _log(log, message: str) -> None:
    log.write(f"graphstream serve: {message}\n")
    log.flush()


class _Status:
    """``status.json``: the run's stage, progress and heartbeat, rewritten by a thread every
    :data:`HEARTBEAT_SECONDS` while the run lives (the server reads it; a stale one means a dead run)."""

    def __init__(self, job_dir: Path, attempt: int):
        self.path = job_dir / STATUS
        self.doc = {"attempt": attempt, "stage": None, "progress": None, "host": socket.gethostname(),
                    "pid": os.getpid(), "heartbeat": time.time()}
        self.error_line: str | None = None   # the step's last "graphstream CMD: error: ..." line
        self.last_line: str | None = None    # the step's last log line
        self.step = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def start_step(self, name: str) -> None:
        self.error_line = self.last_line = None
        self.step = name
        self.doc = {**self.doc, "stage": name, "progress": None}

    def bar(self, desc: str, progress: float | None) -> None:
        """A progress bar's update: the stage is the step and the bar (``partition: build: parts``)."""
        self.doc = {**self.doc, "stage": f"{self.step}: {desc}", "progress": progress}

    def _beat(self) -> None:
        while not self._stop.is_set():
            self.doc = {**self.doc, "heartbeat": time.time()}
            _write_json(self.path, self.doc)
            self._stop.wait(HEARTBEAT_SECONDS)

    def __enter__(self) -> _Status:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _outcome(job_dir: Path, spec: dict[str, Any], state: str, *, result: Any = None,
             error: str | None = None) -> dict[str, Any]:
    # paths in the argv are absolute; callers know them relative to the root
    root = spec["root"].rstrip("/")
    if error is not None:
        # the root only where it starts a path ("/mnt/srv/data/a" is not under "/srv/data")
        start = r"(?<![\w./:-])" + re.escape(root)
        error = re.sub(start + r"(?=$|[\s,;:)\]'\"]|\.(?:\s|$))", "the service root",
                       re.sub(start + "/+", "", error))
    outcome = {"state": state, "result": doc_without_root(result, root), "error": error, "attempt": spec["attempt"]}
    _write_json(job_dir / RESULT, outcome)
    return outcome


def _write_json(path: Path, doc: Any) -> None:
    """Whole or not at all (a temporary sibling renamed into place): readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


class JobFileError(Exception):
    """A file of the job's folder that this module wrote whole is not what it wrote (edited by hand, or
    by something else): the run fails naming it rather than guess, and is not retried."""


def _read_job_file(path: Path, shape: dict[str, type | tuple[type, ...]] | None = None) -> Any:
    """A job file written by :func:`_write_json` (None when absent); ``shape``: the keys it must hold, and
    their types."""
    try:
        doc = _read_json(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise JobFileError(f"the job's {path.name} is damaged (not JSON: {exc}); remove it to run again") from exc
    if doc is None or shape is None:
        return doc
    if not isinstance(doc, dict):
        raise JobFileError(f"the job's {path.name} is damaged (not a JSON object); remove it to run again")
    bad = [key for key, kind in shape.items() if not isinstance(doc.get(key), kind)]
    if bad:
        raise JobFileError(f"the job's {path.name} is damaged ({', '.join(bad)} missing or of the wrong type); "
                           "remove it to run again")
    return doc


def read_status(job_dir: Path) -> dict[str, Any] | None:
    """The last ``status.json`` of a job's run (None: no run started)."""
    try:
        return _read_json(job_dir / STATUS)
    except (json.JSONDecodeError, OSError):
        return None


def read_outcome(job_dir: Path) -> dict[str, Any] | None:
    """The ``result.json`` of a finished run (None: not finished)."""
    try:
        return _read_json(job_dir / RESULT)
    except (json.JSONDecodeError, OSError):
        return None
