"""Partition quality side by side, plus reference 2PS-L speed and coarse-refine memory (one JSON object).

    .venv/bin/python tools/bench_partition.py \
        [--graphs notredame,facebook,cora,citeseer] [--ks 4,8,16,32] \
        [--twops-bin /tmp/2ps/src/build/twophasepartitioner] [--rmat-scale 21] [--rss-scale 22] \
        [--doc docs/partition-quality.md --plot docs/partition_rf.png]

Quality: on the shared real graphs (undirected, self-loops and duplicate
pairs dropped, as in specs/partitioners.md) and each k, the GNN replication
factor (owned nodes + 1-hop halo, summed over parts / num_nodes, computed by
graphstream.partition.metrics for every algorithm, the references included)
and the node balance of every algorithm of graphstream.partition, of METIS
(pymetis on the whole graph in memory, k-way, ufactor from --balance) and of
the 2PS-L authors' C++ (github mayerrn/two_phase_streaming, built in /tmp,
never committed): its own vertex-cut RF and time, and the GNN RF of the owner
derived from its edge parts (the part holding most of a node's edges, ties
lowest part, isolated nodes to the least loaded part, as the spec says).

Speed: our 2ps-l against the reference on an R-MAT graph (--rmat-scale,
edge factor 16), vertex-cut RF and edges/s of the partitioning itself (the
reference's logged "partitioning time", which excludes its text-to-binary
conversion; ours: the whole run including its degree pass).

Memory: coarse-refine on an R-MAT graph of --rss-scale in a fresh process,
peak RSS against the documented model of the partition's process
(``graphstream.estimate.partition_peak_bytes``, docs/estimate.md; its trial
children, which the process's own peak leaves out, left out).
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
ALGOS = ("coarse-refine", "spring", "2ps-l", "hdrf", "dbh", "hash")
NODES = {"notredame": 325729, "facebook": 22470}


def log(msg: str) -> None:
    print(f"bench_partition: {msg}", file=sys.stderr, flush=True)


# -- graphs -------------------------------------------------------------------------------------

def canonical(src, dst, n: int):
    """Undirected simple graph: u < v, self-loops and duplicate pairs dropped."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    keep = src != dst
    a = np.minimum(src[keep], dst[keep])
    b = np.maximum(src[keep], dst[keep])
    key = np.unique(a * n + b)
    return key // n, key % n


def load_edges(name: str, root: Path):
    if name == "notredame":
        with gzip.open(root / "snap" / "web-NotreDame.txt.gz", "rt") as f:
            arr = np.loadtxt(f, dtype=np.int64, comments="#")
        n = NODES[name]
    elif name == "facebook":
        arr = np.loadtxt(root / "musae-facebook" / "facebook_edges.csv", dtype=np.int64, delimiter=",",
                         skiprows=1)
        n = NODES[name]
    elif name in ("cora", "citeseer"):
        with open(root / "planetoid" / f"ind.{name}.graph", "rb") as f:
            graph = pickle.load(f, encoding="latin1")
        pairs = [(u, v) for u, nbrs in graph.items() for v in nbrs]
        arr = np.array(pairs, dtype=np.int64)
        n = int(max(arr.max(), max(graph)) + 1)
    else:
        raise SystemExit(f"unknown graph {name!r}")
    src, dst = canonical(arr[:, 0], arr[:, 1], n)
    return src, dst, n


def shared_store(name: str, root: Path, work: Path, edges: tuple | None = None):
    """The store of a shared graph in ``work``, written from ``edges`` (``load_edges``' result, read when
    not given) when it is not there: a run that finds it reads no dataset file."""
    from graphstream.store import GraphWriter, open_store
    path = work / f"{name}.zarr"
    if not path.exists():
        src, dst, n = edges if edges is not None else load_edges(name, root)
        with GraphWriter(path, num_nodes=n, directed=False) as w:
            w.append(src, dst)
    return open_store(path)


