"""Benchmark of the dask.distributed path: every stage in-process, on 1 worker and on N workers, in one run.

Prints ONE JSON object on stdout. On an R-MAT graph of scale S (default 22,
edge factor 16), for each mode (``in-process``, then local clusters of 1, 2,
... single-threaded worker processes, ``--workers``), each in its own
process so that one mode's caches and memory do not help the next, it times:

- ``generate``: ``generate_rmat`` (chunk ranges as tasks);
- ``ingest_text``: ``ingest`` of the same edges as a SNAP text file (byte
  ranges as tasks; the file is written once, untimed, before the modes run);
- ``degrees``: ``degree_pass`` (edge chunks as tasks);
- ``partition``: ``partition`` with ``--algo`` (``coarse-refine:edge-balance=F``: with
  ``--edge-balance F``; default coarse-refine: its
  rounds over node ranges as tasks), without its metrics pass; its phases
  are reported too (``phases``), and ``rounds`` = label propagation +
  refinement, the part that runs as tasks over node ranges;
- ``metrics``: ``vertex_partition_metrics`` of that plan (edge chunks as
  tasks, replica bitsets as shards);
- ``build``: ``build_partitions`` of that plan (edges routed to shards by
  chunk ranges, one task per part).

Each stage's time excludes the cluster's start (reported apart as
``cluster_start``) and starts with the earlier stages' writes on disk
(``os.sync``, untimed); numba's compiled kernels are loaded (disk cache) by a
scale-17 warm-up of every stage in the same workers first (``WARM_SCALE``). Outputs are
compared with the in-process run's (``identical``: the generated store, the
ingested store and the built dataset, file by file; the partition's
``replication_factor`` against in-process's). ``speedup`` is in-process-
free: the N-worker time against the 1-worker time per stage;
``overhead_1_worker`` is the 1-worker time against in-process. Two
in-process modes run: ``in-process`` as users run it (numba and Blosc use
every core) and ``in-process-1-core`` pinned to one core
(``sched_setaffinity``, ``NUMBA_NUM_THREADS=1``), the CPU a single-threaded
worker has: the overhead of the cluster machinery itself is the 1-worker time
against that mode (``overhead_vs_in_process_1_core``). ``threads_speedup``
is the one-core mode's time against the in-process one per stage: what the
machine's cores give the same code with threads in one process, the bound
to read N workers' speedup against (on the 2-core VMs 1.5-1.7x, not 2x:
the cores share the last-level cache and the memory bandwidth).

    .venv/bin/python tools/bench_distributed.py [--scale 22] [--workers 1 2] [--k 8]
        [--algo coarse-refine] [--workdir /tmp/bench_distributed] [--doc docs/distributed.md [--section NAME]]
        [--log modes.jsonl] [--render-log modes.jsonl] [--warmup] [--repeat N] [--pin-workers]

``--doc FILE`` rewrites the table between ``<!-- bench_distributed:begin -->``
and ``<!-- bench_distributed:end -->`` in FILE (command, machine, date);
``--section NAME`` uses the markers ``bench_distributed-NAME`` instead, so
that runs on different machines keep their own tables. ``--log FILE`` appends
each mode's result to FILE as soon as it is measured (a run cut short keeps
what it measured); ``--render-log FILE`` makes the report and the table from
such a file without running anything (the machine and date are the run's).
``--warmup`` runs the in-process mode once, untimed, first (its stage
seconds are reported as ``warmup_seconds``): on a freshly started machine
the first mode otherwise pays the disk's and page cache's first touches (a
16-vCPU VM: text ingest 7.8 s in the first mode, 2.5-2.7 s run again).
``--repeat N`` runs the modes N times, alternating (in-process, 1 worker,
2 workers, one core, then again), and reports each time as the median of the
N runs (``seconds_each`` keeps them all): on a 2-core VM one stage varies by
20-40% from run to run.

``--pin-workers`` puts each worker process on a core of its own. A
"single-threaded" worker is single-threaded for dask only: zarr decodes and
encodes chunks in a thread pool, and the range writer compresses one range
while the task makes the next, so one unpinned worker keeps 1.1-1.6 cores
busy (``cores_busy``: CPU seconds of the client, scheduler and workers over
the stage's seconds). On a 2-core machine, 2 unpinned workers against 1 then
measure the spare core, not the scaling: pinned, N workers have N cores.

Every mode runs with OpenMP's passive wait policy, as the CLI runs its
commands (``graphstream._resources.quiet_openmp``; ``omp_wait_policy`` in the
JSON), unless ``OMP_WAIT_POLICY`` is set.

Goals (specs/distributed.md): speedup >= 1.7 at 2 workers for generate,
ingest, degrees, partition rounds and build on a 2-core machine; overhead of
1 worker at most 15%.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).parent))   # bench_store's text formatter

BEGIN, END = "<!-- bench_distributed:begin -->", "<!-- bench_distributed:end -->"
STAGES = ("generate", "ingest_text", "degrees", "partition", "rounds", "metrics", "build")
ONE_CORE = -1   # --mode value of the in-process mode pinned to one core
GOALS = {"speedup_2_workers": 1.7, "overhead_1_worker": 1.15}
# The warm-up's graph: the smallest whose stages take the paths of large graphs. From 2^17 nodes the degree
# pass saves its counts as int32 shards; warmed at scale 10 it returned int64 vectors, and the timed s22
# pass paid the loading of its int32 kernel (2 pinned workers, first pass after a scale-10 warm-up
# 1.38-1.44 s, after a scale-17 one 1.10-1.14 s, later passes 0.90-1.05 s)
WARM_SCALE = 17


def _digest(path: Path, mode_dir: Path) -> str:
    """One digest of a folder's files (relative names and bytes), manifests' timing fields excluded (and their
    CRC-32C seal, which covers those fields), and the mode's own folder (manifests name their source store)."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path).as_posix()
        data = f.read_bytes()
        if f.name in ("manifest.json", "part.json"):
            obj = json.loads(data.replace(str(mode_dir).encode(), b"MODE"))
            data = json.dumps(_without_timings(obj), sort_keys=True).encode()
        h.update(rel.encode() + b"\0" + data)
    return h.hexdigest()


