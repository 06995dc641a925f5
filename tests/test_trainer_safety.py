"""Trainer safety (issue 14): no code from checkpoints, result files or Planetoid pickles, a
rendezvous on 127.0.0.1 only, every numeric flag checked, checkpoints written atomically and
kept apart from the parts they train on.

Each crafted file here carries a pickle whose ``__reduce__`` calls ``os.system`` to create a
marker file: loading it must fail with exit 2, and the marker must not exist afterwards.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from graphstream._atomic import atomic_file  # noqa: E402
from graphstream.cli import main  # noqa: E402
from graphstream.errors import (  # noqa: E402
    DiskFullError,
    GraphStreamError,
    InputFormatError,
    NodeDataError,
    ParameterError,
)
from trainer.data import ArrayPart, check_parts, split_graph  # noqa: E402
from trainer.dynamic import DynamicConfig  # noqa: E402
from trainer.launch import LOOPBACK, launch, load_result, store_address  # noqa: E402
from trainer.train import TrainConfig, WorkerResult, run_training  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PLANETOID = ROOT.parent / "shared" / "datasets" / "planetoid"


class RunsCode:
    """Pickles to ``os.system("touch MARKER")``: what a hostile data file does."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def tiny_graph(n: int = 60, seed: int = 0) -> ArrayPart:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    a = np.triu(rng.random((n, n)) < 0.08, 1)
    a = a | a.T
    indptr = np.concatenate([[0], np.cumsum(a.sum(1))]).astype(np.int64)
    indices = np.nonzero(a)[1].astype(np.int64)
    x = (rng.normal(size=(n, 8)) + np.eye(3, 8)[y]).astype(np.float32)
    perm = rng.permutation(n)
    masks = [np.zeros(n, bool) for _ in range(3)]
    for m, idx in zip(masks, (perm[:20], perm[20:40], perm[40:]), strict=True):
        m[idx] = True
    return ArrayPart(np.arange(n), n, indptr, indices, x, y, *masks, degree=np.diff(indptr))


def tiny_parts(n: int = 60, k: int = 2):
    return check_parts(split_graph(tiny_graph(n), np.arange(n) % k))


@pytest.fixture(scope="module")
def parts_dir(tmp_path_factory) -> Path:
    """A partitioned dataset on disk (2 parts of a 60-node graph), built by the CLI."""
    root = tmp_path_factory.mktemp("tiny")
    g = tiny_graph()
    src = np.repeat(np.arange(len(g.indptr) - 1), np.diff(g.indptr))
    np.savetxt(root / "edges.txt", np.stack([src, g.indices], 1), fmt="%d")
    nodes = root / "nodes"
    nodes.mkdir()
    for name, a in (("features", g.features), ("labels", g.labels), ("train_mask", g.train_mask),
                    ("val_mask", g.val_mask), ("test_mask", g.test_mask)):
        np.save(nodes / f"{name}.npy", a)
    assert main(["ingest", root / "edges.txt", root / "g.zarr"]) == 0
    assert main(["partition", root / "g.zarr", "-k", "2", "--out", root / "parts", "--nodes", nodes]) == 0
    return root / "parts"


def train_cli(capsys, *args) -> tuple[int, str]:
    """``graphstream train ...`` in this process: its exit code and stderr."""
    capsys.readouterr()
    code = main(["train", *map(str, args)])
    return code, capsys.readouterr().err


def one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("graphstream train: error:"), err
    assert "Traceback" not in err
    return lines[0]


# -- item 4: nothing runs code ------------------------------------------------------------

def test_resume_refuses_a_checkpoint_that_runs_code(parts_dir, tmp_path, capsys):
    marker = tmp_path / "pwned"
    ck = tmp_path / "evil.pt"
    torch.save({"format": "graphstream.trainer.checkpoint", "weights": RunsCode(marker)}, ck)
    code, err = train_cli(capsys, parts_dir, "--checkpoint", ck, "--resume", "--epochs", "1", "--hidden", "4")
    assert code == 2
    line = one_line_error(err)
    assert str(ck) in line and "weights_only" in line and "posix.system" in line
    assert not marker.exists()


def test_resume_refuses_a_plain_pickle_that_runs_code(tmp_path):
    marker = tmp_path / "pwned"
    ck = tmp_path / "evil.pt"
    ck.write_bytes(pickle.dumps({"weights": RunsCode(marker)}, protocol=2))
    with pytest.raises(InputFormatError, match="weights_only"):
        run_training(tiny_parts(), TrainConfig(hidden=4, epochs=1, checkpoint=str(ck), resume=True), threads=1)
    assert not marker.exists()


