"""graphstream export --to dgl, checked with DGL itself (runs in .venv-dgl only: `bash tools/dgl-env.sh`).

* the layout matches what ``dgl.distributed.partition_graph`` writes (JSON
  fields, files, ndata/edata keys and dtypes, feature keys and dtypes);
* ``dgl.distributed.load_partition`` returns, for every part, exactly our
  inner nodes, edges, features and labels, and its partition book maps ids
  as DistDGL will (DGL_DIST_DEBUG verification on);
* a DGL GraphSAGE (``dgl.nn.SAGEConv``) trains one epoch on every loaded
  part with DGL's NeighborSampler, halo features pulled from their owners'
  files as DistTensor would;
for small graphs made here and SPRING partitions of Cora and MUSAE facebook.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

# The main .venv has no DGL: this module is skipped there. A submodule is asked for because this
# folder, tests/dgl, is itself importable as a namespace package "dgl" when tests/ is on sys.path.
pytest.importorskip("dgl.distributed", reason="DGL is not installed (its environment: bash tools/dgl-env.sh)")
import dgl  # noqa: E402
import torch  # noqa: E402
from dgl.data.utils import load_tensors  # noqa: E402
from dgl.distributed import load_partition, partition_graph  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_export_pyg import (edge_keys, expected_edges, ours_by_part, pipeline_parts,  # noqa: E402
                             run_cli, toy_dataset)


@pytest.fixture(scope="module")
def real_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("export-dgl-real")


def export_dgl(parts: Path, out: Path, name: str = "g") -> Path:
    assert run_cli("export", parts, "--to", "dgl", out, "--graph-name", name) == 0
    return out / f"{name}.json"


# ---------------------------------------------------------------- the layout is DGL's own

def _structure(config_path: Path) -> dict:
    """What a DGL partition folder is made of, without its values: JSON shape, files, keys and dtypes."""
    config = json.loads(config_path.read_text())
    parts = {}
    for p in range(config["num_parts"]):
        g = dgl.load_graphs(str(config_path.parent / config[f"part-{p}"]["part_graph"]))[0][0]
        nf = load_tensors(str(config_path.parent / config[f"part-{p}"]["node_feats"]))
        ef = load_tensors(str(config_path.parent / config[f"part-{p}"]["edge_feats"]))
        parts[p] = {"ndata": {k: str(v.dtype) for k, v in g.ndata.items()},
                    "edata": {k: str(v.dtype) for k, v in g.edata.items()},
                    "idtype": str(g.idtype), "node_feats": {k: str(v.dtype) for k, v in nf.items()},
                    "edge_feats": sorted(ef), "entry": sorted(config[f"part-{p}"]),
                    "paths": [config[f"part-{p}"][f] for f in ("node_feats", "edge_feats", "part_graph")]}
    shape = {k: type(v).__name__ for k, v in config.items() if not k.startswith("part-")}
    return {"config": shape, "ntypes": config["ntypes"], "etypes": config["etypes"],
            "node_map_keys": sorted(config["node_map"]), "edge_map_keys": sorted(config["edge_map"]),
            "halo_hops": config["halo_hops"], "parts": parts}


def test_layout_matches_dgl_partition_graph(tmp_path):
    parts, src = toy_dataset(tmp_path / "parts", num_nodes=80, num_edges=300, k=3)
    ours = _structure(export_dgl(parts, tmp_path / "ours", "toy"))
    e = src["edges"]
    g = dgl.graph((torch.from_numpy(np.concatenate([e[:, 0], e[:, 1]])),
                   torch.from_numpy(np.concatenate([e[:, 1], e[:, 0]]))), num_nodes=80)
    g.ndata["feat"] = torch.from_numpy(src["features"])
    g.ndata["label"] = torch.from_numpy(src["labels"])
    g.ndata["train_mask"] = torch.from_numpy(src["train_mask"])
    g.ndata["val_mask"] = torch.from_numpy(src["val_mask"])
    partition_graph(g, "toy", 3, str(tmp_path / "theirs"), part_method="random")
    theirs = _structure(tmp_path / "theirs" / "toy.json")
    assert ours == theirs
    # Besides DGL's files, ours adds the original ids, as DGL's distributed partition pipeline does.
    assert sorted(p.name for p in (tmp_path / "ours" / "part0").iterdir()) == [
        "edge_feat.dgl", "graph.dgl", "node_feat.dgl", "orig_nids.dgl"]


# ---------------------------------------------------------------- load_partition returns our parts

def check_dgl_partitions(config_path: Path, parts_dir: Path, features: np.ndarray, labels: np.ndarray,
                         masks: dict[str, np.ndarray], expected: set | None = None,
                         monkeypatch=None) -> dict:
    """Every part loaded by DGL equals ours; returns the loaded parts for training."""
    if monkeypatch is not None:
        monkeypatch.setenv("DGL_DIST_DEBUG", "1")   # load_partition then verifies ids against the book
    ours = ours_by_part(parts_dir)
    config = json.loads(config_path.read_text())
    n, k = config["num_nodes"], config["num_parts"]
    assert k == len(ours) and n == labels.shape[0]
    # new id -> original id, from our parts alone (inner nodes in part order).
    orig_of_new = np.concatenate([inner for inner, _ in ours])
    loaded, all_keys = {}, []
    for p, (inner, our_keys) in enumerate(ours):
        g, nfeat, efeat, gpb, name, ntypes, etypes = load_partition(str(config_path), p)
        assert name == config["graph_name"] and ntypes == ["_N"] and etypes == [("_N", "_E", "_N")]
        ni = inner.size
        lo, hi = config["node_map"]["_N"][p]
        assert hi - lo == ni
        nid = g.ndata[dgl.NID]
        is_inner = g.ndata["inner_node"].bool()
        assert int(is_inner.sum()) == ni and bool(is_inner[:ni].all())
        assert torch.equal(nid[:ni], torch.arange(lo, hi))
        assert np.array_equal(orig_of_new[nid[:ni].numpy()], inner)
        assert np.array_equal(load_tensors(str(config_path.parent / f"part{p}" / "orig_nids.dgl"))["_N"].numpy(),
                              inner)
        # The partition book: owners, local ids, ranges, as DistTensor and the samplers use them.
        assert torch.equal(gpb.nid2partid(nid), g.ndata["part_id"])
        assert torch.equal(gpb.nid2localnid(nid[:ni], p), torch.arange(ni))
        assert torch.equal(gpb.partid2nids(p), nid[:ni])
        # Edges: all inner (in-edges of inner nodes), ids contiguous in the edge_map range.
        s, d = g.edges()
        assert bool(g.edata["inner_edge"].bool().all()) and bool((d < ni).all())
        elo, ehi = config["edge_map"]["_N:_E:_N"][p]
        assert torch.equal(g.edata[dgl.EID], torch.arange(elo, ehi))
        keys = edge_keys(orig_of_new[nid[s].numpy()], orig_of_new[nid[d].numpy()], n)
        assert np.array_equal(keys, our_keys)
        all_keys.append(keys)
        # Node data of the inner nodes, against the source files.
        assert np.array_equal(nfeat["_N/feat"].numpy(), features[inner])
        assert np.array_equal(nfeat["_N/label"].numpy(), labels[inner])
        for m, arr in masks.items():
            assert np.array_equal(nfeat[f"_N/{m}"].numpy().astype(bool), arr[inner])
        assert efeat == {}
        loaded[p] = (g, nfeat, gpb)
    assert sum(len(x) for x in all_keys) == config["num_edges"]
    if expected is not None:
        want = edge_keys([a for a, _ in expected], [b for _, b in expected], n)
        assert np.array_equal(np.sort(np.concatenate(all_keys)), want)
    return loaded


@pytest.mark.parametrize("directed", [False, True])
def test_load_partition_equals_parts_toy(tmp_path, monkeypatch, directed):
    parts, src = toy_dataset(tmp_path / "parts", num_nodes=90, num_edges=400, k=4, directed=directed)
    config = export_dgl(parts, tmp_path / "dgl")
    check_dgl_partitions(config, parts, src["features"], src["labels"],
                         {"train_mask": src["train_mask"], "val_mask": src["val_mask"]},
                         expected=expected_edges(src), monkeypatch=monkeypatch)


def test_part_to_dgl(tmp_path):
    from graphstream import open_partitions

    parts, src = toy_dataset(tmp_path / "parts")
    ours = ours_by_part(parts)
    for p, part in enumerate(open_partitions(parts)):
        g = part.to_dgl()
        gid = g.ndata[dgl.NID].numpy()
        s, d = g.edges()
        assert np.array_equal(edge_keys(gid[s.numpy()], gid[d.numpy()], 60), ours[p][1])
        assert np.array_equal(g.ndata["feat"].numpy(), src["features"][gid])
        assert np.array_equal(g.ndata["label"].numpy(), src["labels"][gid])
        assert int(g.ndata["inner_node"].sum()) == part.num_inner


# ---------------------------------------------------------------- GraphSAGE trains on every loaded part

def train_dgl_part(loaded: dict, p: int, seed: int = 0) -> tuple[float, float]:
    """One epoch of a 2-layer SAGEConv model over DGL's NeighborSampler on part p; (loss before, after)."""
    from dgl.nn import SAGEConv

    torch.manual_seed(seed)
    g, nfeat, gpb = loaded[p]
    nid = g.ndata[dgl.NID]
    owner = gpb.nid2partid(nid)
    x = torch.empty((g.num_nodes(), nfeat["_N/feat"].shape[1]))
    y = torch.empty(g.num_nodes(), dtype=torch.int64)
    for q in owner.unique().tolist():       # halo rows live in their owners' files: pull them (DistTensor's job)
        sel = owner == q
        local = loaded[q][2].nid2localnid(nid[sel], q)   # each machine maps its own ids
        x[sel] = loaded[q][1]["_N/feat"][local].float()
        y[sel] = loaded[q][1]["_N/label"][local]
    ni = int(g.ndata["inner_node"].sum())
    train = torch.nonzero(nfeat["_N/train_mask"].bool()).flatten() if "_N/train_mask" in nfeat \
        else torch.arange(ni)
    if train.numel() == 0:
        train = torch.arange(ni)
    classes = int(max(int(q[1]["_N/label"].max()) for q in loaded.values())) + 1
    conv1, conv2 = SAGEConv(x.shape[1], 32, "mean"), SAGEConv(32, classes, "mean")
    params = list(conv1.parameters()) + list(conv2.parameters())
    opt = torch.optim.Adam(params, lr=0.01)

    def full_loss():
        with torch.no_grad():
            h = conv2(g, conv1(g, x).relu())
            return float(torch.nn.functional.cross_entropy(h[train], y[train]))

    before = full_loss()
    sampler = dgl.dataloading.NeighborSampler([10, 10])
    loader = dgl.dataloading.DataLoader(g, train, sampler, batch_size=512, shuffle=True, drop_last=False)
    steps = 0
    for input_nodes, output_nodes, blocks in loader:
        h = conv2(blocks[1], conv1(blocks[0], x[input_nodes]).relu())
        loss = torch.nn.functional.cross_entropy(h, y[output_nodes])
        opt.zero_grad()
        loss.backward()
        assert math.isfinite(float(loss))
        assert all(q.grad is not None and torch.isfinite(q.grad).all() for q in params)
        assert any(float(q.grad.abs().sum()) > 0 for q in conv1.parameters())
        opt.step()
        steps += 1
    assert steps == math.ceil(train.numel() / 512)
    return before, full_loss()