def make_store(name: str, root: Path, work: Path):
    """The shared graph's store and its edges (METIS's input)."""
    src, dst, n = load_edges(name, root)
    return shared_store(name, root, work, (src, dst, n)), src, dst, n


# -- references -----------------------------------------------------------------------------------

def metis_owner(src, dst, n: int, k: int, balance: float, seed: int = 0) -> tuple[np.ndarray, float]:
    import pymetis
    keys = np.concatenate([src, dst])
    order = np.argsort(keys, kind="stable")
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=xadj[1:])
    adj = np.concatenate([dst, src])[order]
    t = time.perf_counter()
    opts = pymetis.Options(ufactor=int(round((balance - 1) * 1000)), seed=seed)
    _, part = pymetis.part_graph(k, adjacency=pymetis.CSRAdjacency(xadj, adj), options=opts)
    return np.asarray(part, dtype=np.int32), time.perf_counter() - t


def owner_from_edges(src, dst, parts, n: int, k: int) -> np.ndarray:
    """The part holding most of a node's edges (ties: lowest part); isolated nodes to the least loaded part."""
    nodes = np.concatenate([src, dst])
    p = np.concatenate([parts, parts]).astype(np.int64)
    cnt = np.zeros((n, k), dtype=np.int64)
    np.add.at(cnt, (nodes, p), 1)
    owner = np.argmax(cnt, axis=1).astype(np.int32)      # argmax: first maximum = lowest part id
    isolated = np.flatnonzero(cnt.sum(axis=1) == 0)
    size = np.bincount(owner[cnt.sum(axis=1) > 0], minlength=k)
    for v in isolated:
        q = int(np.argmin(size))
        owner[v] = q
        size[q] += 1
    return owner


def write_edge_text(path: Path, src, dst) -> None:
    if path.exists():
        return
    with open(path, "w") as f:
        for a in range(0, len(src), 1 << 20):
            np.savetxt(f, np.stack([src[a:a + (1 << 20)], dst[a:a + (1 << 20)]], axis=1), fmt="%d", delimiter="\t")


def run_twops(binary: str, edge_file: Path, k: int, balance: float, parts_prefix: Path | None) -> dict:
    cmd = [binary, "-filename", str(edge_file), "-p", str(k), "-prepartitioner_type", "streamcom",
           "-balance_ratio", str(balance), "-logtostderr"]
    if parts_prefix is not None:
        cmd += ["-write_parts", "-parts_filename", str(parts_prefix)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd}: exit {proc.returncode}: {text[-2000:]}")
    rf = re.findall(r"replication factor: ([0-9.]+)", text)
    pt = re.findall(r"partitioning time: ([0-9.eE+-]+)", text)
    bal = re.findall(r"max_edge_load / average_edge_load\): ([0-9.]+)", text)
    return {"vertex_cut_rf": float(rf[-1]) if rf else None, "partitioning_seconds": float(pt[-1]) if pt else None,
            "edge_balance": float(bal[-1]) if bal else None, "wall_seconds": wall}


def twops_owner(parts_file: Path, src, dst, n: int, k: int) -> np.ndarray:
    """Owner from the reference's "u v part" lines, its ids mapped back to ours.

    Its converter numbers nodes in order of first appearance in the edge file
    (from, to, from, to, ...), so that order is rebuilt here.
    """
    inter = np.stack([src, dst], axis=1).ravel()
    uniq, first = np.unique(inter, return_index=True)
    conv_to_ours = uniq[np.argsort(first, kind="stable")]
    data = np.loadtxt(parts_file, dtype=np.int64, ndmin=2)
    return owner_from_edges(conv_to_ours[data[:, 0]], conv_to_ours[data[:, 1]], data[:, 2], n, k)


# -- one process per memory measurement -------------------------------------------------------------

CHILD = r"""
import json, sys, time
from graphstream.store import open_store
from graphstream.partition import coarse_refine
store = open_store(sys.argv[1])
plan = coarse_refine.run(store, int(sys.argv[2]), work_dir=sys.argv[3])
m = {k: v for k, v in plan.metrics.items() if not isinstance(v, list)}
print(json.dumps(m))
"""