@pytest.mark.parametrize("damage, named", [
    (lambda c: c.pop("optimizers"), "'optimizers'"),
    (lambda c: c.pop("weights"), "'weights'"),
    (lambda c: c.update(weights=torch.zeros(7, dtype=torch.float64)), "'weights' has shape (7,)"),
    (lambda c: c["best"].pop("weights"), "best 'weights'"),
    (lambda c: c["optimizers"].pop(1), "optimizers 1"),
    (lambda c: c["optimizers"][0].update(exp_avg=[]), "optimizers[0] 'exp_avg'"),
    (lambda c: c.update(round="3"), "'round' is a str"),
    (lambda c: c["drift_trust"].update(weight="1"), "drift_trust 'weight' is a str"),
    (lambda c: c["drift_trust"].update(other=1.0), "'drift_trust' holds"),
    (lambda c: c.update(format="other"), "not a graphstream training checkpoint"),
])
def test_resume_names_a_missing_or_misshapen_key(tmp_path, damage, named):
    parts = tiny_parts()
    ck = tmp_path / "c.pt"
    run_training(parts, TrainConfig(hidden=4, epochs=2, checkpoint=str(ck)), threads=1)
    ckpt = torch.load(ck, weights_only=True)
    damage(ckpt)
    torch.save(ckpt, ck)
    with pytest.raises(GraphStreamError) as info:
        run_training(parts, TrainConfig(hidden=4, epochs=4, checkpoint=str(ck), resume=True), threads=1)
    assert named in str(info.value) and str(ck) in str(info.value)
    assert "\n" not in str(info.value)


def test_resume_with_missing_key_exits_2(parts_dir, tmp_path, capsys):
    ck = tmp_path / "c.pt"
    assert train_cli(capsys, parts_dir, "--checkpoint", ck, "--epochs", "1", "--hidden", "4", "--threads", "1")[0] == 0
    ckpt = torch.load(ck, weights_only=True)
    del ckpt["best"]
    torch.save(ckpt, ck)
    code, err = train_cli(capsys, parts_dir, "--checkpoint", ck, "--resume", "--epochs", "2", "--hidden", "4")
    assert code == 2 and "'best'" in one_line_error(err)


def test_worker_results_are_read_without_running_code(tmp_path):
    """The rank result files come back through torch.load(weights_only=True) + an allowlist."""
    marker = tmp_path / "pwned"
    evil = tmp_path / "rank0.pt"
    torch.save(WorkerResult(0, [0], summary={"x": RunsCode(marker)}), evil)
    with pytest.raises(pickle.UnpicklingError):
        load_result(evil, (WorkerResult,))
    assert not marker.exists()
    good = tmp_path / "rank1.pt"
    torch.save(WorkerResult(1, [1], losses=[0.5], summary={"a": np.float64(1.0)},
                            history=[{"scores": np.arange(3.0)}]), good)
    back = load_result(good, (WorkerResult,))
    assert back.parts == [1] and back.losses == [0.5] and np.array_equal(back.history[0]["scores"], np.arange(3.0))
    # an empty array (a dynamic worker whose parts hold no test pairs) is pickled with bytes(): it was
    # refused as "Unsupported global: GLOBAL bytes", a traceback ending a valid 2-worker run
    empty = tmp_path / "rank2.pt"
    torch.save({"scores": np.zeros(0, np.float32), "pairs": np.zeros((0, 2), np.int64)}, empty)
    back = load_result(empty)
    assert back["scores"].shape == (0,) and back["pairs"].shape == (0, 2) and back["pairs"].dtype == np.int64


def planetoid_copy(tmp_path: Path) -> Path:
    if not PLANETOID.is_dir():
        pytest.skip(f"shared datasets not found at {PLANETOID}")
    root = tmp_path / "datasets"
    shutil.copytree(PLANETOID, root / "planetoid")
    return root


