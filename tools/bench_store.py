"""Benchmark of the graph store: generator, streaming reads, ingest, disk and memory.

Prints ONE JSON object on stdout. For each scale S (default 20 and 24, edge
factor 16, so 16 * 2**S edges) it measures, each phase in a fresh
subprocess so that its peak RSS is its own:

- ``generate``: ``generate_rmat`` into a store (edges/s, bytes per edge on
  disk), against the R-MAT kernel alone (no store) as baseline;
- ``read_noop`` / ``read_degree``: a full ``GraphStore.stream()`` pass with a
  no-op consumer and with the degree pass (``degree_pass``), and
  ``read_noop_noprefetch`` (``prefetch=0``) as baseline for the prefetcher;
- ``ingest_text`` / ``ingest_npy``: ``graphstream.ingest.ingest`` of the same
  edges written as SNAP text (``src<TAB>dst`` lines under a ``#`` header) and
  as an E x 2 ``.npy`` (written by untimed ``export_*`` phases);
- ``read_noop_unchecked``: the no-op read of a copy of the same store without
  chunk checksums (format version 1, written by an untimed ``strip`` phase):
  the baseline for what the CRC-32C of every chunk costs (``read_checksum_cost``).
  The two reads alternate ``--repeat`` times and the medians are compared.

Run it under the shared benchmark lock, with data in /tmp (deleted after
each scale unless ``--keep``):

    flock /tmp/graphstream-bench.lock .venv/bin/python tools/bench_store.py \\
        [--scales 20 24] [--workdir /tmp/bench_store] [--skip-ingest]
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

from numba import njit

GOALS = {"generator_edges_per_second": 20e6, "read_edges_per_second": 50e6,
         "ingest_text_edges_per_second": 5e6, "read_peak_rss_bytes": 1 << 30}


# -- phases (each runs in its own process) --------------------------------------------------

def _rss_now() -> int:
    import psutil
    return psutil.Process().memory_info().rss


def _cpu() -> float:
    """User + system CPU seconds of this process, all threads (to tell work from waiting
    on a machine shared with other jobs)."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def phase_generate(args) -> dict:
    from graphstream.ingest.rmat import RmatParams, generate_rmat, rmat_edges
    p = RmatParams(scale=args.scale, edge_factor=args.edge_factor, seed=1, a=0.57, b=0.19, c=0.19)
    rmat_edges(p, 0, 1024)                                   # load the compiled kernel first
    rss0 = _rss_now()
    t, c = time.perf_counter(), _cpu()
    store = generate_rmat(args.store, scale=args.scale, edge_factor=args.edge_factor, seed=1, overwrite=True)
    seconds, cpu = time.perf_counter() - t, _cpu() - c
    disk = _disk_bytes(Path(args.store))
    # Baseline: the kernel alone, same edges, chunk by chunk, nothing stored.
    t = time.perf_counter()
    for first in range(0, p.num_edges, store.chunk_size):
        rmat_edges(p, first, min(store.chunk_size, p.num_edges - first))
    kernel_seconds = time.perf_counter() - t
    return {"num_edges": store.num_edges, "seconds": seconds, "edges_per_second": store.num_edges / seconds,
            "cpu_seconds": cpu, "kernel_only_edges_per_second": store.num_edges / kernel_seconds,
            "bytes_on_disk": disk, "bytes_per_edge": disk / store.num_edges, "rss_before_bytes": rss0}


def phase_read(args) -> dict:
    from graphstream.store import degree_pass, open_store
    store = open_store(args.store)
    if args.consumer == "degree":
        tiny = Path(args.store).with_name("tiny.zarr")        # compile / load the kernel off the clock
        if tiny.exists():
            degree_pass(open_store(tiny))
    rss0 = _rss_now()
    t, c = time.perf_counter(), _cpu()
    if args.consumer == "degree":
        deg = degree_pass(store)
        check = int(deg.out_degree.sum())
    else:
        check = 0
        for batch in store.stream(prefetch=args.prefetch):
            check += len(batch)
    seconds, cpu = time.perf_counter() - t, _cpu() - c
    assert check == store.num_edges, (check, store.num_edges)
    return {"num_edges": store.num_edges, "seconds": seconds, "edges_per_second": store.num_edges / seconds,
            "cpu_seconds": cpu, "rss_before_bytes": rss0}


