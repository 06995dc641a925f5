"""The Python API checks what the CLI's argparse types check for it: an output may not be or hold an input,
parameters are whole or finite numbers of the right type (numpy scalars welcome), functions that take a
store take its path, and ``client=`` is a distributed.Client. Each case used to destroy an input, truncate
a value without a word, or fail deep inside with an AttributeError or a numba TypingError."""
from __future__ import annotations

import json

import numpy as np
import pytest

from graphstream.assemble import build_partitions
from graphstream.dynamic import build_snapshots
from graphstream.dynamic.config import PGCConfig
from graphstream.dynamic.partition import partition_snapshot_store
from graphstream.errors import ParameterError
from graphstream.export import export
from graphstream.ingest.rmat import generate_rmat
from graphstream.partition import partition
from graphstream.store import GraphWriter, degree_pass, open_store


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    rng = np.random.default_rng(3)
    n, e = 200, 2000
    with GraphWriter(root / "g.zarr", num_nodes=n, with_time=True, chunk_size=512) as w:
        w.append(rng.integers(0, n, e), rng.integers(0, n, e), np.sort(rng.integers(0, 5000, e)))
    plan = partition(root / "g.zarr", 4, "hash")
    build_partitions(root / "g.zarr", plan, root / "parts")   # a path for the store, as partition takes
    build_snapshots(root / "g.zarr", root / "s.zarr", num_snapshots=5)
    return root, plan


def _tree(path) -> list:
    return sorted((str(p.relative_to(path)), p.stat().st_size) for p in path.rglob("*") if p.is_file())


def test_an_output_may_not_replace_its_input(graph):
    root, plan = graph
    before = {name: _tree(root / name) for name in ("g.zarr", "parts", "s.zarr")}
    refused = {
        "build out_dir=store": lambda: build_partitions(root / "g.zarr", plan, root / "g.zarr", overwrite=True),
        "build out_dir holds the store": lambda: build_partitions(root / "g.zarr", plan, root, overwrite=True),
        "snapshots out=in": lambda: build_snapshots(root / "g.zarr", root / "g.zarr", num_snapshots=2,
                                                    overwrite=True),
        "export out=in": lambda: export(root / "parts", root / "parts", "pyg", overwrite=True),
        "pgc out=in": lambda: partition_snapshot_store(root / "s.zarr", PGCConfig(num_parts=2),
                                                       out=root / "s.zarr", overwrite=True),
        "work_dir in the store": lambda: partition(root / "g.zarr", 2, "hdrf", work_dir=root / "g.zarr"),
    }
    for case, call in refused.items():
        with pytest.raises(ParameterError, match="choose"):
            call()
        assert {name: _tree(root / name) for name in before} == before, case
    open_store(root / "g.zarr")


def test_numbers_are_checked_not_truncated(graph, tmp_path):
    root, _ = graph
    cases = {
        "GraphWriter num_nodes": (lambda: GraphWriter(tmp_path / "w.zarr", num_nodes=2.5), "num_nodes"),
        "GraphWriter directed": (lambda: GraphWriter(tmp_path / "w.zarr", directed="false"), "directed"),
        "generate scale": (lambda: generate_rmat(tmp_path / "r.zarr", scale=8.5), "scale"),
        "snapshots count": (lambda: build_snapshots(root / "g.zarr", tmp_path / "s.zarr", num_snapshots=2.5),
                            "--num-snapshots"),
        "snapshots edge life": (lambda: build_snapshots(root / "g.zarr", tmp_path / "s.zarr", num_snapshots=2,
                                                        edge_life=1.5), "--edge-life"),
        "snapshots window": (lambda: build_snapshots(root / "g.zarr", tmp_path / "s.zarr", window=1e-9),
                             "below the smallest window"),
        "pgc k": (lambda: PGCConfig(num_parts=2.5), "-k"),
        "pgc edge cost": (lambda: PGCConfig(num_parts=2, edge_cost=float("inf")), "edge_cost"),
        "pgc seed": (lambda: PGCConfig(num_parts=2, seed=-1), "seed"),
        "partition k": (lambda: partition(root / "g.zarr", 2.0, "hash"), "k must be a whole number"),
        "build plan": (lambda: build_partitions(root / "g.zarr", None, tmp_path / "p"), "PartitionPlan"),
        "client": (lambda: partition(root / "g.zarr", 2, "hash", client="tcp://127.0.0.1:8786"),
                   "distributed.Client"),
    }
    for case, (call, message) in cases.items():
        with pytest.raises(ParameterError, match=message):
            call()
        assert not list(tmp_path.iterdir()), case
    # numpy integers are integers: the plan's metrics stay JSON
    plan = partition(root / "g.zarr", np.int64(4), "hash", seed=np.int64(1))
    assert plan.num_parts == 4 and json.dumps(plan.metrics)
    assert PGCConfig(num_parts=np.int64(3)).num_parts == 3
    assert degree_pass(root / "g.zarr").total.sum() == 2 * 2000


def test_writer_refuses_values_a_cast_would_change(tmp_path):
    bad = {"time": ([np.nan, 1, 2], [1.0, 1.0, 1.0], "'time': nan at edge 0"),
           "fractional time": ([1, -1.5, 2], [1.0, 1.0, 1.0], "'time': -1.5 at edge 1"),
           "weight": ([1, 2, 3], [1.0, 1e300, 1.0], "'weight': 1e\\+300 at edge 1"),
           "inf weight": ([1, 2, 3], [1.0, 1.0, np.inf], "'weight': inf at edge 2")}
    for case, (time, weight, message) in bad.items():
        w = GraphWriter(tmp_path / "w.zarr", num_nodes=4, with_time=True, with_weight=True, overwrite=True)
        with pytest.raises(ParameterError, match=message):
            w.append([0, 1, 2], [1, 2, 3], time, weight=weight)
        w.abort()
        assert not (tmp_path / "w.zarr").exists(), case
    with GraphWriter(tmp_path / "w.zarr", num_nodes=4, with_time=True, with_weight=True) as w:
        w.append([0, 1, 2], [1, 2, 3], [1.0, -2.0, 3.0], weight=np.array([1, 2, 3], dtype=np.int64))
    store = open_store(tmp_path / "w.zarr")
    assert store.array("time").read_all().tolist() == [1, -2, 3]
