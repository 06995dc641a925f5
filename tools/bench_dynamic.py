#!/usr/bin/env python
"""Benchmark of the dynamic-graph path; prints ONE JSON object on stdout.

1. Delta storage and transfer volume vs full snapshots on CollegeMsg and
   Bitcoin OTC (edge life 1 and 4 windows) and on generated R-MAT graphs
   with 1%, 10% and 50% churn per step.
2. PGC vs the snapshot and sequence baselines (balance lambda, cut spatial
   and temporal edges) on the real datasets.
3. A generated dynamic graph with 100M+ events: generation, snapshot
   building and PGC, each in its own process (wall time, peak RSS).

Run under the shared lock:  flock /tmp/graphstream-bench.lock .venv/bin/python tools/bench_dynamic.py
Data goes to /tmp/bench_dynamic (override with --work). --skip-big leaves out part 3.
A partial result is kept in WORK/partial.json while it runs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "datasets" / "temporal"
DAY = 86400


def child(code: str, timeout: float | None = None) -> dict:
    """Run ``code`` in a fresh interpreter (its own peak RSS); it prints one JSON object."""
    env = dict(os.environ, GRAPHSTREAM_PROGRESS="0")
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=timeout)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"rc={proc.returncode}",
                "wall_seconds": wall}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall_seconds"] = wall
    return out


def load_events(name: str):
    if name.endswith(".csv"):
        d = np.loadtxt(DATA / name, dtype=np.int64, delimiter=",")
        return d[:, 0] - 1, d[:, 1] - 1, d[:, 3]
    d = np.loadtxt(DATA / name, dtype=np.int64)
    return d[:, 0] - 1, d[:, 1] - 1, d[:, 2]


def delta_figures(res) -> dict:
    d = res.to_dict()
    keep = ("num_snapshots", "total_snapshot_edges", "total_added", "total_removed", "bytes_full",
            "bytes_stored", "storage_ratio", "transfer_bytes_full", "transfer_bytes_delta", "transfer_ratio",
            "transfer_bytes_adaptive", "bytes_on_disk", "seconds")
    out = {k: d[k] for k in keep}
    out["adaptive_transfer_ratio"] = d["transfer_bytes_full"] / d["transfer_bytes_adaptive"]
    out["mean_churn"] = (d["total_added"] + d["total_removed"]) / 2 / max(1, d["total_snapshot_edges"] /
                                                                        max(1, d["num_snapshots"]))
    out["mean_churn"] /= max(1, d["num_snapshots"] - 1)
    return out


def partition_figures(snap_path: Path, k: int) -> dict:
    from graphstream.dynamic import open_snapshots
    from graphstream.dynamic.partition import partition_snapshots
    from graphstream.dynamic.pgc import PGCConfig
    out = {}
    for algo in ("pgc", "snapshot", "sequence"):
        res = partition_snapshots(open_snapshots(snap_path), PGCConfig(num_parts=k, seed=0), algo)
        m = res.metrics
        out[algo] = {key: m.get(key) for key in (
            "balance_lambda", "max_over_mean", "cut_spatial_edges", "total_spatial_edges", "cut_temporal_edges",
            "total_temporal_edges", "cut_weight", "num_instances", "num_chunks", "lp_rounds", "seconds")}
        res.graph.arrays.close()
    return out


def real_datasets(work: Path) -> dict:
    from graphstream import GraphWriter
    from graphstream.dynamic import build_snapshots
    results = {}
    for name, window in (("CollegeMsg.txt", DAY), ("soc-sign-bitcoinotc.csv", 7 * DAY)):
        if not (DATA / name).exists():
            results[name] = {"skipped": f"{DATA / name} absent"}
            continue
        src, dst, tm = load_events(name)
        events = work / f"{name}.zarr"
        with GraphWriter(events, with_time=True, overwrite=True) as w:
            w.append(src, dst, tm)
        entry = {"events": int(len(src)), "window_seconds": window}
        for life in (1, 4):
            res = build_snapshots(events, work / f"{name}.L{life}.zarr", window=window, edge_life=life,
                                  keyframe_every=8, overwrite=True)
            entry[f"edge_life_{life}"] = delta_figures(res)
        # partitioning on weekly (CollegeMsg) / monthly (Bitcoin) snapshots with edge life 4
        pwin = 7 * DAY if name.startswith("College") else 30 * DAY
        res = build_snapshots(events, work / f"{name}.part.zarr", window=pwin, edge_life=4, keyframe_every=8,
                              overwrite=True)
        entry["partition"] = {"window_seconds": pwin, "edge_life": 4, "num_snapshots": res.num_snapshots}
        for k in (4, 8):
            entry["partition"][f"k{k}"] = partition_figures(work / f"{name}.part.zarr", k)
        results[name.split(".")[0]] = entry
    return results


def generated_churn(work: Path) -> dict:
    from graphstream.dynamic import build_snapshots
    from graphstream.dynamic.generate import DynamicRmatConfig, generate_dynamic
    out = {}
    for churn in (0.01, 0.10, 0.50):
        cfg = DynamicRmatConfig(scale=18, edges_per_snapshot=1_000_000, num_snapshots=10, churn=churn, seed=1)
        ev = work / f"rmat-churn{churn}.zarr"
        generate_dynamic(ev, cfg, overwrite=True)
        res = build_snapshots(ev, work / f"rmat-churn{churn}.snaps.zarr", window=1, keyframe_every=8,
                              overwrite=True)
        fig = delta_figures(res)
        fig["config"] = cfg.to_dict()
        fig.update(rebuild_timing(work / f"rmat-churn{churn}.snaps.zarr"))
        out[f"churn_{churn}"] = fig
        shutil.rmtree(ev)
    return out


def rebuild_timing(path: Path) -> dict:
    """CPU (numpy) cost of the device-style rebuild vs copying the next snapshot."""
    from graphstream.dynamic import apply_delta_vectorized, open_snapshots
    snaps = open_snapshots(path)
    prev = snaps.snapshot_keys(0)[0]
    t_rebuild = t_copy = 0.0
    for t in range(1, len(snaps)):
        d = snaps.key_delta(t)
        cur = snaps.snapshot_keys(t)[0]
        a = time.perf_counter()
        rebuilt = apply_delta_vectorized(prev, d.removed_pos, d.added_keys)
        b = time.perf_counter()
        _copy = cur.copy()
        c = time.perf_counter()
        assert np.array_equal(rebuilt, cur)
        t_rebuild += b - a
        t_copy += c - b
        prev = cur
    return {"cpu_rebuild_seconds": t_rebuild, "cpu_full_copy_seconds": t_copy}


def part_sequences(work: Path) -> dict:
    """Per-part snapshot sequences (--out) of the 10%-churn R-MAT graph, k = 4, in a child process."""
    snaps = work / "rmat-churn0.1.snaps.zarr"
    if not snaps.exists():
        return {"skipped": f"{snaps} absent (run the churn part first)"}
    code = f"""
