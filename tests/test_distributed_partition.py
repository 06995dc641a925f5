"""partition, metrics, build and export on a dask cluster give the in-process results (issue 16).

Every test compares a run on the session's LocalCluster (``dask_client``: 2 worker processes x 1
thread) with the in-process run of the same call: plans and metrics equal, output folders equal file
by file (the manifests' timing fields masked), coarse-refine's replication factor within 1%.
"""
from __future__ import annotations

import filecmp
import json
from pathlib import Path

import numpy as np
import pytest

from graphstream.assemble import build_partitions
from graphstream.cli import main as cli_main
from graphstream.cluster import ClusterConfig, open_client
from graphstream.export import export
from graphstream.ingest.datasets import load_dataset
from graphstream.partition import edge_parts as edge_parts_module
from graphstream.partition import metrics as metrics_module
from graphstream.partition import partition
from graphstream.partition._driver import complete_edge_plan, edge_plan
from graphstream.partition.edge_parts import EdgePartWriter, part_groups
from graphstream.partition.metrics import vertex_partition_metrics
from graphstream.store import open_store

ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
DATASETS = {"cora": ("planetoid", "ind.cora.graph"), "citeseer": ("planetoid", "ind.citeseer.graph"),
            "facebook": ("musae-facebook", "facebook.json")}
# (algorithm, parameters): every partitioner whose plan must equal the in-process one exactly
EXACT = [("hash", {}), ("hash", {"mode": "edge"}), ("dbh", {}), ("hdrf", {}), ("2ps-l", {}), ("spring", {})]
# figures that measure the run, not the result
TIMING = ("seconds", "peak_rss_bytes", "build_passes")


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    """name -> dataset folder (graph.zarr + node data) of the shared datasets present."""
    out = {}
    for name, parts in DATASETS.items():
        if ROOT.joinpath(*parts).exists():
            folder = tmp_path_factory.mktemp("ds") / name
            load_dataset(name, folder, root=ROOT, seed=7)
            out[name] = folder
    if not out:
        pytest.skip(f"no shared dataset under {ROOT}")
    return out


def _store(datasets, name):
    if name not in datasets:
        pytest.skip(f"shared dataset {name} not present")
    return open_store(datasets[name] / "graph.zarr")


def _untimed(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.endswith(TIMING) and k != "phase_seconds"}


@pytest.mark.parametrize("name", list(DATASETS))
@pytest.mark.parametrize(("algo", "params"), EXACT, ids=lambda x: x if isinstance(x, str) else "-".join(x.values()))
def test_partition_equals_in_process(datasets, dask_client, tmp_path, name, algo, params):
    store = _store(datasets, name)
    for k in (4, 32) if name == "facebook" else (4,):
        ref = partition(store, k, algo, seed=3, work_dir=tmp_path / "a", **params)
        got = partition(store, k, algo, seed=3, work_dir=tmp_path / "b", client=dask_client, **params)
        assert np.array_equal(ref.owner, got.owner), (algo, k)
        assert _untimed(ref.metrics) == _untimed(got.metrics)
        assert ref.params == got.params


@pytest.mark.parametrize("name", list(DATASETS))
def test_coarse_refine_rf_within_one_percent(datasets, dask_client, name):
    store = _store(datasets, name)
    ref = partition(store, 8, "coarse-refine", seed=1)
    got = partition(store, 8, "coarse-refine", seed=1, client=dask_client)
    assert got.owner.shape == ref.owner.shape and got.owner.max() < 8
    assert got.metrics["replication_factor"] <= ref.metrics["replication_factor"] * 1.01
    # the figures reported for the cluster's plan are its own (a recount in this process)
    assert got.metrics["replication_factor"] == vertex_partition_metrics(store, got.owner, 8)["replication_factor"]