def _without_timings(obj):
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items()
                if not any(w in k for w in ("seconds", "rss", "created", "time_", "elapsed", "cluster", "crc32c"))
                and k != "workers"}   # threads or workers that built the parts: an execution detail
    if isinstance(obj, list):
        return [_without_timings(v) for v in obj]
    return obj


def run_mode(workers: int, scale: int, k: int, algo: str, work: Path, text: Path, pin: bool = False) -> dict:
    """All stages in one mode (workers=0: in-process; ONE_CORE: in-process on one core); run in a child process."""
    os.environ["GRAPHSTREAM_PROGRESS"] = "0"
    if workers == ONE_CORE:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from graphstream._resources import peak_rss_bytes
    from graphstream.assemble import build_partitions
    from graphstream.cluster import ClusterConfig, open_client, worker_peak_rss
    from graphstream.ingest import ingest
    from graphstream.ingest.rmat import generate_rmat
    from graphstream.partition import partition
    from graphstream.partition.metrics import vertex_partition_metrics
    from graphstream.store.degrees import degree_pass

    config = ClusterConfig() if workers <= 0 else ClusterConfig(workers=workers, threads_per_worker=1)
    out = work / f"mode-{workers}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    result: dict = {"mode": _mode_name(workers)}
    t0 = time.perf_counter()
    with open_client(config, local_directory=out / "dask") as client:
        result["cluster_start"] = time.perf_counter() - t0
        if client is not None and pin:
            result["pinned_cores"] = _pin_workers(client)

        def stages(prefix: str, s: int, text_file: Path | None) -> dict:
            times, keep, cpu = {}, {}, {}
            os.sync()   # the warm-up's and the earlier modes' writes on disk (as between stages: _lap)
            t, c = time.perf_counter(), _cpu_seconds(client)
            store = generate_rmat(out / f"{prefix}g.zarr", scale=s, edge_factor=16, seed=1, client=client)
            times["generate"], cpu["generate"], t, c = _lap(t, c, client)
            if text_file is not None:
                ingest(text_file, out / f"{prefix}t.zarr", client=client)
                times["ingest_text"], cpu["ingest_text"], t, c = _lap(t, c, client)
            degree_pass(store, client=client, work_dir=out)
            times["degrees"], cpu["degrees"], t, c = _lap(t, c, client)
            name, _, edge_balance = algo.partition(":edge-balance=")   # "coarse-refine:edge-balance=1.1"
            params = {"edge_balance": float(edge_balance)} if edge_balance else {}
            plan = partition(store, k, name, seed=0, work_dir=out, client=client, metrics=False, **params)
            times["partition"], cpu["partition"], t, c = _lap(t, c, client)
            phases = dict((plan.metrics or {}).get("phase_seconds", {}))
            if plan.metrics and "rounds_accept_seconds" in plan.metrics:   # their sequential part, on the client
                phases["rounds_accept"] = plan.metrics["rounds_accept_seconds"]
            times["rounds"] = phases.get("label_propagation", 0.0) + phases.get("refine", 0.0)
            keep["phases"] = phases
            measured = vertex_partition_metrics(store, plan.owner, k, client=client, work_dir=out)
            times["metrics"], cpu["metrics"], t, c = _lap(t, c, client)
            keep["replication_factor"] = measured["replication_factor"]
            build_partitions(store, plan, out / f"{prefix}parts", work_dir=out, client=client)
            times["build"], cpu["build"], t, c = _lap(t, c, client)
            return {"seconds": times, "cpu_seconds": cpu, **keep}

        # numba's disk cache loaded in every process, tasks' code shipped; the text parser's kernels too
        # (without them the timed ingest paid their loading: R-MAT s22 on 1 pinned worker 5.4-6.0 s
        # against 5.0-5.4 s warmed)
        stages("warm-", WARM_SCALE, _warm_text(work))
        measured = stages("", scale, text)
        result.update(measured)
        if client is not None:
            result["worker_peak_rss_bytes"] = worker_peak_rss(client)
    result["client_peak_rss_bytes"] = peak_rss_bytes()
    result["digests"] = {name: _digest(out / name, out) for name in ("g.zarr", "t.zarr", "parts")}
    return result


