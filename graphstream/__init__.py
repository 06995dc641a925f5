"""graphstream: partition and store graphs larger than memory, feed them to GNN trainers."""
from .errors import GraphStreamError
from .store import GraphStore, GraphWriter, open_store

__version__ = "0.1.0"
__all__ = ["GraphStore", "GraphStreamError", "GraphWriter", "open_store", "__version__"]
