"""The benchmarks' reports: a run cut short keeps what it measured, and the tables say what was measured."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("generate", "ingest_text", "degrees", "partition", "rounds", "metrics", "build")


def _mode(name: str, seconds: float, digest: str = "same") -> dict:
    return {"mode": name, "cluster_start": 0.5, "seconds": {s: seconds for s in STAGES},
            "phases": {"rounds_accept": 0.25}, "replication_factor": 1.5, "client_peak_rss_bytes": 1,
            "digests": {"g.zarr": digest, "t.zarr": "same", "parts": "same"}}


def _render(tmp_path: Path, head: dict, modes: list[tuple[int, dict]], doc_text: str, *args: str) -> tuple[dict, str]:
    """bench_distributed --render-log of ``head`` and the logged ``modes`` into a doc holding ``doc_text``:
    its JSON report and the doc after."""
    log = tmp_path / "modes.jsonl"
    log.write_text("\n".join(json.dumps(x) for x in [head, *({"workers": w, "result": r} for w, r in modes)]) + "\n")
    doc = tmp_path / "doc.md"
    doc.write_text(doc_text)
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_distributed.py"), "--render-log", str(log),
                           "--doc", str(doc), *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout), doc.read_text()


def test_bench_distributed_renders_a_log(tmp_path):
    """--render-log makes the report and the named doc section from the logged modes alone, in any order."""
    head = {"scale": 10, "edges": 16384, "k": 8, "algo": "coarse-refine", "cpu_count": 16, "text_setup_seconds": 0.1,
            "command": "cmd", "machine": "16 cores (test)", "date": "2026-01-02"}
    modes = [(0, _mode("in-process", 2.0)), (4, _mode("4_workers", 1.0, "other")), (1, _mode("1_workers", 4.0)),
             (-1, _mode("in-process-1-core", 8.0))]
    report, text = _render(tmp_path, head, modes, "# Measured\n\n<!-- bench_distributed:begin -->\nthe 2-core table\n"
                           "<!-- bench_distributed:end -->\n", "--section", "16-core")
    assert report["workers"] == [1, 4]
    four = report["modes"]["4_workers"]
    assert four["speedup_vs_1_worker"]["build"] == 4.0
    assert four["identical"] == {"g.zarr": False, "t.zarr": True, "parts": True}
    assert report["modes"]["1_workers"]["overhead_vs_in_process_1_core"]["rounds"] == 0.5
    assert "the 2-core table" in text   # the other machine's section is kept
    section = text[text.index("<!-- bench_distributed-16-core:begin -->"):]
    assert "Machine: 16 cores (test)" in section and "Date: 2026-01-02" in section
    assert report["threads_speedup"]["build"] == 4.0   # in-process on every core against one core
    assert "| build | 2.0 s (4.00x) | 8.0 s | 4.0 s | 1.0 s (4.00x) | 2.00x | 0.50x |" in section
    assert "identical in every mode (generated store, ingested store, built parts): False" in section
    assert section.rstrip().endswith("<!-- bench_distributed-16-core:end -->")


def test_bench_distributed_table_of_a_partitioner_without_rounds(tmp_path):
    """--algo spring has no coarse-refine rounds (0 s in every mode): their ratios are "n/a" in the table,
    the other stages' ratios as usual."""
    head = {"scale": 10, "edges": 16384, "k": 8, "algo": "spring", "cpu_count": 2, "text_setup_seconds": 0.1,
            "command": "cmd", "machine": "2 cores (test)", "date": "2026-01-02"}
    modes = [(0, _mode("in-process", 2.0)), (1, _mode("1_workers", 4.0)), (2, _mode("2_workers", 2.0)),
             (-1, _mode("in-process-1-core", 3.0))]
    for _, mode in modes:
        mode["seconds"]["rounds"] = 0.0
    report, text = _render(tmp_path, head, modes, "<!-- bench_distributed:begin -->\n<!-- bench_distributed:end -->\n")
    assert report["threads_speedup"]["rounds"] is None and report["threads_speedup"]["build"] == 1.5
    assert "| coarse-refine's rounds (LP + refine) | 0.0 s (n/a) | 0.0 s | 0.0 s | 0.0 s (n/a) | n/a | n/a |" in text
    assert "| build | 2.0 s (1.50x) | 3.0 s | 4.0 s | 2.0 s (2.00x) | 2.00x | 1.33x |" in text


