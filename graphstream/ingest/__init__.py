"""Readers that fill a graph store: edge files (SNAP/CSV/TSV, npy, parquet) and dataset loaders.

``ingest(source, out, config_or_keywords)`` is the one entry point for edge
files; see ``pipeline.py`` (its options: :class:`IngestConfig`). Dataset
loaders (Cora, Citeseer, MUSAE facebook) are in ``graphstream.ingest.datasets``;
the R-MAT generator in ``graphstream.ingest.rmat`` (imported on its own, not here).
"""
from ..store import DEFAULT_CHUNK
from .config import IngestConfig
from .pipeline import FORMATS, detect_format, ingest

__all__ = ["DEFAULT_CHUNK", "FORMATS", "IngestConfig", "detect_format", "ingest"]
