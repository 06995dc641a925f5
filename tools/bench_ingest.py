"""Benchmark ingest: SNAP .gz, plain text and .npy edge lists into a graph store.

Prints ONE JSON object on stdout. Each ingest runs as its own
``graphstream ingest --json`` process (so peak RSS is that ingest's own);
figures are the best and the median of ``--repeat`` runs. "cli" runs are
fresh processes and include numba's one-time start-up (about 0.5-1 s here);
"warm" runs repeat the ingest in one process after a first one. Baselines measured
in the same run: pyarrow's multi-threaded CSV reader on the same text
(whole file in memory: a parse-speed reference, not a streaming ingest),
and GraphWriter fed from memory (the store's write ceiling).

    flock /tmp/graphstream-bench.lock .venv/bin/python tools/bench_ingest.py --edges 50000000

The machine is shared: the load average before and after is reported.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NOTREDAME = ROOT.parent / "shared" / "datasets" / "snap" / "web-NotreDame.txt.gz"


def make_inputs(tmp: Path, edges: int, seed: int) -> tuple[Path, Path]:
    """Random edges over 2**24 nodes, as tab-separated text and as an int64 E x 2 .npy."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    txt, npy = tmp / f"edges-{edges}.txt", tmp / f"edges-{edges}.npy"
    if txt.exists() and npy.exists():
        return txt, npy
    rng = np.random.default_rng(seed)
    arr = np.lib.format.open_memmap(npy, mode="w+", dtype=np.int64, shape=(edges, 2))
    schema = pa.schema([("s", pa.int64()), ("d", pa.int64())])
    opts = pcsv.WriteOptions(include_header=False, delimiter="\t")
    with pcsv.CSVWriter(str(txt), schema, write_options=opts) as w:
        step = 5_000_000
        for i in range(0, edges, step):
            block = rng.integers(0, 1 << 24, size=(min(step, edges - i), 2))
            arr[i:i + len(block)] = block
            w.write_table(pa.table({"s": block[:, 0], "d": block[:, 1]}))
    arr.flush()
    del arr
    return txt, npy


_WARM = """
import json, sys, time
from graphstream.ingest import ingest
src, out, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
ingest(src, out, overwrite=True)  # pays numba's one-time start-up
times, cpu = [], []
for _ in range(repeat):
    t, c = time.perf_counter(), time.process_time()
    store = ingest(src, out, overwrite=True)
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
print(json.dumps({"num_edges": store.num_edges, "seconds": times, "cpu_seconds": cpu}))
"""


def run_ingest(src: Path, out: Path, repeat: int) -> dict:
    """``repeat`` cold CLI processes, then ``repeat`` warm runs in one process."""
    env = {**os.environ, "GRAPHSTREAM_PROGRESS": "0"}
    runs = []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-m", "graphstream", "ingest", str(src), str(out), "--overwrite",
                               "--json"], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"ingest of {src} failed: {proc.stderr.strip()}")
        runs.append(json.loads(proc.stdout))
    eps = [r["edges_per_second"] for r in runs]
    disk = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    proc = subprocess.run([sys.executable, "-c", _WARM, str(src), str(out), str(repeat)], capture_output=True,
                          text=True, env=env, check=True)
    warm = json.loads(proc.stdout)
    warm_eps = [warm["num_edges"] / t for t in warm["seconds"]]
    shutil.rmtree(out)
    return {"input": str(src), "input_bytes": src.stat().st_size, "num_edges": runs[0]["num_edges"],
            "num_nodes": runs[0]["num_nodes"],
            "cli_seconds_best": min(r["seconds"] for r in runs),
            "cli_edges_per_second_best": max(eps), "cli_edges_per_second_median": statistics.median(eps),
            "warm_edges_per_second_best": max(warm_eps), "warm_edges_per_second_median": statistics.median(warm_eps),
            # CPU seconds of all threads: less sensitive to other jobs on a shared machine.
            "warm_edges_per_cpu_second_median": warm["num_edges"] / statistics.median(warm["cpu_seconds"]),
            "peak_rss_bytes": max(r["peak_rss_bytes"] for r in runs),
            "bytes_per_edge_on_disk": disk / runs[0]["num_edges"]}


def pyarrow_baseline(txt: Path) -> float:
    import pyarrow.csv as pcsv
    t = time.perf_counter()
    table = pcsv.read_csv(txt, read_options=pcsv.ReadOptions(column_names=["s", "d"], block_size=16 << 20),
                          parse_options=pcsv.ParseOptions(delimiter="\t"))
    return table.num_rows / (time.perf_counter() - t)


def writer_baseline(npy: Path, tmp: Path, limit: int = 20_000_000) -> float:
    from graphstream.store import GraphWriter
    arr = np.load(npy, mmap_mode="r")
    n = min(limit, len(arr))
    src = np.ascontiguousarray(arr[:n, 0])
    dst = np.ascontiguousarray(arr[:n, 1])
    out = tmp / "writer.zarr"
    t = time.perf_counter()
    with GraphWriter(out, overwrite=True) as w:
        for i in range(0, n, 1 << 20):
            w.append(src[i:i + (1 << 20)], dst[i:i + (1 << 20)])
        w.close()
    rate = n / (time.perf_counter() - t)
    shutil.rmtree(out)
    return rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--edges", type=int, default=20_000_000, help="edges in the generated text/npy inputs")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tmp", default="/tmp/graphstream-bench-ingest", help="scratch folder (inputs are kept)")
    p.add_argument("--clean", action="store_true", help="remove the generated inputs at the end")
    p.add_argument("--make-inputs", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    tmp = Path(args.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    if args.make_inputs:
        make_inputs(tmp, args.edges, args.seed)
        return
    load_before = os.getloadavg()
    # Inputs are made in a child process: a child's peak RSS starts at its parent's, so the
    # parent stays small while it launches the measured ingests.
    subprocess.run([sys.executable, __file__, "--make-inputs", "--edges", str(args.edges), "--seed",
                    str(args.seed), "--tmp", str(tmp)], check=True)
    txt, npy = make_inputs(tmp, args.edges, args.seed)
    result = {"machine_cpus": os.cpu_count(), "load_average_before": load_before}
    if NOTREDAME.exists():
        result["snap_gz"] = run_ingest(NOTREDAME, tmp / "nd.zarr", args.repeat)
    result["text"] = run_ingest(txt, tmp / "text.zarr", args.repeat)
    result["npy"] = run_ingest(npy, tmp / "npy.zarr", args.repeat)
    result["baseline_pyarrow_read_csv_edges_per_second"] = pyarrow_baseline(txt)
    result["baseline_graphwriter_from_memory_edges_per_second"] = writer_baseline(npy, tmp)
    result["ratio_text_vs_pyarrow_read_csv"] = (result["text"]["cli_edges_per_second_best"]
                                                / result["baseline_pyarrow_read_csv_edges_per_second"])
    result["ratio_npy_vs_graphwriter"] = (result["npy"]["cli_edges_per_second_best"]
                                          / result["baseline_graphwriter_from_memory_edges_per_second"])
    result["load_average_after"] = os.getloadavg()
    if args.clean:
        shutil.rmtree(tmp)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