def rss_run(store_path: Path, k: int, work: Path) -> dict:
    # glibc's malloc in one arena, as `graphstream partition` runs (until 2026-12-01 this child ran with
    # glibc's default arenas, which hold more freed memory than the CLI's process does)
    env = {**os.environ, "MALLOC_ARENA_MAX": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(store_path), str(k), str(work / "cr_rss")],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- main -------------------------------------------------------------------------------------------

def _over_seeds(runs: list[dict]) -> dict:
    """One row cell from the runs of the seeds: the mean replication factor (what the gap compares: one seed
    moves web-NotreDame's RF by up to 4%, the gaps between partitioners are often under 1%), the worst node
    balance, each seed's figures and the seconds of them all."""
    rfs = [r["replication_factor"] for r in runs]
    cell = {"replication_factor": float(np.mean(rfs)), "node_balance": max(r["node_balance"] for r in runs),
            "seconds": sum(r["seconds"] for r in runs), "replication_factor_each": rfs,
            "replication_factor_min": min(rfs), "replication_factor_max": max(rfs)}
    if "vertex_cut_rf" in runs[0]:
        cell["vertex_cut_rf"] = float(np.mean([r["vertex_cut_rf"] for r in runs]))
    return cell


def quality(args, work: Path) -> dict:
    from graphstream.partition import BALANCED, partition
    from graphstream.partition.metrics import vertex_partition_metrics
    results = {}
    for name in args.graphs:
        store, src, dst, n = make_store(name, Path(args.datasets), work)
        edge_file = work / f"{name}.txt"
        if args.twops_bin:
            write_edge_text(edge_file, src, dst)
        g = {"num_nodes": n, "num_edges": int(len(src)), "seeds": args.seeds, "k": {}}
        for k in args.ks:
            row = {}
            for algo in args.algos:
                runs = []
                for seed in args.seeds:
                    t = time.perf_counter()
                    # the others balance by their own rules and refuse a balance
                    balance = args.balance if algo in BALANCED else None
                    plan = partition(store, k, algo, seed=seed, balance=balance, work_dir=work / "parts")
                    m = plan.metrics
                    runs.append({"replication_factor": m["replication_factor"], "node_balance": m["node_balance"],
                                 "seconds": time.perf_counter() - t})
                    if "vertex_cut_rf" in m:
                        runs[-1]["vertex_cut_rf"] = m["vertex_cut_rf"]
                row[algo] = _over_seeds(runs)
            runs = []
            for seed in args.seeds:
                owner, secs = metis_owner(src, dst, n, k, args.balance, seed=seed)
                m = vertex_partition_metrics(store, owner, k)
                runs.append({"replication_factor": m["replication_factor"], "node_balance": m["node_balance"],
                             "seconds": secs})
            row["metis"] = _over_seeds(runs)
            if args.twops_bin:   # no seed: one run
                prefix = work / f"{name}_k{k}_2ps"
                ref = run_twops(args.twops_bin, edge_file, k, args.balance, prefix)
                owner = twops_owner(Path(str(prefix) + ".txt"), src, dst, n, k)
                m = vertex_partition_metrics(store, owner, k)
                ref.update({"replication_factor": m["replication_factor"], "node_balance": m["node_balance"]})
                row["2ps-l-ref"] = ref
                os.unlink(str(prefix) + ".txt")
            cr, me = row.get("coarse-refine"), row["metis"]
            if cr:
                cr["gap_vs_metis_pct"] = 100 * (cr["replication_factor"] / me["replication_factor"] - 1)
            log(f"{name} k={k}: " + ", ".join(f"{a} {r['replication_factor']:.4f}" for a, r in row.items()))
            g["k"][str(k)] = row
        results[name] = g
    return results


