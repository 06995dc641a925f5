"""MUSAE Twitch loader (binary, imbalanced labels) against the raw files, parsed independently here."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from graphstream.cli import main as cli_main
from graphstream.errors import InputFormatError, ParameterError
from graphstream.ingest.datasets import load_dataset, stratified_split
from graphstream.store import open_store

ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
TWITCH = ROOT / "musae-twitch"


def need(code: str) -> None:
    for suffix in (".json", "_edges.csv", "_target.csv"):
        if not (TWITCH / f"{code}{suffix}").exists():
            pytest.skip(f"shared dataset {TWITCH / (code + suffix)} not present")


def raw(code: str):
    """Edges, target rows and features straight from the files (csv / json modules, no loader code)."""
    with open(TWITCH / f"{code}_edges.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["from", "to"]
    edges = {(min(int(a), int(b)), max(int(a), int(b))) for a, b in rows[1:]}
    with open(TWITCH / f"{code}_target.csv", newline="") as f:
        target = {int(r["new_id"]): r for r in csv.DictReader(f)}
    with open(TWITCH / f"{code}.json") as f:
        feats = json.load(f)
    return len(rows) - 1, edges, target, feats


# (nodes, edge lines in the file, mature positives, partner positives): the dataset README's counts.
EXPECTED = {"DE": (9498, 153138, 5742, 597), "ENGB": (7126, 35324, 3888, 384)}


@pytest.fixture(scope="module", params=["DE", "ENGB"])
def twitch_dir(request, tmp_path_factory):
    code = request.param
    need(code)
    out = tmp_path_factory.mktemp("twitch") / code
    res = load_dataset(f"twitch-{code.lower()}", out, root=ROOT, seed=3, target="partner")
    return code, out, res


def test_against_raw_files(twitch_dir):
    code, out, res = twitch_dir
    n, m_lines, n_mature, n_partner = EXPECTED[code]
    m_file, edges, target, feats = raw(code)
    assert m_file == m_lines and len(target) == n
    assert (res["num_nodes"], res["num_features"], res["num_classes"]) == (n, 3170, 2)
    assert res["num_edges"] == len(edges) == m_lines  # no duplicates or self-loops in these files
    assert res["self_loops"] == 0 and res["target"] == "partner" and res["num_positive"] == n_partner
    store = open_store(out / "graph.zarr")
    assert store.num_nodes == n and store.num_edges == len(edges) and not store.directed
    s, d = store.array("src")[:], store.array("dst")[:]
    assert set(zip(s.tolist(), d.tolist())) == edges
    y = np.load(out / "labels.npy")
    assert y.dtype == np.int64 and y.shape == (n,)
    assert y.tolist() == [int(target[i]["partner"] == "True") for i in range(n)]
    assert int(y.sum()) == n_partner
    assert sum(r["mature"] == "True" for r in target.values()) == n_mature
    x = np.load(out / "features.npy", mmap_mode="r")
    assert x.dtype == np.float32 and x.shape == (n, 3170)
    for node in (0, 1, 17, n // 2, n - 1):
        assert np.flatnonzero(x[node]).tolist() == sorted(set(feats[str(node)]))
    assert int(np.asarray(x[:1000]).sum()) == sum(len(set(feats[str(i)])) for i in range(1000))
    assert set(np.unique(np.asarray(x[:1000])).tolist()) <= {0.0, 1.0}


def test_the_label_held_by_the_features_is_measured_and_said(twitch_dir):
    """partner is written in the features (one id on exactly the partners, one on exactly the others):
    measured from the written arrays here, as the command reports it."""
    code, out, res = twitch_dir
    x = np.asarray(np.load(out / "features.npy", mmap_mode="r")) > 0
    y = np.load(out / "labels.npy") == 1
    exact = [f for f in range(x.shape[1]) if np.array_equal(x[:, f], y) or np.array_equal(x[:, f], ~y)]
    only = np.flatnonzero(x[y].any(0) & ~x[~y].any(0))
    leak = res["label_in_features"]
    assert leak["indicators"] == exact == [920, 2814] and leak["positive_only"] == len(only)
    assert leak["positives_covered"] == round(float(x[y][:, only].any(1).mean()), 4) == 1.0
    assert "give the partner label away" in res["note"]


def test_stratified_split(twitch_dir):
    code, out, res = twitch_dir
    n = EXPECTED[code][0]
    y = np.load(out / "labels.npy")
    masks = [np.load(out / f"{s}_mask.npy") for s in ("train", "val", "test")]
    assert all(mk.dtype == bool and mk.shape == (n,) for mk in masks)
    assert np.array_equal(masks[0] ^ masks[1] ^ masks[2], np.ones(n, bool))  # a partition of the nodes
    assert not (masks[0] & masks[1]).any() and not (masks[1] & masks[2]).any()
    assert [int(mk.sum()) for mk in masks] == [res["num_train"], res["num_val"], res["num_test"]]
    for c in (0, 1):
        n_c = int((y == c).sum())
        counts = [int((y[mk] == c).sum()) for mk in masks]
        assert counts[:2] == [n_c * 70 // 100, n_c * 15 // 100]  # 70/15/15 per class
        assert sum(counts) == n_c


def test_split_is_seeded_and_target_switches(tmp_path):
    need("ENGB")
    a = load_dataset("twitch-engb", tmp_path / "a", root=ROOT, seed=1)
    load_dataset("twitch-engb", tmp_path / "b", root=ROOT, seed=1, target="mature")
    load_dataset("twitch-engb", tmp_path / "c", root=ROOT, seed=2)
    assert a["target"] == "mature" and a["num_positive"] == EXPECTED["ENGB"][2] and a["seed"] == 1
    tm = [np.load(tmp_path / k / "train_mask.npy") for k in "abc"]
    np.testing.assert_array_equal(tm[0], tm[1])
    assert not np.array_equal(tm[0], tm[2])


def test_stratified_split_function():
    labels = np.array([0] * 90 + [1] * 10)
    tr, va, te = stratified_split(labels, seed=5)
    assert (len(tr), len(va), len(te)) == (63 + 7, 13 + 1, 14 + 2)
    assert [int(labels[s].sum()) for s in (tr, va, te)] == [7, 1, 2]
    assert sorted(np.concatenate([tr, va, te]).tolist()) == list(range(100))
    assert np.array_equal(stratified_split(labels, seed=5)[0], tr)
    assert not np.array_equal(stratified_split(labels, seed=6)[0], tr)


def write_fake(root: Path, *, target_rows: list[str], edges: str = "from,to\n0,1\n",
               feats: str = '{"0": [1], "1": [2, 2]}') -> None:
    base = root / "musae-twitch"
    base.mkdir(parents=True)
    (base / "DE_edges.csv").write_text(edges)
    (base / "DE_target.csv").write_text("id,days,mature,views,partner,new_id\n" + "\n".join(target_rows) + "\n")
    (base / "DE.json").write_text(feats)


def test_bad_input(tmp_path):
    good = ["10,1,True,5,False,1", "11,1,False,5,True,0"]
    write_fake(tmp_path / "ok", target_rows=good)
    res = load_dataset("twitch-de", tmp_path / "o", root=tmp_path / "ok", target="partner")
    assert res["num_nodes"] == 2 and res["num_edges"] == 1
    assert np.load(tmp_path / "o" / "labels.npy").tolist() == [1, 0]
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "features.npy"), [[0, 1, 0] + [0] * 3167,
                                                                            [0, 0, 1] + [0] * 3167])
    with pytest.raises(ParameterError, match="unknown Twitch target 'views'"):
        load_dataset("twitch-de", tmp_path / "x", root=tmp_path / "ok", target="views")
    write_fake(tmp_path / "badbool", target_rows=["10,1,yes,5,False,0", "11,1,False,5,True,1"])
    with pytest.raises(InputFormatError, match=r"DE_target.csv:2: column mature is 'yes'"):
        load_dataset("twitch-de", tmp_path / "x", root=tmp_path / "badbool")
    write_fake(tmp_path / "ids", target_rows=["10,1,True,5,False,0", "11,1,False,5,True,5"])
    with pytest.raises(InputFormatError, match="new_id values are not 0..1"):
        load_dataset("twitch-de", tmp_path / "x", root=tmp_path / "ids")
    write_fake(tmp_path / "edge", target_rows=good, edges="from,to\n0,7\n")
    with pytest.raises(InputFormatError, match="node id outside 0..1"):
        load_dataset("twitch-de", tmp_path / "x", root=tmp_path / "edge")
    write_fake(tmp_path / "feat", target_rows=good, feats='{"0": [3170]}')
    with pytest.raises(InputFormatError, match=r"feature id outside \[0, 3170\)"):
        load_dataset("twitch-de", tmp_path / "x", root=tmp_path / "feat")
    assert not (tmp_path / "x").exists()  # nothing left behind by a failed load


def test_cli(tmp_path, capsys):
    need("ENGB")
    rc = cli_main(["dataset", "twitch-engb", str(tmp_path / "e"), "--root", str(ROOT), "--target", "partner",
                   "--seed", "4", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    res = json.loads(out)
    assert res["num_nodes"] == 7126 and res["num_positive"] == 384 and res["seed"] == 4
    rc = cli_main(["dataset", "twitch-engb", str(tmp_path / "e"), "--root", str(ROOT)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "exists" in err
    rc = cli_main(["dataset", "twitch-de", str(tmp_path / "f"), "--root", str(tmp_path / "none")])
    out, err = capsys.readouterr()
    assert rc == 2 and "dataset root not found" in err
    # a negative seed was a numpy traceback (exit 1); a seed for Cora's fixed split was set aside, exit 0
    for name, seed, said in (("twitch-engb", "-1", "--seed must be in [0, "), ("cora", "5", "keeps its Planetoid")):
        rc = cli_main(["dataset", name, str(tmp_path / "g"), "--root", str(ROOT), "--seed", seed])
        out, err = capsys.readouterr()
        assert rc == 2 and said in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "g").exists()
