"""graphstream info PATH [--json]: describe a graph store (attributes and streamed degree statistics),
a partitioned dataset, a snapshot store or dynamic partitions (``kind`` says which)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._report import format_bytes, log, phase_logger
from .._resources import INFO_BYTES_PER_NODE, Stopwatch, check_node_state_fits, peak_rss_bytes
from ..cluster import ClusterConfig, cluster_report, open_client
from ..errors import path_argument
from ..store import open_store
from .flags import add_cluster, cluster_config

if TYPE_CHECKING:
    from distributed import Client


def SUMMARY(result: dict) -> tuple[str, ...] | None:  # noqa: N802 - the name graphstream.cli looks up
    """What the human summary shows, per kind (results of other commands: every plain value)."""
    if result.get("kind") in _HEADLINES:
        return _HEADLINES[result["kind"]]
    if "max_degree" not in result:
        return None
    return ("path", "kind", "num_nodes", "num_edges", "directed", "max_degree", "mean_degree", "max_out_degree",
            "max_in_degree", "isolated_nodes", "self_loops", "bytes_on_disk", "seconds", "peak_rss_bytes")


_HEADLINES = {
    "partitions": ("path", "kind", "algorithm", "num_parts", "num_nodes", "num_edges", "directed", "halo_hops",
                   "replication_factor", "node_balance", "edge_balance", "checksums", "node_data", "part_sizes",
                   "bytes_on_disk"),
    "snapshots": ("path", "kind", "num_snapshots", "num_keyframes", "keyframe_every", "num_nodes", "directed",
                  "edges_per_snapshot_min", "edges_per_snapshot_mean", "edges_per_snapshot_max", "bytes_full",
                  "bytes_stored", "delta_ratio", "checksums", "bytes_on_disk"),
    "node_data": ("path", "kind", "graph", "num_nodes", "num_edges", "directed", "files", "checksums",
                  "bytes_on_disk"),
    "dynamic_partitions": ("path", "kind", "algorithm", "num_parts", "num_snapshots", "num_nodes",
                           "keyframe_every", "balance_lambda", "max_over_mean", "cut_weight", "node_replication",
                           "part_sizes", "bytes_on_disk"),
}


def configure(p) -> None:
    p.add_argument("store", metavar="PATH",
                   help="graph store (.zarr), partitioned dataset, snapshot store, dynamic partitions folder or "
                        "node data folder (graphstream dataset's)")
    add_cluster(p)
    p.set_defaults(run=run)


def store_stats(path: str, client: Client | None = None) -> dict:
    """A graph store's attributes and degree statistics; with ``client``, the degree pass runs on its cluster."""
    from ..store import degree_pass  # compiles numba kernels: not for `info --help`
    watch = Stopwatch(on_lap=phase_logger("info"))  # one progress line per phase
    store = open_store(path)
    check_node_state_fits(store.num_nodes, INFO_BYTES_PER_NODE, "info", path)  # before the degree arrays
    deg = degree_pass(store, client=client)
    watch.lap("degree pass")
    total = deg.total
    n = store.num_nodes
    result = {"kind": "graph", **store.info.to_dict()}
    result.update({
        "max_degree": int(total.max()) if n else 0,
        "mean_degree": float(total.mean()) if n else 0.0,
        "max_out_degree": int(deg.out_degree.max()) if n else 0,
        "max_in_degree": int(deg.in_degree.max()) if n else 0,
        "isolated_nodes": int(np.count_nonzero(total == 0)),
        "self_loops": deg.self_loops,
        "bytes_on_disk": _disk_bytes(path),
        "seconds": watch.seconds,
        "peak_rss_bytes": peak_rss_bytes(),
    })
    return result


def _disk_bytes(path: str) -> int | None:
    from pathlib import Path
    p = Path(path)
    if not p.is_dir():
        return None
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def partitions_info(path: str) -> dict:
    """A partitioned dataset: how it was split, its measured metrics and each part's sizes. It is opened as a
    reader opens it (every file there with its recorded size and a matching header, no data read), so a
    damaged dataset is an error here too; ``verify`` reads every byte."""
    path = path_argument(path, "path")   # reported as every handle reports it: absolute
    from ..store import open_partitions
    from ..store.partitions_manifest import REQUIRED_FILES, balance
    m = open_partitions(path).info
    parts = []
    for entry in m.parts:
        if entry.files is not None:
            names, size = sorted(entry.files), sum(d.size for d in entry.files.values())
        else:   # version 1: no file list in the manifest; the folder says
            files = [f for f in (Path(path) / entry.path).glob("*.npy") if f.is_file()]
            names, size = sorted(f.name for f in files), sum(f.stat().st_size for f in files)
        parts.append({"path": entry.path, "num_inner": entry.num_inner, "num_halo": entry.num_halo,
                      "num_edges": entry.num_edges, "num_train": entry.num_train, "bytes": size, "files": names})
    node_data = sorted({n for p in parts for n in p["files"]} - set(REQUIRED_FILES))
    # the manifest's metrics are measured from the written parts; recounted here where an older one lacks them
    local = sum(e.num_nodes for e in m.parts)
    rf = m.metrics.get("replication_factor", local / m.num_nodes if m.num_nodes else 1.0)
    inner, edges = [e.num_inner for e in m.parts], [e.num_edges for e in m.parts]
    return {
        "path": path, "kind": "partitions", "version": m.version, "algorithm": m.algorithm,
        "num_parts": m.num_parts, "num_nodes": m.num_nodes, "num_edges": m.num_edges, "directed": m.directed,
        "halo_hops": m.halo_hops, "replication_factor": rf,
        "node_balance": m.metrics.get("node_balance", balance(inner, m.num_nodes, m.num_parts)),
        "edge_balance": m.metrics.get("edge_balance", balance(edges, sum(edges), m.num_parts)),
        "checksums": m.checksums, "node_data": node_data,
        "part_sizes": {p["path"]: f"{p['num_inner']:,} inner, {p['num_halo']:,} halo, {p['num_edges']:,} edges, "
                                  f"{format_bytes(p['bytes'])}" for p in parts},
        "parts": [{k: v for k, v in p.items() if k != "files"} for p in parts],
        "params": m.params, "bytes_on_disk": _disk_bytes(path),
    }


