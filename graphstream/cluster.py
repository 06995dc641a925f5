"""The one place where graphstream meets dask.distributed (specs/distributed.md, docs/distributed.md).

Every command runs in-process unless told otherwise (``ClusterConfig()``, the
embedded default: nothing here is imported then). ``--workers N`` starts a
``LocalCluster`` of N worker processes for the command; ``--scheduler ADDR``
(or ``GRAPHSTREAM_SCHEDULER``) joins a running cluster. Library functions
take ``client=`` (a ``distributed.Client``, or None for in-process).

A stage is a list of small tasks over chunk, byte or node ranges; each task
reads and writes the shared stores itself and returns a small result (counts,
sizes, paths), never a big array (the scheduler is not a data plane).
:func:`run_tasks` submits them, feeds the progress bar from their
completions, returns their results in order and turns a lost scheduler into
a :class:`ClusterError` (exit 2). A worker that dies mid-task is dask's to
survive: its tasks are rerun elsewhere, which is why tasks write their
outputs under temporary names and rename them (:func:`save_shard`), so that
a rerun is idempotent.
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._atomic import atomic_dir, save_npy
from ._jobs import Job, ReadyJobs
from ._report import log, progress
from ._resources import machine_cores, quiet_openmp
from .errors import ClusterError, GraphStreamError, ParameterError

if TYPE_CHECKING:   # distributed is imported only when a cluster is asked for (keeps in-process runs light)
    from distributed import Client

SCHEDULER_ENV = "GRAPHSTREAM_SCHEDULER"
# How long a command on a running cluster without workers waits for one (dask-jobqueue's workers may
# still be in the batch queue); without a wait, the paths were "checked" on no worker and the command
# then hung with no word.
WORKER_WAIT_ENV = "GRAPHSTREAM_WORKER_WAIT"
DEFAULT_WORKER_WAIT_SECONDS = 300.0

# How long a worker that died may be replaced before its tasks count as failed (dask's own rule: a task
# whose worker died this many times is marked suspicious and fails).
ALLOWED_FAILURES = 3
# How long a scheduler address may take to send dask's handshake before it is called no scheduler.
PROBE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Where a command runs: in-process (both None), a LocalCluster of ``workers`` processes with
    ``threads_per_worker`` threads each, or the running cluster at ``scheduler``."""
    workers: int | None = None
    threads_per_worker: int = 1
    scheduler: str | None = None

    def __post_init__(self) -> None:
        if self.workers is not None and self.scheduler is not None:
            raise ParameterError("--workers starts a local cluster and --scheduler joins a running one: "
                                 "give one of them")
        if self.workers is not None and self.workers < 1:
            raise ParameterError(f"--workers must be at least 1, got {self.workers}")
        if self.workers is not None and self.workers > max_local_workers():
            raise ParameterError(f"--workers {self.workers}: a local cluster's workers are processes of this "
                                 f"machine; at most {max_local_workers()} here ({machine_cores()} cores; "
                                 "--scheduler for a cluster of several machines)")
        if self.threads_per_worker < 1:
            raise ParameterError(f"--threads-per-worker must be at least 1, got {self.threads_per_worker}")

    @property
    def in_process(self) -> bool:
        return self.workers is None and self.scheduler is None

    @classmethod
    def from_args(cls, args: Any) -> ClusterConfig:
        """From the CLI flags (:func:`graphstream.commands.flags.add_cluster`), with
        ``GRAPHSTREAM_SCHEDULER`` as the scheduler when neither flag is given."""
        workers = getattr(args, "workers", None)
        scheduler = getattr(args, "scheduler", None)
        if workers is None and scheduler is None:
            scheduler = os.environ.get(SCHEDULER_ENV) or None
        threads = getattr(args, "threads_per_worker", None)
        if threads is not None and workers is None and scheduler is None:   # refused rather than ignored
            raise ParameterError("--threads-per-worker applies with --workers N (a local cluster); without it the "
                                 "command runs in this process on every core")
        if threads is not None and workers is None:   # a running cluster's workers have their own threads
            raise ParameterError(f"--threads-per-worker applies with --workers N (a local cluster); the workers of "
                                 f"the cluster at {scheduler} have the threads they were started with "
                                 "(dask worker --nthreads)")
        return cls(workers=workers, threads_per_worker=1 if threads is None else threads, scheduler=scheduler)

    def to_dict(self) -> dict:
        """What ``--json`` reports as ``cluster`` (None: in-process)."""
        if self.in_process:
            return {"mode": "in-process"}
        if self.scheduler is not None:
            return {"mode": "scheduler", "scheduler": self.scheduler}
        return {"mode": "local", "workers": self.workers, "threads_per_worker": self.threads_per_worker}


