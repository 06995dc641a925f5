"""Trainer (static graphs): layers against dense references, the sampler, exact
model averaging across 2 gloo workers, resume, bad input, and averaged vs
centralised accuracy on Cora (the slow variant covers Citeseer and facebook).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from graphstream.errors import NodeDataError, ParameterError  # noqa: E402
from trainer.averaging import weighted_mean_reference  # noqa: E402
from trainer.data import (  # noqa: E402
    ArrayPart,
    PartsError,
    assemble_whole_graph,
    check_parts,
    features_to_device,
    full_block,
    load_part,
    split_graph,
)
from trainer.models import Block, SparseRows, build_model, linear  # noqa: E402
from trainer.optim import Adam  # noqa: E402
from trainer.sampler import sample_blocks  # noqa: E402
from trainer.train import TrainConfig, run_training, train_worker  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
CPU = torch.device("cpu")


def sbm(n=300, k=3, f=16, p_in=0.05, p_out=0.005, seed=0, train_share=4) -> ArrayPart:
    """A small undirected stochastic block model with class-correlated features; the first
    n // train_share of a random order train, up to n // 2 validate, the rest test."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    prob = np.where(y[:, None] == y[None, :], p_in, p_out)
    a = np.triu(rng.random((n, n)) < prob, 1)
    a = a | a.T
    indptr = np.concatenate([[0], np.cumsum(a.sum(1))]).astype(np.int64)
    indices = np.nonzero(a)[1].astype(np.int64)
    x = (rng.normal(size=(n, f)) + 0.8 * np.eye(k, f)[y]).astype(np.float32)
    perm = rng.permutation(n)
    masks = [np.zeros(n, bool) for _ in range(3)]
    masks[0][perm[:n // train_share]] = True
    masks[1][perm[n // train_share:n // 2]] = True
    masks[2][perm[n // 2:]] = True
    return ArrayPart(np.arange(n), n, indptr, indices, x, y, *masks, degree=np.diff(indptr))


def dense_adj(g: ArrayPart) -> np.ndarray:
    n = len(g.indptr) - 1
    a = np.zeros((n, n))
    for i in range(n):
        a[i, g.indices[g.indptr[i]:g.indptr[i + 1]]] = 1.0
    return a


# -- layers -------------------------------------------------------------------

def test_layers_match_dense_references():
    g = sbm(n=60, f=8)
    blk = full_block(g.indptr, g.indices, g.degree.astype(np.float32), CPU)
    blk.src_deg = blk.src_deg.double()   # compare in float64 throughout
    x = torch.from_numpy(g.features).double()
    a = dense_adj(g)
    torch.manual_seed(0)
    for kind, sparse_path in [(k, s) for k in ("gcn", "sage", "gat") for s in (True, False)]:
        model = build_model(kind, 8, 8, 3, dropout=0.0).double().eval()
        conv = model.layers[0]
        blk.sorted_rows = sparse_path      # CSR product, or gather + index_add
        blk.cache.clear()
        got = conv(x, blk).detach().numpy()
        xn = x.numpy()
        if kind == "gcn":
            ahat = a + np.eye(len(a))
            d = ahat.sum(1)
            want = (ahat / np.sqrt(np.outer(d, d))) @ (xn @ conv.lin.weight.detach().numpy().T)
            want += conv.bias.detach().numpy()
        elif kind == "sage":
            mean = (a @ xn) / np.maximum(a.sum(1, keepdims=True), 1)
            want = conv.lin_self(x).detach().numpy() + mean @ conv.lin_neigh.weight.detach().numpy().T
        else:
            h = (xn @ conv.lin.weight.detach().numpy().T).reshape(len(a), conv.heads, -1)
            s = (h * conv.att_src.detach().numpy()).sum(-1)
            d = (h * conv.att_dst.detach().numpy()).sum(-1)
            want = np.zeros((len(a), conv.heads, h.shape[2]))
            for i in range(len(a)):
                nb = np.concatenate([np.flatnonzero(a[i]), [i]])
                e = s[nb] + d[i]
                e = np.where(e > 0, e, 0.2 * e)
                w = np.exp(e - e.max(0))
                w /= w.sum(0)
                want[i] = (w[:, :, None] * h[nb]).sum(0)
            want = want.reshape(len(a), -1) + conv.bias.detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=kind)


def test_sparse_features_equal_dense():
    rng = np.random.default_rng(1)
    x = ((rng.random((40, 30)) < 0.05) * rng.random((40, 30))).astype(np.float32)
    sx = features_to_device(x, CPU)
    assert isinstance(sx, SparseRows)
    assert torch.equal(sx.dense(), torch.from_numpy(x))
    rows = torch.tensor([5, 0, 5, 39])
    assert torch.equal(sx.index_select(0, rows).dense(), torch.from_numpy(x)[rows])
    lin = torch.nn.Linear(30, 4).double()
    sxd = SparseRows(sx.indptr, sx.indices, sx.values.double(), 30)
    torch.testing.assert_close(linear(sxd, lin), lin(torch.from_numpy(x).double()))
    dense = features_to_device(np.ones((4, 3), np.float32), CPU)
    assert isinstance(dense, torch.Tensor)


def test_adam_is_torch_adam():
    torch.manual_seed(0)
    a = torch.randn(6, 4, requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    mine = Adam([a], lr=0.01, weight_decay=5e-4)
    ref = torch.optim.Adam([b], lr=0.01, weight_decay=5e-4, foreach=False)
    for _ in range(30):
        for p, opt in ((a, mine), (b, ref)):
            opt.zero_grad()
            ((p ** 3).sum() + p.sin().sum()).backward()
            opt.step()
    assert torch.equal(a, b)


# -- sampler ------------------------------------------------------------------

def test_sampler_edges_counts_determinism():
    g = sbm(n=200, p_in=0.15)
    deg = np.diff(g.indptr)
    seeds = np.array([3, 17, 50, 199, 100])
    mb = sample_blocks(g.indptr, g.indices, seeds, (4, 3), seed=7)
    again = sample_blocks(g.indptr, g.indices, seeds, (4, 3), seed=7)
    assert np.array_equal(mb.nodes, again.nodes)
    assert np.array_equal(mb.nodes[:5], seeds) and len(np.unique(mb.nodes)) == len(mb.nodes)
    inner, outer = mb.hops[1], mb.hops[0]          # seeds' hop is consumed last
    assert inner.num_dst == 5 and outer.num_dst == inner.num_src
    edges = set(zip(np.repeat(np.arange(len(deg)), deg), g.indices))
    for hop, f in ((inner, 4), (outer, 3)):
        dst, src = mb.nodes[hop.row], mb.nodes[hop.col]
        assert all((int(d), int(s)) in edges for d, s in zip(dst, src))
        counts = np.bincount(hop.row, minlength=hop.num_dst)
        assert np.array_equal(counts, np.minimum(deg[mb.nodes[:hop.num_dst]], f))
        assert np.array_equal(hop.dst_sampled, counts)
        assert len(set(zip(hop.row.tolist(), hop.col.tolist()))) == len(hop.row)  # no repeats
    # Uniform: every neighbour of a node of degree d is drawn about f/d of the time.
    v = int(np.argmax(deg))
    hits = np.zeros(len(deg))
    for s in range(3000):
        b = sample_blocks(g.indptr, g.indices, np.array([v]), (2,), seed=s)
        hits[b.nodes[1:]] += 1
    nb = g.indices[g.indptr[v]:g.indptr[v + 1]]
    expect = 3000 * 2 / deg[v]
    assert np.all(np.abs(hits[nb] - expect) < 5 * np.sqrt(expect)) and hits.sum() == 6000


def test_full_fanout_sample_reproduces_full_batch():
    g = sbm(n=80)
    graph = load_part(g, CPU)
    seeds = np.array([0, 5, 9, 33])
    mb = sample_blocks(g.indptr, g.indices, seeds, (1000, 1000), seed=0)
    for kind in ("gcn", "sage", "gat"):
        model = build_model(kind, 16, 8, 3, dropout=0.0).double().eval()
        blocks = [Block(torch.from_numpy(h.row), torch.from_numpy(h.col), h.num_dst, h.num_src,
                        torch.from_numpy(graph.deg[mb.nodes[:h.num_src]]),
                        torch.from_numpy(graph.deg[mb.nodes[:h.num_dst]] / h.dst_sampled)) for h in mb.hops]
        x = graph.x.double()
        graph.block.src_deg = graph.block.src_deg.double()
        for b in blocks:
            b.src_deg, b.dst_scale = b.src_deg.double(), b.dst_scale.double()
        sampled = model(x[torch.from_numpy(mb.nodes)], blocks)
        full = model(x, [graph.block] * 2)[torch.from_numpy(seeds)]
        torch.testing.assert_close(sampled, full, msg=kind)


# -- parts --------------------------------------------------------------------

def test_split_and_reassemble_roundtrip():
    g = sbm(n=120)
    owner = np.random.default_rng(2).integers(0, 3, 120)
    parts = check_parts(split_graph(g, owner))
    whole = assemble_whole_graph(parts)
    assert np.array_equal(whole.indptr, g.indptr) and np.array_equal(whole.indices, g.indices)
    assert np.array_equal(whole.features, g.features) and np.array_equal(whole.labels, g.labels)
    for m in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(whole, m), getattr(g, m))


def test_partial_halo_rows_are_scaled_to_their_whole_degree():
    """On a ring every node has degree 2 and, with constant features, a GCN layer
    outputs exactly 1 everywhere. In a part (as the builder writes it) a halo node
    keeps its one edge into the part; scaled by degree / row length it still
    outputs 1 (unscaled: 2/3)."""
    from trainer.models import GCNConv
    n, k = 12, 6
    gids = np.array([0, 1, 2, 3, 4, 5, 6, 11])                  # inner 0..5, halo 6 and 11
    rows = [[1, 7], [0, 2], [1, 3], [2, 4], [3, 5], [4, 6], [5], [0]]   # local ids
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    part = ArrayPart(gids, k, indptr, np.concatenate(rows), np.ones((8, 1), np.float32), np.zeros(8, np.int64),
                     degree=np.full(8, 2))
    block = full_block(part.indptr, part.indices, part.degree, torch.device("cpu"))
    np.testing.assert_allclose(block.dst_scale.numpy(), [1.0] * k + [2.0, 2.0])
    conv = GCNConv(1, 1)
    with torch.no_grad():
        conv.lin.weight.fill_(1.0)
        out = conv(torch.from_numpy(part.features), block)
    np.testing.assert_allclose(out.numpy().ravel(), np.ones(8), rtol=1e-6)
    whole_rows = full_block(np.arange(0, 2 * n + 1, 2), np.sort(np.stack([(np.arange(n) - 1) % n,
                            (np.arange(n) + 1) % n], 1), 1).ravel(), np.full(n, 2), torch.device("cpu"))
    assert whole_rows.dst_scale is None                          # complete rows are never rescaled


def test_bad_parts_are_refused():
    g = sbm(n=60)
    owner = np.arange(60) % 3
    parts = split_graph(g, owner)
    with pytest.raises(PartsError, match="inner nodes"):
        check_parts(parts[:2])
    bad = list(parts)
    bad[1] = ArrayPart(**{**bad[1].__dict__, "features": np.zeros((len(bad[1].global_ids), 5), np.float32)})
    with pytest.raises(NodeDataError, match="dimension 5"):
        check_parts(bad)
    ok = check_parts(parts)
    with pytest.raises(ParameterError, match="more workers than parts"):
        run_training(ok, TrainConfig(epochs=1, hidden=4), workers=4)
    if not torch.cuda.is_available():
        with pytest.raises(ParameterError, match="CUDA"):
            run_training(ok, TrainConfig(epochs=1, hidden=4, device="cuda"), workers=1)


# -- averaging ----------------------------------------------------------------

def test_proximal_term_changes_nothing_in_one_full_batch_epoch():
    """The proximal term's gradient is zero at W, so full-batch --sync-every 1 is plain averaging."""
    g = sbm(n=200)
    parts = check_parts(split_graph(g, np.arange(200) % 2))
    cfg = TrainConfig(model="gcn", hidden=8, epochs=4, record_weights=True)
    plain = run_training(parts, replace(cfg, proximal=0.0), workers=1)
    prox = run_training(parts, replace(cfg, proximal=50.0), workers=1)
    assert plain["losses"] == prox["losses"]
    assert all(torch.equal(a["averaged"], b["averaged"]) for a, b in zip(plain["recorded"][0], prox["recorded"][0]))


def test_centralized_and_averaged_runs_report_the_same_keys():
    """docs/trainer.md promises one set of keys for both modes (a script reads either)."""
    parts = check_parts(split_graph(sbm(n=200), np.arange(200) % 2))
    cfg = TrainConfig(model="gcn", hidden=8, epochs=2)
    averaged = run_training(parts, cfg, workers=1)
    central = run_training(parts, cfg, centralized=True)
    assert set(central) == set(averaged)
    assert central["mode"] == "centralized" and central["sync_every"] == 1
    assert len(central["worker_train_seconds"]) == 1


def test_proximal_term_keeps_local_models_near_the_average():
    """Over 5 local epochs, each part's model ends closer to the average it started from."""
    g = sbm(n=300)
    parts = check_parts(split_graph(g, np.arange(300) % 3))

    def drift(proximal):
        out = run_training(parts, TrainConfig(model="gcn", hidden=8, epochs=15, sync_every=5, proximal=proximal,
                                              record_weights=True), workers=1)
        rounds = out["recorded"][0]
        return np.mean([float((w - prev["averaged"]).norm()) for prev, cur in zip(rounds, rounds[1:])
                        for _, w, _ in cur["local"]])
    assert drift(30.0) < 0.8 * drift(0.0)



def test_two_workers_hold_the_exact_weighted_mean(tmp_path):
    """3 parts on 2 gloo workers (worker 0 trains parts 0 and 2): after every sync both
    workers hold bitwise the same weights, equal to sum_i n_i W_i / n computed here."""
    g = sbm(n=240)
    owner = np.random.default_rng(3).integers(0, 3, 240)
    parts = check_parts(split_graph(g, owner))
    n_train = [parts.num_train(i) for i in range(3)]
    assert len(set(n_train)) > 1   # unequal weights, or the test proves less
    config = TrainConfig(model="sage", hidden=8, epochs=6, sync_every=2, mini_batch=True, fanouts=(5, 5),
                         batch_size=16, record_weights=True, checkpoint=str(tmp_path / "ckpt.pt"))
    out = run_training(parts, config, workers=2, threads=1)
    rec0, rec1 = out["recorded"]
    assert len(rec0) == len(rec1) == 3
    total = sum(n_train)
    for r0, r1 in zip(rec0, rec1):
        assert [i for i, _, _ in r0["local"]] == [0, 2] and [i for i, _, _ in r1["local"]] == [1]
        assert torch.equal(r0["averaged"], r1["averaged"])
        want = weighted_mean_reference([[(f, n) for _, f, n in r0["local"]],
                                        [(f, n) for _, f, n in r1["local"]]], total)
        assert torch.equal(r0["averaged"], want)
        # and the plain float64 mean, rounded once, is the same number
        flat = {i: f for r in (r0, r1) for i, f, _ in r["local"]}
        plain = sum(flat[i].double() * n_train[i] for i in range(3)) / total
        assert torch.equal(plain.float(), want)
    assert out["num_parts"] == 3 and out["workers"] == 2 and out["sync_seconds"] >= 0
    assert Path(config.checkpoint).exists() and Path(config.checkpoint + ".best").exists()


def test_resume_continues_exactly(tmp_path):
    g = sbm(n=200)
    parts = check_parts(split_graph(g, np.arange(200) % 2))
    base = dict(model="gcn", hidden=8, sync_every=2, seed=5)
    straight = run_training(parts, TrainConfig(epochs=8, **base), workers=1, threads=1)
    ck = str(tmp_path / "c.pt")
    run_training(parts, TrainConfig(epochs=4, checkpoint=ck, **base), workers=1, threads=1)
    resumed = run_training(parts, TrainConfig(epochs=8, checkpoint=ck, resume=True, **base), workers=1, threads=1)
    assert resumed["losses"] == straight["losses"]
    assert resumed["history"] == straight["history"]
    assert resumed["test_accuracy"] == straight["test_accuracy"]


def test_worker_trains_every_dealt_part():
    g = sbm(n=150)
    parts = check_parts(split_graph(g, np.arange(150) % 5))
    res = train_worker(1, 2, parts, TrainConfig(hidden=4, epochs=1))
    assert res.parts == [1, 3] and res.summary is None


# -- real data ----------------------------------------------------------------

def graphstream(*args) -> dict:
    proc = subprocess.run([sys.executable, "-m", "graphstream", *map(str, args), "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def make_parts(root: Path, name: str, k: int = 4, algo: str = "spring") -> Path:
    if not DATASETS.is_dir():
        pytest.skip(f"shared datasets not found at {DATASETS}")
    graphstream("dataset", name, root / name, "--root", DATASETS)
    graphstream("partition", root / name / "graph.zarr", "-k", k, "--algo", algo, "--out", root / f"{name}-parts",
                 "--nodes", root / name)
    return root / f"{name}-parts"


@pytest.fixture(scope="module")
def cora_parts(tmp_path_factory):
    return make_parts(tmp_path_factory.mktemp("cora"), "cora")


def test_cli_bad_input_exit_2(cora_parts, tmp_path):
    def code(*args):
        return subprocess.run([sys.executable, "-m", "graphstream", "train", *map(str, args)],
                              capture_output=True, text=True, cwd=ROOT)
    p = code(cora_parts, "--workers", "5", "--epochs", "1")
    assert p.returncode == 2 and "more workers than parts" in p.stderr
    broken = tmp_path / "broken"
    shutil.copytree(cora_parts, broken)
    shutil.rmtree(broken / "part-00002")
    p = code(broken, "--epochs", "1")
    assert p.returncode == 2 and "part-00002" in p.stderr
    p = code(tmp_path / "nothing", "--epochs", "1")
    assert p.returncode == 2
    if not torch.cuda.is_available():
        p = code(cora_parts, "--device", "cuda", "--epochs", "1")
        assert p.returncode == 2 and "CUDA" in p.stderr


def mean_accuracy(parts, config: TrainConfig, seeds, **kw) -> float:
    return float(np.mean([run_training(parts, replace(config, seed=s), threads=1, **kw)["test_accuracy"]
                          for s in seeds]))


def centralized_and_averaged(name: str, parts, workers: int) -> tuple[float, float, float]:
    """Mean test accuracy over seeds 0-2 of GCN (hidden 64, 100 epochs): centralised,
    averaged every epoch, averaged every 10 epochs."""
    config = TrainConfig(model="gcn", hidden=64, epochs=100)
    seeds = (0, 1, 2)
    central = mean_accuracy(parts, config, seeds, centralized=True)
    every1 = mean_accuracy(parts, config, seeds, workers=workers)
    every10 = mean_accuracy(parts, replace(config, sync_every=10), seeds, workers=workers)
    print(f"{name}: centralized {central:.4f} averaged {every1:.4f} sync10 {every10:.4f}")
    return central, every1, every10


def test_cora_averaged_matches_centralized(cora_parts):
    """Averaging the 4 parts' models (every epoch, and every 10) against the same GCN on
    the whole graph: mean test accuracy of 3 seeds within 1.5 and 2 points. One worker
    trains the 4 parts in turn here (the 2-worker test above shows that spreading parts
    over workers computes the same average); the slow test uses 2 gloo workers."""
    from trainer.data import open_parts
    central, every1, every10 = centralized_and_averaged("cora gcn", open_parts(cora_parts), workers=1)
    assert central > 0.75
    assert every1 >= central - 0.015
    assert every10 >= central - 0.02


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("GRAPHSTREAM_SLOW"), reason="5 minutes on 2 idle cores, 12 on a busy machine: set GRAPHSTREAM_SLOW=1")
@pytest.mark.parametrize("name", ["cora", "citeseer", "facebook"])
def test_averaged_matches_centralized_two_workers(tmp_path, name, request):
    """The spec's bar with 2 gloo workers and 4 SPRING parts, mean of 3 seeds.

    Citeseer with --sync-every 10 is the hard case: SPRING's parts are
    communities, each with about 30 training labels far from the class mix, and
    without the proximal term (proximal=0) the average lands 2.7 points under
    centralised training (66.3 vs 69.0; docs/trainer.md has the scan).
    """
    central, every1, every10 = centralized_and_averaged(name, make_parts(tmp_path, name), workers=2)
    assert every1 >= central - 0.015
    assert every10 >= central - 0.02


# -- GPU ----------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("model", ["gcn", "sage", "gat"])
@pytest.mark.parametrize("mini_batch", [False, True])
def test_gpu_training_matches_cpu_closely(model, mini_batch):
    g = sbm(n=200)
    parts = check_parts(split_graph(g, np.arange(200) % 2))
    cfg = TrainConfig(model=model, hidden=8, epochs=5, dropout=0.0, mini_batch=mini_batch, fanouts=(5, 5),
                      batch_size=32)
    cpu = run_training(parts, cfg, workers=1)
    gpu = run_training(parts, replace(cfg, device="cuda"), workers=1)
    np.testing.assert_allclose(gpu["losses"], cpu["losses"], rtol=1e-3)
