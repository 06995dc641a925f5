"""The result of a partitioner: who owns every node, and how good that is."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_PARTS = 1024   # replica bitsets take any k; part[e] is int16 and packing keys hold 11 bits of part


@dataclass
class PartitionPlan:
    """``owner[v]`` in [0, num_parts) for every node, plus metrics.

    Edge partitioners also set ``edge_parts_path``: a Zarr array ``part[e]``
    (int16/int32), chunk-aligned with the store's edge columns.
    ``metrics`` holds at least ``replication_factor``, ``node_balance``,
    ``edge_balance``, ``seconds``, ``passes``, ``peak_rss_bytes`` (and
    ``vertex_cut_rf`` for edge partitioners), per specs/partitioners.md.
    """
    algorithm: str
    num_parts: int
    owner: np.ndarray
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    edge_parts_path: str | None = None
