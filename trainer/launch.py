"""Start Q training workers: torch.multiprocessing, gloo on CPU, NCCL on CUDA.

Spawned workers (every worker on this machine) meet at a ``TCPStore`` that
this process hosts on 127.0.0.1 (or on ``--master-addr``): a TCPStore that
opens its own socket listens on every interface, so the store is handed a
socket already bound to that address. The collectives (gloo, NCCL) are pinned
to the loopback interface too unless ``GLOO_SOCKET_IFNAME`` /
``NCCL_SOCKET_IFNAME`` say otherwise. Every worker gets the torchrun
environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``) and a process group; its return value travels back through a
file (a pipe could block a worker that returns large results while the parent
waits in join), read with ``torch.load(weights_only=True)`` admitting only
the result types the caller names. A :class:`GraphStreamError` raised in a
worker is raised again here with its message. One worker runs in this
process, with no process group at all.

Under ``torchrun --nproc-per-node Q`` (``RANK``, ``WORLD_SIZE`` and
``MASTER_ADDR`` already set, ``WORLD_SIZE`` equal to the worker count asked
for) nothing is spawned: this process is worker ``RANK``; it returns its own
result in its slot and ``None`` in the others. torchrun's store is
torchrun's (its ``--master-addr``); workers on several hosts
(``WORLD_SIZE > LOCAL_WORLD_SIZE``) need ``master_addr`` (``--master-addr``)
as an explicit statement that the run listens on the network.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphstream import errors
from graphstream._atomic import clear_after_writers
from graphstream.errors import GraphStreamError, ParameterError, ResourceError

LOOPBACK = "127.0.0.1"
# How long a worker told to stop (SIGTERM) may take before it is killed.
STOP_GRACE_SECONDS = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def store_address(master_addr: str | None) -> str:
    """The address the spawned workers' rendezvous listens on: 127.0.0.1 unless ``--master-addr`` names one."""
    return master_addr or LOOPBACK


def is_loopback(host: str) -> bool:
    """True when ``host`` names this machine's loopback (127.x.x.x, ::1, localhost)."""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    return bool(infos) and all(i[4][0].startswith("127.") or i[4][0] == "::1" for i in infos)


def loopback_interface() -> str | None:
    """The name of the loopback interface (``lo`` on Linux, ``lo0`` on macOS), None if not found."""
    with suppress(OSError, AttributeError):
        names = [name for _, name in socket.if_nameindex()]
        for name in ("lo", "lo0"):
            if name in names:
                return name
    return None


def _collectives_on_loopback() -> None:
    """Keep gloo's and NCCL's own sockets on the loopback interface (both otherwise pick the
    interface of the host name); a value the user set stays."""
    lo = loopback_interface()
    if lo is not None:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", lo)
        os.environ.setdefault("NCCL_SOCKET_IFNAME", lo)


def start_store(host: str):
    """A TCPStore server listening on ``host`` only; its port is ``store.port``.

    A TCPStore that binds its own socket listens on every interface whatever
    ``host`` says; given a socket already bound (``master_listen_fd``) it
    listens there.
    """
    import torch.distributed as dist
    try:
        family, _, _, _, addr = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise ParameterError(f"--master-addr {host}: cannot use this address ({exc})") from exc
    try:
        sock.bind(addr)
        sock.listen(128)
        port = int(sock.getsockname()[1])
        store = dist.TCPStore(host, port, None, True, wait_for_workers=False, master_listen_fd=sock.fileno())
    except OSError as exc:
        sock.close()
        raise ParameterError(f"--master-addr {host}: cannot listen on this address ({exc})") from exc
    except BaseException:
        sock.close()
        raise
    sock.detach()   # the store owns the descriptor now and closes it
    return store


