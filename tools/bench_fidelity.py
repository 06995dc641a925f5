"""Fidelity benchmark: averaged training against centralised training. Prints ONE JSON object on stdout.

For each labelled dataset (cora, citeseer, facebook, twitch-de:mature,
twitch-de:partner; ``--datasets``), each model (``--models``, gcn,sage,gat),
each number of parts p (``--parts``, 4,8; coarse-refine) and each sync
interval (``--syncs``, 1,10 epochs; full batch, so 1 = averaging after every
step), with q workers (``--workers``, 2), over N seeds (``--seeds``, 5):

* the test metric of the centralised run and of the averaged run: ROC-AUC
  (``test_roc_auc``) when the trainer says the labels are binary (its
  ``metric`` key), else accuracy (``test_accuracy``); ``--metric`` forces
  one; test accuracy is kept next to it;
* mean and standard deviation (ddof 1) over seeds, in points (x 100);
* the gap averaged - centralised, paired by seed (same seed, same split),
  with its 95% t-interval over seeds (scipy's Student t quantile).

Every run is the user's command, ``python -m graphstream train PARTS ...
--json`` in a subprocess. A dataset is built once (``graphstream dataset``,
split seed ``--split-seed``, 0) and partitioned once per p (``graphstream
partition --algo coarse-refine --out ... --nodes ...``); the seeds vary the
weights, dropout and sampling. The centralised run trains on the whole graph
the trainer rebuilds from the parts, which does not depend on p, so it runs
once per (dataset, model, seed) and serves every p and sync row.

``--quick``: cora and twitch-de:partner, GCN, p = 4, sync 1 and 10, 2 seeds,
30 epochs (a few minutes on 2 cores). ``--doc docs/training.md`` rewrites the
table between ``<!-- bench_fidelity:begin -->`` and ``<!-- bench_fidelity:end -->``
(appended if absent), with the command, machine and date.
``--train-args "--proximal 0"`` passes extra flags to every train run (to
measure a change on its own); ``--halo-hops 2`` partitions with complete
halo rows one hop out. ``--merge A.json B.json --doc FILE``: one table from
runs made in pieces (the same settings, other datasets).

Run: ``.venv/bin/python tools/bench_fidelity.py --quick``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = REPO.parent / "shared" / "datasets"
ALL_DATASETS = ("cora", "citeseer", "facebook", "twitch-de:mature", "twitch-de:partner")
BEGIN, END = "<!-- bench_fidelity:begin -->", "<!-- bench_fidelity:end -->"
GOAL_POINTS = 1.5


def log(msg: str) -> None:
    print(f"bench_fidelity: {msg}", file=sys.stderr, flush=True)


def csv_list(text: str, cast=str) -> list:
    return [cast(v) for v in text.split(",") if v.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(ALL_DATASETS),
                   help="comma list of cora, citeseer, facebook, twitch-de[:mature|:partner], "
                        "twitch-engb[:mature|:partner] (default: %(default)s)")
    p.add_argument("--models", default="gcn,sage,gat", help="comma list (default %(default)s)")
    p.add_argument("--parts", default="4,8", help="comma list of p (default %(default)s)")
    p.add_argument("--syncs", default="1,10", help="comma list of --sync-every values (default %(default)s)")
    p.add_argument("--workers", type=int, default=2, help="q, worker processes per averaged run (default 2)")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    p.add_argument("--epochs", type=int, default=100, help="epochs of every run (default 100)")
    p.add_argument("--hidden", type=int, default=64, help="hidden size (default 64)")
    p.add_argument("--metric", choices=("auto", "accuracy", "roc_auc"), default="auto",
                   help="test metric compared: auto = ROC-AUC for binary labels, else accuracy (default auto)")
    p.add_argument("--split-seed", type=int, default=0, help="seed of facebook's/Twitch's split (default 0)")
    p.add_argument("--halo-hops", type=int, default=1,
                   help="graphstream partition --halo-hops of every partition (default 1)")
    p.add_argument("--train-args", default="", help="extra flags for every train run, one shell-quoted string")
    p.add_argument("--root", default=str(DEFAULT_ROOT), help="shared datasets folder (default ../shared/datasets)")
    p.add_argument("--work", default=None, help="scratch folder (default: a temporary one, removed)")
    p.add_argument("--jobs", type=int, default=1,
                   help="train runs at a time (default 1; each averaged run uses q processes)")
    p.add_argument("--quick", action="store_true",
                   help="cora,twitch-de:partner; gcn; p=4; sync 1,10; 2 seeds; 30 epochs (explicit flags win)")
    p.add_argument("--doc", default=None, help="markdown file whose bench_fidelity section gets the table")
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                   help="run nothing: merge the JSON outputs of earlier runs (a long benchmark run in pieces, "
                        "the same settings but the datasets, models and seeds) into one result and table")
    args = p.parse_args(argv)
    if args.quick:
        given = set(a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:]))
        for flag, value in (("--datasets", "cora,twitch-de:partner"), ("--models", "gcn"), ("--parts", "4"),
                            ("--seeds", 2), ("--epochs", 30)):
            if flag not in given:
                setattr(args, flag[2:], value)
    for name in ("workers", "seeds", "epochs", "hidden", "jobs", "halo_hops"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def graphstream(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "graphstream", *argv]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SystemExit(f"bench_fidelity: {shlex.join(cmd[1:])} failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip().splitlines()[-1:] or ''}")
    return proc


def dataset_spec(spec: str) -> tuple[str, str | None, str]:
    """'twitch-de:partner' -> ('twitch-de', 'partner', 'twitch-de-partner')."""
    name, _, target = spec.partition(":")
    if name.startswith("twitch") and not target:
        target = "mature"
    return name, target or None, f"{name}-{target}" if target else name


def prepare(spec: str, parts: list[int], args, work: Path) -> dict[int, Path]:
    """Build the dataset and one coarse-refine partition per p; return p -> parts folder."""
    name, target, tag = dataset_spec(spec)
    node_dir = work / tag
    if not node_dir.exists():
        extra = ["--target", target] if target else []
        graphstream("dataset", name, str(node_dir), "--root", args.root, "--seed", str(args.split_seed), *extra)
        log(f"{tag}: dataset built")
    out = {}
    hops = args.halo_hops
    for k in parts:
        pdir = work / (f"{tag}-p{k}" if hops == 1 else f"{tag}-p{k}-h{hops}")
        if not pdir.exists():
            graphstream("partition", str(node_dir / "graph.zarr"), "-k", str(k), "--algo", "coarse-refine",
                        "--out", str(pdir), "--nodes", str(node_dir), "--halo-hops", str(hops))
            log(f"{tag}: {k} coarse-refine parts, halo hops {hops}")
        out[k] = pdir
    return out


TRAINER_SETTINGS = ("class_weight", "drift_correction", "proximal", "average_optimizer_state")


def train(parts_dir: Path, model: str, seed: int, args, *, sync: int | None) -> dict:
    """One `graphstream train` run; sync None = centralised. Returns metric, accuracy, best epoch, seconds."""
    flags = ["train", str(parts_dir), "--model", model, "--epochs", str(args.epochs), "--hidden", str(args.hidden),
             "--seed", str(seed), "--json", *shlex.split(args.train_args)]
    flags += ["--centralized"] if sync is None else ["--workers", str(args.workers), "--sync-every", str(sync)]
    t0 = time.perf_counter()
    proc = graphstream(*flags, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1], "seconds": wall}
    res = json.loads(proc.stdout)
    metric = args.metric
    if metric == "auto":
        metric = res.get("metric", "accuracy")
    key = f"test_{metric}"
    if key not in res:  # a trainer without that key: fall back to accuracy, and say so
        key, metric = "test_accuracy", "accuracy"
    return {"metric": metric, "value": float(res[key]), "test_accuracy": float(res["test_accuracy"]),
            "best_epoch": res.get("best_epoch"), "seconds": wall,
            # what the trainer did, defaults included (they change between versions)
            "trainer": {k: res.get(k) for k in TRAINER_SETTINGS}}


def summary(values: list[float]) -> dict:
    v = np.asarray(values, dtype=np.float64) * 100
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
            "values": [round(float(x), 3) for x in v]}


def gap_interval(averaged: list[float], centralised: list[float], level: float = 0.95) -> dict:
    """Paired gap averaged - centralised in points: mean, std, and the t-interval of the mean over seeds."""
    d = (np.asarray(averaged, dtype=np.float64) - np.asarray(centralised, dtype=np.float64)) * 100
    mean = float(d.mean())
    if len(d) < 2:
        return {"mean": mean, "std": 0.0, "ci95": [None, None]}
    sd = float(d.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2, len(d) - 1) * sd / np.sqrt(len(d)))
    return {"mean": mean, "std": sd, "ci95": [mean - half, mean + half]}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "absent"
    return (f"{os.cpu_count()}-core {cpu}, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, torch {torch}, CPU")


def run(args) -> dict:
    specs = csv_list(args.datasets)
    models = csv_list(args.models)
    parts = csv_list(args.parts, int)
    syncs = csv_list(args.syncs, int)
    seeds = list(range(args.seeds))
    with tempfile.TemporaryDirectory(prefix="bench-fidelity-") as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        prepared = {spec: prepare(spec, parts, args, work) for spec in specs}
        jobs = []  # (key, parts_dir, model, seed, sync)
        for spec in specs:
            for model in models:
                for seed in seeds:
                    jobs.append(((spec, model, "central", seed), prepared[spec][parts[0]], model, seed, None))
                    for k in parts:
                        for s in syncs:
                            jobs.append(((spec, model, (k, s), seed), prepared[spec][k], model, seed, s))
        log(f"{len(jobs)} train runs")
        done = [0]

        def one(job):
            key, pdir, model, seed, sync = job
            res = train(pdir, model, seed, args, sync=sync)
            done[0] += 1
            what = "centralised" if sync is None else f"p={key[2][0]} sync={sync}"
            log(f"[{done[0]}/{len(jobs)}] {key[0]} {model} {what} seed {seed}: "
                f"{res.get('error') or round(res['value'] * 100, 2)} ({res['seconds']:.0f} s)")
            return key, res

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = dict(pool.map(one, jobs))
    rows, errors = [], []
    for key, res in results.items():
        if "error" in res:
            errors.append({"dataset": key[0], "model": key[1], "config": str(key[2]), "seed": key[3],
                           "error": res["error"]})
    for spec in specs:
        for model in models:
            cent = [results[(spec, model, "central", s)] for s in seeds]
            for k in parts:
                for s in syncs:
                    avg = [results[(spec, model, (k, s), seed)] for seed in seeds]
                    ok = [i for i in range(len(seeds)) if "error" not in cent[i] and "error" not in avg[i]]
                    row = {"dataset": spec, "model": model, "parts": k, "sync_every": s, "workers": args.workers,
                           "seeds": len(ok)}
                    if not ok:
                        rows.append(row | {"error": "every run failed"})
                        continue
                    c_val = [cent[i]["value"] for i in ok]
                    a_val = [avg[i]["value"] for i in ok]
                    gap = gap_interval(a_val, c_val)
                    row |= {"metric": avg[ok[0]]["metric"], "centralised": summary(c_val),
                            "averaged": summary(a_val), "gap": gap,
                            "centralised_accuracy": summary([cent[i]["test_accuracy"] for i in ok]),
                            "averaged_accuracy": summary([avg[i]["test_accuracy"] for i in ok]),
                            "best_epoch_centralised": [cent[i]["best_epoch"] for i in ok],
                            "best_epoch_averaged": [avg[i]["best_epoch"] for i in ok],
                            "within_goal": abs(gap["mean"]) <= GOAL_POINTS,
                            "trainer_averaged": avg[ok[0]].get("trainer"),
                            "seconds_averaged": float(np.mean([avg[i]["seconds"] for i in ok]))}
                    rows.append(row)
    return {"tool": "bench_fidelity", "command": shlex.join(["tools/bench_fidelity.py", *sys.argv[1:]]),
            "machine": machine(), "date": dt.date.today().isoformat(),
            "settings": {"datasets": specs, "models": models, "parts": parts, "syncs": syncs,
                         "workers": args.workers, "seeds": seeds, "epochs": args.epochs, "hidden": args.hidden,
                         "metric": args.metric, "split_seed": args.split_seed, "partitioner": "coarse-refine",
                         "halo_hops": args.halo_hops,
                         "train_args": args.train_args, "goal_points": GOAL_POINTS},
            "rows": rows, "errors": errors}


def fmt(s: dict) -> str:
    return f"{s['mean']:.2f} ± {s['std']:.2f}"


def _trainer_line(rows: list[dict]) -> list[str]:
    """How the averaged runs trained (the trainer's own report), when the rows that say agree
    (the class weight apart: ``auto`` resolves it per dataset, and the rows show the metric)."""
    said = [r["trainer_averaged"] for r in rows if r.get("trainer_averaged")]
    rest = {json.dumps({k: v for k, v in t.items() if k != "class_weight"}, sort_keys=True) for t in said}
    if len(rest) != 1:
        return []
    t = json.loads(rest.pop())
    weights = sorted({t["class_weight"] for t in said})
    return [f"Averaged runs: class weight {' / '.join(weights)} (auto: balanced for binary labels), drift correction "
            f"{'on' if t['drift_correction'] else 'off'}, proximal {t['proximal']}, optimizer state "
            f"{'averaged' if t['average_optimizer_state'] else 'per part'}.  "]


def markdown(result: dict) -> str:
    st = result["settings"]
    lines = [BEGIN, "",
             *[f"Command: `.venv/bin/python {c}`  " for c in result.get("commands", [result["command"]])],
             f"Machine: {result['machine']}  ",
             f"Date: {result['date']}  ",
             f"Settings: {st['epochs']} epochs, hidden {st['hidden']}, {st['partitioner']} parts "
             f"(--halo-hops {st.get('halo_hops', 1)}), "
             f"q = {st['workers']} workers, seeds {st['seeds'][0]}..{st['seeds'][-1]} (or fewer: the seeds "
             f"column), split seed {st['split_seed']}"
             + (f", extra train flags `{st['train_args']}`" if st["train_args"] else "")
             + ".", *_trainer_line(result["rows"]), "",
             "Points (x 100), mean ± standard deviation over seeds; gap = averaged - centralised paired by "
             "seed, with its 95% t-interval.", "",
             "| dataset | model | metric | p | sync | seeds | centralised | averaged | gap | 95% CI | "
             "acc. centr. / avg. |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['dataset']} | {r['model']} | - | {r['parts']} | {r['sync_every']} | 0 | "
                         f"{r['error']} | | | | |")
            continue
        lo, hi = r["gap"]["ci95"]
        ci = "-" if lo is None else f"[{lo:+.2f}, {hi:+.2f}]"
        metric = "ROC-AUC" if r["metric"] == "roc_auc" else "accuracy"
        lines.append(f"| {r['dataset']} | {r['model']} | {metric} | {r['parts']} | {r['sync_every']} | {r['seeds']} | "
                     f"{fmt(r['centralised'])} | {fmt(r['averaged'])} | {r['gap']['mean']:+.2f} | {ci} | "
                     f"{r['centralised_accuracy']['mean']:.2f} / {r['averaged_accuracy']['mean']:.2f} |")
    if result["errors"]:
        lines += ["", f"{len(result['errors'])} runs failed: " + "; ".join(
            f"{e['dataset']} {e['model']} {e['config']} seed {e['seed']}: {e['error']}" for e in result["errors"])]
    lines += ["", END]
    return "\n".join(lines)


def write_doc(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section + "\n"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def merge(paths: list[str]) -> dict:
    """One result from the outputs of several runs: their rows and errors in order, every command."""
    results = [json.loads(Path(f).read_text()) for f in paths]
    first = results[0]
    for r in results[1:]:
        differ = [k for k in first["settings"] if k not in ("datasets", "models", "seeds")
                  and r["settings"].get(k) != first["settings"][k]]
        if differ:
            raise SystemExit(f"bench_fidelity: --merge: the runs differ in {', '.join(differ)}, not only in "
                             "datasets, models and seeds")
    seeds = max((r["settings"]["seeds"] for r in results), key=len)   # the rows say how many each used
    datasets = list(dict.fromkeys(d for r in results for d in r["settings"]["datasets"]))
    models = list(dict.fromkeys(m for r in results for m in r["settings"]["models"]))
    settings = dict(first["settings"], datasets=datasets, models=models, seeds=seeds)
    return dict(first, command=" && ".join(r["command"] for r in results),
                commands=[r["command"] for r in results], date=max(r["date"] for r in results),
                settings=settings, rows=[row for r in results for row in r["rows"]],
                errors=[e for r in results for e in r["errors"]])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = merge(args.merge) if args.merge else run(args)
    if args.doc:
        write_doc(Path(args.doc), markdown(result))
        log(f"table written to {args.doc}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
