"""Prompt message streams for the dask clusters graphstream starts (imported with ``distributed`` only).

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