import json
from graphstream.dynamic.partition import PGCConfig, partition_snapshot_store
for algo in ("pgc", "snapshot", "sequence"):
    r = partition_snapshot_store({str(snaps)!r}, PGCConfig(num_parts=4, seed=0), algo=algo,
                                 out={str(work / 'parts')!r} + algo, overwrite=True)
    print(json.dumps({{"algo": algo, **{{k: r[k] for k in ("balance_lambda", "cut_spatial_edges", "cut_temporal_edges",
        "node_replication", "transfer_bytes_full", "transfer_bytes_delta", "seconds", "peak_rss_bytes")}}}}))
"""
    env = dict(os.environ, GRAPHSTREAM_PROGRESS="0")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    out = {}
    for line in proc.stdout.strip().splitlines():
        d = json.loads(line)
        out[d.pop("algo")] = d
    for algo in out:
        shutil.rmtree(work / f"parts{algo}", ignore_errors=True)
    return out


BIG_GEN = """
import json, time
from graphstream.dynamic.generate import DynamicRmatConfig, generate_dynamic
from graphstream._resources import peak_rss_bytes
cfg = DynamicRmatConfig(scale={scale}, edges_per_snapshot={m}, num_snapshots={t}, churn={churn}, seed=2)
a = time.perf_counter()
st = generate_dynamic({events!r}, cfg, overwrite=True)
print(json.dumps({{"events": st.num_edges, "num_nodes": st.num_nodes, "seconds": time.perf_counter() - a,
                  "peak_rss_bytes": peak_rss_bytes(), "config": cfg.to_dict()}}))
"""

BIG_SNAP = """
import json
from graphstream.dynamic import build_snapshots
r = build_snapshots({events!r}, {snaps!r}, window=1, keyframe_every=8, overwrite=True{extra})
print(json.dumps(r.to_dict()))
"""

BIG_PGC = """
import json
from graphstream.dynamic import open_snapshots
from graphstream.dynamic.pgc import PGCConfig, pgc
r = pgc(open_snapshots({snaps!r}), PGCConfig(num_parts={k}, rounds={rounds}, memory_budget={budget},
                                            scratch_dir={scratch!r}))
