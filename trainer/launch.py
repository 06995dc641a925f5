"""Start Q training workers: torch.multiprocessing, gloo on CPU, NCCL on CUDA.

Every worker gets the torchrun environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR=127.0.0.1``, ``MASTER_PORT`` = a free port) and a
process group; its return value travels back through a file (a pipe could
block a worker that returns large results while the parent waits in join).
One worker runs in this process, with no process group at all.

Under ``torchrun --nproc-per-node Q`` (``RANK``, ``WORLD_SIZE`` and
``MASTER_ADDR`` already set, ``WORLD_SIZE`` equal to the worker count asked
for) nothing is spawned: this process is worker ``RANK``; it returns its own
result in its slot and ``None`` in the others.
"""
from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(rank: int, world: int, port: int, backend: str, fn: Callable, args: tuple, out_dir: str,
           threads: int) -> None:
    import torch.distributed as dist
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(threads)
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        result = fn(rank, world, *args)
        torch.save(result, Path(out_dir) / f"rank{rank}.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _under_torchrun(world_size: int) -> bool:
    env = os.environ
    return (world_size > 1 and "RANK" in env and "MASTER_ADDR" in env
            and int(env.get("WORLD_SIZE", "0")) == world_size)


def launch(fn: Callable, world_size: int, args: tuple = (), *, backend: str = "gloo",
           threads_per_worker: int | None = None) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` workers; return their results by rank.

    ``fn`` must be importable (spawned workers re-import it). With one worker,
    ``fn`` runs here without a process group.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    cores = os.cpu_count() or 1
    threads = threads_per_worker or max(1, cores // world_size)
    if _under_torchrun(world_size):
        import torch.distributed as dist
        rank = int(os.environ["RANK"])
        torch.set_num_threads(threads)
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        dist.init_process_group(backend)
        try:
            results: list[Any] = [None] * world_size
            results[rank] = fn(rank, world_size, *args)
            dist.barrier()
            return results
        finally:
            dist.destroy_process_group()
    if world_size == 1:
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return [fn(0, 1, *args)]
        finally:
            torch.set_num_threads(previous)
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory(prefix="graphstream-train-") as out_dir:
        mp.spawn(_entry, args=(world_size, free_port(), backend, fn, args, out_dir, threads),
                 nprocs=world_size, join=True)
        return [torch.load(Path(out_dir) / f"rank{r}.pt", weights_only=False) for r in range(world_size)]


__all__ = ["free_port", "launch"]