def rmat_store(scale: int, work: Path):
    from graphstream.ingest.rmat import generate_rmat
    from graphstream.store import open_store
    path = work / f"rmat{scale}.zarr"
    if path.exists():
        return open_store(path)
    return generate_rmat(path, scale=scale, edge_factor=16, seed=1)


def speed(args, work: Path) -> dict:
    from graphstream.partition import partition
    store = rmat_store(args.rmat_scale, work)
    edge_file = work / f"rmat{args.rmat_scale}.txt"
    if not edge_file.exists():
        log(f"writing {edge_file} for the reference")
        with open(edge_file, "w") as f:
            for b in store.stream():
                np.savetxt(f, np.stack([b.src, b.dst], axis=1), fmt="%d", delimiter="\t")
    k = args.speed_k
    # the kernels were compiled (and cached) by the quality runs: this run measures partitioning only
    t = time.perf_counter()
    plan = partition(store, k, "2ps-l", work_dir=work / "parts", metrics=False)
    ours_wall = time.perf_counter() - t
    ours = {"vertex_cut_rf": plan.metrics.get("vertex_cut_rf"), "seconds": ours_wall,
            "edges_per_second": store.num_edges / ours_wall,
            "phase_seconds": plan.metrics.get("phase_seconds")}
    run_twops(args.twops_bin, edge_file, k, args.balance, None)      # first run converts text to binary
    ref = run_twops(args.twops_bin, edge_file, k, args.balance, None)
    ref["edges_per_second"] = store.num_edges / ref["partitioning_seconds"]
    return {"graph": f"rmat scale {args.rmat_scale} edge factor 16 (directed stream as stored)",
            "num_nodes": store.num_nodes, "num_edges": store.num_edges, "k": k, "ours": ours, "reference": ref,
            "rf_ratio": ours["vertex_cut_rf"] / ref["vertex_cut_rf"],
            "speed_ratio": ours["edges_per_second"] / ref["edges_per_second"]}


def memory(args, work: Path) -> dict:
    from graphstream.estimate import GraphSize, partition_peak_bytes
    store = rmat_store(args.rss_scale, work)
    m = rss_run(Path(store.path), args.rss_k, work)
    # the documented model (docs/estimate.md), for the partition's process alone: its peak is its own
    model = partition_peak_bytes(GraphSize(store.num_nodes, store.num_edges), args.rss_k, "coarse-refine",
                                 children=False)
    return {"graph": f"rmat scale {args.rss_scale} edge factor 16", "num_nodes": store.num_nodes,
            "num_edges": store.num_edges, "k": args.rss_k, "peak_rss_bytes": m["peak_rss_bytes"],
            "model_bytes": model, "within_model": m["peak_rss_bytes"] <= model,
            "seconds": m["seconds"], "replication_factor": m["replication_factor"],
            "node_balance": m["node_balance"], "num_clusters": m["num_clusters"],
            "coarse_edges": m["coarse_edges"], "coarse_edges_dropped_weight": m["coarse_edges_dropped_weight"],
            "phase_seconds": m["phase_seconds"]}