def phase_export(args) -> dict:
    """Write the store's edges as SNAP text or .npy (the ingest inputs; not a goal)."""
    import numpy as np

    from graphstream.store import open_store
    store = open_store(args.store)
    t = time.perf_counter()
    if args.to.endswith(".npy"):
        out = np.lib.format.open_memmap(args.to, mode="w+", dtype=store.id_dtype, shape=(store.num_edges, 2))
        for batch in store.stream():
            out[batch.start:batch.stop, 0] = batch.src
            out[batch.start:batch.stop, 1] = batch.dst
        out.flush()
        del out
    else:
        with open(args.to, "wb") as f:
            f.write(f"# Directed graph: {args.store}\n# Nodes: {store.num_nodes} Edges: {store.num_edges}\n"
                    "# FromNodeId\tToNodeId\n".encode())
            buf = np.empty(store.chunk_size * 24, dtype=np.uint8)
            for batch in store.stream():
                f.write(buf[:_format_edges(batch.src, batch.dst, buf)].tobytes())
    return {"seconds": time.perf_counter() - t, "bytes": os.path.getsize(args.to)}


@njit(cache=True)
def _put_int(buf, pos, v, end):
    """Decimal digits of v >= 0, then the byte ``end``, at buf[pos:]; returns the new end."""
    digits = 1
    x = v // 10
    while x > 0:
        digits += 1
        x //= 10
    for k in range(digits - 1, -1, -1):
        buf[pos + k] = 48 + v % 10
        v //= 10
    buf[pos + digits] = end
    return pos + digits + 1


@njit(cache=True)
def _format_edges(src, dst, buf):
    """``src<TAB>dst<LF>`` lines into buf; returns the bytes used."""
    pos = 0
    for i in range(src.shape[0]):
        pos = _put_int(buf, pos, src[i], 9)
        pos = _put_int(buf, pos, dst[i], 10)
    return pos


def phase_ingest(args) -> dict:
    from graphstream.ingest import ingest
    rss0 = _rss_now()
    t, c = time.perf_counter(), _cpu()
    store = ingest(args.source, args.store, overwrite=True)
    seconds, cpu = time.perf_counter() - t, _cpu() - c
    return {"num_edges": store.num_edges, "seconds": seconds, "edges_per_second": store.num_edges / seconds,
            "cpu_seconds": cpu,
            "source_bytes": os.path.getsize(args.source), "rss_before_bytes": rss0}


def phase_strip(args) -> dict:
    """Copy the store as a version-1 store: same chunks and compressor, no CRC-32C, the
    pre-checksum attributes (the baseline of the checksum cost; not a goal)."""
    import zarr

    from graphstream.store import default_compressor, open_store
    store = open_store(args.store)
    group = zarr.open_group(args.to, mode="w-")
    for name in store.columns:
        src = store.array(name)
        dst = group.create_array(name, shape=src.shape, chunks=src.chunks, dtype=src.dtype,
                                 compressors=default_compressor(), fill_value=0,
                                 config={"write_empty_chunks": True})
        for a in range(0, src.shape[0], src.chunks[0]):
            dst[a:a + src.chunks[0]] = src[a:a + src.chunks[0]]
    keep = ("num_nodes", "num_edges", "directed", "id_dtype", "source", "chunk_size")
    group.attrs.update({"format": store.attrs["format"], "version": 1, **{k: store.attrs[k] for k in keep},
                        "complete": True})
    return {"bytes": _disk_bytes(Path(args.to))}


PHASES = {"generate": phase_generate, "read": phase_read, "export": phase_export, "ingest": phase_ingest,
          "strip": phase_strip}


def run_phase_here(args) -> None:
    from graphstream._resources import peak_rss_bytes
    result = PHASES[args.phase](args)
    result["peak_rss_bytes"] = peak_rss_bytes()
    print(json.dumps(result))


# -- the driver -------------------------------------------------------------------------------