def _cpu_seconds(client) -> dict[str, float]:
    """CPU seconds (user + system, all threads) so far of this process (with a LocalCluster's scheduler),
    the workers and a scheduler of its own."""
    cpu = {"client": time.process_time()}
    if client is not None:
        cpu["workers"] = sum(client.run(time.process_time).values())
        if client.run_on_scheduler(os.getpid) != os.getpid():   # a LocalCluster's runs in the client's process
            cpu["scheduler"] = client.run_on_scheduler(time.process_time)
    return cpu


def _lap(t: float, cpu: dict, client) -> tuple[float, dict, float, dict]:
    """A stage's wall seconds and CPU seconds by process kind since (t, cpu); and the next stage's start
    (the same CPU reading: one round of ``client.run`` a stage), once the stages' writes so far are on disk.

    The kernel writes a file's dirty pages back 30 s after they were written (``vm.dirty_expire_centisecs``),
    so without ``os.sync`` the stores of the first stages (R-MAT s22: 385 MB dirty after generate) went to
    disk in the middle of a later stage, its threads and those of the writeback sharing the cores."""
    wall = time.perf_counter() - t
    now = _cpu_seconds(client)
    os.sync()
    return wall, {key: now[key] - cpu[key] for key in now}, time.perf_counter(), now


def _pin_workers(client) -> dict[str, int]:
    """Every worker process (all its threads, and those it starts later) on a core of its own, round robin:
    then N single-threaded workers use N cores, where an unpinned one also runs its write-behind and
    compression threads on the other cores."""
    cores = sorted(os.sched_getaffinity(0))
    pins = {}
    for i, worker in enumerate(sorted(client.scheduler_info()["workers"])):
        pins[worker] = cores[i % len(cores)]
        client.run(_pin_process, pins[worker], workers=[worker])
    return pins


def _pin_process(core: int) -> None:
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), {core})
        except OSError:   # a thread that ended meanwhile
            pass


