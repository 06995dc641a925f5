"""How many parts: derived from GPU memory (specs/trainer.md).

With q GPUs of M bytes each and a fraction of M kept for computation
(``reserve_fraction``, default 2/3), each GPU can hold M (1 - reserve) bytes
of graph data: p is the smallest number, at least q, whose parts each fit in
one GPU's share (a worker then trains its parts one after the other).

The size of a part is not known before partitioning, so it is bounded: a
part holds at most ``balance`` N / p inner nodes whose rows hold at most
``balance`` A / p aggregation entries (A = E directed, 2E undirected), at
most one halo node per such entry, never more than N nodes in all; on an
undirected store the halo rows hold the other side of the cut entries, at
most as many again (directed: halo rows are empty). The bound holds for a
partition within the balance on nodes *and* entries (coarse-refine caps
both when k comes from here), and for one-hop parts only. It overestimates
a good partition's parts, so p is safe there, not minimal; a partition
that misses the entries' balance can still exceed it, which is why the
built parts are measured against the share (:func:`largest_part_bytes`).
Before 2026-12-01 the halo rows' entries were left out and p = q was taken
whenever the whole graph fitted in q shares: parts of 1.1-2.1x the share.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..errors import ParameterError
from ..store.graph import GraphStore, open_store
from ..store.nodedata import NodeData, open_node_data

# Bytes per node and per entry of a part, as the loader's to_torch() ships them.
_NODE_STRUCT_BYTES = 8 + 8 + 8   # global id (int64), indptr entry (int64), degree (int64)
_ENTRY_BYTES = 8                 # column index (int64)


@dataclass(frozen=True, slots=True)
class DataSize:
    num_nodes: int
    num_entries: int
    node_bytes: int   # per node: node data rows + structure
    entry_bytes: int
    directed: bool = False

    @property
    def total(self) -> int:
        return self.num_nodes * self.node_bytes + self.num_entries * self.entry_bytes

    def part_bound(self, p: int, balance: float) -> int:
        """Upper bound of one (one-hop) part's bytes when the graph is cut in ``p`` parts within ``balance``
        on nodes and entries."""
        inner = min(self.num_nodes, math.ceil(balance * self.num_nodes / p))
        inner_entries = min(self.num_entries, math.ceil(balance * self.num_entries / p))
        # undirected: each halo row lists the part's inner neighbours of that node, the mirror of cut entries
        entries = min(self.num_entries, inner_entries * (1 if self.directed else 2))
        nodes = min(self.num_nodes, inner + inner_entries)
        return nodes * self.node_bytes + entries * self.entry_bytes

    def part_bytes(self, num_nodes: int, num_entries: int) -> int:
        """A built part's bytes as ``to_torch()`` ships them."""
        return num_nodes * self.node_bytes + num_entries * self.entry_bytes


def data_size(store: GraphStore | str | os.PathLike, nodes_dir: str | os.PathLike | NodeData | None) -> DataSize:
    store = open_store(store)
    entries = store.num_edges if store.directed else 2 * store.num_edges
    row = 0
    if nodes_dir is not None:
        data = nodes_dir if isinstance(nodes_dir, NodeData) else open_node_data(nodes_dir, store.num_nodes,
                                                                                 require_features=False)
        for name, arr in data.arrays.items():
            # to_torch() ships labels as int64 whatever their file dtype.
            row += arr.row_bytes // arr.dtype.itemsize * 8 if name == "labels" else arr.row_bytes
    return DataSize(store.num_nodes, entries, row + _NODE_STRUCT_BYTES, _ENTRY_BYTES, bool(store.directed))


def gpu_share(gpu_memory: int, reserve_fraction: float = 2 / 3) -> int:
    """The bytes of graph data one GPU keeps."""
    return int(gpu_memory * (1 - reserve_fraction))


def largest_part_bytes(size: DataSize, parts: list[dict]) -> tuple[int, int]:
    """(index, bytes) of the largest of the built parts (the manifest's entries: ``num_inner``, ``num_halo``,
    ``num_edges``, its CSR entries)."""
    sizes = [size.part_bytes(int(e["num_inner"]) + int(e["num_halo"]), int(e["num_edges"])) for e in parts]
    i = max(range(len(sizes)), key=sizes.__getitem__)
    return i, sizes[i]


def largest_planned_part_bytes(size: DataSize, metrics: dict) -> int:
    """The largest part's bytes from a plan's counts (before the build): its nodes, inner and halo, and its
    CSR entries (``part_edges``: the builder's ``num_edges``, with one hop)."""
    entries = metrics["part_edges"]
    nodes = [i + h for i, h in zip(metrics["part_inner"], metrics["part_halo"], strict=True)]
    return max(size.part_bytes(n, e) for n, e in zip(nodes, entries, strict=True))


def auto_num_parts(store: GraphStore | str | os.PathLike, nodes_dir: str | os.PathLike | None, *, gpus: int,
                   gpu_memory: int, reserve_fraction: float = 2 / 3, balance: float = 1.05) -> int:
    """Number of parts for ``gpus`` GPUs of ``gpu_memory`` bytes (see the module docstring)."""
    if gpus < 1:
        raise ParameterError(f"gpus must be >= 1, got {gpus}")
    if gpu_memory <= 0:
        raise ParameterError(f"gpu_memory must be > 0 bytes, got {gpu_memory}")
    if not 0 <= reserve_fraction < 1:
        raise ParameterError(f"reserve_fraction must be in [0, 1), got {reserve_fraction}")
    if balance < 1:
        raise ParameterError(f"balance must be >= 1, got {balance}")
    size = data_size(store, nodes_dir)
    share = gpu_share(gpu_memory, reserve_fraction)
    # part_bound is non-increasing in p: binary search the smallest p that fits. (Not p = q whenever the
    # whole graph fits in q shares: the parts hold their halos besides.)
    lo, hi = gpus, max(gpus, size.num_nodes)
    if size.part_bound(hi, balance) > share:
        raise ParameterError(f"{store.path}: even {hi} parts need up to {size.part_bound(hi, balance)} bytes "
                             f"each, more than the {share} bytes a GPU keeps for data "
                             f"({gpu_memory} x (1 - {reserve_fraction:.3g}))")
    while lo < hi:
        mid = (lo + hi) // 2
        if size.part_bound(mid, balance) <= share:
            hi = mid
        else:
            lo = mid + 1
    return lo