def _entry(rank: int, world: int, host: str, port: int, backend: str, fn: Callable, args: tuple, out_dir: str,
           threads: int, on_loopback: bool) -> None:
    import torch.distributed as dist
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "MASTER_ADDR": host, "MASTER_PORT": str(port)})
    if on_loopback:
        _collectives_on_loopback()
    torch.set_num_threads(threads)
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    store = dist.TCPStore(host, port, world, False)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world)
    try:
        try:
            result = fn(rank, world, *args)
        except GraphStreamError as exc:   # the parent raises it again: one line, exit 2
            (Path(out_dir) / f"rank{rank}.error").write_text(json.dumps([type(exc).__name__, str(exc)]))
            raise
        torch.save(result, Path(out_dir) / f"rank{rank}.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _worker_error(out_dir: str, world: int) -> GraphStreamError | None:
    """The first GraphStreamError a worker reported (by rank), rebuilt here."""
    for r in range(world):
        path = Path(out_dir) / f"rank{r}.error"
        if path.exists():
            name, message = json.loads(path.read_text())
            cls = getattr(errors, name, GraphStreamError)
            if not (isinstance(cls, type) and issubclass(cls, GraphStreamError)):
                cls = GraphStreamError
            return cls(message)
    return None


# What needs less memory, said with an out-of-memory error.
SMALLER = "a smaller --hidden, --batch-size or --fanout, or more workers (fewer parts each), needs less"
_OOM_WORDS = ("can't allocate memory", "not enough memory", "out of memory", "MemoryError", "Cannot allocate memory")


def _out_of_memory(text: str) -> bool:
    return any(word in text for word in _OOM_WORDS)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _worker_lost(exc: BaseException) -> GraphStreamError | None:
    """One line for a spawned worker that died without reporting an error: killed by a signal (the
    kernel's out-of-memory killer sends SIGKILL) or out of memory in an allocation. Other exceptions are
    bugs: their traceback stays."""
    import torch.multiprocessing as mp
    if isinstance(exc, mp.ProcessExitedException):
        how = (f"was killed by {exc.signal_name}" if exc.signal_name else f"exited with status {exc.exit_code}")
        return ResourceError(f"training worker {exc.error_index} {how} (out of memory, or stopped by hand); the "
                             "other workers were stopped, and a --checkpoint holds the last finished round")
    if isinstance(exc, mp.ProcessRaisedException) and _out_of_memory(str(exc)):
        return ResourceError(f"training worker {exc.error_index}: out of memory ({_last_line(str(exc))}); {SMALLER}")
    return None


def _numpy_result_globals() -> list:
    """What ``torch.load(weights_only=True)`` needs to rebuild plain numeric numpy arrays and scalars."""
    kinds = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
             np.float16, np.float32, np.float64)
    reconstruct = np.zeros(0).__reduce__()[0]        # numpy.(_)core.multiarray._reconstruct
    scalar = np.float64(0).__reduce__()[0]           # numpy.(_)core.multiarray.scalar
    # bytes: pickle's protocol 2 writes an empty array's data (an evaluation split without pairs) as bytes()
    return [reconstruct, scalar, np.ndarray, np.dtype, bytes, *(type(np.dtype(k)) for k in kinds)]


def load_result(path: str | os.PathLike, result_types: Sequence[type] = ()) -> Any:
    """A worker's result file, loaded with ``weights_only=True``: tensors, plain containers, numeric
    numpy arrays and the ``result_types`` (dataclasses) only; nothing in it can run code."""
    with torch.serialization.safe_globals([*result_types, *_numpy_result_globals()]):
        return torch.load(path, map_location="cpu", weights_only=True)


def check_threads(threads: int | None) -> None:
    """``--threads``: None (the default) or a whole number >= 1."""
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ParameterError(f"--threads {threads}: expected a whole number >= 1 (torch CPU threads per worker)")


def _under_torchrun(world_size: int) -> bool:
    env = os.environ
    return (world_size > 1 and "RANK" in env and "MASTER_ADDR" in env
            and int(env.get("WORLD_SIZE", "0")) == world_size)