def _measuring_args(argv: list[str]) -> list[str]:
    """The command line less the options that only say where the results go (``--log``, ``--doc``,
    ``--section``, with their values): what reproduces the figures."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--log", "--doc", "--section"):
            skip = True
        elif not a.startswith(("--log=", "--doc=", "--section=")):
            out.append(a)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--algo", default="coarse-refine")
    ap.add_argument("--workdir", default="/tmp/bench_distributed")
    ap.add_argument("--doc", help="markdown file whose bench_distributed section gets the table")
    ap.add_argument("--section", default="", help="name of the doc section (markers bench_distributed-NAME)")
    ap.add_argument("--log", help="append each mode's result to this JSON-lines file as soon as it is measured")
    ap.add_argument("--render-log", help="no runs: the report (and --doc table) of the modes in this log")
    ap.add_argument("--warmup", action="store_true",
                    help="run the in-process mode once, untimed, before the timed modes (a fresh machine's "
                         "first touches of the disk and page cache otherwise land in the first mode)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run every mode this many times, alternating; each time reported is the median")
    ap.add_argument("--pin-workers", action="store_true",
                    help="each worker process on a core of its own (round robin): N workers use N cores")
    ap.add_argument("--mode", type=int, help=argparse.SUPPRESS)   # internal: run one mode
    args = ap.parse_args()
    work = Path(args.workdir)
    text = work / "edges.txt"
    if args.mode is not None:
        if not text.exists():   # one mode run by hand: a full run writes the text first and removes it at the end
            work.mkdir(parents=True, exist_ok=True)
            _write_text(work, args.scale, text)
        print(json.dumps(run_mode(args.mode, args.scale, args.k, args.algo, work, text, args.pin_workers)))
        return
    if args.render_log:
        lines = [json.loads(line) for line in Path(args.render_log).read_text().splitlines() if line.strip()]
        head, runs = lines[0], {}
        for m in lines[1:]:
            runs.setdefault(m["workers"], []).append(m["result"])
        modes = {workers: _median_mode(r) for workers, r in runs.items()}
    else:
        head, modes = _run_modes(args, work, text)
    report = _report(head, modes)
    json.dump(report, sys.stdout, indent=1)
    print()
    if args.doc:
        _write_doc(Path(args.doc), report, args.section)
    if not args.render_log:
        shutil.rmtree(work, ignore_errors=True)


def _run_modes(args, work: Path, text: Path) -> tuple[dict, dict]:
    """Every mode in its own child process, in-process ones first; each logged (``--log``) when done, so that a
    run cut short still leaves the modes it measured."""
    from graphstream._resources import quiet_openmp
    base_env = dict(os.environ)
    policy = quiet_openmp(base_env)   # every mode as the CLI runs its commands
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    _write_text(work, args.scale, text)
    _warm_text(work)
    head = {"scale": args.scale, "edges": 16 * 2**args.scale, "k": args.k, "algo": args.algo,
            "cpu_count": os.cpu_count(), "text_setup_seconds": time.perf_counter() - t,
            "command": " ".join([".venv/bin/python", "tools/bench_distributed.py", *_measuring_args(sys.argv[1:])]),
            "machine": _machine(), "date": time.strftime("%Y-%m-%d"),
            "omp_wait_policy": policy}
    log = Path(args.log) if args.log else None
    runs: dict[int, list[dict]] = {}
    order = [0, *args.workers, ONE_CORE]   # the pinned mode last: on many cores it matters least
    order = order * args.repeat            # repeats alternate the modes, so a slow spell hits them all
    for i, workers in enumerate([0, *order] if args.warmup else order):
        warmup = args.warmup and i == 0
        cmd = [sys.executable, __file__, "--mode", str(workers), "--scale", str(args.scale), "--k", str(args.k),
               "--algo", args.algo, "--workdir", str(work), *(["--pin-workers"] if args.pin_workers else [])]
        env = dict(base_env)
        if workers == ONE_CORE:   # set before numba is imported; the affinity is set by the child itself
            env.update(NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            sys.exit(f"mode {workers} failed:\n{done.stderr[-4000:]}")
        if warmup:
            head["warmup_seconds"] = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        runs.setdefault(workers, []).append(result)
        if log and sum(map(len, runs.values())) == 1:   # the head first (with the warm-up's seconds, if any)
            log.write_text(json.dumps(head) + "\n")
        if log:
            with log.open("a") as f:
                f.write(json.dumps({"workers": workers, "result": result}) + "\n")
    return head, {workers: _median_mode(r) for workers, r in runs.items()}


def _median_mode(runs: list[dict]) -> dict:
    """One mode's runs as one result: every time (stage seconds, phases, CPU seconds) the median of the
    runs; ``seconds_each`` keeps every run's stage seconds; digests must agree across the runs."""
    first = dict(runs[0])
    first["runs"] = len(runs)
    first["seconds_each"] = [r["seconds"] for r in runs]
    first["seconds"] = {s: median([r["seconds"][s] for r in runs]) for s in first["seconds"]}
    if "phases" in first:
        first["phases"] = {p: median([r["phases"].get(p, 0.0) for r in runs]) for p in first["phases"]}
    if "cpu_seconds" in first:
        first["cpu_seconds"] = {s: {kind: median([r["cpu_seconds"][s][kind] for r in runs]) for kind in c}
                                for s, c in first["cpu_seconds"].items()}
    first["digests"] = {name: (d if all(r["digests"][name] == d for r in runs) else "differs between runs")
                        for name, d in first["digests"].items()}
    return first