def _machine() -> str:
    """The cores, CPU, memory, kernel and Python the figures were measured on (the line the distributed
    benchmark writes)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_distributed import _machine as machine
    return machine()


def write_doc(res: dict, doc: Path, plot: Path, command: str) -> None:
    algos = ["coarse-refine", "metis", "2ps-l-ref", "2ps-l", "spring", "hdrf", "dbh", "hash"]
    lines = ["# Partition quality, side by side", "",
             f"Measured {res['date']} on {res.get('machine', 'this machine')}, with:", "", "```", command, "```",
             "",
             "GNN replication factor (owned nodes + full 1-hop halo, summed over parts, / num_nodes; "
             "computed the same way for every column) and, in brackets, node balance (max/mean owned). "
             "Graphs undirected, self-loops and duplicate pairs dropped. `metis`: pymetis on the whole graph "
             "in memory (k-way, ufactor 50). `2ps-l-ref`: the authors' C++ (mayerrn/two_phase_streaming), "
             "owner = part holding most of a node's edges. `gap` = coarse-refine / METIS - 1.", ""]
    seeds = next(iter(res["quality"].values()), {}).get("seeds")
    if seeds and len(seeds) > 1:
        lines[-2] += (f" Each cell but `2ps-l-ref`'s (no seed) is the mean RF over seeds {', '.join(map(str, seeds))} "
                      "and, in brackets, the worst balance among them; `gap` compares the means, and in "
                      "brackets coarse-refine's worst seed against METIS's mean.")
    for name, g in res["quality"].items():
        lines += [f"## {name} ({g['num_nodes']:,} nodes, {g['num_edges']:,} edges)", "",
                  "| k | " + " | ".join(a for a in algos if a in next(iter(g["k"].values()))) + " | gap |",
                  "|---|" + "---|" * (sum(a in next(iter(g["k"].values())) for a in algos) + 1)]
        for k, row in g["k"].items():
            cells = [f"{row[a]['replication_factor']:.3f} ({row[a]['node_balance']:.2f})" for a in algos if a in row]
            gap = row.get("coarse-refine", {}).get("gap_vs_metis_pct")
            worst = row.get("coarse-refine", {}).get("replication_factor_max")
            tail = " | |" if gap is None else f" | {gap:+.2f}% |"
            if gap is not None and worst is not None and len(row["coarse-refine"]["replication_factor_each"]) > 1:
                tail = f" | {gap:+.2f}% ({100 * (worst / row['metis']['replication_factor'] - 1):+.2f}%) |"
            lines.append(f"| {k} | " + " | ".join(cells) + tail)
        vc = [(k, row["2ps-l"].get("vertex_cut_rf"), row["2ps-l-ref"].get("vertex_cut_rf"))
              for k, row in g["k"].items() if "2ps-l-ref" in row and "2ps-l" in row]
        if vc:
            lines += ["", "Vertex-cut RF, our 2ps-l vs the reference: " +
                      ", ".join(f"k={k} {a:.3f} vs {b:.3f}" for k, a, b in vc)]
        lines.append("")
    if "speed" in res:
        s = res["speed"]
        lines += ["## 2PS-L speed against the reference", "",
                  f"{s['graph']}: {s['num_nodes']:,} nodes, {s['num_edges']:,} edges, k={s['k']}.", "",
                  "| | vertex-cut RF | seconds | edges/s |", "|---|---|---|---|",
                  f"| ours (whole run) | {s['ours']['vertex_cut_rf']:.4f} | {s['ours']['seconds']:.2f} | "
                  f"{s['ours']['edges_per_second'] / 1e6:.1f}M |",
                  f"| reference C++ (partitioning time) | {s['reference']['vertex_cut_rf']:.4f} | "
                  f"{s['reference']['partitioning_seconds']:.2f} | {s['reference']['edges_per_second'] / 1e6:.1f}M |",
                  "", f"RF ratio {s['rf_ratio']:.4f}, speed ratio {s['speed_ratio']:.2f}.", ""]
    if "memory" in res:
        m = res["memory"]
        lines += ["## coarse-refine memory", "",
                  f"{m['graph']}: {m['num_nodes']:,} nodes, {m['num_edges']:,} edges, k={m['k']}: peak RSS "
                  f"{m['peak_rss_bytes'] / 2**20:.0f} MiB against the model of docs/estimate.md (the process "
                  f"alone) {m['model_bytes'] / 2**20:.0f} MiB; {m['seconds']:.1f} s, RF {m['replication_factor']:.3f}, "
                  f"{m['num_clusters']:,} clusters, {m['coarse_edges']:,} coarse edges "
                  f"(dropped weight {m['coarse_edges_dropped_weight']:,}).", ""]
    text = "\n".join(lines[2:])
    begin, end = "<!-- bench_partition:begin -->", "<!-- bench_partition:end -->"
    old = doc.read_text() if doc.exists() else ""
    if begin in old and end in old:   # keep the hand-written text around the generated tables
        text = old[:old.index(begin) + len(begin)] + "\n" + text + "\n" + old[old.index(end):]
    else:
        text = "\n".join(lines[:2]) + begin + "\n" + text + "\n" + end + "\n"
    doc.write_text(text)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    graphs = list(res["quality"])
    fig, axes = plt.subplots(1, len(graphs), figsize=(4.2 * len(graphs), 3.8), squeeze=False)
    for ax, name in zip(axes[0], graphs, strict=True):
        g = res["quality"][name]
        ks = [int(k) for k in g["k"]]
        for a in algos:
            if a in g["k"][str(ks[0])]:
                ax.plot(ks, [g["k"][str(k)][a]["replication_factor"] for k in ks], marker="o", label=a,
                        linewidth=2.5 if a == "coarse-refine" else 1.2,
                        linestyle="--" if a.endswith("-ref") else "-", markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_yticks([t for t in (1, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8, 10, 15) if lo <= t <= hi])
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xticks(ks)
        ax.set_xticklabels([str(k) for k in ks])
        ax.set_title(name)
        ax.set_xlabel("k")
    axes[0][0].set_ylabel("GNN replication factor")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plot, dpi=110)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="notredame,facebook,cora,citeseer")
    ap.add_argument("--ks", default="4,8,16,32")
    ap.add_argument("--algos", default=",".join(ALGOS))
    ap.add_argument("--balance", type=float, default=1.05)
    ap.add_argument("--seeds", default="0,1,2,3,4",
                    help="seeds of each partitioner and of METIS; a cell is the mean RF over them")
    ap.add_argument("--datasets", default=str(DATASETS))
    ap.add_argument("--work", default="/tmp/bench_partition")
    ap.add_argument("--twops-bin", default="/tmp/2ps/src/build/twophasepartitioner")
    ap.add_argument("--rmat-scale", type=int, default=21, help="R-MAT scale of the 2PS-L speed comparison (0: skip)")
    ap.add_argument("--speed-k", type=int, default=32)
    ap.add_argument("--rss-scale", type=int, default=22, help="R-MAT scale of the memory run (0: skip)")
    ap.add_argument("--rss-k", type=int, default=32)
    ap.add_argument("--doc", default=None, help="write the markdown table here")
    ap.add_argument("--plot", default=None, help="write the plot here")
    ap.add_argument("--from-json", default=None, help="only rewrite --doc/--plot from a saved result")
    args = ap.parse_args(argv)
    if args.from_json:
        res = json.loads(Path(args.from_json).read_text())
        write_doc(res, Path(args.doc), Path(args.plot or Path(args.doc).with_suffix(".png")),
                  ".venv/bin/python tools/bench_partition.py "
                  + res["command"].split("bench_partition.py", 1)[-1].strip())
        return
    args.graphs = [g for g in args.graphs.split(",") if g]
    args.ks = [int(k) for k in args.ks.split(",") if k]
    args.algos = [a for a in args.algos.split(",") if a]
    args.seeds = [int(x) for x in args.seeds.split(",") if x]
    if args.twops_bin and not Path(args.twops_bin).exists():
        log(f"{args.twops_bin} absent: the reference 2PS-L is skipped (build it from github "
            "mayerrn/two_phase_streaming in /tmp)")
        args.twops_bin = None
    os.environ.setdefault("GRAPHSTREAM_PROGRESS", "0")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    res = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "command": " ".join([Path(sys.executable).name, *sys.argv]), "balance": args.balance,
           "machine": _machine()}
    t = time.perf_counter()
    res["quality"] = quality(args, work)
    if args.rmat_scale and args.twops_bin:
        res["speed"] = speed(args, work)
    if args.rss_scale:
        res["memory"] = memory(args, work)
    res["seconds"] = time.perf_counter() - t
    if args.doc:
        write_doc(res, Path(args.doc), Path(args.plot or Path(args.doc).with_suffix(".png")),
                  ".venv/bin/python tools/bench_partition.py "
                  + " ".join(argv or sys.argv[1:]))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
