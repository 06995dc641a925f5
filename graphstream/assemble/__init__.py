"""Second pass: a partition plan becomes a partitioned dataset (per-part CSR, split node data, manifest).

Exports are lazy so that ``import graphstream`` stays light: the loader needs
only numpy, the builder pulls in numba.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "build_partitions": "builder", "BuildConfig": "builder",
    "auto_num_parts": "sizing",
    "open_partitions": "loader", "PartitionedDataset": "loader", "Part": "loader", "PartitionsError": "loader",
    "FORMAT": "manifest", "VERSION": "manifest",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
