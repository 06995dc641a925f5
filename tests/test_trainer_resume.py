"""The trainer's resume, losses and failures as a user meets them: a run extended after a short last round
trains every epoch, a checkpoint is resumed on its own parts only, the reported losses are every part's
whatever the workers, PATH.best follows the best as it changes, and NaN, a dead worker or an allocation
too large end the run in one line."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_trainer_safety import tiny_graph, tiny_parts  # noqa: E402

from graphstream.cli import _finite, _json_default, main  # noqa: E402
from graphstream.errors import NodeDataError, ParameterError, ResourceError  # noqa: E402
from trainer import train as train_module  # noqa: E402
from trainer.data import check_parts, split_graph  # noqa: E402
from trainer.launch import launch  # noqa: E402
from trainer.loop import Schedule, run_losses  # noqa: E402
from trainer.train import TrainConfig, TrainingDivergedError, run_training  # noqa: E402


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    """The same 60-node graph partitioned on disk twice (coarse-refine and hash, 2 parts each)."""
    root = tmp_path_factory.mktemp("resume")
    g = tiny_graph()
    src = np.repeat(np.arange(len(g.indptr) - 1), np.diff(g.indptr))
    np.savetxt(root / "edges.txt", np.stack([src, g.indices], 1), fmt="%d")
    nodes = root / "nodes"
    nodes.mkdir()
    for name, a in (("features", g.features), ("labels", g.labels), ("train_mask", g.train_mask),
                    ("val_mask", g.val_mask), ("test_mask", g.test_mask)):
        np.save(nodes / f"{name}.npy", a)
    assert main(["ingest", root / "edges.txt", root / "g.zarr"]) == 0
    out = {}
    for algo in ("coarse-refine", "hash"):
        out[algo] = root / algo
        assert main(["partition", root / "g.zarr", "-k", "2", "--algo", algo, "--out", out[algo], "--nodes",
                     nodes]) == 0
    return out


def train_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["train", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# -- resume ---------------------------------------------------------------------------------------

def test_schedule_after_a_short_round_counts_from_the_epochs_done():
    plain = Schedule(40, 10, 0)
    assert plain.rounds == 4 and [plain.span(r) for r in range(4)] == [(0, 10), (10, 10), (20, 10), (30, 10)]
    after_25 = Schedule(40, 10, 0, start_round=3, start_epoch=25)
    assert after_25.rounds == 5 and [after_25.span(r) for r in (3, 4)] == [(25, 10), (35, 5)]
    assert Schedule(25, 10, 0, start_round=3, start_epoch=25).rounds == 3   # nothing left to train


def test_extending_a_run_after_a_short_round_trains_every_epoch(tmp_path):
    """--epochs 5 --sync-every 2 ends on a round of 1 epoch; resumed to 9 it skipped epoch 5 (the next
    round began at 3 x 2 = 6) and reported 8 losses for 9 epochs."""
    parts = tiny_parts()
    cfg = TrainConfig(hidden=4, epochs=5, sync_every=2, checkpoint=str(tmp_path / "c.pt"))
    run_training(parts, cfg, threads=1)
    out = run_training(parts, dataclasses.replace(cfg, epochs=9, resume=True), threads=1)
    assert [h["epoch"] for h in out["history"]] == [2, 4, 5, 7, 9]
    assert len(out["losses"]) == 9 and out["epochs"] == 9


def test_resume_refuses_fewer_epochs_than_trained(tmp_path):
    parts = tiny_parts()
    cfg = TrainConfig(hidden=4, epochs=4, sync_every=2, checkpoint=str(tmp_path / "c.pt"))
    run_training(parts, cfg, threads=1)
    with pytest.raises(ParameterError, match="checkpoint has trained 4 epochs, this run asks for 2"):
        run_training(parts, dataclasses.replace(cfg, epochs=2, resume=True), threads=1)
    assert run_training(parts, dataclasses.replace(cfg, resume=True), threads=1)["epochs"] == 4   # the same: fine


def test_resume_refuses_other_parts(datasets, tmp_path, capsys):
    """The same part count, feature width and classes, but another partitioning: the rest of the run would
    train on other parts than its start."""
    ck = tmp_path / "c.pt"
    common = ["--hidden", "4", "--threads", "1", "--checkpoint", ck]
    train_json(capsys, datasets["coarse-refine"], "--epochs", "2", *common)
    capsys.readouterr()
    assert main(["train", str(datasets["hash"]), "--epochs", "4", "--resume", *map(str, common)]) == 2
    assert "checkpoint was trained on other parts than" in capsys.readouterr().err
    # the same parts resume
    assert train_json(capsys, datasets["coarse-refine"], "--epochs", "4", "--resume", *common)["epochs"] == 4


def test_centralized_resume_refuses_other_parts_and_the_averaged_runs(datasets, tmp_path, capsys):
    """A centralized run's checkpoint carried no identity of its parts: resumed on other parts (other labels
    even), the run went on from the first one's weights, exit 0. Nor is it an averaged run's to resume."""
    ck = tmp_path / "c.pt"
    common = ["--hidden", "4", "--threads", "1", "--checkpoint", ck, "--centralized"]
    train_json(capsys, datasets["coarse-refine"], "--epochs", "2", *common)
    assert main(["train", str(datasets["hash"]), "--epochs", "4", "--resume", *map(str, common)]) == 2
    assert "checkpoint was trained on other parts than" in capsys.readouterr().err
    assert main(["train", str(datasets["coarse-refine"]), "--epochs", "4", "--resume",
                 *map(str, common[:-1])]) == 2   # averaged, on the same parts: not the same run
    assert "checkpoint was written with 1 parts" in capsys.readouterr().err
    assert train_json(capsys, datasets["coarse-refine"], "--epochs", "4", "--resume", *common)["epochs"] == 4


def test_resume_takes_proximal_0_where_the_run_used_0(datasets, tmp_path, capsys):
    ck = tmp_path / "c.pt"
    common = ["--hidden", "4", "--threads", "1", "--checkpoint", ck]
    assert train_json(capsys, datasets["coarse-refine"], "--epochs", "2", *common)["proximal"] == 0.0
    assert train_json(capsys, datasets["coarse-refine"], "--epochs", "4", "--resume", "--proximal", "0",
                      *common)["epochs"] == 4


def test_best_checkpoint_follows_the_best(tmp_path, monkeypatch):
    """PATH.best was written once, at the end: a run stopped midway left none, or an older run's. Now
    every checkpoint save finds PATH.best holding that checkpoint's best weights."""
    parts = tiny_parts()
    ck = str(tmp_path / "c.pt")
    real = train_module._save_checkpoint
    checked = []

    def save(path, state):
        real(path, state)
        if path == ck:
            best = torch.load(ck + ".best", weights_only=True)["weights"]
            checked.append(torch.equal(best, state["best"]["weights"]))
    monkeypatch.setattr(train_module, "_save_checkpoint", save)
    run_training(parts, TrainConfig(hidden=4, epochs=6, sync_every=1, checkpoint=ck), threads=1)
    assert checked == [True] * 6


