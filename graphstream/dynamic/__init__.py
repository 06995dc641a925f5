"""Dynamic graphs: building snapshot stores from events, PGC chunk partitioning,
per-part snapshot sequences for the trainer (spec: specs/dynamic.md).

The formats themselves (snapshot store, deltas, dynamic partitions) live in
:mod:`graphstream.store`; their names are re-exported here, where users
import them.
"""
from ..store.delta import Delta, KeyDelta, apply_delta, apply_delta_vectorized, diff_sorted
from ..store.dynamic_partitions import DynamicPart, DynamicPartitions, open_dynamic_partitions, partitioning_id
from ..store.snapshots import SnapshotStore, SnapshotWriter, is_snapshot_store, open_snapshots
from .snapshots import WindowSpec, build_snapshots


def __getattr__(name):
    # The partition side pulls in more kernels; load it on first use.
    if name == "partition_snapshot_store":
        from . import partition
        return getattr(partition, name)
    raise AttributeError(name)


__all__ = ["Delta", "DynamicPart", "DynamicPartitions", "KeyDelta", "SnapshotStore", "SnapshotWriter",
           "WindowSpec", "apply_delta", "apply_delta_vectorized", "build_snapshots", "diff_sorted",
           "is_snapshot_store", "open_dynamic_partitions", "open_snapshots", "partition_snapshot_store",
           "partitioning_id"]