m = dict(r.metrics); m.pop("lp_moved_list", None)
r.graph.arrays.close()
print(json.dumps(m))
"""


def big(work: Path, args, partial: dict, save) -> dict:
    out = {}
    partial["big"] = out
    events = str(work / "big-events.zarr")
    snaps = str(work / "big-snaps.zarr")
    shuf = str(work / "big-snaps-unsorted.zarr")
    if args.reuse_big and Path(snaps).exists() and isinstance(args.reuse_big, str):
        previous = json.loads(Path(args.reuse_big).read_text())["big"]
        out["generate"], out["snapshots"] = previous["generate"], previous["snapshots"]
        out["generate"]["reused_from"] = args.reuse_big
    else:
        out["generate"] = child(BIG_GEN.format(scale=args.big_scale, m=args.big_edges, t=args.big_snapshots,
                                               churn=0.1, events=events))
        save()
        if "error" in out["generate"]:
            return out
        out["snapshots"] = child(BIG_SNAP.format(events=events, snaps=snaps, extra=""))
        save()
        if "error" in out["snapshots"]:
            return out
    out["pgc"] = child(BIG_PGC.format(snaps=snaps, k=8, rounds=args.big_rounds, budget=args.big_budget,
                                      scratch=str(work)))
    save()
    if args.big_unsorted:
        # the same events checked for order, then bucketed: forced through the external path
        out["snapshots_bucketed"] = child(BIG_SNAP.format(events=events, snaps=shuf,
                                                          extra=", assume_sorted=False"))
        save()
        shutil.rmtree(shuf, ignore_errors=True)
    return out


def _mb(x) -> str:
    return f"{x / 1e6:.2f} MB"


def markdown(result: dict) -> str:
    """The figures of a run as markdown tables (for docs/dynamic.md)."""
    lines = []
    real = result.get("real", {})
    if real:
        lines += ["### Delta storage and transfer, real datasets (keyframe every 8, int32 ids)", "",
                  "| dataset | window | edge life | snapshots | full | stored (kf + deltas) | full / stored "
                  "| transfer full / delta | adaptive | churn per step | on disk (zstd) |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, e in real.items():
            if "skipped" in e:
                continue
            for life in (1, 4):
                f = e[f"edge_life_{life}"]
                lines.append(f"| {name} | {e['window_seconds'] / 86400:g} d | {life} | {f['num_snapshots']} | "
                             f"{_mb(f['bytes_full'])} | {_mb(f['bytes_stored'])} | {f['storage_ratio']:.2f}x | "
                             f"{f['transfer_ratio']:.2f}x | {f['adaptive_transfer_ratio']:.2f}x | "
                             f"{f['mean_churn']:.1%} | {_mb(f['bytes_on_disk'])} |")
        lines += ["", "### PGC vs baselines (edge life 4; workload = 1 + spatial degree per instance)", "",
                  "| dataset | k | algorithm | lambda | cut spatial | cut temporal | cut weight (1, 2) | chunks "
                  "| seconds |", "|---|---|---|---|---|---|---|---|---|"]
        for name, e in real.items():
            if "skipped" in e:
                continue
            part = e["partition"]
            for k in ("k4", "k8"):
                for algo, m in part[k].items():
                    lam = "inf" if m["balance_lambda"] is None else f"{m['balance_lambda']:.3f}"
                    lines.append(
                        f"| {name} ({part['num_snapshots']} snapshots of {part['window_seconds'] / 86400:g} d) "
                        f"| {k[1:]} | {algo} | {lam} | {m['cut_spatial_edges']} / {m['total_spatial_edges']} | "
                        f"{m['cut_temporal_edges']} / {m['total_temporal_edges']} | {m['cut_weight']:.0f} | "
                        f"{m['num_chunks'] if m['num_chunks'] is not None else '-'} | {m['seconds']:.2f} |")
    churn = result.get("generated_churn", {})
    if churn:
        lines += ["", "### Generated R-MAT (scale 18, 1M edges per step, 10 steps, keyframe every 8)", "",
                  "| churn asked | measured | full | stored | full / stored | transfer full / delta "
                  "| numpy rebuild vs copy (9 steps) | build seconds |", "|---|---|---|---|---|---|---|---|"]
        for key, f in churn.items():
            lines.append(f"| {float(key.split('_')[1]):.0%} | {f['mean_churn']:.1%} | {_mb(f['bytes_full'])} | "
                         f"{_mb(f['bytes_stored'])} | {f['storage_ratio']:.2f}x | {f['transfer_ratio']:.2f}x | "
                         f"{f['cpu_rebuild_seconds']:.3f} s vs {f['cpu_full_copy_seconds']:.3f} s | "
                         f"{f['seconds']:.1f} |")
    parts = result.get("part_sequences", {})
    if parts and "error" not in parts and "skipped" not in parts:
        lines += ["", "### Per-part sequences (--out), R-MAT 10% churn, k = 4", "",
                  "| algorithm | lambda | node replication | transfer full | transfer delta | seconds (incl. write) "
                  "| peak RSS |", "|---|---|---|---|---|---|---|"]
        for algo, m in parts.items():
            lines.append(f"| {algo} | {m['balance_lambda']:.3f} | {m['node_replication']:.2f} | "
                         f"{_mb(m['transfer_bytes_full'])} | {_mb(m['transfer_bytes_delta'])} | {m['seconds']:.1f} | "
                         f"{_mb(m['peak_rss_bytes'])} |")
    big = result.get("big", {})
    if big:
        lines += ["", "### 100M+ events (each phase in its own process)", "",
                  "| phase | wall seconds | peak RSS | notes |", "|---|---|---|---|"]
        g = big.get("generate", {})
        if "events" in g:
            c = g["config"]
            lines.append(f"| generate | {g['seconds']:.1f} | {_mb(g['peak_rss_bytes'])} | {g['events']:,} events, "
                         f"2^{c['scale']} nodes, {c['num_snapshots']} steps of {c['edges_per_snapshot']:,} edges, "
                         f"churn {c['churn']:.0%} |")
        for key, label in (("snapshots", "snapshots (sorted, one pass)"),
                           ("snapshots_bucketed", "snapshots (forced external bucketing)")):
            f = big.get(key, {})
            if "num_snapshots" in f:
                lines.append(f"| {label} | {f['seconds']:.1f} | {_mb(f['peak_rss_bytes'])} | "
                             f"{f['num_events'] / f['seconds'] / 1e6:.2f} M events/s; stored "
                             f"{_mb(f['bytes_stored'])} vs full {_mb(f['bytes_full'])}; transfer "
                             f"{f['transfer_ratio']:.2f}x less |")
            elif f:
                lines.append(f"| {label} | - | - | did not finish: {f.get('error')} |")
        m = big.get("pgc", {})
        if "num_instances" in m:
            ph = ", ".join(f"{k} {v:.0f} s" for k, v in m["phases"].items())
            lines.append(f"| PGC k=8, {m['lp_rounds']} LP rounds | {m['seconds']:.1f} | {_mb(m['peak_rss_bytes'])} | "
                         f"{m['num_instances']:,} instances, {m['num_chunks']:,} chunks, lambda "
                         f"{m['balance_lambda']:.3f}, "
                         f"cut spatial {m['cut_spatial_edges'] / m['total_spatial_edges']:.1%}, "
                         f"temporal {m['cut_temporal_edges'] / m['total_temporal_edges']:.1%}; labels memory-mapped: "
                         f"{m['labels_memory_mapped']}; {ph} |")
        elif m:
            lines.append(f"| PGC | - | - | did not finish: {m.get('error')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="/tmp/bench_dynamic")
    p.add_argument("--skip-big", action="store_true")
    p.add_argument("--only-big", action="store_true")
    p.add_argument("--only-parts", action="store_true", help="only the per-part sequences figure")
    p.add_argument("--big-scale", type=int, default=20)
    p.add_argument("--big-edges", type=int, default=2_000_000, help="edges per snapshot")
    p.add_argument("--big-snapshots", type=int, default=50)
    p.add_argument("--big-rounds", type=int, default=10, help="label propagation rounds on the big graph")
    p.add_argument("--reuse-big", default=None, metavar="JSON",
                   help="reuse the big events and snapshot store of an earlier run (its JSON output)")
    p.add_argument("--big-budget", type=int, default=256 << 20,
                   help="bytes of O(instances) arrays kept in RAM (beyond: memory-mapped)")
    p.add_argument("--big-unsorted", action="store_true", help="also time the external bucketing path")
    p.add_argument("--markdown", default=None, metavar="JSON", help="print the tables of an earlier run and exit")
    args = p.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())), end="")
        return
    os.environ.setdefault("GRAPHSTREAM_PROGRESS", "0")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {"machine": {"cpus": os.cpu_count()}, "work": str(work)}

    def save() -> None:
        (work / "partial.json").write_text(json.dumps(result, indent=1))

    t = time.perf_counter()
    if args.only_parts:
        result["part_sequences"] = part_sequences(work)
        print(json.dumps(result))
        return
    if not args.only_big:
        result["real"] = real_datasets(work)
        save()
        result["generated_churn"] = generated_churn(work)
        save()
        result["part_sequences"] = part_sequences(work)
        save()
    if not args.skip_big:
        big(work, args, result, save)
    result["total_seconds"] = time.perf_counter() - t
    save()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