def test_bench_distributed_repeats_report_medians(tmp_path):
    """--repeat's runs of a mode (logged one line each) become one mode: every stage the median of its runs,
    each run's seconds kept; outputs that differ between runs of a mode are not reported identical."""
    head = {"scale": 10, "edges": 16384, "k": 8, "algo": "coarse-refine", "cpu_count": 2, "text_setup_seconds": 0.1,
            "command": "cmd", "machine": "2 cores (test)", "date": "2026-01-02"}
    runs = [(0, _mode("in-process", 2.0)), (1, _mode("1_workers", 4.0)), (2, _mode("2_workers", 2.0)),
            (0, _mode("in-process", 2.0)), (1, _mode("1_workers", 9.0)), (2, _mode("2_workers", 3.0, "other")),
            (0, _mode("in-process", 2.0)), (1, _mode("1_workers", 5.0)), (2, _mode("2_workers", 2.5))]
    report, text = _render(tmp_path, head, runs, "<!-- bench_distributed:begin -->\n<!-- bench_distributed:end -->\n")
    modes = report["modes"]
    assert modes["1_workers"]["seconds"]["build"] == 5.0
    assert [r["build"] for r in modes["1_workers"]["seconds_each"]] == [4.0, 9.0, 5.0]
    assert modes["2_workers"]["speedup_vs_1_worker"]["build"] == 2.0
    assert modes["2_workers"]["identical"]["g.zarr"] is False and modes["1_workers"]["identical"]["g.zarr"]
    assert "median of 3 runs" in text


def test_bench_distributed_warmup_runs_first_and_is_not_a_mode(tmp_path):
    """--warmup: the in-process mode once before the timed ones, its seconds in the head, not among the modes;
    --pin-workers: the worker on a core of its own, and every stage's CPU seconds by process."""
    log = tmp_path / "modes.jsonl"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_distributed.py"), "--scale", "9",
                           "--workers", "1", "--warmup", "--pin-workers", "--workdir", str(tmp_path / "work"),
                           "--log", str(log)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert set(lines[0]["warmup_seconds"]) >= {"generate", "ingest_text", "partition", "build"}
    assert [line["workers"] for line in lines[1:]] == [0, 1, -1]
    report = json.loads(done.stdout)
    assert list(report["modes"]) == ["in-process", "1_workers", "in-process-1-core"]
    assert report["warmup_seconds"] == lines[0]["warmup_seconds"]
    one = report["modes"]["1_workers"]
    assert list(one["pinned_cores"].values()) == [min(os.sched_getaffinity(0))]
    assert set(one["cpu_seconds"]["build"]) >= {"client", "workers"} and one["cpu_seconds"]["build"]["workers"] > 0
    assert 0 < one["cores_busy"]["build"]