def test_graphsage_trains_toy(tmp_path, monkeypatch):
    parts, src = toy_dataset(tmp_path / "parts", num_nodes=150, num_edges=700, k=3)
    loaded = check_dgl_partitions(export_dgl(parts, tmp_path / "dgl"), parts, src["features"], src["labels"], {})
    for p in loaded:
        before, after = train_dgl_part(loaded, p)
        assert math.isfinite(before) and after < before


# ---------------------------------------------------------------- SPRING partitions of real datasets

@pytest.mark.parametrize("name", ["cora", "facebook"])
def test_dgl_real_spring_partitions(real_root, monkeypatch, name):
    data_dir, parts = pipeline_parts(real_root, name)
    config = export_dgl(parts, real_root / f"{name}-dgl", name)
    features = np.load(data_dir / "features.npy", mmap_mode="r")
    labels = np.load(data_dir / "labels.npy").astype(np.int64)
    masks = {m.stem: np.load(m) for m in sorted(data_dir.glob("*_mask.npy"))}
    loaded = check_dgl_partitions(config, parts, features, labels, masks, monkeypatch=monkeypatch)
    for p in loaded:
        before, after = train_dgl_part(loaded, p)
        assert math.isfinite(before) and math.isfinite(after) and after < before, (p, before, after)
