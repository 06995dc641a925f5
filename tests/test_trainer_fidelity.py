"""The two defaults that close the averaged-vs-centralised gap (docs/training.md):
balanced class weights for binary labels, and SCAFFOLD's drift correction.

With complete receptive fields (``split_graph(..., hops=2)`` for a 2-layer
model) and no dropout, full-batch averaging every epoch *with* the drift
correction is one Adam run on the whole graph: every part's step is on the
parts' mean gradient, which is the whole graph's gradient. Without it, it is
not (each part's Adam step on its own gradient, then averaged).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from graphstream.errors import ParameterError  # noqa: E402
from trainer.data import ArrayPart, PartSet, check_parts, split_graph  # noqa: E402
from trainer.train import (  # noqa: E402
    DRIFT_RISE,
    DriftTrust,
    TrainConfig,
    _node_loss,
    class_weights,
    proximal_strength,
    run_training,
)


def binary_sbm(n=240, positive=0.15, f=12, seed=0) -> ArrayPart:
    """An undirected SBM with rare positives (class 1) and label-correlated features."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < positive).astype(np.int64)
    prob = np.where(y[:, None] == y[None, :], 0.06, 0.01)
    a = np.triu(rng.random((n, n)) < prob, 1)
    a = a | a.T
    indptr = np.concatenate([[0], np.cumsum(a.sum(1))]).astype(np.int64)
    indices = np.nonzero(a)[1].astype(np.int64)
    x = (rng.normal(size=(n, f)) + 0.7 * np.eye(2, f)[y]).astype(np.float32)
    perm = rng.permutation(n)
    masks = [np.zeros(n, bool) for _ in range(3)]
    masks[0][perm[:n // 2]] = True
    masks[1][perm[n // 2:3 * n // 4]] = True
    masks[2][perm[3 * n // 4:]] = True
    return ArrayPart(np.arange(n), n, indptr, indices, x, y, *masks, degree=np.diff(indptr))


def parts_of(g: ArrayPart, p: int, hops: int = 2) -> PartSet:
    owner = np.random.default_rng(1).integers(0, p, g.num_inner)
    return replace(check_parts(split_graph(g, owner, hops)), num_classes=2)


def test_balanced_weights_from_every_parts_training_labels():
    g = binary_sbm()
    parts = parts_of(g, 3)
    train_y = g.labels[g.train_mask]
    counts = np.bincount(train_y, minlength=2)
    assert parts.train_class_counts().tolist() == counts.tolist()      # inner nodes only: each node once
    w = class_weights(parts, "auto").numpy()
    np.testing.assert_allclose(w, counts.sum() / (2 * counts), rtol=1e-6)
    assert (w * counts).sum() == pytest.approx(counts.sum(), rel=1e-6)  # mean weight over training nodes: 1
    assert class_weights(parts, "none") is None
    multi = replace(parts, num_classes=3)                                # auto: plain loss for multi-class
    assert class_weights(multi, "auto") is None and class_weights(multi, "balanced") is not None


def test_weighted_loss_is_the_parts_weighted_mean():
    """Each part's loss is its share of the whole-graph loss: sum_i (n_i / n) loss_i = loss(all)."""
    gen = torch.Generator().manual_seed(0)
    logits, y = torch.randn(50, 2, generator=gen), torch.randint(0, 2, (50,), generator=gen)
    w = torch.tensor([0.6, 3.0])
    whole = _node_loss(logits, y, w)
    pieces = sum(_node_loss(logits[s], y[s], w) * len(y[s]) / 50 for s in (slice(0, 13), slice(13, 50)))
    assert float(whole) == pytest.approx(float(pieces), rel=1e-6)
    assert float(_node_loss(logits, y, None)) == pytest.approx(float(torch.nn.functional.cross_entropy(logits, y)))


def test_bad_class_weight_refused():
    with pytest.raises(ParameterError, match="--class-weight"):
        TrainConfig(class_weight="inverse")


def _weights_after(parts, cfg, tmp_path, name, **kw):
    path = tmp_path / f"{name}.pt"
    out = run_training(parts, replace(cfg, checkpoint=str(path)), workers=1, **kw)
    return torch.load(path, weights_only=False)["weights"], out


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_sync_every_epoch_with_drift_correction_is_centralised_training(tmp_path, model):
    parts = parts_of(binary_sbm(), 4)
    cfg = TrainConfig(model=model, hidden=16, epochs=8, sync_every=1, dropout=0.0, seed=3)
    central, c_out = _weights_after(parts, cfg, tmp_path, "central", centralized=True)
    corrected, a_out = _weights_after(parts, cfg, tmp_path, "corrected")
    plain, p_out = _weights_after(parts, replace(cfg, drift_correction=False), tmp_path, "plain")
    assert a_out["drift_correction"] is True and p_out["drift_correction"] is False
    assert c_out["class_weight"] == a_out["class_weight"] == "balanced"
    step = (central - parts_weights_at_start(parts, cfg)).abs().max()
    assert float((corrected - central).abs().max()) < 1e-4 * float(step)
    assert float((plain - central).abs().max()) > 1e-2 * float(step)   # without: another run


def parts_weights_at_start(parts, cfg):
    from trainer.averaging import flat_parameters
    from trainer.models import build_model
    return flat_parameters(build_model(cfg.model, parts.num_features, cfg.hidden, parts.num_classes,
                                       num_layers=cfg.num_layers, dropout=cfg.dropout, seed=cfg.seed))


def test_drift_correction_on_two_workers_equals_one(tmp_path):
    """The control variates ride one more all_reduce: 2 gloo workers give the single process's weights."""
    parts = parts_of(binary_sbm(), 4)
    cfg = TrainConfig(model="gcn", hidden=8, epochs=6, sync_every=3, seed=1)
    one, _ = _weights_after(parts, cfg, tmp_path, "one")
    path = tmp_path / "two.pt"
    run_training(parts, replace(cfg, checkpoint=str(path)), workers=2, threads=1)
    two = torch.load(path, weights_only=False)["weights"]
    torch.testing.assert_close(two, one, rtol=1e-5, atol=1e-6)


def test_defaults_and_mini_batch():
    full = TrainConfig()
    assert full.drift_correction and proximal_strength(full) == 0.0
    assert proximal_strength(replace(full, drift_correction=False)) == 3.0
    assert proximal_strength(replace(full, mini_batch=True)) == 3.0     # no correction there: FedProx instead
    assert proximal_strength(replace(full, proximal=0.5)) == 0.5
    parts = parts_of(binary_sbm(n=120), 2, hops=1)
    out = run_training(parts, TrainConfig(hidden=8, epochs=2, mini_batch=True, fanouts=(4, 4), batch_size=16),
                       workers=1)
    assert out["drift_correction"] is False and out["proximal"] == 3.0


def test_resume_refuses_another_drift_or_class_weight_setting(tmp_path):
    parts = parts_of(binary_sbm(n=120), 2)
    cfg = TrainConfig(hidden=8, epochs=2, checkpoint=str(tmp_path / "c.pt"))
    run_training(parts, cfg, workers=1)
    with pytest.raises(ParameterError, match="drift_correction True.*--\\[no-\\]drift-correction"):
        run_training(parts, replace(cfg, epochs=4, resume=True, drift_correction=False), workers=1)
    # compared by what they train with: "auto" is "balanced" on binary labels (that resume was refused)
    with pytest.raises(ParameterError, match=r"class_weight 'auto' \(balanced on 2 classes\), this run has "
                                             r"'none' \(none\).*--class-weight"):
        run_training(parts, replace(cfg, epochs=4, resume=True, class_weight="none"), workers=1)
    assert run_training(parts, replace(cfg, epochs=4, resume=True, class_weight="balanced"), workers=1)["rounds"] == 4
    assert run_training(parts, replace(cfg, epochs=6, resume=True), workers=1)["rounds"] == 6


def test_drift_trust_halves_on_a_rise_past_the_bar_only():
    trust = DriftTrust()
    for loss in (2.0, 1.0, 0.5, 0.5 + 0.9 * DRIFT_RISE * 2.0):   # a rise under the bar: kept
        trust.observe(loss)
    assert trust.weight == 1.0
    trust.observe(trust.last_loss + 1.1 * DRIFT_RISE * 2.0)       # past it: halved, for good
    trust.observe(0.1)
    assert trust.weight == 0.5


def test_drift_trust_drops_where_rounds_raise_the_loss_and_survives_resume(tmp_path):
    """A step size that makes the average oscillate halves the correction's weight; a resumed run
    picks the weight up from the checkpoint and ends where the straight run does."""
    parts = parts_of(binary_sbm(), 4)
    cfg = TrainConfig(model="gcn", hidden=8, epochs=12, sync_every=3, seed=1, lr=1.0)
    straight = run_training(parts, cfg, workers=1, threads=1)
    assert straight["drift_correction_weight"] < 1.0
    calm = run_training(parts, replace(cfg, lr=0.01), workers=1, threads=1)
    assert calm["drift_correction_weight"] == 1.0
    ck = str(tmp_path / "c.pt")
    half = run_training(parts, replace(cfg, epochs=9, checkpoint=ck), workers=1, threads=1)
    assert half["drift_correction_weight"] < 1.0   # the drop happened before the checkpoint
    resumed = run_training(parts, replace(cfg, checkpoint=ck, resume=True), workers=1, threads=1)
    assert resumed["history"] == straight["history"]
    assert resumed["drift_correction_weight"] == straight["drift_correction_weight"]