@pytest.mark.parametrize("which", ["graph", "allx"])
def test_crafted_planetoid_pickle_exits_2_and_runs_nothing(tmp_path, capsys, which):
    root = planetoid_copy(tmp_path)
    marker = tmp_path / "pwned"
    (root / "planetoid" / f"ind.cora.{which}").write_bytes(pickle.dumps(RunsCode(marker), protocol=2))
    capsys.readouterr()
    code = main(["dataset", "cora", tmp_path / "out", "--root", root])
    err = capsys.readouterr().err
    assert code == 2 and not marker.exists()
    assert f"ind.cora.{which}" in err and "refusing" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_real_planetoid_pickles_load_as_plain_pickle_does():
    from graphstream.ingest.datasets import _load_pickle
    if not PLANETOID.is_dir():
        pytest.skip(f"shared datasets not found at {PLANETOID}")
    import warnings
    for name in ("cora", "citeseer"):
        for key in ("x", "y", "tx", "ty", "allx", "ally", "graph"):
            path = PLANETOID / f"ind.{name}.{key}"
            ours = _load_pickle(path)
            with open(path, "rb") as f, warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                plain = pickle.load(f, encoding="latin1")
            assert type(ours) is type(plain)
            if hasattr(plain, "todense"):
                assert ours.shape == plain.shape and (ours != plain).nnz == 0
            elif isinstance(plain, dict):
                assert ours == plain
            else:
                assert ours.dtype == plain.dtype and np.array_equal(ours, plain)


# -- item 6: the rendezvous listens on 127.0.0.1 only -------------------------------------

def _listeners() -> list[tuple[str, int, str]]:
    """Listening TCP sockets of this network namespace: (address hex, port, inode)."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":   # LISTEN
                addr, port = f[1].split(":")
                out.append((addr, int(port, 16), f[9]))
    return out


def _own_socket_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def listening_probe(rank: int, world: int) -> dict:
    """Run in each spawned worker: who listens on MASTER_PORT, and where this worker's own sockets listen."""
    port = int(os.environ["MASTER_PORT"])
    mine = _own_socket_inodes()
    listeners = _listeners()
    return {"store": [a for a, p, _ in listeners if p == port],
            "own": [a for a, _, inode in listeners if inode in mine]}


LOOPBACK_HEX = {"0100007F", "00000000000000000000000001000000"}   # 127.0.0.1, ::1 in /proc/net/tcp(6)


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads /proc/net/tcp (Linux)")
def test_two_local_workers_listen_on_loopback_only():
    results = launch(listening_probe, 2, threads_per_worker=1, result_types=())
    for r in results:
        assert r["store"], "nothing listens on MASTER_PORT"
        assert set(r["store"]) <= LOOPBACK_HEX, f"the store listens on {r['store']} (hex), not 127.0.0.1"
        assert set(r["own"]) <= LOOPBACK_HEX, f"a worker's collectives listen on {r['own']} (hex)"


def test_store_address_and_multi_host(monkeypatch):
    assert store_address(None) == LOOPBACK == "127.0.0.1"
    assert store_address("10.0.0.5") == "10.0.0.5"
    # torchrun with workers on 2 hosts: refused without an explicit --master-addr
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.5")
    with pytest.raises(ParameterError, match="--master-addr"):
        launch(listening_probe, 4)


def test_master_addr_is_documented():
    import argparse

    from trainer import cli
    p = argparse.ArgumentParser()
    cli.configure(p)
    assert "--master-addr" in p.format_help() and "127.0.0.1" in p.format_help()
    assert "--master-addr" in (ROOT / "docs" / "trainer.md").read_text()


# -- item 10: every numeric flag checked ---------------------------------------------------

@pytest.mark.parametrize("args, named", [
    (["--epochs", "0"], "--epochs 0"),
    (["--hidden", "0"], "--hidden 0"),
    (["--threads", "0"], "--threads 0"),
    (["--threads", "-1"], "--threads -1"),
    (["--dropout", "2"], "--dropout 2"),
    (["--dropout", "1"], "--dropout 1"),
    (["--lr", "nan"], "--lr nan"),
    (["--lr", "0"], "--lr 0"),
    (["--lr", "1e38"], "--lr 1e+38"),   # Adam's first step overflowed float32: a traceback, exit 1
    (["--weight-decay", "-1"], "--weight-decay -1"),
    (["--proximal", "inf"], "--proximal inf"),
    (["--sync-every", "0"], "--sync-every 0"),
    (["--workers", "0"], "--workers 0"),
    (["--mini-batch", "--batch-size", "0"], "--batch-size 0"),   # (without --mini-batch: refused as unused)
    (["--seed", "-1"], "--seed -1"),
    (["--model", "tgcn", "--epochs", "0"], "--epochs 0"),
    (["--model", "tgcn", "--hidden", "0"], "--hidden 0"),
    (["--model", "tgcn", "--lr", "nan"], "--lr nan"),
    (["--model", "tgcn", "--lr", "1e38"], "--lr 1e+38"),
    (["--model", "tgcn", "--threads", "0"], "--threads 0"),
])
def test_bad_numbers_exit_2_naming_the_value(parts_dir, capsys, args, named):
    code, err = train_cli(capsys, parts_dir, *args)
    assert code == 2, err
    line = one_line_error(err)
    assert named in line and "expected" in line


