"""The degree pass: one streaming pass, O(num_nodes) memory."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from .._atomic import for_workers
from .._report import track
from ..errors import InvalidIdError, ParameterError
from .graph import GraphStore, is_url, open_store, store_for_workers
from .stream import EdgeBatch

if TYPE_CHECKING:
    from distributed import Client

# Per-task degree vectors up to this size come back through the scheduler; larger ones are shards
# in a work folder, summed by node ranges (the scheduler is not a data plane).
RETURN_BYTES = 1 << 20
# Up to this many shards the client sums them itself: a wave of sum tasks costs a round trip, a write of
# the sums and their read here, more than it saves when it reads no more than the client would (R-MAT s22,
# two workers: the sum wave and the read of its sums took 0.12-0.37 s of a 1.07-1.56 s pass)
CLIENT_SUM_MAX_RANGES = 2


@dataclass(frozen=True, slots=True)
class Degrees:
    """Per-node out-, in- and total degree (int64), plus the self-loop count."""
    out_degree: np.ndarray
    in_degree: np.ndarray
    self_loops: int

    @property
    def total(self) -> np.ndarray:
        return self.out_degree + self.in_degree


def degree_pass(store: GraphStore | str | os.PathLike, batch_size: int | None = None, *, client: Client | None = None,
                work_dir: str | os.PathLike | None = None) -> Degrees:
    """Count each node's edges as source and as destination.

    For an undirected store (each edge stored once) ``total`` is the degree.
    A self-loop adds 1 to out and 1 to in, as in the edge list.

    With ``client`` (a ``distributed.Client``) the edge chunks are counted by
    tasks of its cluster; their per-task vectors, O(num_nodes) each, are
    shards in a scratch folder in ``work_dir`` (default: beside the store),
    summed by tasks over node ranges. Same numbers.
    """
    store = open_store(store)
    if client is not None:   # the workers' paths
        store, work_dir = store_for_workers(store), for_workers(work_dir)
        return _degree_pass_on_cluster(client, store, batch_size, work_dir)
    return _count_range(store, 0, store.num_edges, batch_size, progress=True)


def _count_range(store: GraphStore, start: int, stop: int, batch_size: int | None, *,
                 progress: bool = False, counter: type = np.int64) -> Degrees:
    """The degrees of edges [start, stop) of ``store``, counted in ``counter`` integers."""
    n = store.num_nodes
    out_deg = np.zeros(n, dtype=counter)
    in_deg = np.zeros(n, dtype=counter)
    loops = 0
    batches = store.stream(batch_size, start=start, stop=stop)
    if progress:
        batches = track(batches, store.num_edges, "degree pass", size=len)
    # The two columns are counted by two threads at once (the kernels release
    # the GIL); each owns its counter array, so there is nothing to lock and the
    # result does not depend on timing.
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="graphstream-degrees") as pool:
        for batch in batches:
            f_out = pool.submit(_count_ids, batch.src, out_deg)
            f_in = pool.submit(_count_ids, batch.dst, in_deg)
            check_edge_ids(store.path, batch, (f_out.result(), f_in.result()), n)
            loops += int(np.count_nonzero(batch.src == batch.dst))
    return Degrees(out_deg, in_deg, loops)


def check_edge_ids(path: str, batch: EdgeBatch, hits: tuple[int, ...], n: int, why: str = "") -> None:
    """Raise InvalidIdError naming the first edge of ``batch`` with an id outside [0, n), from each
    column kernel's first bad index (``hits``, -1 for none)."""
    bad = [i for i in hits if i >= 0]
    if bad:
        i = min(bad)
        raise InvalidIdError(f"{path}: edge {batch.start + i} = ({batch.src[i]}, {batch.dst[i]}) "
                             f"has an id outside [0, {n}){why}")


@njit(cache=True, nogil=True)
def _count_ids(ids, deg):
    """deg[v] += 1 for every id v of the batch, in place; return -1, or the index
    of the first id outside [0, len(deg)) (nothing past it is counted).
    In place, not ``np.bincount(..., minlength=n)``: that costs O(n) per batch."""
    n = deg.shape[0]
    for i in range(ids.shape[0]):
        v = ids[i]
        if v < 0 or v >= n:
            return i
        deg[v] += 1
    return -1


def total_degree(store: GraphStore, batch_size: int | None = None, *, client: Client | None = None) -> np.ndarray:
    """Exact total degree (both endpoints), what the partitioners use."""
    return degree_pass(store, batch_size, client=client).total


