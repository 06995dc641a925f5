"""graphstream: partition and store graphs larger than memory, feed them to GNN trainers.

The public names are loaded on first use (PEP 562), so that ``import
graphstream`` and ``graphstream --help`` import neither zarr, numba nor torch:
the stores need zarr, the dynamic-graph readers numba kernels (all in graphstream.store).
"""
from importlib import import_module

from .errors import (
    ClusterError,
    CorruptDataError,
    DiskFullError,
    GraphStreamError,
    IncompleteStoreError,
    InputFormatError,
    InputNotFoundError,
    InvalidIdError,
    NodeDataError,
    OutputExistsError,
    OutputLockedError,
    ParameterError,
    PartitionsError,
    ResourceError,
    StoreError,
    StoreReplacedError,
)

__version__ = "0.1.0"

_LAZY = {
    "GraphStore": "graphstream.store", "GraphWriter": "graphstream.store", "open_store": "graphstream.store",
    "open_partitions": "graphstream.store",
    "open_snapshots": "graphstream.store", "open_dynamic_partitions": "graphstream.store",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'graphstream' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = ["GraphStore", "GraphWriter", "open_dynamic_partitions", "open_partitions", "open_snapshots",
           "open_store", "__version__",
           # the errors (graphstream.errors): every one a GraphStreamError, which the CLI makes exit 2
           "ClusterError", "CorruptDataError", "DiskFullError", "GraphStreamError", "IncompleteStoreError",
           "InputFormatError", "InputNotFoundError", "InvalidIdError", "NodeDataError", "OutputExistsError",
           "OutputLockedError", "ParameterError", "PartitionsError", "ResourceError", "StoreError",
           "StoreReplacedError"]
