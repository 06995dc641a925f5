"""``manifest.json`` of a partitioned dataset: written last, metrics recomputed from the part files.

The metrics describe what was written, not what the partitioner predicted:
sizes are read back from the ``.npy`` headers of every part and the training
counts from its ``train_mask.npy``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..store.nodedata import read_npy_header

FORMAT = "graphstream.partitions"
VERSION = 1
MANIFEST = "manifest.json"
PART_META = "part.json"

# Per part: required files; node data files are optional but then in every part.
REQUIRED_FILES = ("global_ids.npy", "indptr.npy", "indices.npy", "degree.npy")
TOP_LEVEL_KEYS = ("format", "version", "algorithm", "params", "num_parts", "num_nodes", "num_edges",
                  "directed", "metrics", "parts")


def part_dir_name(index: int) -> str:
    return f"part-{index:05d}"


def write_part_meta(part_dir: Path, num_inner: int) -> None:
    _write_json(part_dir / PART_META, {"num_inner": int(num_inner)})


def read_part_meta(part_dir: Path) -> dict[str, Any]:
    with open(part_dir / PART_META, encoding="utf-8") as f:
        return json.load(f)


def npy_rows(path: Path) -> int:
    """Row count of a ``.npy`` file from its header."""
    _, shape, _, _ = read_npy_header(path)
    return shape[0] if shape else 0


def part_entry(folder: Path, index: int) -> dict[str, Any]:
    """The manifest entry of one written part, measured from its files."""
    name = part_dir_name(index)
    part_dir = folder / name
    num_inner = int(read_part_meta(part_dir)["num_inner"])
    n_local = npy_rows(part_dir / "global_ids.npy")
    num_edges = npy_rows(part_dir / "indices.npy")
    train = part_dir / "train_mask.npy"
    if train.is_file():
        num_train = int(np.count_nonzero(np.load(train, mmap_mode="r")[:num_inner]))
    else:
        num_train = 0
    entry = {"path": name, "num_inner": num_inner, "num_halo": n_local - num_inner,
             "num_edges": num_edges, "num_train": num_train}
    _write_json(part_dir / PART_META, entry)
    return entry


def balance(values: list[int], total: float, k: int) -> float:
    """max / mean (1.0 for nothing to balance)."""
    mean = total / k if k else 0.0
    return float(max(values) / mean) if mean > 0 else 1.0


def recompute_metrics(folder: Path, num_parts: int, num_nodes: int) -> tuple[list[dict], dict[str, float]]:
    """Manifest part entries and the replication/balance metrics of the written parts."""
    parts = [part_entry(folder, i) for i in range(num_parts)]
    local = sum(p["num_inner"] + p["num_halo"] for p in parts)
    inner = [p["num_inner"] for p in parts]
    edges = [p["num_edges"] for p in parts]
    metrics = {
        "replication_factor": local / num_nodes if num_nodes else 1.0,
        "node_balance": balance(inner, num_nodes, num_parts),
        "edge_balance": balance(edges, sum(edges), num_parts),
    }
    return parts, metrics


def _write_json(path: Path, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """``manifest.json``, the last file of a build (keys in the documented order)."""
    ordered = {key: manifest[key] for key in TOP_LEVEL_KEYS}
    ordered.update({k: v for k, v in manifest.items() if k not in ordered})
    _write_json(folder / MANIFEST, ordered)