def _snapshot_figures(store) -> dict:
    """Counts and byte totals of one snapshot store (a whole store or one dynamic part)."""
    edges = np.asarray(store.edge_counts[:], dtype=np.int64)
    totals = store.manifest.totals
    full, stored = totals.get("bytes_full"), totals.get("bytes_stored")
    return {
        "num_snapshots": store.num_snapshots, "num_keyframes": len(store.keyframes),
        "keyframe_every": store.keyframe_every, "num_nodes": store.num_nodes, "directed": store.directed,
        "edges_per_snapshot_min": int(edges.min()) if len(edges) else 0,
        "edges_per_snapshot_mean": float(edges.mean()) if len(edges) else 0.0,
        "edges_per_snapshot_max": int(edges.max()) if len(edges) else 0,
        "total_snapshot_edges": int(edges.sum()),
        # raw topology bytes: every snapshot in full against keyframes + deltas (what is stored)
        "bytes_full": full, "bytes_stored": stored,
        "delta_ratio": stored / full if full and stored is not None else None,
        "checksums": store.checksums,
    }


def snapshots_info(path: str) -> dict:
    path = path_argument(path, "path")   # reported as every handle reports it: absolute
    from ..store import open_snapshots
    store = open_snapshots(path)
    extra = store.manifest.extra
    return {"path": path, "kind": "snapshots", "version": store.manifest.version, **_snapshot_figures(store),
            "window_seconds": store.window_seconds, "edge_life": store.edge_life,
            "num_events": extra.get("num_events"), "source": extra.get("source"), "bytes_on_disk": _disk_bytes(path)}


def dynamic_info(path: str) -> dict:
    path = path_argument(path, "path")   # reported as every handle reports it: absolute
    from ..store import open_dynamic_partitions
    dp = open_dynamic_partitions(path)
    parts = []
    for entry, part in zip(dp.manifest["parts"], dp, strict=True):
        figures = _snapshot_figures(part)
        parts.append({"path": entry["path"], "num_local_nodes": part.num_local_nodes,
                      "num_owned_instances": entry.get("num_owned_instances"),
                      "total_snapshot_edges": figures["total_snapshot_edges"],
                      "bytes_stored": figures["bytes_stored"], "bytes_full": figures["bytes_full"],
                      "bytes": _disk_bytes(str(Path(path) / entry["path"]))})
    metrics = dp.metrics
    return {
        "path": path, "kind": "dynamic_partitions", "version": dp.manifest.get("version", 1),
        "algorithm": dp.algorithm, "num_parts": dp.num_parts, "num_snapshots": dp.num_snapshots,
        "num_nodes": dp.num_nodes, "keyframe_every": dp.keyframe_every,
        **{key: metrics.get(key) for key in ("balance_lambda", "max_over_mean", "cut_weight", "node_replication",
                                             "num_instances")},
        "checksums": all(part.checksums for part in dp),
        "part_sizes": {p["path"]: f"{p['num_local_nodes']:,} nodes, {p['num_owned_instances'] or 0:,} owned "
                                  f"instances, {p['total_snapshot_edges']:,} snapshot edges, {format_bytes(p['bytes'])}"
                       for p in parts},
        "parts": parts, "metrics": metrics, "params": dp.manifest.get("params", {}),
        "bytes_on_disk": _disk_bytes(path),
    }


def node_data_info(path: str) -> dict:
    """graphstream dataset's folder: its graph store's shape and its node data files' headers (no data
    read; ``verify`` checks their checksums)."""
    from ..store import open_store
    from ..store.nodedata import open_node_data
    path = path_argument(path, "path")
    store = open_store(Path(path) / "graph.zarr")
    data = open_node_data(path, store.num_nodes, require_features=False)
    return {
        "path": path, "kind": "node_data", "graph": str(store.path), "num_nodes": store.num_nodes,
        "num_edges": store.num_edges, "directed": store.directed,
        "files": {f"{name}.npy": f"{' x '.join(map(str, a.shape))} {a.dtype}" for name, a in data.arrays.items()},
        "checksums": store.checksums and data.digests is not None,
        "bytes_on_disk": _disk_bytes(path),
    }


def run(args) -> dict:
    from ..store.verify import detect_kind
    args.store = path_argument(args.store, "path")   # named absolute, found or not
    kind = detect_kind(args.store)
    if kind != "graph":   # the other kinds are described from their manifests: nothing to distribute
        if not ClusterConfig.from_args(args).in_process:
            log(f"info of {kind.replace('_', ' ')}: no cluster used (described from the manifest, not the edges)")
        describe = {"partitions": partitions_info, "snapshots": snapshots_info, "dynamic_partitions": dynamic_info,
                    "node_data": node_data_info}
        return describe[kind](args.store)
    cluster = cluster_config(args, "store")
    with open_client(cluster) as client:
        result = store_stats(args.store, client)
        result.update(cluster_report(cluster, client))
    return result
