"""Zarr graph store, streaming reader and node data."""
from .degrees import Degrees, degree_pass, total_degree
from .graph import (DEFAULT_CHUNK, FORMAT, GraphStore, GraphWriter, StoreInfo, default_compressor,
                    id_dtype_for, is_url, open_store, validate_store)
from .stream import EdgeBatch, stream_edges

__all__ = ["DEFAULT_CHUNK", "FORMAT", "Degrees", "EdgeBatch", "GraphStore", "GraphWriter", "StoreInfo",
           "default_compressor", "degree_pass", "id_dtype_for", "is_url", "open_store", "stream_edges",
           "total_degree", "validate_store"]
