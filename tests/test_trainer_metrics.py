"""Issue 19: metrics that fit the labels (accuracy, macro-F1, ROC-AUC), chosen from the labels,
overridable with --metric, reported under their own names, and used for model selection."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphstream.errors import ParameterError
from trainer.metrics import accuracy, default_metric, macro_f1, resolve_metric, roc_auc, roc_auc_pos_neg

ROOT = Path(__file__).resolve().parents[1]


# -- the metric functions against brute force -----------------------------------------------

def brute_roc_auc(y, s) -> float:
    """P(random positive scores above random negative), ties half: every pair counted."""
    pos = [a for a, t in zip(s, y, strict=True) if t == 1]
    neg = [a for a, t in zip(s, y, strict=True) if t != 1]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def brute_macro_f1(y, p) -> float:
    classes = sorted(set(y) | set(p))
    f1s = []
    for c in classes:
        tp = sum(1 for a, b in zip(y, p, strict=True) if a == c and b == c)
        fp = sum(1 for a, b in zip(y, p, strict=True) if a != c and b == c)
        fn = sum(1 for a, b in zip(y, p, strict=True) if a == c and b != c)
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1s.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    return sum(f1s) / len(f1s)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5)), min_size=1, max_size=40))
def test_roc_auc_is_the_pairwise_probability_ties_half(pairs):
    y = np.array([a for a, _ in pairs])
    s = np.array([b for _, b in pairs], float)        # few distinct scores: many ties
    if y.min() == y.max():
        assert roc_auc(y, s) is None                    # one class: undefined, not NaN
    else:
        assert roc_auc(y, s) == pytest.approx(brute_roc_auc(y, s), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=40))
def test_macro_f1_and_accuracy_match_brute_force(pairs):
    y = [a for a, _ in pairs]
    p = [b for _, b in pairs]
    assert macro_f1(np.array(y), np.array(p)) == pytest.approx(brute_macro_f1(y, p), abs=1e-12)
    assert accuracy(np.array(y), np.array(p)) == pytest.approx(sum(a == b for a, b in pairs) / len(pairs))


def test_degenerate_inputs_give_none_never_nan():
    empty = np.zeros(0)
    assert accuracy(empty, empty) is None and macro_f1(empty, empty) is None
    assert roc_auc(empty, empty) is None and roc_auc(np.ones(3), np.arange(3.0)) is None
    assert roc_auc_pos_neg(np.array([1.0]), empty) is None
    assert roc_auc(np.array([0, 1, 1]), np.array([0.2, 0.2, 0.9])) == 0.75
    # a class only predicted (never true) counts in the mean: F1 0 for it
    assert macro_f1(np.array([0, 0]), np.array([0, 1])) == pytest.approx((2 / 3 + 0) / 2)
    from trainer.link_prediction import roc_auc as link_auc  # the dynamic trainer's, same function
    assert link_auc(np.array([2.0]), empty) is None


def test_metric_is_chosen_from_the_labels_and_checked():
    assert default_metric(2) == "roc_auc" and default_metric(3) == "accuracy" and default_metric(1) == "accuracy"
    assert resolve_metric(None, 2) == "roc_auc" and resolve_metric("macro_f1", 2) == "macro_f1"
    assert resolve_metric("accuracy", 2) == "accuracy" and resolve_metric(None, 7) == "accuracy"
    with pytest.raises(ParameterError, match="needs binary labels, these have 3 classes"):
        resolve_metric("roc_auc", 3)
    with pytest.raises(ParameterError, match="--metric f2"):
        resolve_metric("f2", 2)


# -- the trainer ------------------------------------------------------------------------------

torch = pytest.importorskip("torch")
from trainer.data import ArrayPart, check_parts, split_graph  # noqa: E402
from trainer.train import TrainConfig, run_training  # noqa: E402

CONFIG = TrainConfig(hidden=8, epochs=12)


def graph(n: int = 80, classes: int = 2, seed: int = 0, test_class: int | None = None) -> ArrayPart:
    """A small random graph with noisy class-correlated features; binary labels imbalanced (1 in 4).
    ``test_class``: every test node gets this label (a split holding one class only)."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.25).astype(np.int64) if classes == 2 else rng.integers(0, classes, n)
    a = np.triu(rng.random((n, n)) < 0.08, 1)
    a = a | a.T
    indptr = np.concatenate([[0], np.cumsum(a.sum(1))]).astype(np.int64)
    indices = np.nonzero(a)[1].astype(np.int64)
    x = (rng.normal(size=(n, 8)) + 0.7 * np.eye(classes, 8)[y]).astype(np.float32)
    perm = rng.permutation(n)
    masks = [np.zeros(n, bool) for _ in range(3)]
    for m, idx in zip(masks, np.array_split(perm, 3), strict=True):
        m[idx] = True
    if test_class is not None:
        y[masks[2]] = test_class
    return ArrayPart(np.arange(n), n, indptr, indices, x, y, *masks, degree=np.diff(indptr))


def parts_of(g: ArrayPart, k: int = 2):
    return check_parts(split_graph(g, np.arange(len(g.labels)) % k))


def first_argmax(history: list[dict], key: str) -> int:
    values = [h[key] for h in history]
    return history[int(np.argmax(values))]["epoch"]


