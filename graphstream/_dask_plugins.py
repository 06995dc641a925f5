"""The dask plugins of the clusters graphstream starts (imported with ``distributed`` only): prompt
message streams, and numba's threads as the workers' environment says.

Prompt message streams.

dask batches the messages of its long-lived streams (client -> scheduler,
scheduler -> worker and -> client, worker -> scheduler): a stream that sent
within its interval holds the next message back until the interval ends. The
client's interval is 10 ms, the scheduler's 5 ms and 2 ms, the worker's 2 ms.
A wave of tasks sends a few messages each way, right after the last wave's,
so each wave waited out those intervals: a wave of two no-op tasks on two
pinned workers took 11-12 ms (a single task 10.5-11 ms), 8.2-8.5 ms with 1 ms
intervals (a single task 5.4-5.6 ms). coarse-refine's rounds run ~90 waves
at R-MAT scale 22, ~120 on small graphs. The streams still batch what
comes within 1 ms.
"""
from __future__ import annotations

from distributed import Client, SchedulerPlugin, WorkerPlugin

STREAM_INTERVAL_S = 0.001


class PromptSchedulerStreams(SchedulerPlugin):
    """The scheduler's streams to its workers and clients, those of later workers too."""
    name = "graphstream-prompt-streams"

    def start(self, scheduler) -> None:
        for comm in (*scheduler.stream_comms.values(), *scheduler.client_comms.values()):
            comm.interval = STREAM_INTERVAL_S

    def add_worker(self, scheduler, worker: str) -> None:
        comm = scheduler.stream_comms.get(worker)
        if comm is not None:
            comm.interval = STREAM_INTERVAL_S


class PromptWorkerStream(WorkerPlugin):
    """A worker's stream to the scheduler (set again in a worker restarted after a fault)."""
    name = "graphstream-prompt-stream"

    def setup(self, worker) -> None:
        worker.batched_stream.interval = STREAM_INTERVAL_S


def prompt_streams(client: Client, *, cluster_too: bool) -> None:
    """The client's stream to the scheduler; with ``cluster_too`` (a cluster of this command's own, not a
    shared one whose settings are its owner's) those of the scheduler and the workers."""
    client.scheduler_comm.interval = STREAM_INTERVAL_S
    if cluster_too:
        client.register_plugin(PromptSchedulerStreams())
        client.register_plugin(PromptWorkerStream())


class WorkerNumbaThreads(WorkerPlugin):
    """numba's thread count read again from the worker's environment (``NUMBA_NUM_THREADS``, its threads)
    before its first task.

    A worker process imports the main module of the process that started its cluster (multiprocessing's
    spawn) before its nanny sets its environment. A script that imports graphstream at its top imports
    numba there, whose configuration then holds the machine's cores: the kernels of a single-threaded
    worker ran on every core (two workers on 2 cores: four threads), and a kernel compiled after the first
    ones had run raised numba's "Cannot set NUMBA_NUM_THREADS to a different value once the threads have
    been launched" (a partition of R-MAT s22 on two workers started from such a script failed so). Read
    again before numba's threads start (its configuration, and the pool size its parallel module took
    from it when imported), the count is the worker's. numba not imported: it reads the environment when
    it is; its threads already started (a main module running a kernel at import), or a numba without
    these module attributes: left as it is."""
    name = "graphstream-numba-threads"

    def setup(self, worker) -> None:
        import sys
        config = sys.modules.get("numba.core.config")
        parallel = sys.modules.get("numba.np.ufunc.parallel")
        if config is None or parallel is None or getattr(parallel, "_is_initialized", True) \
                or not hasattr(parallel, "NUM_THREADS") or not hasattr(config, "reload_config"):
            return
        config.reload_config()
        parallel.NUM_THREADS = config.NUMBA_NUM_THREADS
