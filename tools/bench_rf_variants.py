"""coarse-refine's replication factor under parameter variants, over graphs, k and seeds (one JSON object).

    .venv/bin/python tools/bench_rf_variants.py --graphs rmat21:32,rmat20:8,facebook:32 --seeds 0,1 \
        --variant default --variant lp_passes=4 --variant "lp_passes=3 coarse_trials=2" [--work /tmp/exp]

Graphs: ``rmatS:K`` (R-MAT scale S, edge factor 16, seed 1, undirected, as
tools/bench_partition_speed.py writes it) or a shared graph's name
(``web-NotreDame``, ``facebook``, ``cora``, ``citeseer``) and K; the stores
are made in ``--work`` when missing. A variant is a space-separated list of
``name=value`` fields of ``CoarseRefineParams`` (``default``: none).

Every variant runs on every graph, k and seed, in this one process, after its
kernels for every k are loaded by a run on a small graph. The first variant
is the baseline: each run reports its RF change against the baseline's run
on the same graph, k and seed, and each variant the mean, lowest and highest
of those changes and its seconds (all phases) against the baseline's.

Why many seeds: on R-MAT the final RF of one run moves by 2-8% with any
perturbation of the path to it (a solver seed, one label-propagation sweep
more or less; docs/partition-experiments.md, "Variants judged over seeds"), so
a variant is judged by its mean change over graphs and seeds, and one run's
change of a few percent is noise.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_partition_speed import _shared_graphs, ensure_store, load_coarse_refine_kernels  # noqa: E402


def parse_variant(text: str) -> dict:
    """``"lp_passes=4 coarse_weights=edges"`` -> {"lp_passes": 4, "coarse_weights": "edges"}."""
    params = {}
    for field in text.split():
        if field == "default":
            continue
        name, sep, value = field.partition("=")
        if not sep:
            raise SystemExit(f"bench_rf_variants: {field!r} is not name=value")
        try:
            params[name] = json.loads(value)
        except json.JSONDecodeError:
            params[name] = value   # a string field: coarse_solver=metis
    return params


def open_graph(name: str, work: Path, shared: dict | None, datasets: Path | None = None):
    from graphstream.store import open_store
    if name.startswith("rmat"):
        return open_store(ensure_store(work, int(name.removeprefix("rmat")), 16)), shared
    shared = shared or _shared_graphs(work, datasets)
    if name not in shared:
        raise SystemExit(f"bench_rf_variants: unknown graph {name!r} (rmatS or one of {sorted(shared)})")
    return shared[name], shared


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", required=True, help="comma-separated GRAPH:K (rmat21:32, facebook:8, ...)")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds")
    ap.add_argument("--variant", action="append", required=True,
                    help="space-separated name=value fields (repeat; the first is the baseline)")
    ap.add_argument("--work", default="/tmp/exp", help="folder of the graph stores")
    ap.add_argument("--datasets", type=Path, default=None,
                    help="the shared datasets folder (default ../shared/datasets beside the checkout)")
    args = ap.parse_args()

    from graphstream.partition import coarse_refine

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if len(set(args.variant)) < len(args.variant):
        raise SystemExit("bench_rf_variants: a --variant is given twice (each names its runs)")
    variants = [(v, parse_variant(v)) for v in args.variant]
    seeds = [int(s) for s in args.seeds.split(",")]
    specs = []
    for spec in args.graphs.split(","):
        graph, _, k = spec.rpartition(":")
        specs.append((graph, int(k)))

    for k in sorted({k for _, k in specs}):   # no run's seconds count the loading of its kernels
        for _, params in variants:
            load_coarse_refine_kernels(work, k, params)

    shared = None
    runs = []
    for graph, k in specs:
        store, shared = open_graph(graph, work, shared, args.datasets)
        for seed in seeds:
            for text, params in variants:
                plan = coarse_refine.run(store, k, seed=seed, **params)
                m = plan.metrics
                run = {"graph": graph, "k": k, "seed": seed, "variant": text,
                       "replication_factor": m["replication_factor"],
                       "refine_seconds": m["phase_seconds"]["refine"], "seconds": m["seconds"]}
                runs.append(run)
                print(json.dumps(run), file=sys.stderr, flush=True)

    base_text = variants[0][0]
    base = {(r["graph"], r["k"], r["seed"]): r for r in runs if r["variant"] == base_text}
    summary = {}
    for text, _ in variants:
        mine = [r for r in runs if r["variant"] == text]
        for r in mine:
            b = base[(r["graph"], r["k"], r["seed"])]
            r["rf_change"] = r["replication_factor"] / b["replication_factor"] - 1
        changes = [r["rf_change"] for r in mine]
        summary[text] = {
            "runs": len(mine),
            "rf_change_mean": statistics.fmean(changes),
            "rf_change_min": min(changes),
            "rf_change_max": max(changes),
            "seconds": sum(r["seconds"] for r in mine),
            "seconds_vs_baseline": sum(r["seconds"] for r in mine) / sum(r["seconds"] for r in base.values()),
        }
    print(json.dumps({"baseline": base_text, "seeds": seeds, "graphs": args.graphs, "variants": summary,
                      "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