def test_metrics_equal_over_several_part_groups(datasets, dask_client, monkeypatch):
    """k = 130 in groups of 64 parts: three grouped passes, each two stages of tasks."""
    store = _store(datasets, "facebook")
    owner = np.random.default_rng(5).integers(0, 130, store.num_nodes).astype(np.int32)
    monkeypatch.setattr(metrics_module, "part_groups", lambda n, k, b, align=1: part_groups(n, k, 1 << 20, 64))
    ref = vertex_partition_metrics(store, owner, 130)
    got = vertex_partition_metrics(store, owner, 130, client=dask_client)
    assert ref["metrics_passes"] == got["metrics_passes"] == 3
    assert ref == got


@pytest.mark.parametrize("directed", [True, False])
def test_metrics_equal_with_one_edge_range_and_with_several(tmp_path, dask_client, monkeypatch, directed):
    """A store of many chunks: on two workers two edge ranges mark shards that a wave of node ranges
    ORs; on one worker the single range counts its columns itself (no shard). Both give the in-process
    figures, at k = 5 and at k = 130 in three groups."""
    from graphstream.ingest.rmat import generate_rmat
    store = generate_rmat(tmp_path / "g.zarr", scale=12, edge_factor=8, seed=2, chunk_size=3000,
                          undirected=not directed)
    rng = np.random.default_rng(3)
    monkeypatch.setattr(metrics_module, "part_groups", lambda n, k, b, align=1: part_groups(n, k, 1 << 20, 64))
    stages = []
    monkeypatch.setattr(metrics_module, "run_tasks", lambda client, stage, *a, run=metrics_module.run_tasks, **kw:
                        (stages.append(stage), run(client, stage, *a, **kw))[1])
    with open_client(ClusterConfig(workers=1)) as one:
        for k in (5, 130):
            owner = rng.integers(0, k, store.num_nodes).astype(np.int32)
            ref = vertex_partition_metrics(store, owner, k)
            stages.clear()
            assert vertex_partition_metrics(store, owner, k, client=dask_client) == ref
            assert stages == ["metrics: halo bits", "metrics: replicas"] * ref["metrics_passes"]
            stages.clear()
            assert vertex_partition_metrics(store, owner, k, client=one) == ref
            assert stages == ["metrics: halo bits"] * ref["metrics_passes"]


def test_owner_pass_equal_over_several_part_groups(datasets, dask_client, tmp_path):
    """The edge partitioners' owner pass on a cluster, k = 130 in groups of 64 parts: the in-process owner,
    vertex-cut RF and pass count."""
    store = _store(datasets, "facebook")
    rng = np.random.default_rng(9)
    parts = rng.integers(0, 130, store.num_edges).astype(np.int16)
    loads = np.bincount(parts, minlength=130)
    path = str(tmp_path / "edge_parts.zarr")
    writer = EdgePartWriter(path, store, 130, "test")
    writer.write(0, parts)
    writer.close()
    small = edge_parts_module.part_groups
    with pytest.MonkeyPatch.context() as mp:   # the client cuts the groups; tasks get their bounds
        mp.setattr(edge_parts_module, "part_groups", lambda n, k, b, align=1: small(n, k, 1 << 20, 64))
        ref = edge_plan(store, 130, "test", path, loads, {}, passes=1)
        got = complete_edge_plan(edge_plan(store, 130, "test", path, loads, {}, passes=1, owner_pass=False),
                                 store, dask_client, tmp_path)
    assert ref.metrics["passes"] == got.metrics["passes"] == 4   # 1 + three groups
    assert np.array_equal(ref.owner, got.owner)
    assert ref.metrics == got.metrics
    assert [p.name for p in tmp_path.iterdir()] == ["edge_parts.zarr"]   # no shards left


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _manifest_untimed(path: Path) -> dict:
    manifest = json.loads(path.read_text())
    manifest.pop("crc32c", None)    # of the manifest's own text, timings included
    manifest["metrics"] = _untimed(manifest["metrics"])
    return manifest


