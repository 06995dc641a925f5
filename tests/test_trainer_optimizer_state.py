"""--average-optimizer-state: the parts' Adam moments averaged with the weights at every sync (issue 19)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import test_trainer as trainer_tests  # noqa: E402 (the block model of the trainer tests)

from trainer.averaging import WeightedAverager, flat_moments, flat_parameters  # noqa: E402
from trainer.data import ArrayPart, check_parts, split_graph  # noqa: E402
from trainer.models import build_model  # noqa: E402
from trainer.optim import Adam  # noqa: E402
from trainer.train import TrainConfig, run_training  # noqa: E402


def sbm() -> ArrayPart:
    """tests/test_trainer.py's block model, smaller, a third of the nodes training."""
    return trainer_tests.sbm(n=240, f=12, train_share=3)


def three_parts():
    owner = np.random.default_rng(3).integers(0, 3, 240)
    parts = check_parts(split_graph(sbm(), owner))
    n_train = [parts.num_train(i) for i in range(3)]
    assert len(set(n_train)) > 1   # unequal weights, or the weighting is not tested
    return parts, n_train


def moments(state: dict) -> torch.Tensor:
    """A checkpointed optimizer state's moments, flat (float32, as stored)."""
    return torch.cat([t.reshape(-1) for t in state["exp_avg"] + state["exp_avg_sq"]])


def test_averager_loads_the_weighted_mean_of_the_moments_into_every_optimizer():
    model = build_model("gcn", 6, 4, 3, num_layers=2, dropout=0.0, seed=0)
    params = list(model.parameters())
    opts, weights, rng = [], [3, 7], torch.Generator().manual_seed(0)
    for _ in weights:                       # two parts: different gradients, so different moments
        opt = Adam(params, lr=0.01)
        for p in params:
            p.grad = torch.randn(p.shape, generator=rng)
        opt.step()
        opts.append(opt)
    before = [flat_moments(o) for o in opts]
    assert not torch.equal(before[0], before[1])
    want_w = flat_parameters(model)
    avg = WeightedAverager(sum(weights), distributed=False)
    for opt, w in zip(opts, weights):
        avg.add(model, w, opt)
    W = avg.average_into(model, opts)
    want = ((before[0] * 3 + before[1] * 7) / 10).float().double()
    assert torch.equal(flat_moments(opts[0]), want) and torch.equal(flat_moments(opts[1]), want)
    assert W.numel() == want_w.numel() and torch.equal(W, want_w)   # same weights in both parts: unchanged
    assert torch.equal(flat_parameters(model), want_w)


@pytest.mark.parametrize("workers", [1, 2])
def test_after_every_sync_every_part_holds_the_weighted_mean_of_the_moments(tmp_path, workers):
    """Round 0 is the same run with and without the option up to the average: the parts' moments
    after it, kept in the checkpoint, are their own without it, and with it all equal to their
    n_i-weighted mean (on 2 gloo workers too: worker 0 trains parts 0 and 2, worker 1 part 1)."""
    parts, n_train = three_parts()
    base = TrainConfig(model="gcn", hidden=8, epochs=1, sync_every=1, seed=1)
    off = run_training(parts, replace(base, checkpoint=str(tmp_path / "off.pt")), workers=workers, threads=1)
    on = run_training(parts, replace(base, checkpoint=str(tmp_path / "on.pt"), average_optimizer_state=True),
                      workers=workers, threads=1)
    assert off["losses"] == on["losses"] and on["average_optimizer_state"] is True
    local = {i: moments(s) for i, s in torch.load(tmp_path / "off.pt", weights_only=False)["optimizers"].items()}
    shared = {i: moments(s) for i, s in torch.load(tmp_path / "on.pt", weights_only=False)["optimizers"].items()}
    assert sorted(local) == sorted(shared) == [0, 1, 2]
    assert not torch.equal(local[0], local[1])                     # without: each part its own
    want = (sum(local[i].double() * n_train[i] for i in range(3)) / sum(n_train)).float()
    assert all(torch.allclose(shared[i], want, rtol=1e-6, atol=0) for i in range(3))
    assert torch.equal(shared[0], shared[1]) and torch.equal(shared[1], shared[2])   # bitwise one state


def test_off_is_the_default_and_changes_nothing_on_the_first_round():
    """Without the option the run is the default run, bit for bit; with it the first round's losses
    (before any sync) are the same and later ones differ, since the moments now do."""
    parts, _ = three_parts()
    cfg = TrainConfig(model="gcn", hidden=8, epochs=6, sync_every=2, seed=2, record_weights=True)
    default = run_training(parts, cfg, workers=1)
    off = run_training(parts, replace(cfg, average_optimizer_state=False), workers=1)
    on = run_training(parts, replace(cfg, average_optimizer_state=True), workers=1)
    assert off["losses"] == default["losses"] and off["average_optimizer_state"] is False
    assert all(torch.equal(a["averaged"], b["averaged"]) for a, b in zip(default["recorded"][0], off["recorded"][0]))
    assert on["losses"][:2] == off["losses"][:2]
    assert on["losses"][2:] != off["losses"][2:]


def test_dynamic_models_refuse_the_flag(tmp_path):
    """The temporal trainer does not average optimizer state: the flag is refused (exit 2), not ignored."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "graphstream", "train", str(tmp_path), "--model", "tgcn",
                           "--average-optimizer-state"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--average-optimizer-state applies to the static models" in proc.stderr