# -- on a cluster -------------------------------------------------------------------------------

def _degree_pass_on_cluster(client: Client, store: GraphStore, batch_size: int | None,
                            work_dir: str | os.PathLike | None) -> Degrees:
    """Map: tasks over chunk-aligned edge ranges count their degrees. Reduce: small vectors are summed
    here; large ones were saved as shards ([out; in], 2n counts), summed here when they are few
    (``CLIENT_SUM_MAX_RANGES``), else by tasks over node ranges, each its slice.
    One edge range per worker thread, not several: every range costs an O(n) shard, and counting is
    uniform work, so finer ranges buy no balance worth their bytes."""
    from .._atomic import scratch_dir
    from ..cluster import check_visible, run_tasks, shared_scratch_parent, split_range, task_count

    n = store.num_nodes
    ranges = split_range(store.num_edges, task_count(client, per_worker=1), align=store.chunk_size)
    common = {"path": store.path, "batch_size": batch_size}
    if 2 * 8 * n <= RETURN_BYTES or not ranges:
        check_visible(client, store.path)
        counted = run_tasks(client, "degree pass", _count_task, ranges, unit="edge", size=_edges, **common)
        out_deg, in_deg = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        for d in counted:
            out_deg += d.out_degree
            in_deg += d.in_degree
        return Degrees(out_deg, in_deg, sum(d.self_loops for d in counted))
    if work_dir is None and is_url(store.path):
        raise ParameterError(f"{store.path}: a store at a URL needs a work folder for the degree shards (work_dir)")
    parent = work_dir if work_dir is not None else shared_scratch_parent(store.path)
    with scratch_dir(f".{Path(store.path).name}.scratch-degrees-", dir=parent) as work:
        check_visible(client, store.path, work)
        shards = [str(work / f"edges-{i:05d}.npy") for i in range(len(ranges))]
        loops = run_tasks(client, "degree pass", _count_task, [(*r, s) for r, s in zip(ranges, shards, strict=True)],
                          unit="edge", size=_edges, **common)
        if len(shards) <= CLIENT_SUM_MAX_RANGES:   # a few ranges: summed here, without a wave of sum tasks
            both = _sum_shards(shards, 0, n)
            return Degrees(both[0], both[1], sum(loops))
        nodes = split_range(n, task_count(client))
        sums = [str(work / f"nodes-{i:05d}.npy") for i in range(len(nodes))]
        run_tasks(client, "degree sums", _sum_task, [(*r, s) for r, s in zip(nodes, sums, strict=True)],
                  shards=shards)
        both = np.concatenate([np.load(s) for s in sums], axis=1)
    return Degrees(both[0], both[1], sum(loops))


def _edges(task: tuple) -> int:
    return task[1] - task[0]


def _count_task(start: int, stop: int, shard: str | None = None, *, path: str, batch_size: int | None
                ) -> Degrees | int:
    """A task: the degrees of edges [start, stop); with ``shard``, saved there ([out; in], 2n counts) and
    only the self-loop count returned."""
    from ..cluster import save_shard

    if shard is None:
        return _count_range(open_store(path), start, stop, batch_size)
    # A count cannot exceed the range's edges: int32 halves the O(n) shard every task writes and every
    # sum task reads (the shards, not the counting, are what a cluster's degree pass spends its time on),
    # and the counters a worker holds (R-MAT s26: 2 x 268 MB, not 2 x 537 MB)
    deg = _count_range(open_store(path), start, stop, batch_size,
                       counter=np.int32 if stop - start < 2**31 else np.int64)
    save_shard(shard, [deg.out_degree, deg.in_degree])   # [out; in] one after the other, not stacked: no copy
    return deg.self_loops


def _sum_task(lo: int, hi: int, out: str, *, shards: list[str]) -> None:
    """A task: nodes [lo, hi) of every edge-range shard, summed into ``out``."""
    from ..cluster import save_shard

    save_shard(out, _sum_shards(shards, lo, hi))


def _sum_shards(shards: list[str], lo: int, hi: int) -> np.ndarray:
    """Nodes [lo, hi) of every edge-range shard ([out; in], 2n counts), summed in int64."""
    total = np.zeros((2, hi - lo), dtype=np.int64)
    for s in shards:
        total += np.load(s, mmap_mode="r").reshape(2, -1)[:, lo:hi]
    return total
