"""Trainer (dynamic graphs): delta transfer rebuilds exactly the snapshots of a full
transfer, training losses are identical with either, ROC-AUC against a pairwise
reference, T-GCN / EvolveGCN-O on CollegeMsg (edge life 4) and on PGC parts.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from graphstream.dynamic import open_snapshots  # noqa: E402
from graphstream.errors import ParameterError  # noqa: E402
from graphstream.store.delta import apply_delta_vectorized, diff_sorted  # noqa: E402
from trainer.dynamic import (  # noqa: E402
    DynamicConfig,
    SnapshotFeeder,
    rebuild_on_device,
    roc_auc,
    run_dynamic_training,
    sample_negatives,
)

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
CPU = torch.device("cpu")


def graphstream(*args) -> dict:
    proc = subprocess.run([sys.executable, "-m", "graphstream", *map(str, args), "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def college(tmp_path_factory):
    src = DATASETS / "temporal" / "CollegeMsg.txt"
    if not src.is_file():
        pytest.skip(f"CollegeMsg not found at {src}")
    d = tmp_path_factory.mktemp("college")
    graphstream("ingest", src, d / "cm.zarr", "--format", "snap", "--one-based", "--time-column", "2")
    graphstream("snapshots", d / "cm.zarr", d / "snap.zarr", "--num-snapshots", "30", "--edge-life", "4",
                "--keyframe-every", "8")
    return d


def test_rebuild_on_device_equals_reference():
    rng = np.random.default_rng(0)
    for trial in range(20):
        prev = np.unique(rng.integers(0, 5000, rng.integers(0, 400)))
        cur = np.unique(np.concatenate([rng.choice(prev, len(prev) // 2, replace=False) if len(prev) else
                                        np.zeros(0, np.int64), rng.integers(0, 5000, rng.integers(0, 200))]))
        d = diff_sorted(prev, np.ones(len(prev), np.int64), cur, np.ones(len(cur), np.int64))
        got = rebuild_on_device(torch.from_numpy(prev), torch.from_numpy(d.removed_pos),
                                torch.from_numpy(d.added_keys))
        assert np.array_equal(got.numpy(), cur)
        assert np.array_equal(apply_delta_vectorized(prev, d.removed_pos, d.added_keys), cur)


def test_roc_auc_matches_pairwise_reference():
    rng = np.random.default_rng(1)
    pos = rng.integers(0, 20, 50).astype(float)      # many ties
    neg = rng.integers(0, 15, 70).astype(float)
    ref = np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg])
    assert roc_auc(pos, neg) == pytest.approx(ref, abs=1e-12)
    assert roc_auc(np.array([2.0]), np.array([1.0])) == 1.0


def test_negatives_are_non_edges():
    keys = torch.tensor(sorted({a * 50 + b for a, b in np.random.default_rng(2).integers(0, 50, (300, 2))}))
    gen = torch.Generator().manual_seed(0)
    neg = sample_negatives(keys, 50, gen)
    assert len(neg) > 0 and not np.isin(neg.numpy(), keys.numpy()).any()


def test_delta_transfer_rebuilds_full_snapshots(college):
    store = open_snapshots(college / "snap.zarr")
    full, delta = SnapshotFeeder(store, CPU, "full"), SnapshotFeeder(store, CPU, "delta")
    n = 0
    for (t, a), (u, b) in zip(full, delta):
        assert t == u
        assert torch.equal(a, b)
        assert np.array_equal(a.numpy(), store.snapshot_keys(t)[0])
        n += 1
    assert n == store.num_snapshots == full.stats.snapshots == delta.stats.snapshots
    assert full.stats.bytes == int(store.edge_counts.sum()) * 8           # int32 pairs
    assert delta.stats.bytes * 2.5 < full.stats.bytes                     # edge life 4: ~3x fewer bytes
    assert delta.stats.full_snapshots >= 1                                 # the sequence starts full
    # both ways counted, whichever way the snapshots went (specs/trainer.md: "report both")
    for feeder in (full, delta):
        assert (feeder.stats.bytes_full, feeder.stats.bytes_delta) == (full.stats.bytes, delta.stats.bytes)


@pytest.mark.parametrize("model", ["tgcn", "evolvegcn"])
def test_losses_identical_with_full_or_delta_transfer(college, model):
    cfg = dict(model=model, hidden=16, epochs=4, seed=3)
    full = run_dynamic_training(college / "snap.zarr", DynamicConfig(transfer="full", **cfg), threads=1)
    delta = run_dynamic_training(college / "snap.zarr", DynamicConfig(transfer="delta", **cfg), threads=1)
    assert full["losses"] == delta["losses"] and len(full["losses"]) == 4
    assert full["test_auc"] == delta["test_auc"]
    assert delta["transfer_bytes"] < full["transfer_bytes"]
    for run in (full, delta):   # one run reports what the other way would have moved
        assert (run["transfer_bytes_full"], run["transfer_bytes_delta"]) == \
            (full["transfer_bytes"], delta["transfer_bytes"])


def test_the_persistence_baseline_is_scored_on_the_same_pairs(college):
    """With an edge life of 4 most positives were edges the snapshot before: the baseline is reported
    beside the model, and the model is scored on the new edges alone (each pair recounted here)."""
    from graphstream.dynamic import open_snapshots
    from trainer.dynamic import Split, run_sequence
    from trainer.temporal_models import build_dynamic_model

    store = open_snapshots(college / "snap.zarr")
    cfg = DynamicConfig(model="tgcn", hidden=8, epochs=1)
    out = run_sequence(build_dynamic_model("tgcn", 8, 0), store, CPU, cfg, part=0, epoch=0, train=False)
    previous, expected = None, {"train": [], "val": [], "test": []}
    split = Split(store.num_snapshots, cfg.val_fraction, cfg.test_fraction)
    for t, keys in SnapshotFeeder(store, CPU, "full"):
        if previous is not None and keys.numel():
            expected[split.of(t)].append(np.isin(keys.numpy(), previous.numpy()))
        previous = keys
    for which in ("train", "val", "test"):
        assert np.array_equal(out["persisted"][which][0], np.concatenate(expected[which]).astype(np.float32))
    assert out["persisted"]["test"][0].mean() > 0.5 > out["persisted"]["test"][1].mean()
    result = run_dynamic_training(college / "snap.zarr", DynamicConfig(hidden=8, epochs=1), threads=1)
    assert result["test_persistence_roc_auc"] > 0.8 and 0 < result["test_new_edges"] < result["test_pairs"] / 2
    assert 0.0 <= result["test_new_edges_roc_auc"] <= 1.0


def test_an_edge_between_parts_is_evaluated_once(college):
    """It is in both parts' sequences: pooled, the parts' positives were more than the whole graph's."""
    from graphstream.dynamic import open_snapshots
    from trainer.dynamic import _open_sequences, run_sequence
    from trainer.temporal_models import build_dynamic_model

    graphstream("partition", college / "snap.zarr", "-k", "3", "--algo", "pgc", "--out", college / "pgc3")
    cfg = DynamicConfig(model="tgcn", hidden=8, epochs=1)
    model = build_dynamic_model("tgcn", 8, 0)
    parts, _ = _open_sequences(college / "pgc3")
    whole = run_sequence(model, open_snapshots(college / "snap.zarr"), CPU, cfg, part=0, epoch=0, train=False)
    for which in ("val", "test"):
        pooled = sum(len(run_sequence(model, p, CPU, cfg, part=i, epoch=0, train=False)["scores"][which][0])
                     for i, p in enumerate(parts))
        assert pooled == len(whole["scores"][which][0]), which


