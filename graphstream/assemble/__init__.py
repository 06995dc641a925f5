"""Second pass: a partition plan becomes a partitioned dataset (per-part CSR, split node data, manifest).

Exports are lazy so that ``import graphstream`` stays light: the builder
pulls in numba. The dataset's format and loader live in
:mod:`graphstream.store.partitions`; they are re-exported here for the
callers that import them from ``graphstream.assemble``.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "build_partitions": f"{__name__}.builder", "BuildConfig": f"{__name__}.config",
    "auto_num_parts": f"{__name__}.sizing",
    "open_partitions": "graphstream.store.partitions", "PartitionedDataset": "graphstream.store.partitions",
    "Part": "graphstream.store.partitions", "PartitionsError": "graphstream.store.partitions_manifest",
    "FORMAT": "graphstream.store.partitions_manifest", "VERSION": "graphstream.store.partitions_manifest",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
