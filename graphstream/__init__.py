"""graphstream: partition and store graphs larger than memory, feed them to GNN trainers."""
from .errors import GraphStreamError
from .store import GraphStore, GraphWriter, open_store
from .build.loader import open_partitions  # numpy only: no numba, no torch

__version__ = "0.1.0"
__all__ = ["GraphStore", "GraphStreamError", "GraphWriter", "open_partitions", "open_store", "__version__"]