def max_local_workers() -> int:
    """The most workers a LocalCluster may start: 8 a core, at least 64 (a typo of 1000000 grew the client
    by 240 MB a minute without starting one, and held off SIGTERM for 20-35 s)."""
    return max(64, 8 * machine_cores())


def _quiet_distributed() -> None:
    # distributed logs every worker start, stop and rerun at INFO on stderr; a command's stderr is for
    # its own progress lines (warnings and errors still show).
    for name in ("distributed", "distributed.nanny", "distributed.scheduler", "distributed.worker",
                 "distributed.core", "distributed.http.proxy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # a lost scheduler is reported by run_tasks as one ClusterError line; the client's own reconnect
    # tracebacks would bury it
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    # the dashboard is bound to 127.0.0.1; bokeh's note on its allowed-hosts wildcard is not for users
    logging.getLogger("bokeh.server.util").setLevel(logging.ERROR)


# the environment dask's nannies give their workers (a key set to None is left unset)
WORKER_ENV = "distributed.nanny.pre-spawn-environ"


@contextmanager
def open_client(config: ClusterConfig, *, local_directory: str | os.PathLike | None = None
                ) -> Iterator[Client | None]:
    """The client for ``config`` (None in-process), closed, and a started LocalCluster stopped, at the end.

    A started cluster prints its dashboard address on stderr. Its workers get
    ``GRAPHSTREAM_PROGRESS=0`` (progress is the client's to draw) and as many
    numba threads as they have dask threads.
    """
    if config.in_process:
        yield None
        return
    import dask
    from distributed import Client, LocalCluster

    _quiet_distributed()
    if config.scheduler is not None:
        _probe(config.scheduler)
        try:
            client = Client(config.scheduler, timeout="30s", set_as_default=False)
        except Exception as exc:   # OSError, TimeoutError, and TypeError/ValueError of a tls:// without its context
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ClusterError(f"cannot reach the dask scheduler at {config.scheduler}: "
                               f"{type(exc).__name__}: {first_line}") from exc
        try:
            _prompt_streams(client, cluster_too=False)
            _await_a_worker(client, config.scheduler)
            _hint_worker_env(client)
            yield client
        finally:
            client.close()
        return
    # silence_logs=CRITICAL: a task's failure reaches the command as its own one-line error (run_tasks);
    # the worker's "Compute Failed" traceback on stderr would only bury it
    env = {"GRAPHSTREAM_PROGRESS": "0", "NUMBA_NUM_THREADS": str(config.threads_per_worker),
           "OMP_NUM_THREADS": str(config.threads_per_worker)}
    quiet_openmp(env, inherited=os.environ)   # workers of several threads wait between tasks; a user's policy kept
    # dask's nannies set MALLOC_TRIM_THRESHOLD_ in their workers, and glibc then stops raising its mmap
    # threshold: every chunk-sized array is a fresh mmap whose pages fault in zeroed. Measured on R-MAT
    # chunk generation + compression: 2.6x slower. None unsets it (docs/distributed.md: external workers).
    with dask.config.set({f"{WORKER_ENV}.MALLOC_TRIM_THRESHOLD_": None}):
        cluster = LocalCluster(n_workers=config.workers, threads_per_worker=config.threads_per_worker,
                               processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0",
                               local_directory=None if local_directory is None else str(local_directory),
                               env=env, silence_logs=logging.CRITICAL)
    try:
        client = Client(cluster, set_as_default=False)
        try:
            _prompt_streams(client, cluster_too=True)
            _numba_threads_as_the_workers(client)
            workers = "1 worker" if config.workers == 1 else f"{config.workers} workers"
            threads = "1 thread" if config.threads_per_worker == 1 else f"{config.threads_per_worker} threads"
            log(f"dask cluster: {workers} x {threads}, "
                f"dashboard {client.dashboard_link}")
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def _prompt_streams(client: Client, *, cluster_too: bool) -> None:
    """dask's message streams at 1 ms batching intervals instead of 2-10 ms (graphstream._dask_plugins);
    a latency setting only: where this dask lacks the attributes, its own intervals stay."""
    from ._dask_plugins import prompt_streams
    try:
        prompt_streams(client, cluster_too=cluster_too)
    except (AttributeError, TypeError) as exc:
        log(f"dask's stream intervals left as they are ({type(exc).__name__}: {exc})")


def _numba_threads_as_the_workers(client: Client) -> None:
    """In every worker of a cluster this command started, numba's threads as its NUMBA_NUM_THREADS
    (graphstream._dask_plugins.WorkerNumbaThreads: a script importing graphstream at its top otherwise
    gives its workers the machine's cores)."""
    from ._dask_plugins import WorkerNumbaThreads
    client.register_plugin(WorkerNumbaThreads())


def worker_env(name: str) -> str | None:
    """An environment variable of the process this runs in (``client.run(worker_env, name)``; not
    ``os.environ.get``, which would pickle the client's environment along)."""
    return os.environ.get(name)


def _await_a_worker(client: Client, address: str) -> None:
    """Wait (``GRAPHSTREAM_WORKER_WAIT`` seconds, default 300) for the running cluster's first worker,
    saying so; none by then is a :class:`ClusterError`. Workers that join later are not checked for the
    paths: a task on one that cannot see them fails with its own error."""
    if client.scheduler_info().get("workers"):
        return
    text = os.environ.get(WORKER_WAIT_ENV, "").strip()
    try:
        wait = float(text) if text else DEFAULT_WORKER_WAIT_SECONDS
    except ValueError:
        wait = -1.0
    if not 0 <= wait < float("inf"):
        raise ParameterError(f"{WORKER_WAIT_ENV}={text!r}: expected seconds, a number >= 0")
    log(f"dask cluster at {address}: no worker yet; waiting up to {wait:g} s for one to join ({WORKER_WAIT_ENV})")
    try:
        if wait == 0:   # dask reads a timeout of 0 as none: it waited for ever
            raise TimeoutError("no wait")
        client.wait_for_workers(1, timeout=wait)
    except Exception as exc:
        lost = None if isinstance(exc, TimeoutError) else _lost_scheduler(client, exc)
        if lost is not None:
            raise lost from exc
        raise ClusterError(f"no dask worker joined the cluster at {address} within {wait:g} s: start workers "
                           f"(dask worker {address}), or wait longer ({WORKER_WAIT_ENV}=SECONDS)") from exc


def _hint_worker_env(client: Client) -> None:
    """Say so when the workers of a running cluster have MALLOC_TRIM_THRESHOLD_ set (dask's default for
    nanny workers): it slows the chunk-sized allocations of every stage ~2x (see open_client)."""
    try:
        found = client.run(worker_env, "MALLOC_TRIM_THRESHOLD_")
    except Exception:   # a hint only: never the reason a command fails
        return
    if any(v is not None for v in found.values()):
        log("dask workers have MALLOC_TRIM_THRESHOLD_ set (dask's default), which makes graphstream's stages "
            f"about 2x slower; set {WORKER_ENV}.MALLOC_TRIM_THRESHOLD_ to null in the workers' dask config "
            "(docs/distributed.md, 'Worker memory allocator')")


def _probe(address: str) -> None:
    """Fail at once on an address that is no dask scheduler's: empty, a web address (the dashboard's),
    or a tcp:// one that is refused, unresolvable, silent or answers with something else than dask's
    handshake (dask's client would retry for its whole timeout, hang on a silent listener, or read
    foreign bytes as a frame length); a tls:// one without dask's TLS settings, or refused; any other
    protocol, or a path after the port."""
    import socket
    import struct
    from urllib.parse import urlsplit

    if not address.strip():
        raise ClusterError("--scheduler: empty address (expected tcp://HOST:PORT)")
    # as dask reads it, not as urlsplit does (which lowercases the scheme and strips blanks)
    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    if address != address.strip() or scheme != scheme.lower():
        raise ClusterError(f"--scheduler {address!r}: expected tcp://HOST:PORT (or tls://), without blanks "
                           "or capitals")
    try:
        parts = urlsplit(address if "://" in address else f"tcp://{address}")
        port = parts.port or 8786
    except ValueError as exc:
        raise ClusterError(f"--scheduler {address}: not an address ({exc}); expected tcp://HOST:PORT") from exc
    if parts.scheme in ("http", "https"):
        raise ClusterError(f"--scheduler {address}: a web address (the dashboard's?); the scheduler listens "
                           "on tcp://HOST:PORT (8786 by default)")
    # anything else dask's client would retry for its whole timeout, then print a traceback on its way out
    if parts.scheme not in ("tcp", "tls"):
        raise ClusterError(f"--scheduler {address}: graphstream connects to tcp:// or tls:// schedulers "
                           "(tcp://HOST:PORT)")
    if not parts.hostname:
        raise ClusterError(f"--scheduler {address}: no host; expected tcp://HOST:PORT (127.0.0.1 for this "
                           "machine)")
    if parts.path or parts.query or parts.fragment:
        raise ClusterError(f"--scheduler {address}: expected tcp://HOST:PORT, nothing after the port")
    if parts.scheme == "tls":
        import dask
        if not dask.config.get("distributed.comm.tls.ca-file", None):
            raise ClusterError(f"--scheduler {address}: a tls:// scheduler needs the cluster's TLS files in dask's "
                               "config (distributed.comm.tls.ca-file, .client.cert, .client.key)")
        try:   # the client speaks first in TLS: only the connection can be checked here
            socket.create_connection((parts.hostname, port), timeout=10).close()
        except OSError as exc:
            raise ClusterError(f"cannot reach the dask scheduler at {address}: {exc}") from exc
        return
    try:
        with socket.create_connection((parts.hostname, port), timeout=10) as conn:
            conn.settimeout(PROBE_SECONDS)
            header = conn.recv(8, socket.MSG_WAITALL)   # a scheduler writes its handshake on accept
    except TimeoutError as exc:
        raise ClusterError(f"cannot reach the dask scheduler at {address}: it accepts connections but sends no "
                           f"dask handshake within {PROBE_SECONDS:g} s (the dashboard's port, or another "
                           "service?)") from exc
    except OSError as exc:
        raise ClusterError(f"cannot reach the dask scheduler at {address}: {exc}") from exc
    if len(header) < 8 or not 0 < struct.unpack("<Q", header)[0] < 1 << 20:
        raise ClusterError(f"cannot reach the dask scheduler at {address}: what answers there is not a dask "
                           "scheduler (its first bytes are no dask handshake)")


def _lost_scheduler(client: Client, exc: BaseException) -> ClusterError | None:
    """A ClusterError when ``exc`` means the client lost its scheduler (None: the task's own error)."""
    from concurrent.futures import CancelledError

    from distributed.comm.core import CommClosedError

    if isinstance(exc, CommClosedError | CancelledError | TimeoutError) or client.status not in ("running",):
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return ClusterError(f"lost the dask scheduler ({type(exc).__name__}: {first_line}); "
                            "nothing was written, run the command again")
    return None


def run_tasks(client: Client, stage: str, fn: Callable[..., Any], tasks: Sequence[tuple], *,
              unit: str = "task", size: Callable[[tuple], int] | None = None,
              resources: dict | None = None, task_kwargs: Mapping[str, Any] | None = None,
              cost: Sequence[float] | None = None, line: bool = True, **common: Any) -> list[Any]:
    """Run ``fn(*task, **common)`` for every task on the cluster; their results, in the order of ``tasks``.

    ``stage`` names the progress bar and the task keys; ``size(task)`` is how
    many ``unit`` a task counts for in the bar (default 1 task). A task's own
    exception (a :class:`GraphStreamError` naming a bad chunk, say) is raised
    here as it was raised there; a lost scheduler is a :class:`ClusterError`.
    ``task_kwargs`` go to every task too, whatever their names (a task keyword
    named ``unit``, ``size`` or ``resources`` cannot be given as ``common``).

    ``line``: the stage's closing line on stderr (``stage: N units in S s``, what the in-process
    path's progress writes when stderr is not a terminal); False for steps of a phase that logs its
    own time (coarse-refine's rounds). ``cost``: the tasks' expected costs, for tasks of very unequal
    size (one part per task). They are then handed out largest first and only as
    worker threads free up (:func:`run_jobs`).
    """
    check_client(client)
    results: list[Any] = [None] * len(tasks)
    units = (lambda t: 1) if size is None else size
    # the task's keywords kept apart from map's own (batch_size, workers, ...)
    call = partial(fn, **common, **(task_kwargs or {}))
    if cost is not None:
        def keep(i: int, result: Any) -> list[Job]:
            results[i] = result
            return []
        run_jobs(client, stage, [Job(str(i), call, tasks[i], (cost[i],), partial(keep, i), units(tasks[i]))
                                 for i in range(len(tasks))],
                 unit=unit, total=sum(units(t) for t in tasks), resources=resources, line=line)
        return results

    run_id = uuid.uuid4().hex[:8]   # fresh keys: a shared cluster must not serve another run's results
    keys = [f"{stage}-{run_id}-{i}" for i in range(len(tasks))]
    if tasks and all(tasks):   # one message to the scheduler for the whole stage (a wave of 8 no-op tasks
        # on 2 workers: 35 ms against 40 ms with a submit per task, which coarse-refine's rounds pay ~120 times)
        futures = client.map(call, *zip(*tasks, strict=True), key=keys, pure=False, resources=resources)
    else:
        futures = [client.submit(call, *tasks[i], key=keys[i], pure=False, resources=resources)
                   for i in range(len(tasks))]
    index = {key: i for i, key in enumerate(keys)}
    from distributed import as_completed

    with _stage_guard(client, futures, f"{stage}-{run_id}-"), \
            progress(sum(units(t) for t in tasks), stage, unit=unit, line=line) as bar:
        for future in as_completed(futures, loop=client.loop):
            i = index[future.key]
            if future.status == "error":
                _raise_first_error(client, futures, i)
            results[i] = future.result()
            bar.update(units(tasks[i]))
    return results


def _raise_first_error(client: Client, futures: list, failed: int) -> None:
    """Raise the error of the first failing task in the tasks' order, not of the first to fail in time:
    the later tasks are cancelled, the earlier ones run to their end (the in-process path names the
    first bad line of a file; whichever range finished first named a later one, run to run)."""
    _cancel(client, futures[failed + 1:])
    for future in futures[:failed]:
        if future.exception() is not None:   # waits for it; a lost scheduler raises here (the stage guard's)
            future.result()
    futures[failed].result()


def run_jobs(client: Client, stage: str, jobs: Sequence[Job], *, unit: str = "task", total: int | None = None,
             resources: dict | None = None, line: bool = True) -> None:
    """Run ``jobs`` and every job they release (:class:`graphstream._jobs.Job`), one per worker thread at
    a time, the next as a thread frees up. Given all at once, the scheduler would queue some on a busy
    worker behind a long task (it assigns up to 1.1 tasks per thread in advance), and a released job
    would wait behind tasks of lower priority. Errors as :func:`run_tasks`; ``total`` is the progress
    bar's length in ``unit``."""
    check_client(client)
    from distributed import as_completed

    run_id = uuid.uuid4().hex[:8]
    ready = ReadyJobs(jobs)

    def submit() -> Any:
        job = ready.pop()
        future = client.submit(job.fn, *job.args, key=f"{stage}-{run_id}-{job.name}", pure=False,
                               resources=resources)
        running[future.key] = job
        return future

    window = max(1, sum(client.nthreads().values()))
    running: dict[str, Job] = {}
    futures = [submit() for _ in range(min(window, len(ready)))]
    with _stage_guard(client, futures, f"{stage}-{run_id}-"), \
            progress(sum(j.units for j in jobs) if total is None else total, stage, unit=unit,
                     line=line) as bar:
        done = as_completed(futures, loop=client.loop)
        for future in done:
            job = running.pop(future.key)
            result = future.result()
            if job.then is not None:
                ready.release(job.then(result))
            bar.update(job.units)
            while ready and len(running) < window:
                futures.append(submit())
                done.add(futures[-1])


@contextmanager
def _stage_guard(client: Client, futures: list, prefix: str) -> Iterator[None]:
    """A stage's errors: its tasks cancelled; a lost scheduler a :class:`ClusterError`; on a task's error,
    SIGINT or SIGTERM, a wait until the stage's tasks have stopped, before the outputs are unwound."""
    try:
        yield
    except BaseException as exc:
        lost = _lost_scheduler(client, exc) if isinstance(exc, Exception) and \
            not isinstance(exc, GraphStreamError) else None
        _cancel(client, futures)
        if lost is not None:
            raise lost from exc
        # a cancelled task's thread runs on, and one that writes after the command has removed its
        # temporary output would leave it back (a hidden .OUT.tmp-* beside a failed ingest's OUT)
        _wait_until_stopped(client, prefix)
        raise


def run_task(client: Client, stage: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """One task on one worker (a sequential pass, e.g. a greedy streaming partitioner); its result."""
    return run_tasks(client, stage, fn, [args], **kwargs)[0]


def _wait_until_stopped(client: Client, prefix: str, timeout: float = 20.0) -> None:
    """Wait (bounded) until no worker still runs a task of this stage: a cancelled task's thread runs
    to its end, and one that wrote after the command removed its temporary output would leave it back."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            running = client.run(_running_tasks, prefix)
        except Exception:   # the scheduler or the workers are gone: nothing left to wait for
            return
        if not any(running.values()):
            return
        time.sleep(0.2)


def _running_tasks(prefix: str, dask_worker=None) -> int:
    """Tasks of the stage ``prefix`` that a worker still executes (cancelled ones included)."""
    return sum(1 for ts in dask_worker.state.tasks.values()
               if str(ts.key).startswith(prefix) and ts.state in ("executing", "long-running", "cancelled"))


def _cancel(client: Client, futures: list) -> None:
    try:
        client.cancel(futures)
    except Exception:   # the scheduler may be gone already; nothing more to stop
        pass


def check_client(client: Any) -> None:
    """Refuse a ``client=`` that is not a ``distributed.Client`` (a scheduler address given as the client
    failed later with an AttributeError). Checked by shape: the methods this module calls."""
    if not all(callable(getattr(client, name, None)) for name in ("submit", "run", "nthreads")):
        hint = " (a scheduler address: pass distributed.Client(address))" if isinstance(client, str) else ""
        raise ParameterError(f"client must be a distributed.Client, got {client!r}{hint}")


def shared_scratch_parent(near: str | os.PathLike) -> str | None:
    """Where a cluster run puts a scratch folder that no work folder was given for: beside ``near`` (an
    output, or the input store), on the file system the workers share, where a local /tmp is not
    shared; the system's temporary folder when that folder is not writable (a read-only dataset
    mount: in-process runs worked there, cluster runs failed with EROFS), which a LocalCluster's
    workers see and remote ones are told of by :func:`check_visible`. None (the system's temporary
    folder) for a URL."""
    if "://" in str(near):
        return None
    parent = Path(near).resolve().parent
    return str(parent) if os.access(parent, os.W_OK | os.X_OK) else None


def check_visible(client: Client, *paths: str | os.PathLike) -> None:
    """Raise a ClusterError naming the worker and the path when a worker cannot see one of ``paths``.

    Every path a task touches must be visible to every worker (local disk for a
    LocalCluster, a shared file system or an fsspec URL across machines).
    """
    check_client(client)
    local = [str(p) for p in paths if p is not None and "://" not in str(p)]
    if not local:
        return
    targets = [str(Path(p).resolve()) for p in local]
    try:   # a worker that dies during the check answers with its error: it is gone, dask reruns its tasks
        seen = client.run(_missing_paths, targets, on_error="return")
    except Exception as exc:
        raise (_lost_scheduler(client, exc) or exc) from exc
    blind = {worker: missing for worker, missing in sorted(seen.items())
             if missing and not isinstance(missing, BaseException)}
    if blind:   # every path a worker misses named at once (one at a time took a run per path to find them)
        worker, missing = next(iter(blind.items()))
        others = f" (and {len(blind) - 1} other worker(s))" if len(blind) > 1 else ""
        raise ClusterError(f"worker {worker}{others} cannot see {'; '.join(_unseen(Path(p)) for p in missing)}: "
                           "every path must be visible to every worker (a shared file system, or an fsspec URL); "
                           "see docs/distributed.md")


def _unseen(path: Path) -> str:
    """A path a worker cannot see, as the user can act on it: a scratch or temporary folder this command
    made (graphstream-parts-*, .g.zarr.scratch-*, .X.tmp-*) by the folder it was made in."""
    if not (path.name.startswith("graphstream-") or "scratch-" in path.name or ".tmp-" in path.name):
        return str(path)
    # the output's temporary sibling lies beside the output, whatever --work-dir says
    where = ("write the output to a folder every worker sees" if ".tmp-" in path.name
             else "give --work-dir a folder every worker sees, and an output in one: its temporary "
                  "copy lies beside it")
    return f"{path.parent} (where this command made {path.name}; {where})"


@contextmanager
def output_for_tasks(client: Client, out: str | os.PathLike, overwrite: bool = False, *,
                     inputs: Sequence[str | os.PathLike] = (), mkdir: bool = True) -> Iterator[Path]:
    """The temporary sibling of ``out`` that tasks write into (this process holds it, as for any atomic
    output): checked visible to every worker with ``inputs``, swapped into place when the block ends,
    removed on any error, a lost scheduler or a signal included."""
    with atomic_dir(out, overwrite, mkdir=mkdir) as tmp:
        check_visible(client, *inputs, tmp if mkdir else tmp.parent)
        yield tmp


def _missing_paths(paths: list[str]) -> list[str]:
    return [p for p in paths if not os.path.exists(p)]


def workers_on_this_machine(client: Client) -> bool:
    """Whether every worker runs on this machine (a local cluster): a file the client writes through a
    shared memory map is then visible to them through the page cache, without a flush to disk."""
    import socket
    from urllib.parse import urlparse

    here = {"127.0.0.1", "::1", "localhost", socket.gethostname()}
    try:
        here.update(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    hosts = {urlparse(address).hostname for address in client.scheduler_info()["workers"]}
    return bool(hosts) and hosts <= here


def worker_peak_rss(client: Client) -> dict[str, int]:
    """Peak RSS of every worker process (bytes), for ``--json``'s ``worker_peak_rss_bytes``."""
    from ._resources import peak_rss_bytes

    return {worker: int(rss) for worker, rss in sorted(client.run(peak_rss_bytes).items())}


def cluster_report(config: ClusterConfig, client: Client | None) -> dict:
    """What a command's ``--json`` adds when it ran on a cluster: ``cluster`` (how) and
    ``worker_peak_rss_bytes`` (every worker's peak); nothing in-process. Call it while ``client`` is open."""
    if client is None:
        return {}
    return {"cluster": config.to_dict(), "worker_peak_rss_bytes": worker_peak_rss(client)}


def save_shard(path: str | os.PathLike, array: np.ndarray | list[np.ndarray]) -> Path:
    """Write a task's ``.npy`` shard under a temporary name, then rename it: a task rerun after its
    worker died finds either nothing or a whole shard, never half of one. A list of 1-D blocks is
    saved as their concatenation (:func:`save_npy`)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        save_npy(tmp, array)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def publish_dir(tmp: Path, final: Path) -> bool:
    """Rename a task's finished folder ``tmp`` to ``final``; False (``tmp`` removed) when an earlier
    attempt of the same task got there first (a rerun after a lost worker: same content)."""
    try:
        os.rename(tmp, final)
        return True
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and final.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        raise


def task_staging_dir(parent: str | os.PathLike, name: str) -> Path:
    """A new folder ``parent/.NAME.XXXXXXXX.task`` for a task to build ``name`` in before
    :func:`publish_dir` renames it; :func:`clear_task_staging` removes those of killed workers."""
    path = Path(parent) / f".{name}.{uuid.uuid4().hex[:8]}.task"
    path.mkdir()
    return path


def clear_task_staging(parent: str | os.PathLike) -> None:
    """Remove the staging folders that tasks of workers killed mid-task left in ``parent`` (their reruns
    published the same content elsewhere); call it after the stage's tasks have all finished."""
    for leftover in Path(parent).glob(".*.task"):
        shutil.rmtree(leftover, ignore_errors=True)


def split_range(stop: int, parts: int, *, start: int = 0, align: int = 1) -> list[tuple[int, int]]:
    """``[start, stop)`` cut into at most ``parts`` contiguous ranges whose inner bounds are multiples of
    ``align`` (a chunk size, say); empty ranges dropped."""
    if stop <= start:
        return []
    parts = max(1, parts)
    step = -(-(stop - start) // parts)
    step = -(-step // align) * align
    return [(a, min(a + step, stop)) for a in range(start, stop, step)]


def task_count(client: Client, per_worker: int = 4) -> int:
    """How many tasks to cut a stage into: a few per worker thread, so that a slow or restarted
    worker does not hold the others back."""
    threads = sum(client.nthreads().values()) or 1
    return per_worker * threads