def test_bench_partition_speed_compare_runs_the_fast_preset_beside_the_default(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_partition_speed.py"), "--compare",
                           "--graphs", "rmat10", "--ks", "4", "--solvers", "coarse-refine,coarse-refine:preset=fast",
                           "--work", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    row = json.loads(done.stdout)["graphs"]["rmat10"]["k=4"]
    assert row["coarse-refine"]["preset"] == "default" and row["coarse-refine"]["coarse_trials"] == 3
    fast = row["coarse-refine:preset=fast"]
    assert fast["preset"] == "fast" and fast["coarse_trials"] == 1
    assert fast["seconds_vs_coarse_refine"] == fast["seconds"] / row["coarse-refine"]["seconds"]


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="the sampler reads /proc")
def test_the_sampled_peak_counts_the_processes_a_run_starts_and_starts_again_on_reset():
    """A small process whose child holds 300 MB for a while: the tree's peak counts the child, which the
    process's own peak RSS does not; after a reset, a child holding little leaves a peak far below it.
    (In a process of its own: the tree counts the process it runs in, and the test runner's is large.)"""
    script = f"""
import subprocess, sys
sys.path.insert(0, {str(ROOT / "tools")!r})
from bench_partition_speed import TreePeak
from graphstream._resources import peak_rss_bytes

def child(mib):
    code = f"import numpy as np, time; a = np.ones({{mib}} << 17); time.sleep(0.3)"   # MiB of float64
    subprocess.run([sys.executable, "-c", code], check=True)

with TreePeak() as tree:
    child(300)
    big = tree.peak
    tree.reset()
    child(1)
print(big, tree.peak, peak_rss_bytes())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    big, small, own = (int(x) for x in done.stdout.split())
    assert big >= 300 << 20 > own
    assert 0 < small < 200 << 20


def test_bench_partition_speed_compare_repeats_alternate_and_read_the_csr_back(tmp_path):
    """--compare --repeat: every solver run that many times, the median and each run reported, the ratio
    to coarse-refine's median; the in-memory solver's CSR made once (its later runs read it back) and
    removed at the end."""
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_partition_speed.py"), "--compare",
                           "--graphs", "rmat10", "--ks", "4", "--solvers", "coarse-refine,metis", "--repeat", "3",
                           "--work", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    graph = json.loads(done.stdout)["graphs"]["rmat10"]
    assert graph["baseline_stream_pass"]["edges_per_s"] > 0   # the machine's speed in the same run
    assert graph["baseline_stream_pass"]["edges_per_s"] == graph["num_edges"] / graph["baseline_stream_pass"]["seconds"]
    row = graph["k=4"]
    for solver in ("coarse-refine", "metis"):
        r = row[solver]
        assert r["runs"] == 3 and len(r["seconds_each"]) == 3 and len(r["peak_rss_bytes_each"]) == 3
        assert all(t >= p for t, p in zip(r["peak_tree_rss_bytes_each"], r["peak_rss_bytes_each"], strict=True))
        assert abs(r["seconds"] - sorted(r["seconds_each"])[1]) < 0.01   # the median (each rounded to 10 ms)
    assert row["coarse-refine"]["seconds_vs_coarse_refine"] == 1.0
    assert row["coarse-refine"]["warmup_seconds"] > 0 and "warmup_seconds" not in row["metis"]   # timed apart
    assert row["metis"]["seconds_vs_coarse_refine"] == row["metis"]["seconds"] / row["coarse-refine"]["seconds"]
    assert len(set(row["metis"]["replication_factor_each"])) == 1   # METIS is deterministic for its seed
    assert row["metis"]["csr_read_from_cache"] is False   # the row's load_seconds: the run that made it
    runs = [line.split(" ", 3)[2:] for line in done.stderr.splitlines() if line.startswith("rmat10 4 ")]
    assert [solver for solver, _ in runs] == ["coarse-refine", "metis", "metis", "coarse-refine", "coarse-refine",
                                              "metis"]
    assert [json.loads(r)["csr_read_from_cache"] for solver, r in runs if solver == "metis"] == [False, True, True]
    assert not (tmp_path / "csr-cache").exists()


def _tool_report(tool: str, *args: str) -> dict:
    """The JSON report of ``tools/<tool> ARGS``, run as a user runs it (exit 0 asserted)."""
    done = subprocess.run([sys.executable, str(ROOT / "tools" / tool), *args], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_bench_build_tasks_times_every_stage_of_a_cluster_build(tmp_path):
    """bench_build_tasks: each build stage's tasks timed on 1 and 2 workers, the parts' edge shares, and
    the outputs of both worker counts identical."""
    from graphstream.ingest.rmat import generate_rmat
    store = generate_rmat(tmp_path / "g.zarr", scale=10, edge_factor=8, seed=1, undirected=True)
    report = _tool_report("bench_build_tasks.py", str(store.path), "-k", "4", "--workers", "1", "2",
                          "--work", str(tmp_path / "work"))
    assert report["identical"] is True
    assert len(report["part_edge_shares"]) == 4 and abs(sum(report["part_edge_shares"]) - 1) < 1e-3
    assert [r["workers"] for r in report["runs"]] == [1, 2]
    for run in report["runs"]:
        stages = run["stages"]
        # parts this small are built whole, one task each (none is cut into steps)
        assert set(stages) == {"build: route edges", "build: degrees", "build: parts", "build: parts: part"}
        assert stages["build: parts"]["tasks"] == 4 and len(stages["build: parts"]["task_seconds"]) == 4
        assert stages["build: parts: part"]["task_seconds"] == stages["build: parts"]["task_seconds"]
        # the task stream's times are the workers' clocks shifted by each worker's estimate of its offset to
        # the scheduler (from its heartbeats: off by up to half a round trip, 0.19 s seen on a loaded 2-core
        # machine), so a task's stop may fall that much after the client's wall time
        skew = 0.5
        assert -skew <= stages["build: route edges"]["first_start"] <= stages["build: parts"]["last_stop"]
        assert stages["build: parts"]["last_stop"] <= run["seconds"] + skew


def test_bench_rounds_tasks_counts_the_waves_of_coarse_refine_s_rounds(tmp_path):
    """bench_rounds_tasks: the rounds' waves by stage on 1 and 2 workers (one task a wave on one worker, a
    refinement sweep of R rounds = R waves: at most 8, fewer on a graph of few segments), the plans
    identical, and spans within the phases."""
    from graphstream.ingest.rmat import generate_rmat
    from graphstream.partition.coarse_rounds import round_bounds
    from graphstream.partition.vertex_stream import build_vertex_stream
    store = generate_rmat(tmp_path / "g.zarr", scale=11, edge_factor=8, seed=1, undirected=True)
    sweep_rounds = len(round_bounds(build_vertex_stream(store, tmp_path / "vs").offsets, 8))   # 8 at most
    report = _tool_report("bench_rounds_tasks.py", str(store.path), "-k", "4", "--workers", "1", "2",
                          "--work", str(tmp_path / "work"))
    assert report["identical"] is True and [r["workers"] for r in report["runs"]] == [1, 2]
    for run in report["runs"]:
        stages = run["stages"]
        assert {"coarse-refine: label propagation", "coarse-refine: refine summary",
                "coarse-refine: refine"} <= set(stages)
        refine = stages["coarse-refine: refine"]
        assert refine["waves"] % sweep_rounds == 0 and refine["waves"] > sweep_rounds
        assert refine["tasks"] >= refine["waves"]
        if run["workers"] == 1:
            assert refine["tasks"] == refine["waves"]
        for entry in stages.values():
            assert 0 <= entry["mean"] <= entry["longest"]   # durations: each on one worker's clock
        if run["workers"] == 1:
            # one worker: a wave's span is its tasks' durations on one clock, within the client's phases; on
            # two, each worker's times carry its own estimate of its offset to the scheduler (see above)
            for entry in stages.values():
                assert entry["longest"] <= entry["span"] + 1e-6
            phases = run["phase_seconds"]
            rounds = phases["label_propagation"] + phases["refine"]
            waves = sum(stages[name]["span"] for name in stages if name.startswith("coarse-refine"))
            assert waves <= rounds
    assert not (tmp_path / "work" / "w1" / "rounds").exists()


def test_simple_csr_is_the_symmetric_simple_graph(tmp_path):
    """bench_partition_speed's CSR for the in-memory solvers (built in place to fit R-MAT s23): both
    orientations of every edge, self-loops and duplicates dropped, columns sorted, isolated nodes kept."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tools"))
    from bench_partition_speed import simple_csr

    from graphstream.store import GraphWriter, open_store
    rng = np.random.default_rng(0)
    n = 500
    src, dst = rng.integers(0, n, 20000), rng.integers(0, n, 20000)
    src[:50] = dst[:50]   # self-loops
    with GraphWriter(tmp_path / "g.zarr", num_nodes=n + 3, directed=False, chunk_size=777) as w:
        w.append(src, dst)
    xadj, adj = simple_csr(open_store(tmp_path / "g.zarr"))
    pairs = {(int(u), int(v)) for u, v in zip(src, dst, strict=True) if u != v}
    want = sorted(pairs | {(v, u) for u, v in pairs})
    got = [(u, int(v)) for u in range(n + 3) for v in adj[xadj[u]:xadj[u + 1]]]
    assert got == want and len(xadj) == n + 4 and xadj[-1] == len(adj)


