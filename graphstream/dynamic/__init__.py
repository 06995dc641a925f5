"""Dynamic graphs: snapshot stores (keyframes + deltas), PGC chunk partitioning,
per-part snapshot sequences for the trainer (spec: specs/dynamic.md)."""
from .delta import Delta, KeyDelta, apply_delta, apply_delta_vectorized, diff_sorted
from .snapshots import (SnapshotStore, SnapshotWriter, WindowSpec, build_snapshots, is_snapshot_store,
                        open_snapshots)


def __getattr__(name):
    # The partition side pulls in more kernels; load it on first use.
    if name in ("open_dynamic_partitions", "DynamicPartitions", "DynamicPart", "partition_snapshot_store"):
        from . import partition
        return getattr(partition, name)
    raise AttributeError(name)


__all__ = ["Delta", "DynamicPart", "DynamicPartitions", "KeyDelta", "SnapshotStore", "SnapshotWriter",
           "WindowSpec", "apply_delta", "apply_delta_vectorized", "build_snapshots", "diff_sorted",
           "is_snapshot_store", "open_dynamic_partitions", "open_snapshots", "partition_snapshot_store"]
