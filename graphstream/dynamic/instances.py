"""The spatio-temporal graph of node instances (v, t), never materialised.

Instance ids come from the per-snapshot prefix counts (``node_counts``) and
the rank of v among the active nodes of t; spatial edges are read snapshot
by snapshot from the snapshot store; temporal edges are two O(instances)
arrays ``prev``/``next`` filled by one forward pass. The O(instances) arrays
are memory-mapped files when they exceed the configured memory budget.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from .._atomic import allocated_memmap
from .._atomic import scratch_dir as scratch_folder
from .._report import progress
from .._resources import available_memory_bytes
from ..errors import ParameterError
from ..store.delta import decode_keys
from ..store.snapshots import SnapshotStore
from .config import PGCConfig

# -- O(instances) arrays, in RAM or memory-mapped -------------------------------------

class InstanceArrays:
    """Allocates the O(instances) arrays: plain arrays within ``budget``
    bytes, otherwise memory-mapped files in a private temporary folder."""

    def __init__(self, expected_bytes: int, budget: int | None, scratch_dir: str | None):
        if budget is None:   # a quarter of what this process may still allocate (its cgroup's limit too)
            budget = available_memory_bytes() // 4
        self.mapped = expected_bytes > budget
        self._stack = ExitStack()
        self._dir = None
        if self.mapped:
            # pid-named: a folder left by a killed run is removed by the next one
            self._dir = Path(self._stack.enter_context(scratch_folder("graphstream-pgc-", scratch_dir)))
        self._n = 0

    def alloc(self, n: int, dtype, fill=None) -> np.ndarray:
        if self.mapped:
            self._n += 1
            # blocks allocated up front: a full disk is ENOSPC here, not SIGBUS at a later store
            mm = allocated_memmap(self._dir / f"a{self._n}.npy", dtype, (max(n, 1),))[:n]
            arr = mm.view(np.ndarray)  # numba sees a plain array over the mapping
        else:
            arr = np.empty(n, dtype=dtype)
        if fill is not None:
            arr[...] = fill
        return arr

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> InstanceArrays:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- per-snapshot kernels ------------------------------------------------------------

@njit(cache=True)
def _active_sorted(src, dst, local_of):
    """Sorted distinct nodes of a snapshot; sets local_of[v] to v's rank.

    ``local_of`` (int64[N], all -1) must be reset with :func:`_reset_local`.
    """
    buf = np.empty(src.shape[0] + dst.shape[0], dtype=np.int64)
    n = 0
    for arr in (src, dst):
        for i in range(arr.shape[0]):
            v = arr[i]
            if local_of[v] == -1:
                local_of[v] = -2
                buf[n] = v
                n += 1
    active = np.sort(buf[:n])
    for j in range(n):
        local_of[active[j]] = j
    return active


@njit(cache=True)
def _reset_local(active, local_of):
    for j in range(active.shape[0]):
        local_of[active[j]] = -1


@njit(cache=True)
def snapshot_adjacency(src, dst, local_of, na):
    """Undirected CSR over local ids (both directions, self-loops skipped)."""
    indptr = np.zeros(na + 1, dtype=np.int64)
    for e in range(src.shape[0]):
        if src[e] != dst[e]:
            indptr[local_of[src[e]] + 1] += 1
            indptr[local_of[dst[e]] + 1] += 1
    for j in range(na):
        indptr[j + 1] += indptr[j]
    fill = indptr[:-1].copy()
    indices = np.empty(indptr[na], dtype=np.int64)
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        if s != d:
            a = local_of[s]
            b = local_of[d]
            indices[fill[a]] = b
            fill[a] += 1
            indices[fill[b]] = a
            fill[b] += 1
    return indptr, indices


@njit(cache=True)
def _link_instances(active, indptr, base, last_inst, prev, nxt, deg, node_work, ic, ec):
    """Temporal links to each node's previous instance; degrees; node workloads."""
    for j in range(active.shape[0]):
        v = active[j]
        i = base + j
        p = last_inst[v]
        prev[i] = p
        nxt[i] = -1
        if p >= 0:
            nxt[p] = i
        last_inst[v] = i
        d = indptr[j + 1] - indptr[j]
        deg[i] = d
        node_work[v] += ic + ec * d


