"""Readable summaries for tools/demo.sh: one line per step from the command's saved JSON,
and a closing table of what was produced with the headline figures.

    python tools/demo_report.py step NAME FILE.json     # one line for the step NAME
    python tools/demo_report.py final WORK              # outputs table + headline figures

The demo keeps every command's full ``--json`` output under WORK/json/ (the
figures a script would read); this prints what a person reads.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def size(n: float | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def rate(n: float | None, what: str = "edges") -> str:
    if not n:
        return "?"
    return f"{n / 1e6:.1f}M {what}/s" if n >= 1e6 else f"{n / 1e3:.0f}k {what}/s"


def num(n) -> str:
    return f"{n:,}" if isinstance(n, int) else str(n)


def _accuracy(d: dict) -> tuple[str, float | None]:
    """The headline test metric a train run reports (name, value)."""
    for key in ("test_roc_auc", "test_auc", "test_accuracy", "test_macro_f1"):
        if isinstance(d.get(key), (int, float)):
            return key.removeprefix("test_"), float(d[key])
    return "test metric", None


def step_line(name: str, d: dict) -> str:
    secs = f"{d.get('seconds', 0):.1f} s" if isinstance(d.get("seconds"), (int, float)) else ""
    if name in ("generate", "ingest"):
        return (f"{d.get('path')}: {num(d.get('num_nodes'))} nodes, {num(d.get('num_edges'))} edges, "
                f"{'directed' if d.get('directed') else 'undirected'}, {secs} "
                f"({rate(d.get('edges_per_second'))})")
    if name == "info":
        return (f"degrees: max {num(d.get('max_degree'))}, mean {d.get('mean_degree', 0):.1f}, "
                f"{num(d.get('isolated_nodes'))} isolated nodes; {size(d.get('bytes_on_disk'))} on disk")
    if name == "verify":
        return (f"{d.get('path')}: {'OK' if d.get('ok') else 'DAMAGED'} ({d.get('kind')}, "
                f"{num(d.get('chunks_checked', 0))} chunks and {num(d.get('files_checked', 0))} files checked, "
                f"{size(d.get('bytes_checked'))})")
    if name == "partition" and "node_replication" in d:   # a snapshot store: PGC or its baselines
        return (f"{d.get('algorithm')} k={d.get('num_parts')}: node replication {d['node_replication']:.3f}, "
                f"workload max/mean {d.get('max_over_mean', 0):.3f}, {secs}")
    if name == "partition":
        return (f"{d.get('algorithm')} k={d.get('k')}: replication factor {d.get('replication_factor', 0):.3f}, "
                f"node balance {d.get('node_balance', 0):.3f}, {secs}")
    if name == "dataset":
        return f"{d.get('name', '')} {num(d.get('num_nodes'))} nodes, {num(d.get('num_edges'))} edges, {secs}"
    if name == "snapshots":
        return (f"{d.get('num_snapshots')} snapshots; deltas store {d.get('storage_ratio', 0):.1f}x less than full "
                f"copies and ship {d.get('transfer_ratio', 0):.1f}x less; {secs}")
    if name == "train":
        metric, value = _accuracy(d)
        shown = f"{value:.4f}" if value is not None else "not evaluated"
        return f"{d.get('model', '')} {metric} {shown}, {secs}"
    return secs


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _disk(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


WHAT = {
    "rmat.zarr": "generated R-MAT graph store",
    "rmat-parts": "R-MAT partitioned dataset (8 parts)",
    "notredame.zarr": "web-NotreDame graph store",
    "cora": "Cora graph store + features/labels/masks",
    "cora-parts": "Cora partitioned dataset (4 parts, node data split)",
    "collegemsg.zarr": "CollegeMsg timestamped graph store",
    "collegemsg-snap.zarr": "CollegeMsg snapshot store (keyframes + deltas)",
    "collegemsg-parts": "CollegeMsg per-part snapshot sequences (PGC)",
    "json": "every command's full --json output",
}


def final(work: Path) -> str:
    lines = ["", "What was produced:", ""]
    rows = [(str(work / name), size(_disk(work / name)), what) for name, what in WHAT.items() if (work / name).exists()]
    width = max((len(r[0]) for r in rows), default=10)
    lines += [f"  {p:<{width}}  {s:>9}  {w}" for p, s, w in rows]
    lines += ["", "Headline figures:", ""]
    rmat = _load(work / "json" / "3-partition.json")
    if isinstance(rmat.get("replication_factor"), (int, float)):
        lines.append(f"  R-MAT, k={rmat.get('k')}, {rmat.get('algorithm')}: replication factor "
                     f"{rmat['replication_factor']:.3f}, node balance {rmat.get('node_balance', 0):.3f}")
    rfs = {f.stem.split("-", 2)[-1]: _load(f).get("replication_factor")
           for f in sorted((work / "json").glob("5-partition-*.json"))}
    if rfs:
        lines.append("  web-NotreDame, k=8, replication factor (lower is better): "
                     + ", ".join(f"{a} {v:.3f}" for a, v in rfs.items() if isinstance(v, (int, float))))
    averaged, central = _load(work / "json" / "6-train-averaged.json"), _load(work / "json" / "6-train-central.json")
    (name, a), (_, c) = _accuracy(averaged), _accuracy(central)
    if a is not None and c is not None:
        lines.append(f"  Cora GCN {name}: averaged over 4 parts {a:.4f} vs centralised {c:.4f} ({a - c:+.4f})")
    snap = _load(work / "json" / "7-snapshots.json")
    if snap.get("transfer_bytes_full"):
        lines.append(f"  CollegeMsg snapshots: deltas ship {size(snap['transfer_bytes_delta'])} instead of "
                     f"{size(snap['transfer_bytes_full'])} ({snap['transfer_ratio']:.1f}x less)")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "step":
        print(f"   {step_line(argv[1], _load(Path(argv[2])))}")
        return 0
    if len(argv) == 2 and argv[0] == "final":
        print(final(Path(argv[1])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