def test_tgcn_learns_on_pgc_parts(college):
    parts = college / "pgc"
    graphstream("partition", college / "snap.zarr", "-k", "2", "--algo", "pgc", "--out", parts)
    out = run_dynamic_training(parts, DynamicConfig(model="tgcn", hidden=16, epochs=15), workers=1, threads=1)
    assert out["num_parts"] == 2 and out["test_auc"] > 0.75, out["test_auc"]
    central = run_dynamic_training(parts, DynamicConfig(model="tgcn", hidden=16, epochs=15), centralized=True,
                                   threads=1)
    assert central["test_auc"] > 0.75
    with pytest.raises(ParameterError, match="more workers than parts"):
        run_dynamic_training(parts, DynamicConfig(), workers=3)


def test_two_workers_when_one_holds_no_evaluation_pairs(college):
    """--algo snapshot cuts the sequence by time: the middle part holds no val or test snapshot, its
    worker's score arrays are empty, and reading them back ended a valid run with a traceback."""
    parts = college / "by-time"
    graphstream("partition", college / "snap.zarr", "-k", "3", "--algo", "snapshot", "--out", parts)
    out = run_dynamic_training(parts, DynamicConfig(model="tgcn", hidden=4, epochs=1), workers=2, threads=1)
    assert out["workers"] == 2 and out["test_auc"] is not None


@pytest.mark.gpu
def test_delta_on_gpu_equals_full(college):
    store = open_snapshots(college / "snap.zarr")
    dev = torch.device("cuda")
    for (_, a), (_, b) in zip(SnapshotFeeder(store, dev, "full"), SnapshotFeeder(store, dev, "delta")):
        assert torch.equal(a, b)