def assert_same_folders(a: Path, b: Path) -> None:
    """Every file of ``a`` and ``b`` equal byte for byte, ``manifest.json`` up to its timing fields."""
    assert _files(a) == _files(b)
    for rel in _files(a):
        if rel == "manifest.json":
            assert _manifest_untimed(a / rel) == _manifest_untimed(b / rel)
        else:
            assert filecmp.cmp(a / rel, b / rel, shallow=False), rel


def test_build_and_export_identical_for_any_worker_count(datasets, dask_client, tmp_path):
    folder = datasets.get("cora")
    if folder is None:
        pytest.skip("shared dataset cora not present")
    store = open_store(folder / "graph.zarr")
    plan = partition(store, 5, "hdrf", seed=2)
    build_partitions(store, plan, tmp_path / "in-process", nodes=folder)
    export(tmp_path / "in-process", tmp_path / "pyg-in-process", "pyg")
    build_partitions(store, plan, tmp_path / "two", nodes=folder, client=dask_client)
    export(tmp_path / "two", tmp_path / "pyg-two", "pyg", client=dask_client)
    with open_client(ClusterConfig(workers=1)) as one:
        build_partitions(store, plan, tmp_path / "one", nodes=folder, client=one)
        export(tmp_path / "one", tmp_path / "pyg-one", "pyg", client=one)
    for n in ("one", "two"):
        assert_same_folders(tmp_path / "in-process", tmp_path / n)
        assert_same_folders(tmp_path / "pyg-in-process", tmp_path / f"pyg-{n}")
    assert not [p for p in tmp_path.rglob(".*") if p.name != ".lock"]   # no staging folder or shard left


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_degree_rows_equal_numpy_indexing(tmp_path, chunk):
    """A part's degrees read a chunk at a time (inner ids, then halo ids: two ascending runs, which may
    share chunks, skip some, or be empty) are the array indexed whole."""
    import zarr

    from graphstream.assemble.distributed import DegreeRows
    rng = np.random.default_rng(chunk)
    degree = rng.integers(0, 1 << 40, 300)
    array = zarr.create_array(tmp_path / "d.zarr", shape=(300,), chunks=(chunk,), dtype=np.int64, fill_value=0,
                              compressors=None)
    array[:] = degree
    rows = DegreeRows(str(tmp_path / "d.zarr"))
    inner = np.sort(rng.choice(np.arange(40, 200), 30, replace=False))
    halo = np.sort(rng.choice(300, 50, replace=False))
    for ids in (np.concatenate([inner, halo]), inner, halo[:0], np.array([299, 0]), np.arange(300)):
        got = rows[ids]
        assert got.dtype == np.int64 and np.array_equal(got, degree[ids]), ids