@pytest.mark.parametrize("field, value", [
    ("lr", float("nan")), ("lr", -0.1), ("lr", float("inf")), ("lr", 1e38), ("dropout", -0.1), ("dropout", 1.0),
    ("weight_decay", float("nan")), ("proximal", -1.0), ("epochs", 0), ("hidden", 0), ("sync_every", 0),
    ("batch_size", 0), ("num_layers", 0), ("seed", -1), ("epochs", 2.5), ("hidden", True), ("fanouts", (5, 0)),
])
def test_train_config_checks_itself(field, value):
    with pytest.raises(ParameterError, match="expected"):
        TrainConfig(**{field: value})


@pytest.mark.parametrize("field, value", [
    ("lr", float("nan")), ("lr", 1e38), ("epochs", 0), ("hidden", 0), ("sync_every", 0), ("seed", -1),
    ("val_fraction", 0.0), ("test_fraction", 1.5),
])
def test_dynamic_config_checks_itself(field, value):
    with pytest.raises(ParameterError, match="expected"):
        DynamicConfig(**{field: value})


def test_negative_or_fractional_labels_are_named():
    g = tiny_graph()
    g.labels = g.labels.copy()
    g.labels[7] = -2
    with pytest.raises(NodeDataError, match=r"label -2 of node \d+ \(local 7\) in \w+_mask: .* belongs in no mask"):
        check_parts([g])
    g.labels = g.labels.astype(np.float64)
    with pytest.raises(NodeDataError, match="dtype float64"):
        check_parts([g])


@pytest.mark.parametrize("centralized, mini_batch", [(False, False), (True, False), (False, True)])
def test_unlabelled_nodes_outside_every_mask_train_as_labelled_ones(centralized, mini_batch):
    """A graph whose unlabelled majority is -1 (ogbn-papers100M's kind) was refused ("labels must be class ids
    >= 0"), whatever the masks: a node in no mask is neither trained on nor scored, so its label is not read.
    The run is the one its real labels would give; a -1 inside a mask is still refused, naming the mask."""
    g = tiny_graph()
    out_of_masks = np.arange(len(g.labels)) % 3 == 0
    masks = {m: getattr(g, m) & ~out_of_masks for m in ("train_mask", "val_mask", "test_mask")}
    labelled = dataclasses.replace(g, **masks)
    unlabelled = dataclasses.replace(labelled, labels=np.where(out_of_masks, -1, g.labels))
    owner = np.arange(len(g.labels)) % 2
    config = TrainConfig(hidden=4, epochs=3, mini_batch=mini_batch, batch_size=8)
    runs = [run_training(check_parts(split_graph(graph, owner)), config, centralized=centralized, threads=1)
            for graph in (labelled, unlabelled)]
    assert runs[0]["losses"] == runs[1]["losses"]
    assert runs[0]["history"] == runs[1]["history"]
    scores = [{key: value for key, value in run.items() if key.endswith(("accuracy", "macro_f1"))} for run in runs]
    assert scores[0] == scores[1] and len(scores[0]) >= 8
    inside = dataclasses.replace(unlabelled, labels=np.where(np.arange(len(g.labels)) == 1, -1, unlabelled.labels))
    where = next(m for m in ("train_mask", "val_mask", "test_mask") if masks[m][1])
    with pytest.raises(NodeDataError, match=f"label -1 of node 1 \\(local 0\\) in {where}: a node in a mask needs"):
        check_parts(split_graph(inside, owner))


