"""Jobs that release jobs: a stage whose long tasks are cut into steps, each step released by the last.

A builder's parts pass is the example: a part with most of the edges is one
task too long for the others to hide, so it is cut into a chain (count its
rows, bucket its pairs range by range, fill its buckets, finish), and every
step's result releases the next ones. The same queue feeds threads
(:func:`run_jobs_in_threads`) and a dask cluster (``graphstream.cluster.run_jobs``):
among the jobs ready to start, the one of largest priority goes to the next
free thread or worker.
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ._report import progress


@dataclass(frozen=True, slots=True)
class Job:
    """``fn(*args)`` on a thread or a worker, then ``then(result)`` where the jobs were started (the
    client), which returns the jobs that result releases. ``units``: what the job counts for in the
    progress bar."""
    name: str
    fn: Callable[..., Any]
    args: tuple
    priority: tuple
    then: Callable[[Any], Sequence[Job]] | None = None
    units: int = 0


class ReadyJobs:
    """The jobs ready to start: largest priority first, and among equals the first released."""

    def __init__(self, jobs: Sequence[Job] = ()):
        self._heap: list[tuple[tuple, int, Job]] = []
        self._order = itertools.count()
        self.release(jobs)

    def release(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            heapq.heappush(self._heap, (tuple(-x for x in job.priority), next(self._order), job))

    def pop(self) -> Job:
        return heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)


def run_jobs_in_threads(jobs: Sequence[Job], threads: int, stage: str, *, unit: str = "task",
                        total: int | None = None) -> None:
    """Run ``jobs`` and every job they release on ``threads`` threads (the kernels release the GIL),
    one job a thread at a time; the first error stops the stage (jobs not started are dropped, the
    running ones finish) and is raised."""
    ready = ReadyJobs(jobs)
    running: dict[Future, Job] = {}
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="graphstream-jobs") as pool, \
            progress(sum(j.units for j in jobs) if total is None else total, stage, unit=unit) as bar:
        while ready or running:
            while ready and len(running) < threads:
                job = ready.pop()
                running[pool.submit(job.fn, *job.args)] = job
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                job = running.pop(future)
                result = future.result()   # an error: the pool's exit waits for the running jobs
                if job.then is not None:
                    ready.release(job.then(result))
                bar.update(job.units)