def test_cli_partition_out_on_a_cluster(datasets, dask_client, tmp_path, capsys):
    """The CLI path (on the session's cluster through --scheduler, rather than a cluster of its own):
    --json reports the cluster and the workers' peak RSS."""
    folder = datasets.get("citeseer") or next(iter(datasets.values()))
    args = ["partition", str(folder / "graph.zarr"), "-k", "4", "--algo", "dbh", "--nodes", str(folder), "--json"]
    assert cli_main([*args, "--out", str(tmp_path / "ref")]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert "cluster" not in ref and "worker_peak_rss_bytes" not in ref
    address = dask_client.scheduler.address
    assert cli_main([*args, "--out", str(tmp_path / "got"), "--scheduler", address]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["cluster"] == {"mode": "scheduler", "scheduler": address}
    assert len(got["worker_peak_rss_bytes"]) == 2 and min(got["worker_peak_rss_bytes"].values()) > 0
    assert got["replication_factor"] == ref["replication_factor"]
    assert_same_folders(tmp_path / "ref", tmp_path / "got")


def test_greedy_partitioners_count_degrees_as_tasks(datasets, dask_client, tmp_path):
    """The sequential greedy pass is one task; the degree pass before it is tasks over edge chunks."""
    from distributed import get_task_stream

    store = _store(datasets, "cora")
    for algo in ("spring", "2ps-l", "dbh"):
        with get_task_stream(dask_client) as stream:
            got = partition(store, 4, algo, seed=3, work_dir=tmp_path / algo, client=dask_client)
        keys = [str(task["key"]) for task in stream.data]
        assert any(key.startswith("degree pass-") for key in keys), (algo, keys)
        if algo != "spring":   # an edge partitioner: the owner pass after the greedy one as tasks too
            assert any(key.startswith("owner: count edges per part-") for key in keys), (algo, keys)
            assert any(key.startswith("owner: best part-") for key in keys), (algo, keys)
        assert sum(key.startswith(f"{algo}: partition (one worker)-") for key in keys) == 1, (algo, keys)
        assert np.array_equal(got.owner, partition(store, 4, algo, seed=3, work_dir=tmp_path / "here").owner)
        assert not list((tmp_path / algo).glob("degree-*.npy"))   # the degree vector does not stay behind


@pytest.mark.parametrize("halo_hops", [1, 2])
def test_a_large_part_cut_into_tasks_is_the_same_part(datasets, dask_client, tmp_path, halo_hops, monkeypatch):
    """A part with most of the edges is built as a chain of tasks (its rows counted, each edge range
    bucketed, each bucket filled into its slice of indices.npy, then finished): the same bytes as the
    in-process build, which builds it whole. With 2 hops every part's pairs come from the hop's ranges
    too (and the other parts' wide halos make part 0 no longer the largest share: it is cut by hand)."""
    from graphstream.assemble import distributed as build_on_cluster

    if halo_hops == 2:
        monkeypatch.setattr(build_on_cluster, "parts_to_cut", lambda *args: [0])
    from types import SimpleNamespace

    from distributed import get_task_stream

    from graphstream.assemble import BuildConfig
    from graphstream.store import GraphWriter

    folder = datasets.get("cora")
    if folder is None:
        pytest.skip("shared dataset cora not present")
    cora = open_store(folder / "graph.zarr")
    batches = list(cora.stream())
    # Cora in chunks of 1024 edges: several edge ranges on the cluster, so several bucket tasks
    with GraphWriter(tmp_path / "g.zarr", num_nodes=cora.num_nodes, directed=cora.directed, chunk_size=1024) as w:
        w.append(np.concatenate([b.src for b in batches]), np.concatenate([b.dst for b in batches]))
    store = open_store(tmp_path / "g.zarr")
    rng = np.random.default_rng(5)
    owner = np.where(rng.random(store.num_nodes) < 0.9, 0, rng.integers(1, 4, store.num_nodes))
    plan = SimpleNamespace(num_parts=4, owner=owner, algorithm="test", params={}, metrics={})
    # blocks of 1 KiB: part 0 takes a few dozen, so it is bucketed and cut
    config = BuildConfig(bucket_bytes=1024, sort_bytes=4096)
    build_partitions(store, plan, tmp_path / "in-process", nodes=folder, halo_hops=halo_hops, config=config)
    with get_task_stream(dask_client) as stream:
        build_partitions(store, plan, tmp_path / "two", nodes=folder, halo_hops=halo_hops, config=config,
                         client=dask_client)
    names = [str(t["key"]) for t in stream.data]
    kinds = {kind: sum(f"-{kind}-" in name for name in names) for kind in ("layout", "bucket", "fill", "finish", "part")}
    assert kinds["layout"] == kinds["finish"] == 1 and kinds["part"] == 3, kinds
    assert kinds["bucket"] >= 2 and kinds["fill"] >= 4
    assert_same_folders(tmp_path / "in-process", tmp_path / "two")
    assert not [p for p in tmp_path.rglob(".*") if p.name != ".lock"]   # no split folder or staging left