def test_a_label_far_above_the_classes_is_named():
    """A sentinel label (999, 10^6 for "unlabelled") made a model with an output for every id up to it:
    10^6 on Cora was killed for memory, 999 trained a 1000-output model without a word."""
    g = tiny_graph()
    n = len(g.indptr) - 1
    g.labels = g.labels.copy()
    g.labels[7] = n   # more classes than nodes
    with pytest.raises(NodeDataError, match=f"label {n} found among {n} nodes: more classes than nodes"):
        check_parts([g])
    g.labels[7] = n - 1
    parts = check_parts([g])
    assert parts.num_classes == n and "only" in parts.sparse_classes_note
    g.labels[7] = 0
    assert check_parts([g]).sparse_classes_note is None


def test_labels_of_one_class_or_a_binary_coded_0_2_are_said():
    """All-zero labels trained a one-output model to accuracy 1.0, and a binary label coded 0/2 three
    classes (no ROC-AUC, no class weighting), both without a word."""
    g = tiny_graph()
    g.labels = np.zeros_like(g.labels)
    assert "nothing to classify" in check_parts([g]).sparse_classes_note
    g.labels = np.where(np.arange(len(g.labels)) % 2 == 0, 0, 2)
    assert "only two classes occur" in check_parts([g]).sparse_classes_note
    g.labels = np.where(np.arange(len(g.labels)) % 2 == 0, 0, 1)
    assert check_parts([g]).sparse_classes_note is None


@pytest.mark.parametrize("columns", [1, 3])
def test_labels_of_several_columns_are_refused_in_one_line(tmp_path, capsys, columns):
    """The format allows (n, C) labels (multi-label) and the builder splits them; training takes one class
    id a node, so such parts get exit 2 and a line naming the shape (an (n, 1) file of class ids is the
    usual slip), not a traceback from the first batch."""
    g = tiny_graph()
    src = np.repeat(np.arange(len(g.indptr) - 1), np.diff(g.indptr))
    np.savetxt(tmp_path / "edges.txt", np.stack([src, g.indices], 1), fmt="%d")
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    np.save(nodes / "features.npy", g.features)
    np.save(nodes / "labels.npy", np.repeat(g.labels[:, None], columns, axis=1))
    np.save(nodes / "train_mask.npy", g.train_mask)
    assert main(["ingest", tmp_path / "edges.txt", tmp_path / "g.zarr"]) == 0
    assert main(["partition", tmp_path / "g.zarr", "-k", "2", "--out", tmp_path / "parts", "--nodes", nodes]) == 0
    code, err = train_cli(capsys, tmp_path / "parts", "--epochs", "1", "--hidden", "4", "--threads", "1")
    assert code == 2, err
    assert "labels have shape (" in one_line_error(err) and f", {columns})" in err


# -- item 8: checkpoints are atomic, disk full is one line, and stay apart from the parts ----

def test_checkpoint_on_a_full_disk_exits_2_and_keeps_the_old_one(parts_dir, tmp_path, capsys, monkeypatch):
    ck = tmp_path / "c.pt"
    assert train_cli(capsys, parts_dir, "--checkpoint", ck, "--epochs", "1", "--hidden", "4", "--threads", "1")[0] == 0
    before = ck.read_bytes()
    real_save = torch.save

    def full_disk(obj, f, *a, **k):    # half a file written, then the disk is full
        real_save(obj, f, *a, **k)
        with open(f, "r+b") as fh:
            fh.truncate(10)
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(torch, "save", full_disk)
    code, err = train_cli(capsys, parts_dir, "--checkpoint", ck, "--overwrite", "--epochs", "1", "--hidden", "4",
                          "--threads", "1")
    assert code == 2
    line = one_line_error(err)
    assert str(ck) in line and "space" in line
    assert ck.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt", "c.pt.best"]