BINARY_KEYS = {"metric", "selected_by", "mode", "best_epoch", "test_accuracy", "val_accuracy", "test_roc_auc",
               "val_roc_auc", "test_macro_f1", "val_macro_f1", "final_test_roc_auc", "final_val_roc_auc"}


@pytest.mark.parametrize("centralized", [False, True])
def test_binary_labels_select_by_val_roc_auc(centralized):
    out = run_training(parts_of(graph()), CONFIG, centralized=centralized, threads=1)
    assert BINARY_KEYS <= out.keys(), BINARY_KEYS - out.keys()
    assert out["mode"] == ("centralized" if centralized else "averaged")
    assert out["metric"] == "roc_auc" and out["selected_by"] == "val_roc_auc"
    assert all(0.0 <= out[k] <= 1.0 for k in ("test_roc_auc", "val_roc_auc", "test_macro_f1", "test_accuracy"))
    assert all("val_roc_auc" in h and "val_macro_f1" in h for h in out["history"])
    # the kept model is the first round with the highest validation ROC-AUC, and its value is reported
    assert out["best_epoch"] == first_argmax(out["history"], "val_roc_auc")
    best = next(h for h in out["history"] if h["epoch"] == out["best_epoch"])
    assert out["val_roc_auc"] == pytest.approx(best["val_roc_auc"], abs=1e-6)
    json.dumps(out, allow_nan=False)


def test_selection_follows_the_chosen_metric():
    """One run per metric on the same binary data: each keeps the argmax epoch of its own history,
    and at least two of them disagree (otherwise the test would not tell them apart)."""
    parts = parts_of(graph(seed=3))
    best = {}
    for metric in ("accuracy", "macro_f1", "roc_auc"):
        out = run_training(parts, replace(CONFIG, metric=metric, epochs=20), threads=1)
        assert out["metric"] == metric and out["selected_by"] == f"val_{metric}"
        assert out["best_epoch"] == first_argmax(out["history"], f"val_{metric}")
        best[metric] = out["best_epoch"]
    assert len(set(best.values())) > 1, best


def test_multi_class_selects_by_accuracy_and_reports_macro_f1():
    parts = parts_of(graph(classes=3))
    out = run_training(parts, CONFIG, threads=1)
    assert out["metric"] == "accuracy" and out["selected_by"] == "val_accuracy"
    assert "test_roc_auc" not in out and 0.0 <= out["test_macro_f1"] <= 1.0
    assert out["best_epoch"] == first_argmax(out["history"], "val_accuracy")
    out = run_training(parts, replace(CONFIG, metric="macro_f1"), threads=1)
    assert out["selected_by"] == "val_macro_f1"
    assert out["best_epoch"] == first_argmax(out["history"], "val_macro_f1")
    with pytest.raises(ParameterError, match="--metric roc_auc: needs binary labels"):
        run_training(parts, replace(CONFIG, metric="roc_auc"), threads=1)


def test_a_test_split_of_one_class_gives_null_and_a_note():
    out = run_training(parts_of(graph(test_class=0)), CONFIG, threads=1)
    assert out["test_roc_auc"] is None and out["val_roc_auc"] is not None
    assert "test nodes hold one class only: test_roc_auc is null" in out["note"]
    assert out["test_accuracy"] is not None
    json.dumps(out, allow_nan=False)


# -- the command line --------------------------------------------------------------------------

def _to_disk(g: ArrayPart, root: Path) -> Path:
    from graphstream.cli import main
    src = np.repeat(np.arange(len(g.indptr) - 1), np.diff(g.indptr))
    np.savetxt(root / "edges.txt", np.stack([src, g.indices], 1), fmt="%d")
    nodes = root / "nodes"
    nodes.mkdir()
    for name in ("features", "labels", "train_mask", "val_mask", "test_mask"):
        np.save(nodes / f"{name}.npy", getattr(g, name))
    assert main(["ingest", root / "edges.txt", root / "g.zarr"]) == 0
    assert main(["partition", root / "g.zarr", "-k", "2", "--out", root / "parts", "--nodes", nodes]) == 0
    return root / "parts"


def test_cli_metric_flag_and_its_refusal(tmp_path, capsys):
    from graphstream.cli import main
    multi = _to_disk(graph(classes=3), tmp_path)
    capsys.readouterr()
    assert main(["train", str(multi), "--metric", "roc_auc", "--epochs", "2", "--hidden", "8"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "--metric roc_auc: needs binary labels, these have 3 classes" in err[0], err
    assert main(["train", str(multi), "--metric", "macro_f1", "--epochs", "3", "--hidden", "8", "--threads", "1",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metric"] == "macro_f1" and out["selected_by"] == "val_macro_f1" and "test_macro_f1" in out
    assert main(["train", str(multi), "--model", "tgcn", "--metric", "accuracy"]) == 2
    assert "reports roc_auc only" in capsys.readouterr().err


def test_docs_name_the_metrics_and_the_dynamic_aliases():
    doc = (ROOT / "docs" / "trainer.md").read_text()
    for word in ("--metric", "test_roc_auc", "test_macro_f1", "selected_by", "deprecated"):
        assert word in doc, word
