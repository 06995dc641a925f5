"""Partitioning a snapshot store and writing per-part snapshot sequences.

``graphstream partition SNAP.zarr -k K --algo pgc|snapshot|sequence [--out DIR]``
lands in :func:`partition_snapshot_store`. With ``--out DIR`` every part gets
its own snapshot store (keyframes + deltas, same format as the input) over
local node ids: per snapshot t, every edge of t with an endpoint instance
owned by the part, i.e. the owned instances with their full spatial
neighbourhood (the halo), plus the list of owned nodes of t. The folder
(format "graphstream.dynamic_partitions") is written into a temporary
sibling and renamed into place.

Layout of DIR::

    manifest.json        format, params, metrics, parts: [{path, num_nodes, ...}]
    part-00000/          snapshot store over local ids 0..n_p-1, plus
                         global_ids (n_p,) sorted: local id -> global node id
                         inner, inner_offsets: owned local ids per snapshot

Local ids are ranks in the sorted ``global_ids``, so a part's edges keep the
canonical (src, dst) order of the global snapshot.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from .._atomic import atomic_dir, check_output, for_workers, recorded_path
from .._resources import Stopwatch, peak_rss_bytes
from ..errors import ParameterError
from ..kernels.bitsets import has_bit, new_bitsets, set_bit
from ..store.delta import encode_keys
from ..store.dynamic_partitions import (  # noqa: F401 (importable here as before)
    FORMAT,
    PARTITIONING_KEY,
    VERSION,
    DynamicPart,
    DynamicPartitions,
    DynamicPartitionsManifest,
    open_dynamic_partitions,
    partitioning_id,
)
from ..store.integrity import seal
from ..store.snapshots import SnapshotStore, SnapshotWriter, open_snapshots
from .baselines import sequence_partition, snapshot_partition
from .pgc import DynamicPartitionResult, PGCConfig, fit_cost_model, pgc

if TYPE_CHECKING:
    from distributed import Client

ALGORITHMS = {"pgc": pgc, "snapshot": snapshot_partition, "sequence": sequence_partition}


# -- per-part sequences -----------------------------------------------------------------

@njit(cache=True)
def _mark_members(src, dst, local_of, active, base, inst_part, bits):
    """Bit p of node v: v is owned by p at some t, or in the halo of p's instances."""
    for j in range(active.shape[0]):
        set_bit(bits, active[j], inst_part[base + j])
    for e in range(src.shape[0]):
        ps = inst_part[base + local_of[src[e]]]
        pd = inst_part[base + local_of[dst[e]]]
        if ps != pd:
            set_bit(bits, dst[e], ps)
            set_bit(bits, src[e], pd)


@njit(cache=True)
def _route_edges(src, dst, local_of, base, inst_part, k, offsets, out):
    """Edge indices grouped by part (an edge goes to the parts of both its
    endpoint instances), each group in edge order."""
    counts = np.zeros(k + 1, dtype=np.int64)
    for e in range(src.shape[0]):
        ps = inst_part[base + local_of[src[e]]]
        pd = inst_part[base + local_of[dst[e]]]
        counts[ps + 1] += 1
        if pd != ps:
            counts[pd + 1] += 1
    for p in range(k):
        counts[p + 1] += counts[p]
    for p in range(k + 1):
        offsets[p] = counts[p]
    fill = counts[:k].copy()
    for e in range(src.shape[0]):
        ps = inst_part[base + local_of[src[e]]]
        pd = inst_part[base + local_of[dst[e]]]
        out[fill[ps]] = e
        fill[ps] += 1
        if pd != ps:
            out[fill[pd]] = e
            fill[pd] += 1


@njit(cache=True)
def _members_of(bits, p):
    n = 0
    for v in range(bits.shape[0]):
        if has_bit(bits, v, p):
            n += 1
    out = np.empty(n, dtype=np.int64)
    n = 0
    for v in range(bits.shape[0]):
        if has_bit(bits, v, p):
            out[n] = v
            n += 1
    return out