def test_checkpoint_short_write_without_errno_exits_2_and_leaves_nothing(parts_dir, tmp_path, capsys, monkeypatch):
    """torch's zip writer reports a file cut short (a file size limit, a full disk it does not name) as a
    RuntimeError: one line, exit 2, the old checkpoint whole, no temporary file left; and a temporary file
    a killed run left is cleared by the next save."""
    ck = tmp_path / "c.pt"
    args = ("--epochs", "1", "--hidden", "4", "--threads", "1")
    assert train_cli(capsys, parts_dir, "--checkpoint", ck, *args)[0] == 0
    before = ck.read_bytes()
    real_save = torch.save

    def cut_short(obj, f, *a, **k):
        real_save(obj, f, *a, **k)
        with open(f, "r+b") as fh:
            fh.truncate(10)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 96064 vs 96008")
    monkeypatch.setattr(torch, "save", cut_short)
    code, err = train_cli(capsys, parts_dir, "--checkpoint", ck, "--overwrite", *args)
    line = one_line_error(err)
    assert code == 2 and str(ck) in line and "cannot write the checkpoint" in line and "unchanged" in line
    assert ck.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt", "c.pt.best"]
    monkeypatch.setattr(torch, "save", real_save)
    (tmp_path / ".c.pt.tmp-0badc0de").write_bytes(b"left by a killed run")
    assert train_cli(capsys, parts_dir, "--checkpoint", ck, "--overwrite", *args)[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt", "c.pt.best"]


def test_resume_without_a_checkpoint_says_it_starts_a_new_run(parts_dir, tmp_path, capsys, monkeypatch):
    """A restartable job passes --resume every time: the first run has nothing to resume, and says so."""
    monkeypatch.setenv("GRAPHSTREAM_PROGRESS", "1")   # log lines on (the suite turns them off)
    ck = tmp_path / "c.pt"
    code, err = train_cli(capsys, parts_dir, "--checkpoint", ck, "--resume", "--epochs", "1", "--hidden", "4",
                          "--threads", "1")
    assert code == 0 and "no checkpoint there yet; --resume starts a new run" in err and ck.exists()


def test_an_existing_checkpoint_is_not_replaced_without_overwrite(parts_dir, tmp_path, capsys):
    """A checkpoint can hold hours of training: a second run on its path is refused (exit 2, one line, the
    file unchanged) unless it resumes the run or --overwrite asks for a new one."""
    ck = tmp_path / "c.pt"
    args = ("--checkpoint", ck, "--epochs", "1", "--hidden", "4", "--threads", "1")
    assert train_cli(capsys, parts_dir, *args)[0] == 0
    before = ck.read_bytes()
    code, err = train_cli(capsys, parts_dir, *args)
    line = one_line_error(err)
    assert code == 2 and str(ck) in line and "--overwrite" in line and "--resume" in line
    assert ck.read_bytes() == before
    (tmp_path / "c.pt").unlink()   # the best weights alone are a run's too
    code, err = train_cli(capsys, parts_dir, *args)
    assert code == 2 and "c.pt.best: output exists" in one_line_error(err)
    assert train_cli(capsys, parts_dir, *args, "--overwrite")[0] == 0
    assert ck.exists() and (tmp_path / "c.pt.best").exists()
    code, err = train_cli(capsys, parts_dir, *args, "--overwrite", "--resume")
    assert code == 2 and "give one of them" in one_line_error(err)


def test_overwrite_never_turns_a_folder_into_a_checkpoint_file(parts_dir, tmp_path, capsys, monkeypatch):
    """A store named c.pt.best beside --checkpoint c.pt: --overwrite replaced it (a graphstream output, so
    "replaceable") with the best weights' file. The checkpoint's paths are reported absolute, as every
    path graphstream reports (it said "c.pt")."""
    from graphstream.store import GraphWriter

    with GraphWriter(tmp_path / "c.pt.best", num_nodes=2) as w:
        w.append(np.array([0]), np.array([1]))
    args = ("--checkpoint", "c.pt", "--epochs", "1", "--hidden", "4", "--threads", "1", "--overwrite")
    monkeypatch.chdir(tmp_path)
    code, err = train_cli(capsys, parts_dir, *args)
    assert code == 2 and f"{tmp_path}/c.pt.best: is a folder, and this output is a file" in one_line_error(err)
    assert (tmp_path / "c.pt.best" / "zarr.json").exists() and not (tmp_path / "c.pt").exists()
    shutil.rmtree(tmp_path / "c.pt.best")
    capsys.readouterr()
    assert main(["train", str(parts_dir), *args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint"] == f"{tmp_path}/c.pt" and out["best_checkpoint"] == f"{tmp_path}/c.pt.best"


def test_disk_full_in_the_library_is_disk_full_error(tmp_path, monkeypatch):
    def full_disk(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(DiskFullError):
        run_training(tiny_parts(), TrainConfig(hidden=4, epochs=1, checkpoint=str(tmp_path / "c.pt")), threads=1)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["inside", "is", "best"])
def test_checkpoint_apart_from_the_parts(parts_dir, tmp_path, capsys, where):
    parts = tmp_path / "parts"
    shutil.copytree(parts_dir, parts)
    listing = sorted(str(p.relative_to(parts)) for p in parts.rglob("*"))
    ck = {"inside": parts / "run.pt", "is": parts, "best": tmp_path / "parts"}[where]
    if where == "best":   # PARTS = CHECKPOINT.best: the best weights would land on the parts
        shutil.move(parts, tmp_path / "run.pt.best")
        parts, ck = tmp_path / "run.pt.best", tmp_path / "run.pt"
    code, err = train_cli(capsys, parts, "--checkpoint", ck, "--epochs", "1", "--hidden", "4", "--threads", "1")
    assert code == 2
    assert "--checkpoint" in one_line_error(err)
    assert sorted(str(p.relative_to(parts)) for p in parts.rglob("*")) == listing


def test_a_worker_error_reaches_the_parent_as_one_line(parts_dir, tmp_path, capsys, monkeypatch):
    """With 2 spawned workers the checkpoint is refused inside the workers; the parent says so in one line,
    and leaves nothing in the temporary folder (torch's error files of the workers included)."""
    marker = tmp_path / "pwned"
    ck = tmp_path / "evil.pt"
    torch.save({"format": "graphstream.trainer.checkpoint", "weights": RunsCode(marker)}, ck)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    code, err = train_cli(capsys, parts_dir, "--checkpoint", ck, "--resume", "--epochs", "1", "--hidden", "4",
                          "--workers", "2", "--threads", "1")
    line = one_line_error(err)
    assert code == 2 and "weights_only" in line and "system" in line
    assert not marker.exists()
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("flag", [["--drift-correction"], ["--no-drift-correction"], ["--proximal", "1"],
                                  ["--class-weight", "none"], ["--no-average-optimizer-state"],
                                  ["--mini-batch"], ["--fanout", "5,5"], ["--batch-size", "64"],
                                  ["--dropout", "0.9"], ["--weight-decay", "0.1"]])
def test_static_only_flags_are_refused_for_dynamic_models(parts_dir, capsys, flag):
    code, err = train_cli(capsys, parts_dir, "--model", "tgcn", *flag)
    assert code == 2, err
    line = one_line_error(err)
    assert flag[0].replace("--no-", "--").split("-")[-1] in line and "static models" in line


def test_fidelity_flags_reach_the_trainer(parts_dir, capsys):
    """The defaults and their switches, as the run reports them in --json."""
    def run(*flags):
        capsys.readouterr()
        assert main(["train", str(parts_dir), "--epochs", "2", "--hidden", "4", "--json", *flags]) == 0
        return json.loads(capsys.readouterr().out)
    default = run()
    assert (default["class_weight"], default["drift_correction"], default["proximal"]) == ("none", True, 0.0)
    off = run("--class-weight", "balanced", "--no-drift-correction")
    assert (off["class_weight"], off["drift_correction"], off["proximal"]) == ("balanced", False, 3.0)
    assert run("--proximal", "0.5")["proximal"] == 0.5


def _workers(pid: int) -> list[int]:
    """The training workers among ``pid``'s children (not multiprocessing's resource tracker, which
    ends on its own once its parent has gone)."""
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []
    return [c for c in children if _running(c) and b"resource_tracker" not in _cmdline(c)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc for the worker processes")
def test_sigterm_to_the_parent_alone_ends_its_workers(parts_dir, tmp_path):
    """The parent unwound (its output released) while its two workers trained on, rewriting the
    checkpoint, and it waited for them at exit: now it stops them first."""
    ck = tmp_path / "ck.pt"
    proc = subprocess.Popen([sys.executable, "-m", "graphstream", "train", str(parts_dir), "--workers", "2",
                             "--epochs", "1000000", "--hidden", "8", "--threads", "1", "--checkpoint", str(ck)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not ck.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)   # training has begun once the first round's checkpoint is there
    workers = _workers(proc.pid)
    try:
        assert ck.exists() and len(workers) == 2, (workers, proc.poll())
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 143 and "terminated (SIGTERM)" in err, err
        assert not [w for w in workers if _running(w)], "workers outlived the parent"
    finally:   # a failed run leaves nothing training
        for pid in [proc.pid, *workers]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
    before = ck.stat().st_mtime_ns
    time.sleep(1.0)
    assert ck.stat().st_mtime_ns == before and not (tmp_path / ".ck.pt.lock").exists()


def killed_mid_save(rank: int, world: int, path: str) -> None:
    """Run in each spawned worker: rank 0 dies (SIGKILL, as a worker stopped past its grace) while it
    writes ``path``, holding the lock and a temporary file."""
    if rank == 0:
        with atomic_file(path) as tmp:
            Path(tmp).write_bytes(b"half a checkpoint")
            os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_mid_save_leaves_nothing_beside_the_checkpoint(tmp_path):
    """A worker stopped while it saved left .NAME.lock (and its .NAME.tmp-*) beside the checkpoint:
    the launcher clears them once its workers have ended (a CI run of the SIGTERM test above hit this)."""
    ck = tmp_path / "ck.pt"
    ck.write_bytes(b"the previous checkpoint")
    with pytest.raises(Exception, match="SIGKILL|signal"):
        launch(killed_mid_save, 2, (str(ck),), threads_per_worker=1, outputs=(str(ck),))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.pt"]
    assert ck.read_bytes() == b"the previous checkpoint"


def _parts_without_training_nodes_in(part: int | None):
    """tiny_graph's two parts with no training node in ``part`` (None: in neither)."""
    g = tiny_graph()
    owner = np.arange(len(g.global_ids)) % 2
    train = g.train_mask.copy()
    train[(owner == part) if part is not None else slice(None)] = False
    return check_parts(split_graph(dataclasses.replace(g, train_mask=train), owner))


def test_centralized_without_training_nodes_exits_2(tmp_path):
    """It trained on nothing and reported NaN losses with exit 0; the averaged run refused."""
    parts = _parts_without_training_nodes_in(None)
    for centralized in (False, True):
        with pytest.raises(GraphStreamError, match="no training nodes"):
            run_training(parts, TrainConfig(hidden=4, epochs=2), centralized=centralized, threads=1)


def test_a_part_without_training_nodes_adds_no_loss():
    """Its epochs had the loss NaN (the mean over no node) between synchronisations, and counted as a
    part in the mean: the losses are the mean over the parts that trained."""
    parts = _parts_without_training_nodes_in(1)
    out = run_training(parts, TrainConfig(hidden=4, epochs=6, sync_every=3), threads=1)
    assert len(out["losses"]) == 6 and all(np.isfinite(loss) for loss in out["losses"])
    # 3 classes: a fresh model's cross-entropy is near ln 3 = 1.10 (halved, 0.55, when the empty part counted)
    assert 0.9 < out["losses"][0] < 1.4, out["losses"]


def test_resume_refuses_other_hyperparameters(tmp_path):
    """A checkpoint resumed with another seed, rate, dropout or batching trained the rest of the run
    another way, without a word."""
    parts = tiny_parts()
    cfg = TrainConfig(hidden=4, epochs=2, checkpoint=str(tmp_path / "c.pt"))
    run_training(parts, cfg, threads=1)
    for change, flag in ((dict(seed=7), "--seed"), (dict(lr=0.05), "--lr"), (dict(dropout=0.1), "--dropout"),
                         (dict(weight_decay=0.0), "--weight-decay"), (dict(mini_batch=True), "--mini-batch"),
                         (dict(fanouts=(5, 5)), "--fanout")):
        with pytest.raises(ParameterError, match=f"pass the same {flag} to resume it"):
            run_training(parts, dataclasses.replace(cfg, epochs=4, resume=True, **change), threads=1)
    assert run_training(parts, dataclasses.replace(cfg, epochs=4, resume=True), threads=1)["rounds"] == 4


def test_gat_hidden_width_is_a_multiple_of_its_heads():
    """--model gat --hidden 10 built a first layer of 8 (--hidden 3: 4) and reported hidden 10."""
    with pytest.raises(ParameterError, match="--hidden 10: GAT's hidden layers are 4 attention heads wide"):
        TrainConfig(model="gat", hidden=10)
    assert TrainConfig(model="gat", hidden=12).hidden == 12 and TrainConfig(model="gcn", hidden=10).hidden == 10


def test_a_checkpoint_under_a_file_is_named_as_such(parts_dir, capsys, tmp_path):
    (tmp_path / "afile").write_text("x")
    for checkpoint in (tmp_path / "afile" / "ck", tmp_path / "afile" / "sub" / "ck"):   # deeper: "does not exist"
        code, err = train_cli(capsys, parts_dir, "--checkpoint", str(checkpoint))
        assert code == 2 and f"{tmp_path / 'afile'} is a file, not a folder" in err, err