def test_undirected_negatives_are_not_edges_read_backwards():
    """An undirected snapshot holds each edge once as (min, max); a candidate (v, u) of an edge (u, v)
    was taken as a non-edge (the score is symmetric: it is that edge)."""
    rng = np.random.default_rng(5)
    pairs = np.sort(rng.integers(0, 30, (200, 2)), axis=1)
    keys = torch.tensor(sorted({a * 30 + b for a, b in pairs}))
    neg = sample_negatives(keys, 30, torch.Generator().manual_seed(0), undirected=True)
    u, v = neg // 30, neg % 30
    assert len(neg) > 0 and bool((u <= v).all())
    assert not np.isin((u * 30 + v).numpy(), keys.numpy()).any()


def test_no_training_transition_is_refused(college, tmp_path):
    """3 snapshots: one transition validates, one tests, none trains; every part weighed 0 and the
    average was a model of zeros, reported with AUCs of 0.5 and exit 0."""
    graphstream("snapshots", college / "cm.zarr", tmp_path / "s3.zarr", "--num-snapshots", "3")
    with pytest.raises(ParameterError, match="no transition to train on"):
        run_dynamic_training(tmp_path / "s3.zarr", DynamicConfig(hidden=4, epochs=1), threads=1)
    proc = subprocess.run([sys.executable, "-m", "graphstream", "train", str(tmp_path / "s3.zarr"), "--model",
                           "tgcn", "--epochs", "1", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "no transition to train on" in proc.stderr and proc.stdout == ""


def test_a_nan_loss_of_a_dynamic_run_ends_it(college):
    from trainer.loop import TrainingDivergedError
    with pytest.raises(TrainingDivergedError, match=r"part 0, epoch \d+: the training loss is nan"):
        run_dynamic_training(college / "snap.zarr", DynamicConfig(model="evolvegcn", hidden=8, epochs=3, lr=1e30),
                             threads=1)


def test_centralized_refuses_another_store_at_the_source_path(college, tmp_path):
    """The parts' source store written again (another graph, --overwrite): --centralized trained on it."""
    import shutil
    src = tmp_path / "s.zarr"
    shutil.copytree(college / "snap.zarr", src)
    graphstream("partition", src, "-k", "2", "--out", tmp_path / "p")
    graphstream("snapshots", college / "cm.zarr", src, "--num-snapshots", "12", "--overwrite")
    with pytest.raises(ParameterError, match="needs the snapshot store the parts were cut from"):
        run_dynamic_training(tmp_path / "p", DynamicConfig(hidden=4, epochs=1), centralized=True, threads=1)


def test_centralized_finds_its_relative_source_past_another_store_here(college, tmp_path, monkeypatch):
    """A relative source is tried from the current folder, then beside the parts: another store of that
    name in the current folder was refused instead of the next place tried."""
    import shutil
    home = tmp_path / "home"
    home.mkdir()
    shutil.copytree(college / "snap.zarr", home / "s.zarr")
    monkeypatch.chdir(home)
    from graphstream.cli import main
    assert main(["partition", "s.zarr", "-k", "2", "--out", "p"]) == 0
    from graphstream.store.integrity import seal  # a relative source, as folders written before recorded
    doc = json.loads((home / "p" / "manifest.json").read_text())
    (home / "p" / "manifest.json").write_text(json.dumps(seal({**doc, "source": "s.zarr"})))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    graphstream("snapshots", college / "cm.zarr", elsewhere / "s.zarr", "--num-snapshots", "12")
    monkeypatch.chdir(elsewhere)
    out = run_dynamic_training(home / "p", DynamicConfig(hidden=4, epochs=1), centralized=True, threads=1)
    assert out["mode"] == "centralized"


def test_the_plain_output_does_not_call_a_dynamic_runs_roc_auc_accuracy():
    """`train --model tgcn` printed "val_accuracy: 0.7752", --json's deprecated alias of val_auc."""
    from trainer.cli import SUMMARY

    dynamic = {"model": "tgcn", "test_auc": 0.8, "val_auc": 0.77, "test_accuracy": 0.8, "val_accuracy": 0.77}
    assert "val_auc" in SUMMARY(dynamic) and not {"test_accuracy", "val_accuracy"} & set(SUMMARY(dynamic))
    static = {"model": "gcn", "test_accuracy": 0.81, "val_accuracy": 0.79}
    assert {"test_accuracy", "val_accuracy"} <= set(SUMMARY(static))


def test_file_urls_name_snapshot_stores_and_their_parts(college, tmp_path):
    """`partition file:///.../snap.zarr` took the snapshot store for a graph store ("format
    'graphstream.snapshots', expected 'graphstream.graph'"), and `train file:///.../parts --model tgcn`
    looked for ".../file:/..." under the working folder."""
    from graphstream.cli import main
    assert main(["partition", f"file://{college / 'snap.zarr'}", "-k", "2", "--out", f"file://{tmp_path / 'p'}"]) == 0
    out = run_dynamic_training(f"file://{tmp_path / 'p'}", DynamicConfig(hidden=4, epochs=1), threads=1)
    assert out["num_parts"] == 2
