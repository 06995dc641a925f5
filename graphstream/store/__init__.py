"""Every on-disk format, read and written here only: the graph store (Zarr), node data (.npy),
the partitioned dataset, the snapshot store (keyframes + deltas) and dynamic partitions.

The degree pass and the dynamic formats are loaded lazily: they compile
numba kernels, and importing this package must stay numpy-and-zarr only.
"""
from .graph import (
    DEFAULT_CHUNK,
    FORMAT,
    MAX_CHUNK,
    GraphStore,
    GraphWriter,
    StoreInfo,
    default_compressor,
    id_dtype_for,
    is_url,
    open_store,
    validate_store,
)
from .partitions import Part, PartitionedDataset, open_partitions
from .partitions_manifest import PartEntry, PartitionsError, PartitionsManifest
from .stream import EdgeBatch, stream_edges

__all__ = ["DEFAULT_CHUNK", "FORMAT", "MAX_CHUNK", "Degrees", "EdgeBatch", "GraphStore", "GraphWriter", "StoreInfo",
           "default_compressor", "degree_pass", "id_dtype_for", "is_url", "open_store", "stream_edges",
           "total_degree", "validate_store",
           # the partitioned dataset (graphstream.store.partitions)
           "Part", "PartEntry", "PartitionedDataset", "PartitionsError", "PartitionsManifest", "open_partitions",
           # dynamic graphs (graphstream.store.snapshots, graphstream.store.dynamic_partitions)
           "DynamicPart", "DynamicPartitions", "DynamicPartitionsManifest", "SnapshotManifest", "SnapshotStore",
           "SnapshotWriter", "is_snapshot_store", "open_dynamic_partitions", "open_snapshots"]

_LAZY = {"Degrees": "degrees", "degree_pass": "degrees", "total_degree": "degrees",
         **dict.fromkeys(("SnapshotManifest", "SnapshotStore", "SnapshotWriter", "is_snapshot_store",
                          "open_snapshots"), "snapshots"),
         **dict.fromkeys(("DynamicPart", "DynamicPartitions", "DynamicPartitionsManifest",
                          "open_dynamic_partitions"), "dynamic_partitions")}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
