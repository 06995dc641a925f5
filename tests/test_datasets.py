"""Dataset loaders (Cora, Citeseer, MUSAE facebook) against independent references."""
from __future__ import annotations

import csv
import json
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest

from graphstream.cli import main as cli_main
from graphstream.errors import InputNotFoundError, OutputExistsError, ParameterError
from graphstream.ingest.datasets import load_dataset
from graphstream.store import open_store

ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def need(*parts: str) -> Path:
    path = ROOT.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared dataset {path} not present")
    return path


def edge_set(store) -> set[tuple[int, int]]:
    s, d = store.array("src")[:], store.array("dst")[:]
    return set(zip(s.tolist(), d.tolist()))


def load_raw(name: str, key: str):
    with open(ROOT / "planetoid" / f"ind.{name}.{key}", "rb") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return pickle.load(f, encoding="latin1")


# Class counts of the standard loaders (PyG Planetoid), an independent reference.
CLASS_COUNTS = {"cora": [351, 217, 418, 818, 426, 298, 180], "citeseer": [264, 590, 668, 701, 596, 508]}
SIZES = {"cora": (2708, 5278, 1433, 140), "citeseer": (3327, 4552, 3703, 120)}


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid(tmp_path, name):
    need("planetoid", f"ind.{name}.graph")
    res = load_dataset(name, tmp_path / name, root=ROOT)
    n, m, f, n_train = SIZES[name]
    assert (res["num_nodes"], res["num_edges"], res["num_features"]) == (n, m, f)
    out = tmp_path / name
    store = open_store(out / "graph.zarr")
    assert store.num_nodes == n and store.num_edges == m and not store.directed
    # graph: the dict, symmetrised, self-loops and duplicates dropped, each edge once as (min, max)
    graph = load_raw(name, "graph")
    ref = {(min(u, v), max(u, v)) for u, vs in graph.items() for v in vs if u != v}
    assert edge_set(store) == ref
    src, dst = store.array("src")[:], store.array("dst")[:]
    assert np.all(src < dst)
    assert np.all(np.diff(src.astype(np.int64) * n + dst) > 0)  # sorted, unique
    x = np.load(out / "features.npy")
    y = np.load(out / "labels.npy")
    masks = {s: np.load(out / f"{s}_mask.npy") for s in ("train", "val", "test")}
    assert x.dtype == np.float32 and x.shape == (n, f)
    assert y.dtype == np.int64 and y.shape == (n,)
    assert all(m.dtype == bool and m.shape == (n,) for m in masks.values())
    assert np.bincount(y).tolist() == CLASS_COUNTS[name]
    # split: first len(y) train, next 500 val, test.index test
    test_index = np.loadtxt(ROOT / "planetoid" / f"ind.{name}.test.index", dtype=np.int64)
    assert np.flatnonzero(masks["train"]).tolist() == list(range(n_train))
    assert np.flatnonzero(masks["val"]).tolist() == list(range(n_train, n_train + 500))
    assert np.flatnonzero(masks["test"]).tolist() == sorted(test_index.tolist())
    # features: test rows sit at their test ids, training rows first
    tx = np.asarray(load_raw(name, "tx").todense())
    allx = np.asarray(load_raw(name, "allx").todense())
    np.testing.assert_array_equal(x[test_index], tx)
    np.testing.assert_array_equal(x[:len(allx)], allx)
    ty = np.asarray(load_raw(name, "ty"))
    np.testing.assert_array_equal(y[test_index], ty.argmax(1))
    if name == "citeseer":
        missing = sorted(set(range(test_index.min(), test_index.max() + 1)) - set(test_index.tolist()))
        assert len(missing) == 15
        assert not x[missing].any() and not y[missing].any()
        assert not (masks["train"] | masks["val"] | masks["test"])[missing].any()


@pytest.fixture(scope="module")
def facebook_dir(tmp_path_factory):
    need("musae-facebook", "facebook.json")
    out = tmp_path_factory.mktemp("fb") / "facebook"
    res = load_dataset("facebook", out, root=ROOT, seed=7)
    return out, res


def test_facebook(facebook_dir):
    out, res = facebook_dir
    n = 22470
    assert res["num_nodes"] == n and res["num_edges"] == 171002 and res["num_features"] == 4714
    assert res["self_loops"] == 179 and res["num_classes"] == 4
    store = open_store(out / "graph.zarr")
    assert not store.directed
    with open(ROOT / "musae-facebook" / "facebook_edges.csv") as f:
        rows = list(csv.reader(f))[1:]
    assert edge_set(store) == {(min(int(a), int(b)), max(int(a), int(b))) for a, b in rows}
    x = np.load(out / "features.npy", mmap_mode="r")
    assert x.dtype == np.float32 and x.shape == (n, 4714)
    with open(ROOT / "musae-facebook" / "facebook.json") as f:
        feats = json.load(f)
    for node in (0, 1, 554, 10772, n - 1):
        assert np.flatnonzero(x[node]).tolist() == sorted(set(feats[str(node)]))
    assert int(np.asarray(x[:2000]).sum()) == sum(len(set(feats[str(i)])) for i in range(2000))
    y = np.load(out / "labels.npy")
    with open(ROOT / "musae-facebook" / "facebook_target.csv", encoding="utf-8") as f:
        target = {int(r["id"]): r["page_type"] for r in csv.DictReader(f)}
    classes = ["company", "government", "politician", "tvshow"]
    assert [classes[c] for c in y[:100]] == [target[i] for i in range(100)]
    assert np.bincount(y).tolist() == [6495, 6880, 5768, 3327]
    masks = [np.load(out / f"{s}_mask.npy") for s in ("train", "val", "test")]
    assert [int(m.sum()) for m in masks] == [15729, 3370, 3371]
    assert np.array_equal(masks[0] ^ masks[1] ^ masks[2], np.ones(n, bool))
    assert not (masks[0] & masks[1]).any()