def write_part_sequences(result: DynamicPartitionResult, out: str | os.PathLike, *, overwrite: bool = False,
                         extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write per-part snapshot sequences of ``result`` into ``out`` (atomically)."""
    watch = Stopwatch()
    graph, inst_part = result.graph, result.inst_part
    snaps = graph.snaps
    k = result.config.num_parts
    # pass a: which global nodes each part needs (owned at some t, or halo)
    bits = new_bitsets(snaps.num_nodes, k)
    for s in graph.snapshots("part members"):
        _mark_members(s.src, s.dst, graph.local_of, s.active, s.base, inst_part, bits)
    members = [_members_of(bits, p) for p in range(k)]
    num_active = int(np.count_nonzero((bits != 0).any(axis=1)))
    del bits
    parts_meta = []
    partitioning = partitioning_id(dict(snaps.attrs), result.algorithm, _config_dict(result.config))
    with atomic_dir(out, overwrite=overwrite) as tmp:
        writers = []
        for p in range(k):
            w = SnapshotWriter(tmp / f"part-{p:05d}", num_nodes=max(len(members[p]), 1),
                               keyframe_every=snaps.keyframe_every, directed=snaps.directed, node_lists=True,
                               attrs={"part": p, "num_parts": k, "global_num_nodes": snaps.num_nodes,
                                      PARTITIONING_KEY: partitioning,
                                      "t0": snaps.t0, "window_seconds": snaps.window_seconds,
                                      "edge_life": snaps.edge_life})
            w.write_array("global_ids", members[p].astype(snaps.id_dtype))
            writers.append(w)
        owned_instances = np.zeros(k, dtype=np.int64)
        offsets = np.zeros(k + 1, dtype=np.int64)
        # pass b: route each snapshot's edges to the parts, map to local ids
        for s in graph.snapshots("part sequences"):
            routed = np.empty(2 * len(s.src), dtype=np.int64)
            _route_edges(s.src, s.dst, graph.local_of, s.base, inst_part, k, offsets, routed)
            owner = inst_part[s.base:s.base + len(s.active)]
            for p in range(k):
                e = routed[offsets[p]:offsets[p + 1]]
                g = members[p]
                lsrc = np.searchsorted(g, s.src[e])
                ldst = np.searchsorted(g, s.dst[e])
                owned = s.active[owner == p]
                owned_instances[p] += len(owned)
                writers[p].append(encode_keys(lsrc, ldst, writers[p].num_nodes), s.counts[e],
                                  inner=np.searchsorted(g, owned))
        for p, w in enumerate(writers):
            w.close()
            t = w.totals
            parts_meta.append({
                "path": f"part-{p:05d}", "num_nodes": int(len(members[p])),
                "num_owned_instances": int(owned_instances[p]), "total_snapshot_edges": t.total_edges,
                "bytes_full": t.bytes_full, "bytes_stored": t.bytes_stored,
                "transfer_bytes_full": t.transfer_bytes_full, "transfer_bytes_delta": t.transfer_bytes_delta,
                "transfer_bytes_adaptive": t.transfer_bytes_adaptive})
        # owned + halo nodes over all parts / nodes active at some time
        node_rf = sum(m["num_nodes"] for m in parts_meta) / max(1, num_active)
        manifest = {
            "format": FORMAT, "version": VERSION, "algorithm": result.algorithm,
            "params": _config_dict(result.config), "num_parts": k, "num_snapshots": snaps.num_snapshots,
            "num_nodes": snaps.num_nodes, "directed": snaps.directed, "keyframe_every": snaps.keyframe_every,
            "source": recorded_path(snaps.path), PARTITIONING_KEY: partitioning,
            "metrics": {**_json_metrics(result.metrics), "node_replication": node_rf,
                        "write_seconds": watch.seconds},
            "parts": parts_meta,
        }
        if extra:
            manifest.update(extra)
        # validated like any reader would (paths inside the folder) before it is written
        (tmp / "manifest.json").write_text(DynamicPartitionsManifest.from_dict(seal(manifest), str(out)).to_json())
    return manifest


def _config_dict(config: PGCConfig) -> dict[str, Any]:
    return {f: getattr(config, f) for f in config.__dataclass_fields__}


def _json_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items()}


# -- partitioning a snapshot store ------------------------------------------------------------

def with_fitted_costs(config: PGCConfig, feature_dim: int = 64) -> PGCConfig:
    """``config`` with the workload model's costs fitted from measured timings
    (the spec's "linear fit": one GCN-style layer timed on this machine)."""
    instance_cost, edge_cost = fit_cost_model(feature_dim=feature_dim)
    return replace(config, instance_cost=instance_cost, edge_cost=edge_cost)


def partition_snapshots(snaps: SnapshotStore | str | os.PathLike, config: PGCConfig,
                        algo: str = "pgc") -> DynamicPartitionResult:
    """Run one of pgc / snapshot / sequence on a snapshot store."""
    if algo not in ALGORITHMS:
        raise ParameterError(f"--algo {algo!r} does not apply to snapshot stores; "
                             f"use one of {', '.join(ALGORITHMS)}")
    if not isinstance(snaps, SnapshotStore):
        snaps = open_snapshots(snaps)
    if config.num_parts > snaps.num_nodes:   # as for a graph store: parts that could hold no node
        raise ParameterError(f"k = {config.num_parts} exceeds the number of nodes ({snaps.num_nodes}) of {snaps.path}")
    return ALGORITHMS[algo](snaps, config)


def partition_snapshot_store(store: str | os.PathLike, config: PGCConfig, *, algo: str = "pgc",
                             out: str | os.PathLike | None = None, overwrite: bool = False,
                             client: Client | None = None) -> dict[str, Any]:
    """Partition a snapshot store and, with ``out``, write the per-part sequences; the report.

    What ``graphstream partition SNAP.zarr -k K --algo pgc|snapshot|sequence [--out DIR]`` runs.
    ``client`` (a ``distributed.Client``): the whole run is one task on one worker of its cluster
    (PGC's label propagation follows snapshot order and its chunk assignment is greedy), writing
    ``out`` into a temporary sibling that this process holds and swaps in
    (:func:`graphstream.cluster.output_for_tasks`).
    Same result; ``seconds`` and ``peak_rss_bytes`` are the worker's.
    """
    if algo not in ALGORITHMS:
        raise ParameterError(f"--algo {algo!r} does not apply to snapshot stores; "
                             f"use one of {', '.join(ALGORITHMS)}")
    if not isinstance(config, PGCConfig):
        raise ParameterError(f"config must be a PGCConfig, got {type(config).__name__}")
    if client is not None:   # the workers' paths
        store, out = for_workers(store), for_workers(out)
    if out is not None:
        check_output(out, overwrite, inputs={"snapshot store": store})  # fail before the long part
    if client is not None:
        from ..cluster import check_visible, output_for_tasks, run_task
        if out is None:
            check_visible(client, store)
            return run_task(client, f"partition {algo}", partition_snapshot_store, str(store), config, algo=algo)
        with output_for_tasks(client, out, overwrite, inputs=(store,)) as tmp:
            report = run_task(client, f"partition {algo}", partition_snapshot_store, str(store), config, algo=algo,
                              out=str(tmp), overwrite=True)
        report["out"] = str(out)
        return report
    watch = Stopwatch()
    snaps = open_snapshots(store)
    result = partition_snapshots(snaps, config, algo)
    try:
        report = {"store": snaps.path, "algorithm": algo, "num_parts": config.num_parts,
                  "num_snapshots": snaps.num_snapshots, "num_nodes": snaps.num_nodes,
                  "instance_cost": config.instance_cost, "edge_cost": config.edge_cost}
        report.update(result.metrics)
        if out is not None:
            manifest = write_part_sequences(result, out, overwrite=overwrite)
            report["out"] = str(out)
            report["node_replication"] = manifest["metrics"]["node_replication"]
            parts = manifest["parts"]
            report["transfer_bytes_full"] = sum(p["transfer_bytes_full"] for p in parts)
            report["transfer_bytes_delta"] = sum(p["transfer_bytes_delta"] for p in parts)
        report["seconds"] = watch.seconds
        report["peak_rss_bytes"] = peak_rss_bytes()
    finally:
        result.graph.arrays.close()
    return report

