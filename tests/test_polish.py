"""Issue 18 items 2, 3, 4, 10, 11: what the user is told is true and readable.

- ingest --relabel detects a header of words over string ids, and says what it decided;
- train on parts without validation/test nodes prints no NaN and says what it evaluated;
- train says whether a checkpoint was saved, and the README synopsis shows --checkpoint;
- export of parts with features but no labels (or no node data) writes what exists;
- help texts name every choice, and docs/cli.md is what tools/gen_cli_docs.py generates now.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphstream.cli import main as cli_main
from graphstream.store import open_store

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*argv) -> int:
    return cli_main([str(a) for a in argv])


@pytest.fixture
def logs_on(monkeypatch):
    """Log lines on stderr (conftest silences them for the suite)."""
    monkeypatch.setenv("GRAPHSTREAM_PROGRESS", "1")


def strict_json(text: str) -> dict:
    """JSON as a strict parser reads it: NaN or Infinity (not JSON) fail the test."""
    def refuse(name):
        raise AssertionError(f"{name} in the JSON output")
    return json.loads(text, parse_constant=refuse)


# ---------------------------------------------------------------- item 2: header detection with --relabel

@pytest.mark.parametrize("text, header, ids", [
    ("from\tto\nalice\tbob\ncarol\tdave\n", True, ["alice", "bob", "carol", "dave"]),
    ("FromNodeId\tToNodeId\nx\ty\n", True, ["x", "y"]),
    ('"source_id"\t"target_id"\nx\ty\n', True, ["x", "y"]),
    ("from\tto\n1\t2\n3\t4\n", True, ["1", "2", "3", "4"]),               # numbers below words
    ("follower\tfollowee\nuser_1\tuser_2\n", True, ["user_1", "user_2"]),     # the relation's roles
    ("alice\tbob\ncarol\tdave\n", False, ["alice", "bob", "carol", "dave"]),  # words, not column names
    ("from\tto\nto\tfrom\n", False, ["from", "to"]),                        # the names are ids again
    ("src\tdst\n", False, ["src", "dst"]),                                  # a lone line: an edge
])
def test_relabel_header_of_words(tmp_path, capsys, logs_on, text, header, ids):
    src = tmp_path / "names.tsv"
    src.write_text(text)
    assert run_cli("ingest", src, tmp_path / "n.zarr", "--relabel", "--json") == 0
    captured = capsys.readouterr()
    store = open_store(tmp_path / "n.zarr")
    assert store.attrs["ingest"]["header"] is header
    # recount from the file: every data line is one edge
    lines = [ln for ln in text.splitlines() if ln]
    assert store.num_edges == strict_json(captured.out)["num_edges"] == len(lines) - header
    assert [str(x) for x in store.id_map()] == ids
    decided = "read as a header, skipped" if header else "read as data (an edge)"
    assert "names.tsv:1: first line" in captured.err and decided in captured.err
    assert ("--header no" if header else "--header yes") in captured.err


def test_header_words_without_relabel_and_forced(tmp_path, capsys, logs_on):
    src = tmp_path / "e.txt"
    src.write_text("src dst\n0 1\n1 2\n")
    assert run_cli("ingest", src, tmp_path / "a.zarr") == 0
    assert open_store(tmp_path / "a.zarr").num_edges == 2
    assert "read as a header" in capsys.readouterr().err
    # --header yes/no decide alone: nothing to report
    names = tmp_path / "names.tsv"
    names.write_text("alice\tbob\ncarol\tdave\n")
    assert run_cli("ingest", names, tmp_path / "b.zarr", "--relabel", "--header", "yes") == 0
    assert open_store(tmp_path / "b.zarr").num_edges == 1
    assert "first line" not in capsys.readouterr().err


# ---------------------------------------------------------------- items 3 and 4: train

def _node_classification_parts(root: Path, masks: tuple[str, ...], *, labels: bool = True, k: int = 2) -> Path:
    """A small two-community graph ingested, partitioned and built with node data that has ``masks``."""
    rng = np.random.default_rng(0)
    n = 120
    y = (np.arange(n) >= n // 2).astype(np.int64)
    pairs = rng.integers(0, n, size=(900, 2))
    pairs = pairs[(y[pairs[:, 0]] == y[pairs[:, 1]]) | (rng.random(len(pairs)) < 0.1)]
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    edges = root / "e.txt"
    edges.write_text("".join(f"{a} {b}\n" for a, b in pairs) + f"{n - 1} 0\n")
    assert run_cli("ingest", edges, root / "g.zarr", "--undirected") == 0
    nodes = root / "nodes"
    nodes.mkdir()
    np.save(nodes / "features.npy", (rng.normal(size=(n, 6)) + y[:, None]).astype(np.float32))
    if labels:
        np.save(nodes / "labels.npy", y)
    perm = rng.permutation(n)
    for i, name in enumerate(masks):
        m = np.zeros(n, bool)
        m[perm[i * n // 3:(i + 1) * n // 3]] = True
        np.save(nodes / f"{name}.npy", m)
    parts = root / "parts"
    assert run_cli("partition", root / "g.zarr", "-k", k, "--algo", "hash", "--out", parts, "--nodes", nodes) == 0
    return parts


@pytest.fixture(scope="module")
def train_only_parts(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    return _node_classification_parts(tmp_path_factory.mktemp("train-only"), ("train_mask",))


def _train(capsys, parts, *extra) -> tuple[dict, str]:
    capsys.readouterr()
    assert run_cli("train", parts, "--epochs", 4, "--hidden", 8, "--threads", 1, "--json", *extra) == 0
    captured = capsys.readouterr()
    return strict_json(captured.out), captured.err


def test_train_without_val_test_says_nothing_to_evaluate(train_only_parts, capsys):
    result, _ = _train(capsys, train_only_parts)
    assert result["evaluated_on"] == ["train"]
    assert result["test_accuracy"] is None and result["val_accuracy"] is None
    assert 0.0 <= result["train_accuracy"] <= 1.0
    assert "nothing to evaluate" in result["note"]
    # no validation to choose by: the last round's model is kept (not "best_epoch: 0")
    assert result["selected_by"].startswith("last round")
    assert result["best_epoch"] == result["epochs"] == 4
    assert all(h["val_accuracy"] is None and h["test_accuracy"] is None for h in result["history"])


def test_train_with_val_only_has_no_test_accuracy(tmp_path, capsys):
    pytest.importorskip("torch")
    parts = _node_classification_parts(tmp_path, ("train_mask", "val_mask"))
    result, _ = _train(capsys, parts)
    # two classes: selected by the validation ROC-AUC (issue 19: the metric fits the labels)
    assert result["evaluated_on"] == ["train", "val"] and result["selected_by"] == "val_roc_auc"
    assert result["test_accuracy"] is None and 0.0 <= result["val_accuracy"] <= 1.0
    assert "no test nodes" in result["note"]
    assert 1 <= result["best_epoch"] <= 4


def test_train_says_whether_a_checkpoint_was_saved(train_only_parts, tmp_path, capsys, logs_on):
    result, err = _train(capsys, train_only_parts)
    assert result["checkpoint"] is None and result["best_checkpoint"] is None
    assert "no checkpoint saved" in result["note"] and "no checkpoint saved" in err
    ckpt = tmp_path / "run.pt"
    result, err = _train(capsys, train_only_parts, "--checkpoint", ckpt)
    assert result["checkpoint"] == str(ckpt) and Path(result["best_checkpoint"]).is_file() and ckpt.is_file()
    assert "no checkpoint saved" not in result.get("note", "") and "no checkpoint saved" not in err
    # resuming a run without validation nodes (best val_accuracy None) works
    result, _ = _train(capsys, train_only_parts, "--checkpoint", ckpt, "--resume")
    assert result["best_epoch"] == 4
    # the human output says it too
    assert run_cli("train", train_only_parts, "--epochs", 2, "--hidden", 8, "--threads", 1) == 0
    assert "no checkpoint saved" in capsys.readouterr().out


def test_dynamic_models_refuse_checkpoint(tmp_path, capsys):
    pytest.importorskip("torch")
    assert run_cli("train", tmp_path, "--model", "tgcn", "--checkpoint", tmp_path / "c.pt") == 2
    assert "--checkpoint/--resume apply to the static models" in capsys.readouterr().err


def test_readme_synopsis_shows_checkpoint():
    readme = (ROOT / "README.md").read_text()
    synopsis = readme[readme.index("graphstream train PARTS_DIR"):]
    synopsis = synopsis[:synopsis.index("```")]
    assert "--checkpoint PATH" in synopsis and "--resume" in synopsis


def test_nan_accuracy_is_none():
    torch = pytest.importorskip("torch")
    from trainer.evaluate import accuracy
    pred = torch.tensor([0, 1])
    assert accuracy(pred, pred, torch.tensor([], dtype=torch.int64)) is None
    assert accuracy(pred, torch.tensor([0, 0]), torch.tensor([0, 1])) == 0.5


# ---------------------------------------------------------------- item 10: export without labels

@pytest.mark.parametrize("with_features", [True, False])
def test_export_pyg_without_labels(tmp_path, capsys, logs_on, with_features):
    torch = pytest.importorskip("torch")
    root = tmp_path
    if with_features:
        parts = _node_classification_parts(root, (), labels=False, k=3)
    else:
        edges = root / "e.txt"
        edges.write_text("0 1\n1 2\n2 3\n3 0\n0 2\n")
        assert run_cli("ingest", edges, root / "g.zarr") == 0
        parts = root / "parts"
        assert run_cli("partition", root / "g.zarr", "-k", 3, "--algo", "hash", "--out", parts) == 0
    capsys.readouterr()
    out = root / "pyg"
    assert run_cli("export", parts, "--to", "pyg", out, "--json") == 0
    captured = capsys.readouterr()
    result = strict_json(captured.out)
    expect = ["features"] if with_features else []
    assert result["node_data"] == expect
    assert result["missing_node_data"] == (["labels"] if with_features else ["features", "labels"])
    assert "no node " in captured.err
    assert not (out / "label.pt").exists()          # no labels, no label file
    assert result["halo_hops_left_out"] == 0
    from graphstream import open_partitions
    dataset = open_partitions(parts)
    got_edges = 0
    for p, part in enumerate(dataset):
        feats = torch.load(out / f"part_{p}" / "node_feats.pt", weights_only=True)
        inner = np.asarray(part.global_ids[:part.num_inner])
        assert feats["global_id"].numpy().tolist() == inner.tolist()
        assert sorted(feats["feats"]) == (["x"] if with_features else [])
        if with_features:
            assert np.array_equal(feats["feats"]["x"].numpy(), np.asarray(part.features[:part.num_inner]))
        graph = torch.load(out / f"part_{p}" / "graph.pt", weights_only=True)
        got_edges += graph["row"].numel()
    assert got_edges == result["num_edges"] == sum(int(part.indptr[part.num_inner]) for part in dataset)
    # PyG reads it back
    pytest.importorskip("torch_geometric")
    from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore
    for p in range(len(dataset)):
        LocalGraphStore.from_partition(str(out), p)
        store = LocalFeatureStore.from_partition(str(out), p)
        if with_features:
            ids = torch.from_numpy(np.asarray(dataset[p].global_ids[:dataset[p].num_inner], dtype=np.int64))
            x = store.get_tensor_from_global_id(group_name=None, attr_name="x", index=ids)
            assert np.array_equal(x.numpy(), np.asarray(dataset[p].features[:dataset[p].num_inner]))


def test_export_warnings_are_not_silenced_with_progress(tmp_path, capsys, monkeypatch):
    """GRAPHSTREAM_PROGRESS=0 silences progress; it also took the export's warnings (node data and halo
    hops left out), which --json did not all report."""
    monkeypatch.setenv("GRAPHSTREAM_PROGRESS", "0")
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n1 2\n2 3\n3 0\n0 2\n")
    assert run_cli("ingest", edges, tmp_path / "g.zarr", "--undirected") == 0
    parts = tmp_path / "parts"
    assert run_cli("partition", tmp_path / "g.zarr", "-k", 2, "--algo", "hash", "--halo-hops", 2, "--out", parts) == 0
    capsys.readouterr()
    assert run_cli("export", parts, "--to", "pyg", tmp_path / "named", "--graph-name", "g") == 2   # ignored before
    assert "--graph-name is DistDGL's" in capsys.readouterr().err and not (tmp_path / "named").exists()
    for target in ("pyg",):   # DistDGL's export runs the same lines (tests/dgl: its own environment)
        assert run_cli("export", parts, "--to", target, tmp_path / target, "--json") == 0
        captured = capsys.readouterr()
        assert strict_json(captured.out)["halo_hops_left_out"] == 1
        warnings = [line for line in captured.err.splitlines() if line.startswith("graphstream: warning: ")]
        assert len(warnings) == 2 and "no node features or labels" in warnings[0] and "--halo-hops 2" in warnings[1]


# ---------------------------------------------------------------- item 11: help texts and docs/cli.md

def _help(*argv: str) -> str:
    out = subprocess.run([sys.executable, "-m", "graphstream", *argv, "--help"], capture_output=True, text=True,
                         env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"}, cwd=ROOT, check=True)
    return " ".join(out.stdout.split())


def test_partition_help_names_every_choice():
    text = _help("partition")
    for algo in ("coarse-refine", "spring", "2ps-l", "hdrf", "dbh", "hash", "pgc", "snapshot", "sequence"):
        assert algo in text, algo
    assert "its passes" not in text
    assert "refinement sweeps" in text
    # the defaults the help states are the partitioners' own (the help cannot import them: numba at parse)
    from graphstream.partition.coarse_refine import CoarseRefineParams
    assert f"with fewer replicas (default {CoarseRefineParams().refine_passes};" in text


def test_train_help_lists_devices():
    text = _help("train")
    assert "{cpu,cuda,cuda:N}" in text
    assert "nothing is saved" in text


def test_docs_cli_is_generated_from_the_parser():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_cli_docs
    finally:
        sys.path.pop(0)
    text = gen_cli_docs.render()
    assert (ROOT / "docs" / "cli.md").read_text() == text, (
        "docs/cli.md is out of date: run .venv/bin/python tools/gen_cli_docs.py")
    # every command and every flag of the parser is in it
    from graphstream.cli import build_parser
    for name, sub in gen_cli_docs.subcommands(build_parser()):
        assert f"## graphstream {name}" in text
        for action in sub._actions:
            for flag in action.option_strings if action.dest != "help" else ():
                assert f"`{flag}" in text, (name, flag)


def test_docs_hold_no_working_notes():
    banned = ("session", "load average", "while other jobs", "busier moment", "benchmark lock",
              "shared 2-core", "other work", "graphstream-bench.lock", "shared with other jobs", "lead's run")
    for page in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        text = page.read_text().lower()
        for phrase in banned:
            assert phrase not in text, f"{page.name}: {phrase!r}"


def test_nan_is_not_json():
    with pytest.raises(AssertionError):
        strict_json(json.dumps({"a": math.nan}))
