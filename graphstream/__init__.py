"""graphstream: partition and store graphs larger than memory, feed them to GNN trainers."""
from .errors import GraphStreamError
from .store import GraphStore, GraphWriter, open_store
from .assemble.loader import open_partitions  # numpy only: no numba, no torch


def __getattr__(name: str):
    # The dynamic-graph readers import numba kernels: load them only when asked for.
    if name in ("open_snapshots", "open_dynamic_partitions"):
        from . import dynamic
        return getattr(dynamic, name)
    raise AttributeError(f"module 'graphstream' has no attribute {name!r}")

__version__ = "0.1.0"
__all__ = ["GraphStore", "GraphStreamError", "GraphWriter", "open_dynamic_partitions", "open_partitions",
           "open_snapshots", "open_store", "__version__"]