def _report(head: dict, modes: dict) -> dict:
    """Ratios between the modes: N workers against the fewest, 1 worker against both in-process modes."""
    base, one_core = modes[0], modes.get(ONE_CORE)
    counts = sorted(w for w in modes if w > 0)
    one = modes[counts[0]] if counts else None
    report = {**{key: head[key] for key in ("scale", "edges", "k", "algo", "cpu_count", "text_setup_seconds")},
              **{key: head[key] for key in ("warmup_seconds", "omp_wait_policy") if key in head},
              "goals": GOALS, "workers": counts, "modes": {}}
    if one_core is not None:
        # the same code in one process, its threads on every core against one core: what this machine's
        # cores give a stage (memory bandwidth and the last-level cache are shared), the bound against
        # which N workers on N cores are read
        report["threads_speedup"] = {s: _ratio(one_core["seconds"][s], base["seconds"][s]) for s in STAGES}
    for workers, m in modes.items():
        entry = {key: m[key] for key in ("cluster_start", "pinned_cores", "runs", "seconds", "seconds_each",
                                         "phases", "replication_factor", "client_peak_rss_bytes") if key in m}
        if "cpu_seconds" in m:   # how many cores a stage kept busy, all processes together
            entry["cpu_seconds"] = m["cpu_seconds"]
            entry["cores_busy"] = {s: sum(c.values()) / m["seconds"][s] for s, c in m["cpu_seconds"].items()
                                   if m["seconds"][s]}
        entry["worker_peak_rss_bytes"] = m.get("worker_peak_rss_bytes")
        entry["identical"] = {name: m["digests"][name] == base["digests"][name] for name in m["digests"]}
        if workers > 0:
            entry["overhead_vs_in_process"] = {s: _ratio(m["seconds"][s], base["seconds"][s]) for s in STAGES}
            if one_core is not None:
                entry["overhead_vs_in_process_1_core"] = {s: _ratio(m["seconds"][s], one_core["seconds"][s])
                                                          for s in STAGES}
            entry["speedup_vs_1_worker"] = {s: _ratio(one["seconds"][s], m["seconds"][s]) for s in STAGES}
            rf, rf0 = m.get("replication_factor"), base.get("replication_factor")
            entry["rf_vs_in_process"] = rf / rf0 if rf and rf0 else None
        report["modes"][_mode_name(workers)] = entry
    report.update(command=head["command"], machine=head["machine"], date=head["date"])
    return report


