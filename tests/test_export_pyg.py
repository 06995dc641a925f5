"""graphstream export --to pyg: PyG's stores read back exactly our parts, and a GraphSAGE model trains on them.

Two kinds of input: small partitioned datasets written here by an
independent writer (``write_parts``, the format of docs/format.md built
straight from an edge list), and SPRING partitions of Cora and MUSAE facebook
made by the real pipeline (skipped when ../shared/datasets is absent).
The same helpers serve tests/dgl/test_export_dgl.py.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from graphstream.cli import main as cli_main

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


# ---------------------------------------------------------------- independent reference writer

def write_parts(folder: Path, num_nodes: int, edges: np.ndarray, owner: np.ndarray, *, directed: bool = False,
                node_data: dict[str, np.ndarray] | None = None) -> Path:
    """A partitioned dataset (manifest + part-NNNNN/*.npy) built in RAM from an edge list, for tests.

    Row v lists the nodes that feed v (undirected: neighbours; directed:
    in-neighbours). Halo rows hold their edges to the part's inner nodes when
    undirected (as the builder writes them), nothing when directed.
    """
    src, dst = edges[:, 0].astype(np.int64), edges[:, 1].astype(np.int64)
    if not directed:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    rows, cols = dst, src          # row = the node aggregating, col = the node feeding it
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    degree = np.bincount(rows, minlength=num_nodes)
    k = int(owner.max()) + 1
    folder.mkdir(parents=True)
    entries = []
    for p in range(k):
        inner = np.flatnonzero(owner == p)
        mine = np.isin(rows, inner)
        halo = np.setdiff1d(np.unique(cols[mine]), inner)
        gids = np.concatenate([inner, halo])
        local = np.full(num_nodes, -1, dtype=np.int64)
        local[gids] = np.arange(gids.size)
        keep = mine | (np.isin(rows, halo) & np.isin(cols, inner) if not directed else np.zeros_like(mine))
        r, c = local[rows[keep]], local[cols[keep]]
        o = np.lexsort((c, r))
        r, c = r[o], c[o]
        indptr = np.zeros(gids.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=gids.size), out=indptr[1:])
        d = folder / f"part-{p:05d}"
        d.mkdir()
        np.save(d / "global_ids.npy", gids.astype(np.int32))
        np.save(d / "indptr.npy", indptr)
        np.save(d / "indices.npy", c.astype(np.int32))
        np.save(d / "degree.npy", degree[gids].astype(np.int64))
        for name, arr in (node_data or {}).items():
            np.save(d / f"{name}.npy", arr[gids])
        train = (node_data or {}).get("train_mask")
        entries.append({"path": d.name, "num_inner": int(inner.size), "num_halo": int(halo.size),
                        "num_edges": int(c.size),
                        "num_train": int(train[inner].sum()) if train is not None else 0})
    manifest = {"format": "graphstream.partitions", "version": 1, "algorithm": "test", "params": {},
                "num_parts": k, "num_nodes": num_nodes, "num_edges": int(edges.shape[0]), "directed": directed,
                "metrics": {}, "parts": entries}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def toy_dataset(folder: Path, *, num_nodes: int = 60, num_edges: int = 200, k: int = 3, directed: bool = False,
                seed: int = 0, node_data: bool = True) -> tuple[Path, dict]:
    """A random graph with random owners and node data; returns (parts folder, the source arrays)."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, num_nodes, size=(num_edges, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    if not directed:
        edges = np.sort(edges, axis=1)
    edges = np.unique(edges, axis=0)                # a simple graph: each edge once
    owner = rng.integers(0, k, size=num_nodes)
    owner[:k] = np.arange(k)                       # no empty part
    data = {"features": rng.standard_normal((num_nodes, 8)).astype(np.float32),
            "labels": rng.integers(0, 4, size=num_nodes).astype(np.int64),
            "train_mask": rng.random(num_nodes) < 0.5,
            "val_mask": rng.random(num_nodes) < 0.2}
    parts = write_parts(folder, num_nodes, edges, owner, directed=directed,
                        node_data=data if node_data else None)
    return parts, {"edges": edges, "owner": owner, "directed": directed, **data}


def expected_edges(src_arrays: dict) -> set[tuple[int, int]]:
    """Directed (src -> dst) edges as DGL/PyG hold them: both directions when undirected."""
    e = src_arrays["edges"]
    pairs = {(int(a), int(b)) for a, b in e}
    if not src_arrays["directed"]:
        pairs |= {(b, a) for a, b in pairs}
    return pairs


def edge_keys(src, dst, num_nodes: int) -> np.ndarray:
    """Edges (global ids) as sorted int64 keys src * n + dst: multisets compare with array_equal."""
    return np.sort(np.asarray(src, dtype=np.int64) * num_nodes + np.asarray(dst, dtype=np.int64))


def ours_by_part(parts_dir: Path):
    """Our view of each part: (inner global ids, sorted keys of its inner rows' edges in global ids)."""
    from graphstream import open_partitions

    dataset = open_partitions(parts_dir)
    out = []
    for part in dataset:
        gids = np.asarray(part.global_ids, dtype=np.int64)
        ip = np.asarray(part.indptr, dtype=np.int64)
        ni = part.num_inner
        dst = np.repeat(np.arange(ni), np.diff(ip[: ni + 1]))
        src = np.asarray(part.indices[: ip[ni]], dtype=np.int64)
        out.append((gids[:ni], edge_keys(gids[src], gids[dst], dataset.num_nodes)))
    return out


# ---------------------------------------------------------------- real datasets through the pipeline

def run_cli(*argv: str) -> int:
    return cli_main([str(a) for a in argv])


def pipeline_parts(root: Path, name: str, k: int = 4, algo: str = "spring") -> tuple[Path, Path]:
    """``graphstream dataset NAME`` then ``graphstream partition --algo spring --out`` (cached under root)."""
    data_dir, parts = root / name, root / f"{name}-{algo}-{k}"
    if parts.exists():
        return data_dir, parts
    if not DATASETS.is_dir():
        pytest.skip(f"real datasets absent ({DATASETS})")
    from graphstream.cli import build_parser
    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    if "dataset" not in choices:
        pytest.skip("the `graphstream dataset` command is not available yet")
    if not data_dir.exists() and run_cli("dataset", name, data_dir, "--root", DATASETS) != 0:
        pytest.fail(f"graphstream dataset {name} failed")
    rc = run_cli("partition", data_dir / "graph.zarr", "-k", k, "--algo", algo, "--out", parts,
                 "--nodes", data_dir)
    if rc != 0:
        pytest.fail(f"graphstream partition --algo {algo} failed on {name}")
    return data_dir, parts


@pytest.fixture(scope="module")
def real_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("export-real")


# ---------------------------------------------------------------- CLI contract (no PyG needed)

def test_unknown_target_missing_dataset_existing_output(tmp_path, capsys):
    # Parts without node data are exported (structure only) since issue 18: tests/test_polish.py.
    parts, _ = toy_dataset(tmp_path / "parts")
    assert run_cli("export", parts, "--to", "onnx", tmp_path / "o") == 2
    assert "unknown export target 'onnx'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    (tmp_path / "exists").mkdir()
    assert run_cli("export", parts, "--to", "pyg", tmp_path / "exists") == 2
    assert "--overwrite" in capsys.readouterr().err
    assert run_cli("export", tmp_path / "nowhere", "--to", "pyg", tmp_path / "o") == 2
    assert "nowhere" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_dgl_export_checks_its_input_before_dgl(tmp_path, capsys):
    """Dynamic partitions, a missing folder or an empty --graph-name were sent to install dgl first (and
    the empty name was the folder's without a word where dgl is installed)."""
    parts, _ = toy_dataset(tmp_path / "parts")
    for args, said in (((tmp_path / "nowhere", "--to", "dgl", tmp_path / "o"), "nowhere"),
                       ((parts, "--to", "dgl", tmp_path / "o", "--graph-name", ""), "--graph-name is empty")):
        assert run_cli("export", *args) == 2
        err = capsys.readouterr().err
        assert said in err and "needs the dgl package" not in err, err
        assert not (tmp_path / "o").exists()


def test_a_part_without_nodes_refused_for_pyg(tmp_path, capsys):
    """It was exported with exit 0, and torch_geometric's LocalFeatureStore.from_partition then failed
    on that part (max() of no ids): refused before anything is written, naming the part."""
    edges = np.array([[0, 1], [1, 2], [2, 3]])
    parts = write_parts(tmp_path / "parts", 4, edges, np.array([0, 0, 2, 2]))   # part 1 owns nothing
    assert run_cli("export", parts, "--to", "pyg", tmp_path / "pyg") == 2
    assert "part 1 owns no nodes" in capsys.readouterr().err
    assert not (tmp_path / "pyg").exists()


def test_json_output_and_overwrite(tmp_path, capsys):
    parts, src = toy_dataset(tmp_path / "parts")
    out = tmp_path / "pyg"
    assert run_cli("export", parts, "--to", "pyg", out, "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["target"] == "pyg" and result["num_parts"] == 3 and result["num_nodes"] == 60
    assert result["num_edges"] == len(expected_edges(src)) == 2 * len(src["edges"])
    assert sorted(p.name for p in out.iterdir()) == [
        "META.json", "edge_map.pt", "label.pt", "node_map.pt", "part_0", "part_1", "part_2", "train_idx", "val_idx"]
    assert run_cli("export", parts, "--to", "pyg", out, "--overwrite", "--json") == 0
    assert json.loads(capsys.readouterr().out)["num_parts"] == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no temporary left behind


# ---------------------------------------------------------------- PyG reads back exactly our parts

def check_pyg_stores(out: Path, stores: dict, parts_dir: Path, features: np.ndarray, labels: np.ndarray,
                     masks: dict[str, np.ndarray], expected: set | None = None) -> None:
    """Every part's LocalGraphStore/LocalFeatureStore equals our part, features/labels equal the source's."""
    import torch

    ours = ours_by_part(parts_dir)
    n = labels.shape[0]
    assert len(stores) == len(ours)
    all_keys, all_ids = [], []
    for p, (inner, our_keys) in enumerate(ours):
        gs, fs = stores[p]
        assert gs.meta["num_parts"] == len(ours) and not gs.meta["is_hetero"]
        ei = gs.get_edge_index(edge_type=None, layout="coo")
        eid = gs.get_edge_id(edge_type=None, layout="coo")
        assert np.array_equal(edge_keys(ei[0].numpy(), ei[1].numpy(), n), our_keys)
        assert torch.equal(gs.edge_pb[eid], torch.full_like(eid, p))
        assert bool((ei[1][1:] >= ei[1][:-1]).all()), "is_sorted promises col order"
        gid = fs.get_global_id(None)
        assert np.array_equal(gid.numpy(), inner)
        assert torch.equal(gs.node_pb[gid], torch.full_like(gid, p))
        x = fs.get_tensor(group_name=None, attr_name="x")
        assert np.array_equal(x.numpy(), features[inner])
        # The distributed sampler's path: features by global id.
        some = gid.flip(0)[:500]
        assert np.array_equal(fs.get_tensor_from_global_id(index=some, group_name=None, attr_name="x").numpy(),
                              features[some.numpy()])
        assert np.array_equal(fs.get_tensor(group_name=None, attr_name="y").numpy(), labels[inner])
        for name, m in masks.items():
            assert np.array_equal(fs.get_tensor(group_name=None, attr_name=name).numpy(), m[inner])
            idx = torch.load(out / f"{name[:-5]}_idx" / f"partition{p}.pt")
            assert np.array_equal(idx.numpy(), inner[m[inner]])
        all_keys.append(our_keys)
        all_ids.append(eid)
    ids = torch.cat(all_ids).sort().values
    assert torch.equal(ids, torch.arange(ids.numel())), "edge ids are a permutation of 0..E-1"
    assert np.array_equal(torch.load(out / "label.pt").numpy(), labels)
    if expected is not None:
        want = edge_keys([a for a, _ in expected], [b for _, b in expected], n)
        assert np.array_equal(np.sort(np.concatenate(all_keys)), want)


@pytest.mark.parametrize("directed", [False, True])
def test_pyg_stores_equal_parts_toy(tmp_path, directed):
    parts, src = toy_dataset(tmp_path / "parts", directed=directed, num_edges=300)
    out = tmp_path / "pyg"
    assert run_cli("export", parts, "--to", "pyg", out) == 0
    check_pyg_stores(out, load_pyg_stores(out), parts, src["features"], src["labels"],
                     {"train_mask": src["train_mask"], "val_mask": src["val_mask"]},
                     expected=expected_edges(src))


# ---------------------------------------------------------------- training with PyG on the loaded stores

def load_pyg_stores(out: Path) -> dict:
    """Every part's (LocalGraphStore, LocalFeatureStore), as each machine of a PyG job would load its own."""
    pytest.importorskip("torch_geometric")
    from torch_geometric.distributed import LocalFeatureStore, LocalGraphStore

    k = json.loads((out / "META.json").read_text())["num_parts"]
    return {p: (LocalGraphStore.from_partition(str(out), p), LocalFeatureStore.from_partition(str(out), p))
            for p in range(k)}


def train_pyg_part(out: Path, stores: dict, p: int, steps: int = 3, seed: int = 0) -> tuple[float, float]:
    """One epoch of a PyG GraphSAGE on part p, rebuilt from PyG's stores; returns (loss before, loss after).

    Halo features are fetched from their owners' feature stores, as PyG's RPC
    lookup does. The epoch is full-batch on the part (a few steps): PyG's
    NeighborLoader needs pyg-lib or torch-sparse, which have no wheels for
    this torch on PyPI. A linear input projection ahead of GraphSAGE keeps
    the aggregation narrow (MUSAE facebook has 4,714 features).
    """
    torch = pytest.importorskip("torch")
    from torch_geometric.data import Data
    from torch_geometric.nn import GraphSAGE

    torch.manual_seed(seed)
    gs, fs = stores[p]
    ei = gs.get_edge_index(edge_type=None, layout="coo")
    inner = fs.get_global_id(None)
    nodes = torch.cat([inner, torch.from_numpy(np.setdiff1d(ei[0].numpy(), inner.numpy()))])
    local = torch.full((gs.node_pb.numel(),), -1, dtype=torch.long)
    local[nodes] = torch.arange(nodes.numel())
    owners = gs.node_pb[nodes]
    x = torch.empty((nodes.numel(), fs.get_tensor(group_name=None, attr_name="x").shape[1]))
    for q in owners.unique().tolist():
        sel = owners == q
        x[sel] = stores[q][1].get_tensor_from_global_id(index=nodes[sel], group_name=None, attr_name="x").float()
    labels = torch.load(out / "label.pt")
    data = Data(x=x, edge_index=local[ei], y=labels[nodes], num_nodes=nodes.numel())
    assert int(data.edge_index.min()) >= 0
    train = torch.zeros(nodes.numel(), dtype=torch.bool)
    train[: inner.numel()] = fs.get_tensor(group_name=None, attr_name="train_mask")
    if not bool(train.any()):
        train[: inner.numel()] = True
    model = torch.nn.ModuleDict({
        "proj": torch.nn.Linear(data.num_features, 32),
        "sage": GraphSAGE(32, 32, num_layers=2, out_channels=int(labels.max()) + 1)})
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def loss_now():
        h = model["sage"](model["proj"](data.x).relu(), data.edge_index)
        return torch.nn.functional.cross_entropy(h[train], data.y[train])

    with torch.no_grad():
        before = float(loss_now())
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_now()
        loss.backward()
        assert all(q.grad is not None and torch.isfinite(q.grad).all() for q in model.parameters())
        assert all(float(q.grad.abs().sum()) > 0 for q in model["sage"].parameters())
        opt.step()
    with torch.no_grad():
        after = float(loss_now())
    return before, after


def test_part_to_pyg(tmp_path):
    pytest.importorskip("torch_geometric")
    from graphstream import open_partitions
    from graphstream.export.pyg import part_to_pyg

    parts, src = toy_dataset(tmp_path / "parts", directed=True)
    ours = ours_by_part(parts)
    for p, part in enumerate(open_partitions(parts)):
        data = part_to_pyg(part)
        gid = data.global_id.numpy()
        assert np.array_equal(edge_keys(gid[data.edge_index[0].numpy()], gid[data.edge_index[1].numpy()], 60),
                              ours[p][1])
        assert np.array_equal(data.x.numpy(), src["features"][gid])
        assert np.array_equal(data.y.numpy(), src["labels"][gid])
        assert np.array_equal(data.train_mask.numpy(), src["train_mask"][gid])
        assert int(data.inner_mask.sum()) == part.num_inner and data.num_nodes == part.num_nodes


def test_pyg_graphsage_trains_on_toy(tmp_path):
    parts, _ = toy_dataset(tmp_path / "parts", num_nodes=120, num_edges=600)
    out = tmp_path / "pyg"
    assert run_cli("export", parts, "--to", "pyg", out) == 0
    stores = load_pyg_stores(out)
    for p in range(3):
        before, after = train_pyg_part(out, stores, p)
        assert math.isfinite(before) and math.isfinite(after) and after < before


@pytest.mark.parametrize("name", ["cora", "facebook"])
def test_pyg_real_spring_partitions(real_root, name):
    pytest.importorskip("torch_geometric")
    data_dir, parts = pipeline_parts(real_root, name)
    out = real_root / f"{name}-pyg"
    assert run_cli("export", parts, "--to", "pyg", out) == 0
    features = np.load(data_dir / "features.npy", mmap_mode="r")
    labels = np.load(data_dir / "labels.npy").astype(np.int64)
    masks = {m.stem: np.load(m) for m in sorted(data_dir.glob("*_mask.npy"))}
    stores = load_pyg_stores(out)
    check_pyg_stores(out, stores, parts, features, labels, masks)
    for p in stores:
        before, after = train_pyg_part(out, stores, p)
        assert math.isfinite(before) and math.isfinite(after) and after < before, (p, before, after)


def test_dgl_halo_in_reach():
    """The DGL export's part graph keeps the inner nodes and the halo nodes their rows name (the outer
    hops of a --halo-hops 2 part would be isolated there), renumbered in order."""
    from graphstream.export.dgl import halo_in_reach

    src = np.array([1, 5, 0, 3, 5, 2])         # 3 inner nodes (0..2); halo 3..6, of which 4 and 6 unnamed
    new_src, local = halo_in_reach(src, 3, 7)
    assert local.tolist() == [0, 1, 2, 3, 5] and new_src.tolist() == [1, 4, 0, 3, 4, 2]
    same, every = halo_in_reach(np.array([3, 4, 0]), 3, 5)   # one hop: every halo node named, unchanged
    assert same.tolist() == [3, 4, 0] and every.tolist() == [0, 1, 2, 3, 4]