class Snapshot:
    """One snapshot's edges and its active nodes (local ids set in ``local_of``)."""

    def __init__(self, t: int, base: int, src: np.ndarray, dst: np.ndarray, counts: np.ndarray,
                 active: np.ndarray):
        self.t, self.base, self.src, self.dst, self.counts, self.active = t, base, src, dst, counts, active


@dataclass
class InstanceGraph:
    """The implicit spatio-temporal graph: per-snapshot instance offsets plus
    per-instance temporal links and spatial degrees."""
    snaps: SnapshotStore
    offsets: np.ndarray      # (T+1,) first instance id of each snapshot
    prev: np.ndarray         # (I,) previous instance of the same node, -1 if none
    next: np.ndarray         # (I,) next instance of the same node, -1 if none
    deg: np.ndarray          # (I,) undirected spatial degree (self-loops skipped)
    node_work: np.ndarray    # (N,) summed workload of each node's instances
    local_of: np.ndarray     # (N,) scratch, all -1 between snapshots
    inst_dtype: np.dtype
    arrays: InstanceArrays

    @property
    def num_instances(self) -> int:
        return int(self.offsets[-1])

    @property
    def num_snapshots(self) -> int:
        return len(self.offsets) - 1

    def snapshots(self, desc: str = "snapshots", only: np.ndarray | None = None):
        """Yield each snapshot (or those in ``only``, ascending) with its active
        nodes' local ids set in ``local_of`` (reset after)."""
        ts = range(self.num_snapshots) if only is None else [int(t) for t in only]
        # a bar only: a pass is part of a phase that logs its own time (label propagation runs many)
        with progress(len(ts), desc, unit="snapshot", line=False) as bar:
            for t in ts:
                keys, counts = self.snaps.snapshot_keys(t)
                src, dst = decode_keys(keys, self.snaps.num_nodes)
                active = _active_sorted(src, dst, self.local_of)
                try:
                    yield Snapshot(t, int(self.offsets[t]), src, dst, counts, active)
                finally:
                    _reset_local(active, self.local_of)
                bar.update(1)

    def workload(self, ic: float, ec: float, lo: int = 0, hi: int | None = None) -> np.ndarray:
        hi = self.num_instances if hi is None else hi
        return ic + ec * self.deg[lo:hi].astype(np.float64)


def instance_bytes(num_instances: int) -> int:
    """What the O(instances) arrays of PGC take (labels, prev, next, degree, label sizes, part)."""
    idt = 4 if num_instances < 2**31 else 8
    return num_instances * (4 * idt + 8 + 4)


def build_instance_graph(snaps: SnapshotStore, config: PGCConfig) -> InstanceGraph:
    """Pass 0: instance offsets from the stored node counts, then one forward
    pass linking each instance to its node's previous instance."""
    offsets = np.zeros(snaps.num_snapshots + 1, dtype=np.int64)
    np.cumsum(snaps.node_counts, out=offsets[1:])
    num = int(offsets[-1])
    idt = np.dtype(np.int32) if num < 2**31 else np.dtype(np.int64)
    arrays = InstanceArrays(instance_bytes(num), config.memory_budget, config.scratch_dir)
    prev = arrays.alloc(num, idt)
    nxt = arrays.alloc(num, idt)
    deg = arrays.alloc(num, np.int32)
    n = snaps.num_nodes
    last_inst = np.full(n, -1, dtype=np.int64)
    node_work = np.zeros(n, dtype=np.float64)
    local_of = np.full(n, -1, dtype=np.int64)
    graph = InstanceGraph(snaps, offsets, prev, nxt, deg, node_work, local_of, idt, arrays)
    for s in graph.snapshots("instances"):
        if len(s.active) != snaps.node_counts[s.t]:
            raise ParameterError(f"{snaps.path}: snapshot {s.t} has {len(s.active)} active nodes, "
                                 f"node_counts says {snaps.node_counts[s.t]}")
        indptr, _ = snapshot_adjacency(s.src, s.dst, local_of, len(s.active))
        _link_instances(s.active, indptr, s.base, last_inst, prev, nxt, deg, node_work,
                        config.instance_cost, config.edge_cost)
    return graph


