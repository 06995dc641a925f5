"""What a user sees (issue 18, items 5 and 6): short aligned summaries, --verbose, --json unchanged, progress lines."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from graphstream import cli
from graphstream._report import format_bytes, format_rate, format_seconds, format_value

# Keys whose values are measured, not computed: they differ between two runs.
MEASURED = re.compile(r"(seconds|_per_second|_bytes|^bytes_)")
SIZE = re.compile(r"\d[\d.]* (kB|MB|GB)$")
RATE = re.compile(r"\d[\d.]*[KMG]? edges/s")
TIME = r"\d[\d.]* (s|min)"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("out") / "g.zarr"
    assert cli.main(["generate", "rmat", str(path), "--scale", "12", "--json"]) == 0
    return path


def human(argv, capsys, monkeypatch):
    """(stdout lines, the result dict they were printed from) of a run without --json."""
    seen = {}
    real = cli._print_human
    monkeypatch.setattr(cli, "_print_human", lambda result, args: (seen.update(result), real(result, args)))
    capsys.readouterr()
    assert cli.main([str(a) for a in argv]) == 0
    return capsys.readouterr().out.splitlines(), seen


def as_json(argv, capsys) -> dict:
    capsys.readouterr()
    assert cli.main([str(a) for a in argv] + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def assert_aligned(lines):
    """Every line is `key:` padded to one column, then the value."""
    columns = {len(re.match(r"^\S+:\s+", line).group(0)) for line in lines}
    assert len(columns) == 1, lines


def test_formats():
    assert format_bytes(213590016) == "214 MB" and format_bytes(1_240_000_000) == "1.24 GB"
    assert format_rate(12_345_678, "edges") == "12.3M edges/s"
    assert format_seconds(0.4213) == "0.42 s" and format_seconds(41.4) == "41 s"
    assert format_seconds(125) == "2 min 05 s"
    assert format_value("peak_rss_bytes", 213590016) == "214 MB"
    assert format_value("edges_per_second", 2.5e6) == "2.5M edges/s"
    assert format_value("num_edges", 262144) == "262,144"
    # a mean of 6198.3 was shown as "6198.0", part workloads 42129.0 and 42136.0 both as "4.213e+04"
    assert format_value("edges_per_snapshot_mean", 6198.3) == "6198.3"
    assert format_value("part_workloads", [42129.0, 42136.0]) == "42129.0, 42136.0"
    assert format_value("replication_factor", 1.0) == "1.0" and format_value("x", 1.23456) == "1.235"
    # small rates in plain digits, never scientific notation (6180.4 once printed as 6.18e+03)
    assert format_rate(6180.4, "edges") == "6180 edges/s" and format_rate(12.5, "edges") == "12.5 edges/s"
    assert format_rate(999.9, "edges") == "1000 edges/s" and format_rate(12_345, "edges") == "12.3K edges/s"


def test_generate_and_info_summary(tmp_path, capsys, monkeypatch):
    out = tmp_path / "g.zarr"
    lines, result = human(["generate", "rmat", out, "--scale", "12"], capsys, monkeypatch)
    assert 4 <= len(lines) <= 12 and len(lines) < len(result)
    assert_aligned(lines)
    text = dict(line.split(":", 1) for line in lines)
    assert SIZE.search(text["peak_rss_bytes"].strip()) and RATE.search(text["edges_per_second"])
    assert "id_dtype" not in text and "chunk_size" not in text
    lines, result = human(["info", out], capsys, monkeypatch)
    assert len(lines) <= 15 and "peak_rss_bytes" in result
    assert_aligned(lines)
    text = dict(line.split(":", 1) for line in lines)
    assert SIZE.search(text["bytes_on_disk"].strip()) and RATE.search(text["seconds"])
    assert f"{result['num_edges']:,}" in text["num_edges"]


@pytest.mark.parametrize("algo", ["coarse-refine", "hdrf"])
def test_partition_summary_verbose_and_json(store, algo, capsys, monkeypatch):
    argv = ["partition", store, "-k", "4", "--algo", algo]
    lines, result = human(argv, capsys, monkeypatch)
    assert len(lines) <= 15, lines
    assert_aligned(lines)
    text = "\n".join(lines)
    assert re.search(r"^replication_factor:\s+\d\.\d+$", text, re.M)
    assert re.search(r"^peak_rss_bytes:\s+\d[\d.]* (MB|GB)$", text, re.M) and RATE.search(text)
    assert "params" in result and "params:" not in text and "seed:" not in text and "part_halo" not in text
    # --verbose: every key, settings included (nested and indented)
    verbose, _ = human(argv + ["--verbose"], capsys, monkeypatch)
    keys = {line.split(":")[0].strip() for line in verbose}
    assert set(result) <= keys and "seed" in keys and len(verbose) > len(lines)
    assert re.search(rf"^  metis:\s+{TIME}$" if algo == "coarse-refine" else rf"^  owner:\s+{TIME}$",
                     "\n".join(verbose), re.M)
    # --json: the same keys, and the same values for everything that is not a measurement
    js = as_json(argv, capsys)
    assert list(js) == list(result)
    for key, value in result.items():
        if not MEASURED.search(key) and key != "phase_seconds":
            assert js[key] == json.loads(json.dumps(value, default=cli._json_default)), key


def run_cli(args, progress: str | None, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "GRAPHSTREAM_PROGRESS"}
    if progress is not None:
        env["GRAPHSTREAM_PROGRESS"] = progress
    proc = subprocess.run([sys.executable, "-m", "graphstream.cli", *map(str, args)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)  # stderr is a pipe, not a terminal
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.splitlines()


def test_progress_lines_when_not_a_terminal(tmp_path):
    err = run_cli(["generate", "rmat", "g.zarr", "--scale", "12"], None, tmp_path)
    assert any(re.fullmatch(rf"graphstream: rmat: .* edges in {TIME} \(.* edges/s\)", line) for line in err), err
    err = run_cli(["partition", "g.zarr", "-k", "4", "--algo", "coarse-refine", "--out", "parts"], None, tmp_path)
    for phase in ("vertex stream", "label propagation", "coarse graph", "metis", "refine"):
        matching = [line for line in err if re.fullmatch(rf"graphstream: coarse-refine: {phase} {TIME}", line)]
        assert len(matching) == 1, (phase, err)
    assert any(re.match(rf"graphstream: build: parts: 4 parts in {TIME}", line) for line in err), err
    assert not any("\r" in line or "%|" in line for line in err)   # no bar drawn into a file
    err = run_cli(["info", "g.zarr"], None, tmp_path)
    assert any(re.fullmatch(rf"graphstream: info: degree pass {TIME}", line) for line in err), err


def test_progress_off(tmp_path):
    assert run_cli(["generate", "rmat", "g.zarr", "--scale", "10"], "0", tmp_path) == []
    assert run_cli(["partition", "g.zarr", "-k", "2", "--algo", "coarse-refine", "--out", "p"], "0", tmp_path) == []


def test_train_reports_its_epochs_once(tmp_path):
    """train: one progress line for the epochs, from the first worker only (two workers here)."""
    pytest.importorskip("torch")
    run_cli(["generate", "rmat", "g.zarr", "--scale", "8"], "0", tmp_path)
    n = 256
    rng = np.random.default_rng(0)
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    np.save(nodes / "features.npy", rng.standard_normal((n, 4)).astype(np.float32))
    np.save(nodes / "labels.npy", rng.integers(0, 3, n))
    for name, lo, hi in (("train_mask", 0, 0.6), ("val_mask", 0.6, 0.8), ("test_mask", 0.8, 1.0)):
        u = np.arange(n) / n
        np.save(nodes / f"{name}.npy", (u >= lo) & (u < hi))
    run_cli(["partition", "g.zarr", "-k", "2", "--algo", "hash", "--out", "parts", "--nodes", "nodes"], "0", tmp_path)
    err = run_cli(["train", "parts", "--epochs", "3", "--workers", "2", "--hidden", "8"], None, tmp_path)
    lines = [line for line in err if re.fullmatch(rf"graphstream: train: 3 epochs in {TIME} \(.*epochs/s\)", line)]
    assert len(lines) == 1, err