def test_bench_build_tasks_cut_against_whole_from_a_saved_owner(tmp_path):
    """--save-owner, then --owner (no partition); --whole alternates the cut and whole builds on the
    cluster and in-process; with small buckets part of the plan is cut into its steps; all identical."""
    import numpy as np

    from graphstream.ingest.rmat import generate_rmat
    store = generate_rmat(tmp_path / "g.zarr", scale=10, edge_factor=8, seed=1, undirected=True)
    tool = [sys.executable, str(ROOT / "tools" / "bench_build_tasks.py"), str(store.path)]
    first = subprocess.run([*tool, "-k", "4", "--workers", "1", "--save-owner", str(tmp_path / "o.npy")],
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    owner = np.load(tmp_path / "o.npy")
    owner[: len(owner) * 9 // 10] = 0   # one part with most of the nodes and edges
    np.save(tmp_path / "o.npy", owner)
    done = subprocess.run([*tool, "--owner", str(tmp_path / "o.npy"), "--workers", "2", "--in-process", "2",
                           "--whole", "--repeat", "2", "--bucket-bytes", "1024"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["identical"] is True and report["k"] == 4 and max(report["part_edge_shares"]) > 0.5
    runs = [(r["repeat"], r["mode"], r["cut"]) for r in report["runs"]]
    assert runs == [(0, "cluster", True), (0, "cluster", False), (0, "in-process", True), (0, "in-process", False),
                    (1, "cluster", False), (1, "cluster", True), (1, "in-process", False), (1, "in-process", True)]
    for run in report["runs"]:
        if run["mode"] == "cluster":
            cut_steps = {"build: parts: layout", "build: parts: fill"} <= set(run["stages"])
            assert cut_steps == run["cut"]
        else:
            assert run["passes"]["workers"] == 2


def test_bench_rf_variants_judges_every_variant_against_the_first_on_the_same_runs(tmp_path):
    """Every variant runs on every graph, k and seed; each run's change is against the baseline's run of the
    same graph, k and seed, and the summary is made of those changes (the baseline's all zero)."""
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_rf_variants.py"), "--graphs", "rmat10:4,rmat10:8",
                           "--seeds", "0,1", "--variant", "default", "--variant", "lp_passes=1 coarse_solver=metis",
                           "--work", str(tmp_path)], capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    runs = report["runs"]
    assert len(runs) == 2 * 2 * 2 and report["baseline"] == "default"
    base = {(r["k"], r["seed"]): r["replication_factor"] for r in runs if r["variant"] == "default"}
    other = [r for r in runs if r["variant"] != "default"]
    assert {(r["k"], r["seed"]) for r in other} == set(base)
    for r in other:
        assert r["rf_change"] == r["replication_factor"] / base[(r["k"], r["seed"])] - 1
    summary = report["variants"]["lp_passes=1 coarse_solver=metis"]
    changes = [r["rf_change"] for r in other]
    assert summary["runs"] == 4 and summary["rf_change_mean"] == sum(changes) / 4
    assert summary["rf_change_min"] == min(changes) and summary["rf_change_max"] == max(changes)
    assert report["variants"]["default"]["rf_change_max"] == report["variants"]["default"]["rf_change_min"] == 0


def test_bench_rf_variants_refuses_a_field_without_a_value(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_rf_variants.py"), "--graphs", "rmat10:4",
                           "--variant", "lp_passes", "--work", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode != 0 and "'lp_passes' is not name=value" in done.stderr


def test_bench_distributed_command_line_leaves_out_where_the_results_go():
    """The command a table prints is the one that reproduces its figures: ``--log``, ``--doc`` and
    ``--section`` go, with their values, however they are spelled; the measuring options stay."""
    sys.path.insert(0, str(ROOT / "tools"))
    from bench_distributed import _measuring_args
    argv = ["--scale", "22", "--log", "/tmp/modes.log", "--workers", "1", "2", "--doc=docs/distributed.md",
            "--section", "2-core-pinned", "--pin-workers", "--repeat", "3"]
    assert _measuring_args(argv) == ["--scale", "22", "--workers", "1", "2", "--pin-workers", "--repeat", "3"]


def test_bench_partition_cells_are_the_mean_over_seeds_and_keep_each_seed():
    """A quality cell: the mean RF over the seeds (what the gap to METIS compares), the worst balance,
    every seed's RF with their extremes, and the seconds of all of them."""
    sys.path.insert(0, str(ROOT / "tools"))
    from bench_partition import _over_seeds
    runs = [{"replication_factor": rf, "node_balance": bal, "seconds": 1.0}
            for rf, bal in ((1.10, 1.02), (1.16, 1.05), (1.13, 1.01))]
    cell = _over_seeds(runs)
    assert cell["replication_factor"] == pytest.approx(1.13)
    assert cell["node_balance"] == 1.05 and cell["seconds"] == 3.0
    assert cell["replication_factor_each"] == [1.10, 1.16, 1.13]
    assert (cell["replication_factor_min"], cell["replication_factor_max"]) == (1.10, 1.16)
    assert "vertex_cut_rf" not in cell
    assert _over_seeds([{**r, "vertex_cut_rf": v} for r, v in zip(runs, (2.0, 3.0, 4.0))])["vertex_cut_rf"] == 3.0
