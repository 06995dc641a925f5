"""What the service shows of the root: its datasets (``GET /api/datasets``) and partition reports.

Datasets are found by walking the root (hidden names, the service's
``.graphstream`` folder and the temporary siblings of outputs being written
included, are skipped; symlinks are not followed) and described from their
metadata only, as ``graphstream info`` does for partitioned datasets and
snapshot stores (a graph store's description here leaves out ``info``'s
degree pass, which reads every edge). Paths shown are relative to the root.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Any

from ..commands.info import dynamic_info, node_data_info, partitions_info, snapshots_info
from ..errors import GraphStreamError
from ..report import PartitionReport, partition_report, render_plot
from ..store import open_store
from ..store.verify import detect_kind
from .jobargs import confine, doc_without_root, without_root

MAX_DEPTH = 4


def list_datasets(root: Path) -> list[dict[str, Any]]:
    """Every graph store, snapshot store, partitioned dataset, dynamic partitions and node data folder under
    ``root`` (down to :data:`MAX_DEPTH` folders), with its description or the error reading it."""
    found: list[dict[str, Any]] = []
    _walk(root, root, 0, found)
    return found


def _walk(root: Path, folder: Path, depth: int, found: list[dict[str, Any]]) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        try:
            kind = detect_kind(path)
        except GraphStreamError:
            if depth + 1 < MAX_DEPTH:
                _walk(root, path, depth + 1, found)
            continue
        rel = path.relative_to(root).as_posix()
        try:
            info = _describe(kind, path)
        except (GraphStreamError, OSError, ValueError) as exc:
            found.append({"path": rel, "kind": kind, "error": " ".join(without_root(str(exc), root).split())})
        else:   # the metadata's own paths (a store's source, a dataset's graph) shown as the jobs name them
            found.append({**doc_without_root(info, str(root)), "path": rel, "kind": kind})
        if kind == "node_data" and depth + 1 < MAX_DEPTH:   # its graph.zarr, which jobs partition, listed too
            _walk(root, path, depth + 1, found)


def _describe(kind: str, path: Path) -> dict[str, Any]:
    if kind == "graph":
        return open_store(path).info.to_dict()
    describe = {"partitions": partitions_info, "snapshots": snapshots_info, "dynamic_partitions": dynamic_info,
                "node_data": node_data_info}
    return describe[kind](str(path))


def dataset_report(root: Path, rel: str) -> PartitionReport:
    """The partition report of ``root/rel`` (confined like a job's path), its paths relative to the root."""
    full = confine(root, rel, f"dataset {rel!r}")
    report = _cached_report(str(full), _version(full))
    def shown(p: str) -> str:
        return _relative(root, p)
    graph = {**report.graph, "store": None if report.graph["store"] is None else shown(report.graph["store"])}
    return dataclasses.replace(report, path=rel, graph=graph,
                               rf_vs_k=[dataclasses.replace(p, path=shown(p.path)) for p in report.rf_vs_k])


def dataset_plot(root: Path, rel: str, name: str, fmt: str) -> bytes:
    full = confine(root, rel, f"dataset {rel!r}")
    return _cached_plot(str(full), _version(full), name, fmt)


def _version(full: Path) -> tuple[int, int]:
    """What invalidates a cached report: its manifest, and its parent folder (a sibling partitioning
    added or removed)."""
    try:
        return (full / "manifest.json").stat().st_mtime_ns, full.parent.stat().st_mtime_ns
    except OSError:
        return 0, 0


@functools.lru_cache(maxsize=32)
def _cached_report(full: str, version: tuple[int, int]) -> PartitionReport:
    return partition_report(full)


@functools.lru_cache(maxsize=64)
def _cached_plot(full: str, version: tuple[int, int], name: str, fmt: str) -> bytes:
    return render_plot(_cached_report(full, version), name, fmt)


def _relative(root: Path, path: str) -> str:
    p = Path(path)
    try:
        return p.resolve().relative_to(root).as_posix()
    except ValueError:
        return path