def run_phase(phase: str, **kw) -> dict:
    cmd = [sys.executable, __file__, "--phase", phase]
    for k, v in kw.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "GRAPHSTREAM_PROGRESS": "0"})
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"rc {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ingest_available() -> str | None:
    """None when graphstream.ingest.ingest can be imported, else why not."""
    proc = subprocess.run([sys.executable, "-c", "from graphstream.ingest import ingest"],
                          capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    return "graphstream.ingest.ingest unavailable: " + (proc.stderr.strip().splitlines() or ["?"])[-1]


def bench_scale(scale: int, args) -> dict:
    work = Path(args.workdir) / f"s{scale}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    store = work / "rmat.zarr"
    out: dict = {"scale": scale, "num_nodes": 1 << scale, "num_edges": args.edge_factor << scale}
    try:
        out["generate"] = run_phase("generate", scale=scale, edge_factor=args.edge_factor, store=store)
        run_phase("generate", scale=4, edge_factor=4, store=work / "tiny.zarr")
        out["read_noop"] = run_phase("read", store=store, consumer="noop", prefetch=2)
        out["read_noop_noprefetch"] = run_phase("read", store=store, consumer="noop", prefetch=0)
        out["read_degree"] = run_phase("read", store=store, consumer="degree")
        unchecked = work / "unchecked.zarr"
        out["strip"] = run_phase("strip", store=store, to=unchecked)
        checked_runs, unchecked_runs = [], []
        for _ in range(args.repeat):    # alternated, so drift on the machine hits both alike
            checked_runs.append(run_phase("read", store=store, consumer="noop", prefetch=2))
            unchecked_runs.append(run_phase("read", store=unchecked, consumer="noop", prefetch=2))
        out["read_noop_checked_runs"] = [r.get("edges_per_second") for r in checked_runs]
        out["read_noop_unchecked_runs"] = [r.get("edges_per_second") for r in unchecked_runs]
        shutil.rmtree(unchecked, ignore_errors=True)
        if args.skip_ingest:
            out["ingest"] = {"skipped": "--skip-ingest"}
        elif (why := ingest_available()) is not None:
            out["ingest"] = {"skipped": why}
        else:
            text, npy = work / "rmat.txt", work / "rmat.npy"
            out["export_text"] = run_phase("export", store=store, to=text)
            out["ingest_text"] = run_phase("ingest", source=text, store=work / "from_text.zarr")
            text.unlink(missing_ok=True)
            shutil.rmtree(work / "from_text.zarr", ignore_errors=True)
            out["export_npy"] = run_phase("export", store=store, to=npy)
            out["ingest_npy"] = run_phase("ingest", source=npy, store=work / "from_npy.zarr")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return out


def _checksum_cost(scale: dict) -> dict:
    import statistics
    checked = [x for x in scale.get("read_noop_checked_runs", []) if x]
    unchecked = [x for x in scale.get("read_noop_unchecked_runs", []) if x]
    if not checked or not unchecked:
        return {}
    a, b = statistics.median(checked), statistics.median(unchecked)
    return {"read_checked_edges_per_second_median": a, "read_unchecked_edges_per_second_median": b,
            "read_checked_vs_unchecked": a / b}


def summary(scales: dict) -> dict:
    def get(s, phase, key):
        return scales.get(s, {}).get(phase, {}).get(key)

    res: dict = {}
    for s in scales:
        gen = get(s, "generate", "edges_per_second")
        read = get(s, "read_noop", "edges_per_second")
        deg = get(s, "read_degree", "edges_per_second")
        base = get(s, "read_noop_noprefetch", "edges_per_second")
        res[f"scale_{s}"] = {
            "generator_edges_per_second": gen,
            "generator_vs_kernel_only": gen / get(s, "generate", "kernel_only_edges_per_second") if gen else None,
            "read_noop_edges_per_second": read,
            "read_degree_edges_per_second": deg,
            "read_prefetch_speedup_vs_no_prefetch": read / base if read and base else None,
            **_checksum_cost(scales[s]),
            "bytes_per_edge": get(s, "generate", "bytes_per_edge"),
            "read_peak_rss_bytes": max(filter(None, [get(s, "read_noop", "peak_rss_bytes"),
                                                     get(s, "read_degree", "peak_rss_bytes")]), default=None),
            "read_noop_peak_rss_bytes": get(s, "read_noop", "peak_rss_bytes"),
            "ingest_text_edges_per_second": get(s, "ingest_text", "edges_per_second"),
            "ingest_npy_edges_per_second": get(s, "ingest_npy", "edges_per_second"),
            "goals_met": {
                "generator": gen is not None and gen >= GOALS["generator_edges_per_second"],
                "read": read is not None and read >= GOALS["read_edges_per_second"],
                "read_rss": (get(s, "read_noop", "peak_rss_bytes") or 1 << 62) < GOALS["read_peak_rss_bytes"],
            },
        }
    keys = sorted(scales, key=int)
    if len(keys) >= 2:
        lo, hi = keys[0], keys[-1]
        a, b = get(lo, "read_noop", "peak_rss_bytes"), get(hi, "read_noop", "peak_rss_bytes")
        res["read_noop_peak_rss_ratio_largest_vs_smallest"] = b / a if a and b else None
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="+", default=[20, 24])
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--workdir", default="/tmp/bench_store")
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--skip-ingest", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="alternated checked/unchecked reads (default 3)")
    # Internal: run one phase in this process.
    ap.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    for name in ("scale", "prefetch"):
        ap.add_argument(f"--{name}", type=int, help=argparse.SUPPRESS)
    for name in ("store", "consumer", "to", "source"):
        ap.add_argument(f"--{name}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase:
        run_phase_here(args)
        return 0
    import numba
    t = time.perf_counter()
    load_start = os.getloadavg()
    scales = {str(s): bench_scale(s, args) for s in args.scales}
    print(json.dumps({
        "benchmark": "store", "edge_factor": args.edge_factor, "cpu_count": os.cpu_count(),
        # Other jobs on the machine slow every figure: compare cpu_seconds too.
        "load_average_start": load_start, "load_average_end": os.getloadavg(),
        "numba_threads": numba.config.NUMBA_NUM_THREADS, "goals": GOALS,
        "summary": summary(scales), "scales": scales, "seconds": time.perf_counter() - t,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