# -- the run's losses -----------------------------------------------------------------------------

def test_run_losses_are_the_mean_over_the_parts():
    assert run_losses({1: [3.0, None], 0: [1.0, None], 2: [2.0, None]}) == [2.0, None]
    assert run_losses({0: [1.0, 2.0], 1: [None, 4.0]}) == [1.0, 3.0]


def test_losses_are_every_parts_whatever_the_workers(datasets, capsys):
    """--json losses were worker 0's parts alone: with 2 workers they differed from 1 worker's by up to
    0.09 on Cora, with bitwise-equal weights."""
    common = [datasets["coarse-refine"], "--epochs", "4", "--sync-every", "2", "--hidden", "4", "--threads", "1"]
    one = train_json(capsys, *common, "--workers", "1")
    two = train_json(capsys, *common, "--workers", "2")
    assert one["losses"] == two["losses"] and len(one["losses"]) == 4
    assert one["history"] == two["history"]


# -- failures in one line -------------------------------------------------------------------------

def test_a_diverging_run_stops_naming_the_epoch(tmp_path, datasets, capsys):
    parts = tiny_parts()
    with pytest.raises(TrainingDivergedError, match=r"epoch \d+: the training loss is (nan|inf)"):
        run_training(parts, TrainConfig(hidden=4, epochs=5, lr=1e30), threads=1)
    capsys.readouterr()
    assert main(["train", str(datasets["coarse-refine"]), "--epochs", "5", "--lr", "1e30", "--hidden", "4",
                 "--threads", "1", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "the run diverged" in err and len(err.strip().splitlines()) == 1


def test_nan_features_are_named_before_training():
    g = tiny_graph()
    feats = g.features.copy()
    feats[7, 3] = np.nan
    parts = check_parts(split_graph(dataclasses.replace(g, features=feats), np.arange(60) % 2))
    with pytest.raises(NodeDataError, match=r"features row \d+ holds nan"):
        run_training(parts, TrainConfig(hidden=4, epochs=2), threads=1)


def test_json_has_null_for_non_finite_numbers():
    value = {"a": float("nan"), "b": [1.0, float("inf"), np.float32("nan"), np.float64(2.5)], "c": "nan"}
    assert json.loads(json.dumps(_finite(value), default=_json_default, allow_nan=False)) == {"a": None, "b": [1.0, None, None, 2.5],
                                                                      "c": "nan"}


def killed_worker(rank: int, world: int) -> None:
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    torch.distributed.barrier()


def test_a_killed_worker_is_one_line():
    with pytest.raises(ResourceError, match="training worker 1 was killed by SIGKILL"):
        launch(killed_worker, 2, threads_per_worker=1)


def allocation_too_large(rank: int, world: int) -> None:
    torch.empty(1 << 62, dtype=torch.uint8)


@pytest.mark.parametrize("workers", [1, 2])
def test_an_allocation_too_large_is_one_line(workers):
    with pytest.raises(ResourceError, match=r"training worker \d: out of memory .*a smaller --hidden"):
        launch(allocation_too_large, workers, threads_per_worker=1)


def test_fanout_without_mini_batch_is_refused(datasets, capsys):
    for flag in (["--fanout", "5,5"], ["--batch-size", "64"]):
        capsys.readouterr()
        assert main(["train", str(datasets["coarse-refine"]), "--epochs", "1", *flag]) == 2
        assert f"{flag[0]} applies with --mini-batch" in capsys.readouterr().err


@pytest.mark.parametrize("flags, said", [
    (["--centralized", "--workers", "2"], "--workers applies to averaged training"),
    (["--centralized", "--sync-every", "10"], "--sync-every applies to averaged training"),
    (["--centralized", "--proximal", "5"], "--proximal applies to averaged training"),
    (["--centralized", "--no-drift-correction"], "--[no-]drift-correction applies to averaged training"),
    (["--centralized", "--average-optimizer-state"], "--[no-]average-optimizer-state applies to averaged"),
    (["--model", "tgcn", "--centralized", "--workers", "2"], "--workers applies to averaged training"),
    (["--mini-batch", "--drift-correction"], "--drift-correction applies to full-batch training"),
    (["--transfer", "full"], "--transfer applies to the dynamic models"),   # was ignored, exit 0
    (["--mini-batch", "--fanout", "99999999999999999999,5"], "--fanout: fanout must be integers in [1, "),
    (["--mini-batch", "--fanout", "5,,5"], "--fanout: fanout must be comma-separated integers"),
])
def test_flags_a_mode_does_not_use_are_refused(datasets, capsys, flags, said):
    """--centralized ran with --workers 9 (more than the parts), --sync-every 10 and --proximal 5 set aside,
    and --mini-batch without the drift correction asked for, each with exit 0."""
    capsys.readouterr()
    assert main(["train", str(datasets["coarse-refine"]), "--epochs", "1", *flags]) == 2
    assert said in capsys.readouterr().err


def test_finite_helper_keeps_plain_values():
    assert _finite({"n": 3, "x": 0.5, "s": None, "t": (1, math.inf)}) == {"n": 3, "x": 0.5, "s": None, "t": [1, None]}