def _machine() -> str:
    import platform
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def _write_doc(path: Path, report: dict, section: str = "") -> None:
    """The per-stage table of ``report`` between the markers of ``path`` (``section`` names them apart)."""
    begin, end = (BEGIN, END) if not section else (BEGIN.replace(":", f"-{section}:"), END.replace(":", f"-{section}:"))
    modes, workers = report["modes"], report["workers"]
    names = [m for m in ("in-process", "in-process-1-core") if m in modes]
    threads = report.get("threads_speedup")
    head = ["stage", *({"in-process": "in-process" + (" (vs 1 core)" if threads else ""),
                        "in-process-1-core": "in-process, 1 core"}[m] for m in names)]
    head += [f"{w} worker{'s' * (w > 1)}" + (f" (vs {workers[0]})" if w != workers[0] else "") for w in workers]
    first = modes[f"{workers[0]}_workers"]
    overheads = [key for key in ("overhead_vs_in_process", "overhead_vs_in_process_1_core") if key in first]
    head += [f"{workers[0]} worker vs in-process" + (", 1 core" if key.endswith("core") else "") for key in overheads]
    label = {"generate": "generate", "ingest_text": "ingest (text)", "degrees": "degrees",
             "partition": "partition (coarse-refine, all phases)", "rounds": "coarse-refine's rounds (LP + refine)",
             "metrics": "metrics", "build": "build"}
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for stage in STAGES:
        cells = [label[stage]] + [f"{modes[m]['seconds'][stage]:.1f} s"
                                  + (f" ({_times(threads[stage])})" if threads and m == "in-process" else "")
                                  for m in names]
        for w in workers:
            m = modes[f"{w}_workers"]
            cells.append(f"{m['seconds'][stage]:.1f} s" + (f" ({_times(m['speedup_vs_1_worker'][stage])})"
                                                         if w != workers[0] else ""))
        cells += [_times(first[key][stage]) for key in overheads]
        rows.append("| " + " | ".join(cells) + " |")
    same = all(all(m["identical"].values()) for m in modes.values())
    rfs = sorted({round(m["replication_factor"], 4) for m in modes.values()})
    accept = modes[f"{workers[-1]}_workers"].get("phases", {}).get("rounds_accept")
    text = "\n".join([
        begin, "",
        f"Command: `{report['command']}`  ",
        f"Machine: {report['machine']}  ",
        f"Date: {report['date']}  ",
        f"Graph: R-MAT scale {report['scale']} ({report['edges']:,} directed edges), k = {report['k']}, "
        f"{report['algo']}; single-threaded workers"
        + (", each pinned to a core of its own" if any("pinned_cores" in m for m in modes.values()) else "")
        + "; each stage without the cluster's start; "
        + (f"median of {runs} runs. " if (runs := first.get("runs", 1)) > 1 else "one run. ")
        + f"In brackets: the speedup against {workers[0]} worker{'s' * (workers[0] > 1)}"
        + (f"; for in-process, its threads on all {report['cpu_count']} cores against one core (what the "
           "machine's cores give the same code in one process)" if threads else "") + ".",
        "", *rows, "",
        f"Outputs identical in every mode (generated store, ingested store, built parts): {same}; "
        f"replication factor {', '.join(map(str, rfs))}."
        + (f" The rounds' sequential part (accepting proposals, applying moves, on the client) took "
           f"{accept:.1f} s with {workers[-1]} workers." if accept is not None else ""),
        "", end])
    doc = path.read_text()
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + text + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(doc)


def _mode_name(workers: int) -> str:
    return {0: "in-process", ONE_CORE: "in-process-1-core"}.get(workers, f"{workers}_workers")


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _times(ratio: float | None) -> str:
    """A ratio as the table writes it; "n/a" for a stage that took no time in the mode it is read against
    (the rounds of a partitioner without them: ``--algo spring``)."""
    return "n/a" if ratio is None else f"{ratio:.2f}x"


def _warm_text(work: Path) -> Path:
    """The scale-10 SNAP text of the warm-up (written once, beside the timed one)."""
    text = work / "warm-edges.txt"
    if not text.exists():
        tmp = text.with_name(f"warm-edges.{os.getpid()}.tmp")
        _write_text(work, 10, tmp)
        os.replace(tmp, text)
    return text


def _write_text(work: Path, scale: int, text: Path) -> None:
    """The SNAP text file of the scale-S graph (seed 1), written once by the in-process path, untimed."""
    os.environ["GRAPHSTREAM_PROGRESS"] = "0"
    import numpy as np
    from bench_store import _format_edges  # the one SNAP-text formatter of the benchmarks (numba)

    from graphstream.ingest.rmat import generate_rmat

    store = generate_rmat(work / "text-source.zarr", scale=scale, edge_factor=16, seed=1, overwrite=True)
    with open(text, "wb") as f:
        f.write(b"# R-MAT edges\n# FromNodeId\tToNodeId\n")
        buf = np.empty(store.chunk_size * 24, dtype=np.uint8)
        for batch in store.stream():
            f.write(buf[:_format_edges(batch.src, batch.dst, buf)].tobytes())
    shutil.rmtree(work / "text-source.zarr")


if __name__ == "__main__":
    main()
