"""Trainer benchmark: prints ONE JSON object on stdout.

Sections (``--sections``, comma separated; default all):

- ``accuracy``: GCN test accuracy, centralised vs averaged (2 gloo workers,
  4 SPRING parts), sync every epoch and every 10 epochs, mean of 3 seeds, on
  Cora, Citeseer and MUSAE facebook: the correctness bar of the trainer spec.
- ``models``: epoch time and test accuracy of GCN, GraphSAGE and GAT,
  centralised vs averaged, full batch and mini-batch (one seed), per dataset.
- ``transfer``: host -> device bytes and seconds, full snapshots vs
  keyframe + deltas, on CollegeMsg (edge life 4) and generated R-MAT graphs
  with 1% and 10% churn. Bytes do not need a GPU; times are reported for the
  device used (on CPU the "copy" is a memory copy: labelled, not a GPU figure).
- ``gpu``: a scale-22 R-MAT graph with random features, epoch time on CUDA;
  skipped with a reason without CUDA.

Run: ``.venv/bin/python tools/bench_train.py``.
Scratch data goes to ``--work`` (default /tmp/graphstream-bench-train).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"


def log(msg: str) -> None:
    print(f"bench_train: {msg}", file=sys.stderr, flush=True)


def gs(*args) -> dict:
    proc = subprocess.run([sys.executable, "-m", "graphstream", *map(str, args), "--json"],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "GRAPHSTREAM_PROGRESS": "0"})
    if proc.returncode != 0:
        raise RuntimeError(f"graphstream {' '.join(map(str, args))}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def parts_of(work: Path, name: str, k: int = 4, algo: str = "spring") -> Path:
    out = work / f"{name}-{algo}{k}"
    if not (out / "manifest.json").exists():
        if not (work / name / "graph.zarr").exists():
            gs("dataset", name, work / name, "--root", DATASETS)
        gs("partition", work / name / "graph.zarr", "-k", k, "--algo", algo, "--out", out, "--nodes", work / name,
           "--overwrite")
    return out


def accuracy_section(work: Path, datasets: list[str], seeds: tuple[int, ...], epochs: dict[str, int],
                     hidden: int) -> dict:
    from trainer.data import open_parts
    from trainer.train import TrainConfig, run_training
    out = {}
    for name in datasets:
        folder = parts_of(work, name)
        parts = open_parts(folder)
        base = TrainConfig(model="gcn", hidden=hidden, epochs=epochs[name])
        rows = {"centralized": [], "averaged_sync1": [], "averaged_sync10": []}
        secs = {k: [] for k in rows}
        for seed in seeds:
            cfg = replace(base, seed=seed)
            for key, kw, c in (("centralized", {"centralized": True}, cfg),
                               ("averaged_sync1", {"workers": 2}, cfg),
                               ("averaged_sync10", {"workers": 2}, replace(cfg, sync_every=10))):
                r = run_training(folder if "workers" in kw else parts, c, threads=1, **kw)
                rows[key].append(r["test_accuracy"])
                secs[key].append(r["epoch_seconds"])
                log(f"accuracy {name} seed {seed} {key}: {r['test_accuracy']:.4f}")
        mean = {k: float(np.mean(v)) for k, v in rows.items()}
        out[name] = {
            "model": "gcn", "hidden": hidden, "epochs": epochs[name], "parts": 4, "algo": "spring", "workers": 2,
            "seeds": list(seeds), "test_accuracy": rows, "mean": mean,
            "gap_sync1_points": 100 * (mean["centralized"] - mean["averaged_sync1"]),
            "gap_sync10_points": 100 * (mean["centralized"] - mean["averaged_sync10"]),
            "pass_sync1": mean["averaged_sync1"] >= mean["centralized"] - 0.015,
            "pass_sync10": mean["averaged_sync10"] >= mean["centralized"] - 0.02,
            "epoch_seconds_mean": {k: float(np.mean(v)) for k, v in secs.items()},
            "replication_factor": json.loads((folder / "manifest.json").read_text())["metrics"]["replication_factor"],
        }
    return out


def models_section(work: Path, datasets: list[str], epochs: dict[str, int], hidden: int) -> dict:
    from trainer.data import open_parts
    from trainer.train import TrainConfig, run_training
    out = {}
    for name in datasets:
        folder = parts_of(work, name)
        parts = open_parts(folder)
        res = {}
        for model in ("gcn", "sage", "gat"):
            for mini in (False, True):
                cfg = TrainConfig(model=model, hidden=hidden, epochs=epochs[name], mini_batch=mini,
                                  fanouts=(25, 10), batch_size=512)
                key = f"{model}{'-minibatch' if mini else ''}"
                c = run_training(parts, cfg, centralized=True, threads=1)
                a = run_training(folder, cfg, workers=2, threads=1)
                res[key] = {"centralized": {"test_accuracy": c["test_accuracy"], "epoch_seconds": c["epoch_seconds"]},
                            "averaged": {"test_accuracy": a["test_accuracy"], "epoch_seconds": a["epoch_seconds"],
                                         "sync_seconds_per_round": a["sync_seconds"] / max(1, a["rounds"])}}
                log(f"models {name} {key}: central {c['test_accuracy']:.4f} ({c['epoch_seconds']:.3f} s/epoch), "
                    f"averaged {a['test_accuracy']:.4f} ({a['epoch_seconds']:.3f} s/epoch)")
        out[name] = {"hidden": hidden, "epochs": epochs[name], "results": res}
    return out


def feeder_figures(store, device) -> dict:
    import torch

    from trainer.dynamic import SnapshotFeeder
    res = {}
    for mode in ("full", "delta"):
        feeder = SnapshotFeeder(store, device, mode)
        for _ in feeder:
            pass
        res[mode] = feeder.stats.to_dict()
    res["bytes_ratio"] = res["full"]["bytes"] / max(1, res["delta"]["bytes"])
    # Steady state: leave out the first snapshot, which both modes ship in full.
    first = int(store.edge_counts[0]) * 2 * (4 if store.num_nodes < 2**31 else 8)
    res["bytes_ratio_after_first"] = (res["full"]["bytes"] - first) / max(1, res["delta"]["bytes"] - first)
    res["time_ratio"] = res["full"]["seconds"] / max(1e-12, res["delta"]["seconds"])
    res["device"] = str(device)
    res["snapshots"] = int(store.num_snapshots)
    res["edges_per_snapshot_mean"] = float(np.mean(store.edge_counts))
    del torch
    return res


def transfer_section(work: Path, device_name: str, rmat_scale: int, rmat_edges: int, rmat_snapshots: int) -> dict:
    import torch

    from graphstream.dynamic import open_snapshots
    from graphstream.dynamic.generate import DynamicRmatConfig, generate_dynamic
    device = torch.device(device_name)
    out = {}
    cm = work / "collegemsg.zarr"
    if not cm.exists():
        gs("ingest", DATASETS / "temporal" / "CollegeMsg.txt", cm, "--format", "snap", "--one-based",
           "--time-column", "2")
    snaps = work / "collegemsg-life4.zarr"
    if not snaps.exists():
        gs("snapshots", cm, snaps, "--num-snapshots", 50, "--edge-life", 4)
    out["collegemsg_life4"] = feeder_figures(open_snapshots(snaps), device)
    for churn in (0.01, 0.10):
        tag = f"rmat{rmat_scale}_churn{int(churn * 100)}"
        ev, sn = work / f"{tag}.zarr", work / f"{tag}-snap.zarr"
        if not sn.exists():
            cfg = DynamicRmatConfig(scale=rmat_scale, edges_per_snapshot=rmat_edges, num_snapshots=rmat_snapshots,
                                    churn=churn, seed=0)
            generate_dynamic(ev, cfg, overwrite=True)
            gs("snapshots", ev, sn, "--window", cfg.step_seconds, "--overwrite")
        out[tag] = feeder_figures(open_snapshots(sn), device)
        out[tag]["churn"] = churn
    return out


def gpu_section(work: Path, scale: int) -> dict:
    import torch
    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device on this machine (torch.cuda.is_available() is False)"}
    from trainer.train import TrainConfig, run_training
    store = work / f"rmat{scale}.zarr"
    if not store.exists():
        gs("generate", "rmat", store, "--scale", scale, "--edge-factor", 16, "--seed", 0)
    nodes = work / f"rmat{scale}-nodes"
    n = 2 ** scale
    if not (nodes / "labels.npy").exists():
        nodes.mkdir(exist_ok=True)
        rng = np.random.default_rng(0)
        feats = np.lib.format.open_memmap(nodes / "features.npy", mode="w+", dtype=np.float32, shape=(n, 128))
        for a in range(0, n, 1 << 20):
            feats[a:a + (1 << 20)] = rng.standard_normal((min(1 << 20, n - a), 128), dtype=np.float32)
        feats.flush()
        np.save(nodes / "labels.npy", rng.integers(0, 16, n))
        np.save(nodes / "train_mask.npy", rng.random(n) < 0.6)
        np.save(nodes / "val_mask.npy", rng.random(n) < 0.2)
        np.save(nodes / "test_mask.npy", rng.random(n) < 0.2)
    folder = work / f"rmat{scale}-parts"
    if not (folder / "manifest.json").exists():
        gs("partition", store, "-k", 1, "--algo", "hash", "--out", folder, "--nodes", nodes, "--overwrite")
    res = {}
    for model in ("gcn", "sage", "gat"):
        r = run_training(folder, TrainConfig(model=model, hidden=256, epochs=5, device="cuda", mini_batch=True),
                         workers=1)
        res[model] = {"epoch_seconds": r["epoch_seconds"], "test_accuracy": r["test_accuracy"]}
    return {"scale": scale, "device": torch.cuda.get_device_name(0), "results": res}


def _table(caption: str, columns: list[str], rows: list[list]) -> list[str]:
    """A markdown table under its caption, then a blank line: the lines of one figures section."""
    return ([caption, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(map(str, row)) + " |" for row in rows] + [""])


def render_markdown(result: dict) -> str:
    """The figures section of docs/trainer.md from one bench result."""
    lines = [(f"Measured by `.venv/bin/python tools/bench_train.py` ({result['machine']['cpus']} CPUs, torch "
              f"{result['machine']['torch']}, {result.get('date', 'date in the JSON')}); times are wall clock."), ""]
    acc = result.get("accuracy")
    if acc:
        lines += _table(
            "Test accuracy, GCN, 4 SPRING parts, 2 gloo workers, mean of 3 seeds (best-validation weights):",
            ["dataset", "hidden / epochs", "centralised", "averaged, sync 1", "averaged, sync 10",
             "gap 1 / 10 (points)"],
            [[name, f"{r['hidden']} / {r['epochs']}", f"{100 * r['mean']['centralized']:.2f}",
              f"{100 * r['mean']['averaged_sync1']:.2f}", f"{100 * r['mean']['averaged_sync10']:.2f}",
              f"{r['gap_sync1_points']:+.2f} / {r['gap_sync10_points']:+.2f}"] for name, r in acc.items()])
    mod = result.get("models")
    if mod:
        lines += _table(
            "Epoch time (s, worker 0's training per epoch) and test accuracy, one seed:",
            ["dataset", "model", "centralised acc", "s/epoch", "averaged acc", "s/epoch", "sync s/round"],
            [[f"{name} ({r['epochs']} ep.)", key, f"{100 * v['centralized']['test_accuracy']:.1f}",
              f"{v['centralized']['epoch_seconds']:.3f}", f"{100 * v['averaged']['test_accuracy']:.1f}",
              f"{v['averaged']['epoch_seconds']:.3f}", f"{v['averaged']['sync_seconds_per_round']:.4f}"]
             for name, r in mod.items() for key, v in r["results"].items()])
    tr = result.get("transfer")
    if tr:
        lines += _table(
            ("Host -> device transfer over a whole sequence, full snapshots vs keyframe + deltas "
             f"({tr.get('note', 'device: ' + str(next(iter(tr.values()))['device']))}):"),
            ["sequence", "snapshots", "edges/snapshot", "full bytes", "delta bytes", "ratio", "ratio after 1st",
             "full s", "delta s", "full host s", "delta host s"],
            [[name, r["snapshots"], f"{r['edges_per_snapshot_mean']:.0f}", r["full"]["bytes"], r["delta"]["bytes"],
              f"{r['bytes_ratio']:.2f}x", f"{r['bytes_ratio_after_first']:.2f}x", f"{r['full']['seconds']:.4f}",
              f"{r['delta']['seconds']:.4f}", f"{r['full'].get('host_seconds', 0.0):.4f}",
              f"{r['delta'].get('host_seconds', 0.0):.4f}"] for name, r in tr.items() if isinstance(r, dict)])
    gpus = result.get("gpu")
    for gpu in gpus if isinstance(gpus, list) else [gpus] if gpus else []:
        if "skipped" in gpu:
            lines.append(f"GPU: {gpu['skipped']}")
            continue
        lines += _table(
            (f"Mini-batch training on {gpu['device']}: R-MAT scale {gpu['scale']}, 128 random features, 16 random "
             "classes (accuracy is chance, 1/16: the figure is the epoch time), hidden 256, one part, 5 epochs:"),
            ["model", "s/epoch", "test accuracy"],
            [[model, f"{r['epoch_seconds']:.3f}", f"{100 * r['test_accuracy']:.1f}"]
             for model, r in gpu["results"].items()])
    return "\n".join(lines)


def write_doc(doc: Path, text: str, section: str = "") -> None:
    """Replace what lies between the bench markers of ``doc`` (``bench_train-SECTION`` if named) with ``text``."""
    name = f"bench_train-{section}" if section else "bench_train"
    start, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    body = doc.read_text()
    if start not in body or end not in body:
        raise SystemExit(f"{doc}: no {start} ... {end} markers")
    head, rest = body.split(start, 1)
    tail = rest.split(end, 1)[1]
    doc.write_text(f"{head}{start}\n{text}\n{end}{tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="accuracy,models,transfer,gpu")
    ap.add_argument("--datasets", default="cora,citeseer,facebook")
    ap.add_argument("--work", default="/tmp/graphstream-bench-train")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--epochs", default="cora=100,citeseer=100,facebook=50")
    ap.add_argument("--model-epochs", default="cora=50,citeseer=50,facebook=20",
                    help="epochs per dataset in the models section (one seed)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--transfer-device", default=None, help="cuda when available, else cpu")
    ap.add_argument("--rmat-scale", type=int, default=20)
    ap.add_argument("--rmat-edges", type=int, default=1_000_000)
    ap.add_argument("--rmat-snapshots", type=int, default=12)
    ap.add_argument("--gpu-scale", type=int, default=22)
    ap.add_argument("--doc", default=None, help="also write the figures into this markdown file (between markers)")
    ap.add_argument("--render", default=None, help="only render a saved result JSON into --doc (no runs)")
    ap.add_argument("--section", default="", help="write between the markers bench_train-SECTION of --doc")
    args = ap.parse_args()
    if args.render:
        write_doc(Path(args.doc), render_markdown(json.loads(Path(args.render).read_text())), args.section)
        return
    import torch
    torch.set_num_threads(1)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sections = args.sections.split(",")
    datasets = [d for d in args.datasets.split(",") if d]
    epochs = {k: int(v) for k, v in (kv.split("=") for kv in args.epochs.split(","))}
    result = {"tool": "bench_train", "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                                 "torch": torch.__version__, "cuda": torch.cuda.is_available(),
                                                 "load_average_start": os.getloadavg()}}
    t0 = time.perf_counter()
    if "accuracy" in sections:
        result["accuracy"] = accuracy_section(work, datasets, tuple(int(s) for s in args.seeds.split(",")), epochs,
                                              args.hidden)
    if "models" in sections:
        model_epochs = {k: int(v) for k, v in (kv.split("=") for kv in args.model_epochs.split(","))}
        result["models"] = models_section(work, datasets, model_epochs, args.hidden)
    if "transfer" in sections:
        dev = args.transfer_device or ("cuda" if torch.cuda.is_available() else "cpu")
        result["transfer"] = transfer_section(work, dev, args.rmat_scale, args.rmat_edges, args.rmat_snapshots)
        if dev == "cpu":
            result["transfer"]["note"] = ("no CUDA device: bytes are what a GPU would receive; seconds are CPU "
                                          "memory copies and the rebuild on the CPU, not GPU figures")
    if "gpu" in sections:
        result["gpu"] = gpu_section(work, args.gpu_scale)
    result["seconds"] = time.perf_counter() - t0
    result["machine"]["load_average_end"] = os.getloadavg()
    result["date"] = time.strftime("%Y-%m-%d")
    if args.doc:
        write_doc(Path(args.doc), render_markdown(result), args.section)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