def test_facebook_split_is_seeded(facebook_dir, tmp_path, monkeypatch):
    import graphstream.ingest.datasets as ds
    out, _ = facebook_dir
    # Only the split depends on the seed: skip writing the 424 MB of features here.
    monkeypatch.setattr(ds, "_write_facebook_features", lambda *a, **k: 4714)
    load_dataset("facebook", tmp_path / "a", root=ROOT, seed=7)
    load_dataset("facebook", tmp_path / "b", root=ROOT, seed=8)
    same = np.load(tmp_path / "a" / "train_mask.npy")
    np.testing.assert_array_equal(same, np.load(out / "train_mask.npy"))
    assert not np.array_equal(same, np.load(tmp_path / "b" / "train_mask.npy"))


def test_bad_arguments(tmp_path):
    with pytest.raises(ParameterError, match="unknown dataset 'pubmed'"):
        load_dataset("pubmed", tmp_path / "x", root=ROOT)
    with pytest.raises(InputNotFoundError, match="dataset root not found"):
        load_dataset("cora", tmp_path / "x", root=tmp_path / "nowhere")
    (tmp_path / "empty" / "planetoid").mkdir(parents=True)
    with pytest.raises(InputNotFoundError, match=r"ind\.cora\.x: dataset file not found"):
        load_dataset("cora", tmp_path / "x", root=tmp_path / "empty")
    assert not (tmp_path / "x").exists()


def test_output_exists_and_atomic(tmp_path):
    need("planetoid", "ind.cora.graph")
    out = tmp_path / "cora"
    out.mkdir()
    (out / "keep.txt").write_text("old")
    with pytest.raises(OutputExistsError):
        load_dataset("cora", out, root=ROOT)
    assert (out / "keep.txt").exists()
    # --overwrite replaces an output of graphstream's, never a folder of the user's named by mistake
    with pytest.raises(OutputExistsError, match="not a graphstream output"):
        load_dataset("cora", out, root=ROOT, overwrite=True)
    assert (out / "keep.txt").read_text() == "old"
    (out / "keep.txt").unlink()
    load_dataset("cora", out, root=ROOT, overwrite=True)   # an empty folder
    (out / "labels.npy").write_bytes(b"")   # a dataset folder (its graph store) is replaced whole
    load_dataset("cora", out, root=ROOT, overwrite=True)
    assert (out / "labels.npy").stat().st_size > 0
    assert [p.name for p in tmp_path.iterdir()] == ["cora"]  # no temporary leftovers


def test_cli(tmp_path, capsys):
    need("planetoid", "ind.cora.graph")
    rc = cli_main(["dataset", "cora", str(tmp_path / "c"), "--root", str(ROOT), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    res = json.loads(out)
    assert res["num_nodes"] == 2708 and res["num_edges"] == 5278 and res["path"] == str(tmp_path / "c")
    rc = cli_main(["dataset", "cora", str(tmp_path / "c"), "--root", str(ROOT)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "exists" in err
    rc = cli_main(["dataset", "citeseer", str(tmp_path / "d"), "--root", str(tmp_path / "none")])
    out, err = capsys.readouterr()
    assert rc == 2 and "dataset root not found" in err


@pytest.mark.parametrize("damage, named", [
    (lambda p: p.write_text(p.read_text() + "junk\n"), "cannot read the test node ids"),     # a traceback before
    (lambda p: p.write_text(p.read_text() + "99999\n"), "1001 test node ids for the 1000"),   # IndexError before
    (lambda p: p.write_text("5\n" + "\n".join(p.read_text().split()[1:]) + "\n"), "do not fit the 1000 test rows"),
])
def test_a_damaged_planetoid_test_index_is_one_line(tmp_path, capsys, damage, named):
    source = need("planetoid", "ind.cora.test.index").parent
    root = tmp_path / "root"
    (root / "planetoid").mkdir(parents=True)
    for f in source.glob("ind.cora.*"):
        (root / "planetoid" / f.name).write_bytes(f.read_bytes())
    damage(root / "planetoid" / "ind.cora.test.index")
    assert cli_main(["dataset", "cora", str(tmp_path / "c"), "--root", str(root)]) == 2
    assert named in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_a_negative_planetoid_node_id_names_the_graph_file(tmp_path, capsys):
    source = need("planetoid", "ind.cora.graph").parent
    root = tmp_path / "root"
    (root / "planetoid").mkdir(parents=True)
    for f in source.glob("ind.cora.*"):
        (root / "planetoid" / f.name).write_bytes(f.read_bytes())
    graph = {i: [(i + 1) % 2708] for i in range(2708)}
    graph[5] = [-1]
    with open(root / "planetoid" / "ind.cora.graph", "wb") as f:
        pickle.dump(graph, f, protocol=2)
    assert cli_main(["dataset", "cora", str(tmp_path / "c"), "--root", str(root)]) == 2
    assert "ind.cora.graph: negative node id -1" in capsys.readouterr().err
