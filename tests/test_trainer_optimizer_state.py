"""--average-optimizer-state (the default): the parts' Adam moments averaged with the weights at every sync
(issue 19); --no-average-optimizer-state keeps them per part."""
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
    # without the drift correction: with it every part's one step is on the same mean gradient, so its
    # moments would be one state with the option or without
    base = TrainConfig(model="gcn", hidden=8, epochs=1, sync_every=1, seed=1, drift_correction=False)
    off = run_training(parts, replace(base, checkpoint=str(tmp_path / "off.pt"), average_optimizer_state=False),
                       workers=workers, threads=1)
    on = run_training(parts, replace(base, checkpoint=str(tmp_path / "on.pt")), workers=workers, threads=1)
    assert off["losses"] == on["losses"] and on["average_optimizer_state"] is True
    local = {i: moments(s) for i, s in torch.load(tmp_path / "off.pt", weights_only=False)["optimizers"].items()}
    shared = {i: moments(s) for i, s in torch.load(tmp_path / "on.pt", weights_only=False)["optimizers"].items()}
    assert sorted(local) == sorted(shared) == [0, 1, 2]
    assert not torch.equal(local[0], local[1])                     # without: each part its own
    want = (sum(local[i].double() * n_train[i] for i in range(3)) / sum(n_train)).float()
    assert all(torch.allclose(shared[i], want, rtol=1e-6, atol=0) for i in range(3))
    assert torch.equal(shared[0], shared[1]) and torch.equal(shared[1], shared[2])   # bitwise one state


def test_on_is_the_default_and_off_changes_nothing_on_the_first_round():
    """With the option the run is the default run, bit for bit; without it the first round's losses
    (before any sync) are the same and later ones differ, since the moments then do."""
    parts, _ = three_parts()
    cfg = TrainConfig(model="gcn", hidden=8, epochs=6, sync_every=2, seed=2, record_weights=True)
    default = run_training(parts, cfg, workers=1)
    off = run_training(parts, replace(cfg, average_optimizer_state=False), workers=1)
    on = run_training(parts, replace(cfg, average_optimizer_state=True), workers=1)
    assert on["losses"] == default["losses"] and default["average_optimizer_state"] is True
    assert off["average_optimizer_state"] is False
    assert all(torch.equal(a["averaged"], b["averaged"]) for a, b in zip(default["recorded"][0], on["recorded"][0]))
    assert on["losses"][:2] == off["losses"][:2]
    assert on["losses"][2:] != off["losses"][2:]


def test_resume_refuses_the_other_setting(tmp_path):
    """A checkpoint keeps the moments as the run had them: resuming it with the other setting is refused."""
    from graphstream.errors import ParameterError
    parts, _ = three_parts()
    cfg = TrainConfig(model="gcn", hidden=8, epochs=2, sync_every=1, seed=1, checkpoint=str(tmp_path / "c.pt"),
                      average_optimizer_state=False)
    run_training(parts, cfg, workers=1)
    with pytest.raises(ParameterError, match="pass --no-average-optimizer-state"):
        run_training(parts, replace(cfg, epochs=4, resume=True, average_optimizer_state=True), workers=1)
    assert run_training(parts, replace(cfg, epochs=4, resume=True), workers=1)["rounds"] == 4


@pytest.mark.parametrize("flag", ["--average-optimizer-state", "--no-average-optimizer-state"])
def test_dynamic_models_refuse_the_flag(tmp_path, flag):
    """The temporal trainer does not average optimizer state: either flag is refused (exit 2), not ignored."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "graphstream", "train", str(tmp_path), "--model", "tgcn", flag],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--[no-]average-optimizer-state applies to the static models" in proc.stderr


def test_cli_default_and_off(tmp_path, capsys):
    """The command line: on unless --no-average-optimizer-state, and said so in --json."""
    import json

    from graphstream import GraphWriter, open_store
    from graphstream.assemble import build_partitions
    from graphstream.cli import main as cli_main
    from graphstream.partition.plan import PartitionPlan
    g = sbm()
    n = len(g.global_ids)
    rows = np.repeat(np.arange(n), np.diff(g.indptr))
    with GraphWriter(tmp_path / "g.zarr", num_nodes=n, directed=True) as w:
        w.append(np.asarray(g.indices), rows)
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    for name, a in (("features", g.features), ("labels", g.labels), ("train_mask", g.train_mask),
                    ("val_mask", g.val_mask), ("test_mask", g.test_mask)):
        np.save(nodes / f"{name}.npy", a)
    build_partitions(open_store(tmp_path / "g.zarr"), PartitionPlan("test", 3, np.arange(n) % 3), tmp_path / "p",
                     nodes=nodes)
    for flags, want in (([], True), (["--no-average-optimizer-state"], False)):
        assert cli_main(["train", str(tmp_path / "p"), "--epochs", "2", "--hidden", "4", "--workers", "1",
                         "--json", *flags]) == 0
        assert json.loads(capsys.readouterr().out)["average_optimizer_state"] is want