def _torchrun(fn: Callable, world_size: int, args: tuple, backend: str, threads: int,
              master_addr: str | None) -> list[Any]:
    import torch.distributed as dist
    env = os.environ
    local_world = int(env.get("LOCAL_WORLD_SIZE", world_size))
    if local_world < world_size and not master_addr:
        raise ParameterError(f"workers on several hosts (WORLD_SIZE {world_size}, LOCAL_WORLD_SIZE {local_world}): "
                             "pass --master-addr ADDR, the address of worker 0's host that every host reaches "
                             "(the rendezvous and the collectives then listen on the network)")
    if local_world >= world_size and not master_addr:
        _collectives_on_loopback()
    rank = int(env["RANK"])
    torch.set_num_threads(threads)
    if backend == "nccl":
        torch.cuda.set_device(int(env.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    dist.init_process_group(backend)
    try:
        results: list[Any] = [None] * world_size
        results[rank] = fn(rank, world_size, *args)
        dist.barrier()
        return results
    finally:
        dist.destroy_process_group()


def _stop_workers(processes: Sequence, grace: float = STOP_GRACE_SECONDS) -> None:
    """End the workers still running: SIGTERM, then SIGKILL after ``grace`` seconds. A parent that
    unwinds (SIGTERM to it alone) would otherwise wait for them at exit (multiprocessing joins its
    children), while they train on and keep writing the checkpoint it had released."""
    alive = [p for p in processes if p.is_alive()]
    for p in alive:
        p.terminate()
    for p in alive:
        p.join(grace)
        if p.is_alive():
            p.kill()
            p.join()


def launch(fn: Callable, world_size: int, args: tuple = (), *, backend: str = "gloo",
           threads_per_worker: int | None = None, master_addr: str | None = None,
           result_types: Sequence[type] = (), outputs: Sequence[str] = ()) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` workers; return their results by rank.

    ``fn`` must be importable (spawned workers re-import it). With one worker,
    ``fn`` runs here without a process group. ``result_types``: the classes
    (besides tensors, numeric numpy arrays and plain containers) that ``fn``'s
    results hold, admitted when they are read back. ``master_addr``: the
    address the rendezvous listens on (default 127.0.0.1, this machine only).
    ``outputs``: files the workers write (atomically, under their lock); once
    spawned workers have ended, what one stopped mid-write left beside them
    (its temporary file, its lock file) is cleared.
    """
    if world_size < 1:
        raise ParameterError(f"--workers {world_size}: expected a whole number >= 1")
    check_threads(threads_per_worker)
    cores = os.cpu_count() or 1
    threads = max(1, cores // world_size) if threads_per_worker is None else threads_per_worker
    if _under_torchrun(world_size):
        return _torchrun(fn, world_size, args, backend, threads, master_addr)
    if world_size == 1:
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return [fn(0, 1, *args)]
        except (MemoryError, RuntimeError) as exc:   # torch's allocators raise RuntimeErrors
            if isinstance(exc, MemoryError) or _out_of_memory(str(exc)):
                raise ResourceError(f"training worker 0: out of memory ({_last_line(str(exc)) or 'MemoryError'}); "
                                    f"{SMALLER}") from exc
            raise
        finally:
            torch.set_num_threads(previous)
    import torch.multiprocessing as mp
    host = store_address(master_addr)
    store = start_store(host)
    try:
        with tempfile.TemporaryDirectory(prefix="graphstream-train-") as out_dir:
            spawn_log = logging.getLogger("torch.multiprocessing.spawn")
            level = spawn_log.level
            spawn_log.setLevel(logging.ERROR)   # its "Terminating process" warning would break the one-line error
            # mp.spawn, with its context kept: a worker that raises leaves its traceback in a
            # pytorch-errorfile-*.pickle of the temporary folder, which torch reads and never removes
            context = None
            try:
                context = mp.start_processes(_entry, args=(world_size, host, store.port, backend, fn, args,
                                                           out_dir, threads, is_loopback(host)),
                                             nprocs=world_size, join=False, start_method="spawn")
                while not context.join():
                    pass
            except Exception as exc:
                error = _worker_error(out_dir, world_size) or _worker_lost(exc)
                if error is not None:
                    raise error from exc
                raise
            finally:
                spawn_log.setLevel(level)
                if context is not None:
                    _stop_workers(context.processes)   # this process unwinds (SIGTERM, Ctrl-C, an error)
                    for path in outputs:   # a worker killed in a save leaves its temporary and lock files
                        clear_after_writers(path)
                for path in context.error_files if context is not None else ():
                    Path(path).unlink(missing_ok=True)
            return [load_result(Path(out_dir) / f"rank{r}.pt", result_types) for r in range(world_size)]
    finally:
        del store


__all__ = ["LOOPBACK", "check_threads", "free_port", "is_loopback", "launch", "load_result", "loopback_interface",
           "start_store", "store_address"]
