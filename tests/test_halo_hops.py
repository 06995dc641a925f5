"""``graphstream partition --out --halo-hops H``: parts holding complete rows H - 1 hops out (issue 19).

Every built part is checked against a reference computed with plain numpy from
the edge list: its nodes are those within H hops of its inner nodes, and its
CSR holds (as a multiset of global (row, column) pairs) every aggregation
entry whose row lies within H - 1 hops (undirected: or whose column does, the
outermost halo's edges to the inside). Then what it is for: a 2-layer model on
a part built with H = 2 computes every inner node's whole-graph output, which
it does not with H = 1. The cluster build gives the in-process bytes.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from graphstream import GraphWriter, open_partitions, open_store
from graphstream.assemble import build_partitions
from graphstream.cli import main as cli_main
from graphstream.errors import ParameterError
from graphstream.partition.plan import PartitionPlan
from graphstream.store import PartitionsError
from graphstream.store.integrity import seal
from trainer.data import ArrayPart, PartSet, assemble_whole_graph, load_part, open_parts, split_graph
from trainer.evaluate import logits
from trainer.models import build_model


def _graph(n: int, m: int, seed: int, directed: bool, chunk: int, path: Path):
    """A random multigraph with self-loops and duplicate edges, and its store."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = np.where(rng.random(m) < 0.7, (src + rng.integers(1, 6, m)) % n, rng.integers(0, n, m))
    src = np.concatenate([src, [3, 3, 5]])
    dst = np.concatenate([dst, [3, 7, 7]])     # a self-loop, and a duplicate edge 5-7 below
    src, dst = np.concatenate([src, [5]]), np.concatenate([dst, [7]])
    with GraphWriter(path, num_nodes=n, directed=directed, chunk_size=chunk) as w:
        w.append(src, dst)
    return open_store(path), src, dst


