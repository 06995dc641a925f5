"""Zarr graph store, streaming reader, node data and the partitioned dataset: every on-disk format.

The degree pass is loaded lazily: it compiles numba kernels, and ``import
graphstream`` (which imports this package) must stay numpy-and-zarr only.
"""
from .graph import (DEFAULT_CHUNK, FORMAT, GraphStore, GraphWriter, StoreInfo, default_compressor,
                    id_dtype_for, is_url, open_store, validate_store)
from .partitions import Part, PartitionedDataset, open_partitions
from .partitions_manifest import PartEntry, PartitionsError, PartitionsManifest
from .stream import EdgeBatch, stream_edges

__all__ = ["DEFAULT_CHUNK", "FORMAT", "Degrees", "EdgeBatch", "GraphStore", "GraphWriter", "StoreInfo",
           "default_compressor", "degree_pass", "id_dtype_for", "is_url", "open_store", "stream_edges",
           "total_degree", "validate_store",
           # the partitioned dataset (graphstream.store.partitions)
           "Part", "PartEntry", "PartitionedDataset", "PartitionsError", "PartitionsManifest", "open_partitions"]

_LAZY = {"Degrees": "degrees", "degree_pass": "degrees", "total_degree": "degrees"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
