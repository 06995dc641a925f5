"""Peak memory and wall time, measured the same way by every command and benchmark; node-state estimates."""
from __future__ import annotations

import math
import os
import resource
import sys
import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field

from .errors import ResourceError


def raise_open_files_limit() -> bool:
    """Raise this process's soft limit of open files to its hard limit; whether it went up. Each memory
    map holds a file descriptor (Python's mmap keeps its own copy), and a dataset's parts are mapped
    array by array: at the usual soft limit of 1024, reading every part of a 300-part dataset failed
    at part 169. Called when an open fails with EMFILE, not before: the process's limit is left as it
    was until it is in the way."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return False
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return False
    return True


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far.

    Linux: VmHWM of /proc/self/status, the peak of this program's own memory. ru_maxrss is kept
    across fork and exec, so a command started by a large process (a test runner, a service)
    would report its parent's size instead; ru_maxrss is the fallback elsewhere.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def lower_thread_priority(niceness: int = 10) -> None:
    """This thread's scheduling priority lowered by ``niceness`` (Linux: a thread's own nice value; a
    no-op elsewhere, where setpriority would name a process). For helper threads feeding a chain of
    work that no thread can share: when the threads outnumber the cores, the chain keeps a core."""
    if sys.platform.startswith("linux"):
        import threading
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + niceness))
        except OSError:   # not allowed here: the threads keep the priority they had
            pass


@dataclass
class Stopwatch:
    """Wall-clock seconds since creation; ``lap(name)`` records named phases.

    ``on_lap(name, seconds)`` is told each phase as it ends (``_report.phase_logger``: one progress line per phase).
    """
    start: float = field(default_factory=time.perf_counter)
    laps: dict[str, float] = field(default_factory=dict)
    on_lap: Callable[[str, float], None] | None = None
    _last: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._last = self.start

    def lap(self, name: str) -> float:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self._last)
        if self.on_lap is not None:
            self.on_lap(name, now - self._last)
        self._last = now
        return self.laps[name]

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start


# ---------------------------------------------------------------------------
# node state: refuse an id range that cannot fit before allocating for it
# ---------------------------------------------------------------------------
# Lower bounds of the per-node arrays each command allocates whatever the
# edges: ``info`` (degree pass: out, in and total degree, int64 each) and
# ``partition`` (the degree pass plus at least an int32 owner and a byte of
# metrics per node; most algorithms need more). Lower bounds on purpose: a
# store is refused only when even this much cannot fit, so no graph that the
# command could have processed is turned away (R-MAT scale 26, 64M nodes,
# needs 1.5-2 GiB here, far below a 24 GB machine).
INFO_BYTES_PER_NODE = 24
PARTITION_BYTES_PER_NODE = 32


def available_memory_bytes() -> int:
    """Memory this process could still allocate: psutil's ``available``, capped by the room left under its
    cgroup's memory limit (v2 or v1, its own cgroup's or an ancestor's) and under its address-space limit
    (``ulimit -v``). Reading the cgroup v2 root's file alone missed every limit here: a container on a
    cgroup v1 host, ``systemd-run -p MemoryMax=`` (a nested v2 cgroup), ``prlimit --as``."""
    import psutil
    avail = int(psutil.virtual_memory().available)
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            room = cgroup_memory_room(f.read(), "/sys/fs/cgroup")
    except OSError:
        room = None
    if room is not None:
        avail = min(avail, room)
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm", encoding="ascii") as f:
                mapped = int(f.read().split()[0]) * resource.getpagesize()
        except (OSError, ValueError, IndexError):
            mapped = 0
        avail = min(avail, max(soft - mapped, 0))
    return avail


# a cgroup v1 limit this high is none ("unlimited" is 2**63 less a page)
_NO_CGROUP_LIMIT = 2**60


def cgroup_memory_room(proc_cgroup: str, root: str) -> int | None:
    """Bytes left under the tightest memory limit of the cgroups in ``proc_cgroup`` (the text of
    /proc/self/cgroup) and their ancestors, read below ``root`` (/sys/fs/cgroup); None where none is set."""
    room = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":   # the v2 hierarchy ("0::/path")
            base, files = root, ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base, files = os.path.join(root, "memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        folder = path.strip("/")
        while True:   # a limit may sit on any ancestor (a container's on the pod's, a scope's on its slice)
            limit = _read_bytes(os.path.join(base, folder, files[0]))
            if limit is not None and limit < _NO_CGROUP_LIMIT:
                used = _read_bytes(os.path.join(base, folder, files[1])) or 0
                room = max(limit - used, 0) if room is None else min(room, max(limit - used, 0))
            if not folder:
                break
            folder = os.path.dirname(folder)
    return room


def _read_bytes(path: str) -> int | None:
    """An integer file of a cgroup ("max": None, as a missing or unreadable file)."""
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def machine_cores() -> int:
    """Cores this process may run on: its CPU affinity (taskset, a container's cpuset), capped by a cgroup v2
    CPU quota (a Kubernetes limit shows every core of the host in the affinity)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        cores = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def usable_cores() -> int:
    """Threads a command's pools may use: :func:`machine_cores`, capped by ``NUMBA_NUM_THREADS`` when it is
    set (one knob for every thread pool of a command: the numba kernels' and ours)."""
    cores = machine_cores()
    asked = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if asked.isdigit() and int(asked) >= 1:
        cores = min(cores, int(asked))
    return cores


def quiet_openmp(env: MutableMapping[str, str], inherited: Mapping[str, str] | None = None) -> str:
    """OpenMP's passive wait policy in ``env`` (a process's environment, before its first parallel kernel),
    unless a policy is set there already, or in ``inherited`` (the environment whose variables the process
    will also see): that one is kept. Returns the policy in effect.

    Why: numba's kernels run on OpenMP threads (libgomp), which spin for a while after every parallel
    region before they sleep (3 ms a region a thread on a 2-core machine). A command runs thousands of
    regions with Python or dask work between them, and on many cores the spinning threads took the
    cores that dask workers need: with 16 workers at R-MAT scale 21 the client used 98 s of CPU over the
    partition, 35 s with this policy (docs/distributed.md, "OpenMP wait policy"). libgomp reads the
    policy once, when it is loaded, so this is for a process that has not run a kernel yet. The CLI does
    not call it for plug-in commands such as the trainer's: torch loads an OpenMP library of its own,
    which would read the policy too, and the effect on training was not measured."""
    policy = env.get("OMP_WAIT_POLICY", (inherited or {}).get("OMP_WAIT_POLICY", "PASSIVE"))
    env["OMP_WAIT_POLICY"] = policy
    return policy


M_ARENA_MAX = -8   # mallopt's parameter number in glibc's malloc.h


def one_malloc_arena(env: MutableMapping[str, str]) -> str:
    """glibc's malloc limited to one arena, in this process and (through ``env``, a process's environment)
    in the processes it starts, unless ``MALLOC_ARENA_MAX`` is set there already: that value is kept.
    Returns the value in effect; for a process whose threads have not allocated yet.

    Why: glibc gives every thread that allocates while another holds the lock an arena of its own (up to
    8 a core), and memory freed in one arena is not reused by another. The numba kernels' threads and
    zarr's decompression threads allocate chunk after chunk, so a command's RSS grew past its live data:
    ``graphstream partition`` of R-MAT s22 at k = 32 peaked at 728-743 MiB, 608-625 MiB with one arena,
    in 90.7-100.5 s against 94.8-102.4 s (alternating, docs/partition-experiments.md, "One malloc arena").
    ``tools/bench_partition_speed.py`` has measured its children with one arena all along."""
    value = env.setdefault("MALLOC_ARENA_MAX", "1")
    if sys.platform.startswith("linux"):
        import ctypes
        import ctypes.util
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            libc.mallopt(M_ARENA_MAX, int(value))
        except (OSError, AttributeError, ValueError):   # not glibc (musl has no arenas), or a bad value
            pass
    return value


def workers_within(per_worker_bytes: int) -> int:
    """How many workers to run at once: one per usable core, and no more than half of the available
    memory holds at ``per_worker_bytes`` each (the rest stays for the page cache and the process's
    other state); at least one."""
    by_memory = available_memory_bytes() // 2 // max(1, int(per_worker_bytes))
    return int(max(1, min(usable_cores(), by_memory)))


def node_state_shortfall(num_nodes: int, bytes_per_node: int) -> str | None:
    """None if ``num_nodes * bytes_per_node`` fits in the available memory, else "at least X GiB ... more than Y".

    The factor is 1: node state is refused only when its lower bound alone
    exceeds all the memory available now (page cache counts as available).
    """
    need = int(num_nodes) * int(bytes_per_node)
    avail = available_memory_bytes()
    if need <= avail:
        return None
    return (f"at least {_gib(need)} of per-node state ({bytes_per_node} B/node), "
            f"more than the {_gib(avail)} of memory available")


def check_node_state_fits(num_nodes: int, bytes_per_node: int, what: str, where: str) -> None:
    """Raise a one-line ResourceError before ``what`` allocates node state that cannot fit in memory."""
    short = node_state_shortfall(num_nodes, bytes_per_node)
    if short is not None:
        raise ResourceError(f"{where}: {what}: {num_nodes} nodes need {short}; if the node ids are sparse "
                               f"(the node count is the largest id + 1), ingest again with --relabel")


def _gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.3g} MiB"