def _entries(src, dst, directed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Aggregation entries (row, column) of the whole graph: row v lists the sources of u -> v;
    undirected, both orientations, a self-loop once."""
    if directed:
        return dst, src
    loop = src == dst
    return np.concatenate([dst, src[~loop]]), np.concatenate([src, dst[~loop]])


def _reference(rows, cols, n: int, owner: np.ndarray, p: int, hops: int, directed: bool):
    """Part p's global ids (inner, then halo, each ascending) and its (row, col) entries as a Counter."""
    inner = np.flatnonzero(owner == p)
    complete = np.zeros(n, bool)
    complete[inner] = True
    for _ in range(hops - 1):
        complete[cols[complete[rows]]] = True
    held = complete[rows] if directed else complete[rows] | complete[cols]
    nodes = complete.copy()
    nodes[rows[held]] = True
    nodes[cols[held]] = True
    halo = np.setdiff1d(np.flatnonzero(nodes), inner)
    return np.concatenate([inner, halo]), Counter(zip(rows[held].tolist(), cols[held].tolist(), strict=True))


def _part_entries(part) -> Counter:
    gids = np.asarray(part.global_ids, np.int64)
    indptr = np.asarray(part.indptr, np.int64)
    row = np.repeat(np.arange(len(gids)), np.diff(indptr))
    return Counter(zip(gids[row].tolist(), gids[np.asarray(part.indices, np.int64)].tolist(), strict=True))


@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
@pytest.mark.parametrize("hops", [1, 2, 3])
def test_parts_hold_complete_rows_hops_minus_one_out(tmp_path, directed, hops):
    n, k = 300, 5
    store, src, dst = _graph(n, 700, seed=hops, directed=directed, chunk=128, path=tmp_path / "g.zarr")
    owner = np.random.default_rng(1).integers(0, k, n)
    manifest = build_partitions(store, PartitionPlan("test", k, owner), tmp_path / "parts", halo_hops=hops)
    rows, cols = _entries(src, dst, directed)
    deg = np.bincount(rows, minlength=n)
    dataset = open_partitions(tmp_path / "parts")
    assert dataset.info.halo_hops == hops and manifest.get("halo_hops", 1) == hops
    for p, part in enumerate(dataset):
        gids, entries = _reference(rows, cols, n, owner, p, hops, directed)
        assert np.array_equal(part.global_ids, gids), p
        assert part.num_inner == np.count_nonzero(owner == p)
        assert _part_entries(part) == entries, p
        assert np.array_equal(part.degree, deg[gids])
        ip = np.asarray(part.indptr)
        for r in range(len(gids)):   # columns sorted within each row, as with one hop
            assert np.all(np.diff(np.asarray(part.indices[ip[r]:ip[r + 1]])) >= 0)
    assert manifest["metrics"]["part_bytes"] == sum(f.stat().st_size for f in (tmp_path / "parts").glob("part-*/*.npy"))


def test_one_hop_is_unchanged_and_manifest_reads_old_as_one(tmp_path):
    store, _, _ = _graph(120, 300, seed=4, directed=False, chunk=64, path=tmp_path / "g.zarr")
    plan = PartitionPlan("test", 3, np.arange(120) % 3)
    build_partitions(store, plan, tmp_path / "default")
    build_partitions(store, plan, tmp_path / "one", halo_hops=1)
    text = (tmp_path / "default" / "manifest.json").read_text()
    assert '"halo_hops"' not in text and open_partitions(tmp_path / "default").info.halo_hops == 1
    for f in (tmp_path / "default").glob("part-*/*.npy"):
        assert f.read_bytes() == (tmp_path / "one" / f.relative_to(tmp_path / "default")).read_bytes()
    # a manifest saying halo_hops 0 is refused by the loader, naming the key
    obj = json.loads(text)
    obj.pop("crc32c")
    obj["halo_hops"] = 0
    (tmp_path / "default" / "manifest.json").write_text(json.dumps(seal(obj)))
    with pytest.raises(PartitionsError, match="halo_hops is 0"):
        open_partitions(tmp_path / "default")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_halo_hops_refused(tmp_path, bad):
    store, _, _ = _graph(50, 100, seed=0, directed=False, chunk=64, path=tmp_path / "g.zarr")
    with pytest.raises(ParameterError, match="--halo-hops"):
        build_partitions(store, PartitionPlan("test", 2, np.arange(50) % 2), tmp_path / "p", halo_hops=bad)
    assert not (tmp_path / "p").exists()


def test_cli_halo_hops(tmp_path, capsys):
    _graph(200, 500, seed=2, directed=False, chunk=64, path=tmp_path / "g.zarr")
    assert cli_main(["partition", str(tmp_path / "g.zarr"), "-k", "4", "--algo", "hash", "--halo-hops", "2",
                     "--out", str(tmp_path / "p"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert open_partitions(tmp_path / "p").info.halo_hops == 2 and out["part_bytes"] > 0
    assert cli_main(["partition", str(tmp_path / "g.zarr"), "-k", "4", "--halo-hops", "2"]) == 2
    assert "--halo-hops 2 shapes the dataset that --out DIR builds" in capsys.readouterr().err


def _node_data(folder: Path, n: int) -> Path:
    rng = np.random.default_rng(0)
    folder.mkdir()
    np.save(folder / "features.npy", rng.standard_normal((n, 8)).astype(np.float32))
    np.save(folder / "labels.npy", rng.integers(0, 3, n))
    np.save(folder / "train_mask.npy", rng.random(n) < 0.5)
    return folder


@pytest.mark.parametrize("model", ["gcn", "sage", "gat"])
def test_two_layer_model_exact_on_inner_nodes_with_two_hops(tmp_path, model):
    """The point of --halo-hops 2: every inner node's 2-layer output on its part is its output on the
    whole graph; with one hop the halo's first-layer outputs are estimates and the inner outputs differ."""
    n, k = 400, 4
    store, _, _ = _graph(n, 1200, seed=7, directed=False, chunk=256, path=tmp_path / "g.zarr")
    nodes = _node_data(tmp_path / "nodes", n)
    owner = np.random.default_rng(3).integers(0, k, n)
    net = build_model(model, 8, 16, 3, num_layers=2, dropout=0.5, seed=0)
    cpu = torch.device("cpu")
    err = {}
    for hops in (1, 2):
        build_partitions(store, PartitionPlan("test", k, owner), tmp_path / f"h{hops}", nodes=nodes, halo_hops=hops)
        parts = open_parts(tmp_path / f"h{hops}")
        whole = assemble_whole_graph(parts)
        ref = logits(net, load_part(whole, cpu))
        err[hops] = max(float((logits(net, load_part(part, cpu))[:part.num_inner]
                               - ref[np.array(part.global_ids[:part.num_inner], np.int64)]).abs().max())
                        for part in parts.parts)
    assert err[2] < 1e-5
    assert err[1] > 1e-3


def test_split_graph_hops_matches_the_builder(tmp_path):
    """trainer.data.split_graph(hops=2) (in-memory experiments) holds the builder's complete rows."""
    n, k = 250, 4
    store, src, dst = _graph(n, 600, seed=9, directed=False, chunk=128, path=tmp_path / "g.zarr")
    nodes = _node_data(tmp_path / "nodes", n)
    owner = np.random.default_rng(2).integers(0, k, n)
    build_partitions(store, PartitionPlan("test", k, owner), tmp_path / "p", nodes=nodes, halo_hops=2)
    built = open_parts(tmp_path / "p")
    whole = assemble_whole_graph(built)
    for a, b in zip(split_graph(whole, owner, hops=2), built.parts, strict=True):
        assert np.array_equal(a.global_ids, b.global_ids)
        # the split's rows are the complete ones; the builder's too, plus the outer halo's partial rows
        ip = np.asarray(a.indptr)
        has_row = np.flatnonzero(np.diff(ip))
        full = _part_entries(b)
        assert all(full[e] >= c for e, c in _part_entries(a).items())
        assert np.all(np.diff(ip)[has_row] == np.asarray(b.degree)[has_row])
    assert isinstance(whole, ArrayPart) and isinstance(built, PartSet)


def test_cluster_build_equals_in_process(tmp_path, dask_client):
    from test_distributed_partition import assert_same_folders
    n = 600
    store, _, _ = _graph(n, 2000, seed=11, directed=False, chunk=256, path=tmp_path / "g.zarr")
    nodes = _node_data(tmp_path / "nodes", n)
    plan = PartitionPlan("test", 6, np.random.default_rng(5).integers(0, 6, n))
    build_partitions(store, plan, tmp_path / "in-process", nodes=nodes, halo_hops=2)
    build_partitions(store, plan, tmp_path / "cluster", nodes=nodes, halo_hops=2, client=dask_client)
    assert_same_folders(tmp_path / "in-process", tmp_path / "cluster")
    assert json.loads((tmp_path / "cluster" / "manifest.json").read_text())["halo_hops"] == 2
    assert not [p for p in tmp_path.rglob(".*") if p.name != ".lock"]   # no staging folder or shard left
