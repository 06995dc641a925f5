"""`graphstream info` on every kind of output, and `graphstream estimate` against real runs (issue 18, items 8, 9)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

from graphstream.cli import main
from graphstream.store import GraphWriter, open_snapshots, open_store

OUTPUT_KINDS = ("graph", "partitions", "snapshots", "dynamic_partitions")


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys, *argv) -> dict:
    code, out, err = _cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """One output of each kind: a timestamped graph store, its partitioned dataset (with node data), its
    snapshot store and the snapshot store's dynamic partitions."""
    root = tmp_path_factory.mktemp("info")
    rng = np.random.default_rng(5)
    n, e = 300, 4000
    with GraphWriter(root / "g.zarr", num_nodes=n, with_time=True, chunk_size=1024) as w:
        w.append(rng.integers(0, n, e), rng.integers(0, n, e), np.sort(rng.integers(0, 10_000, e)))
    nodes = root / "nodes"
    nodes.mkdir()
    np.save(nodes / "features.npy", rng.standard_normal((n, 4)).astype(np.float32))
    np.save(nodes / "train_mask.npy", rng.random(n) < 0.5)
    assert main(["partition", root / "g.zarr", "-k", "3", "--algo", "spring", "--out", root / "parts",
                 "--nodes", nodes, "--json"]) == 0
    from graphstream.dynamic import build_snapshots
    build_snapshots(root / "g.zarr", root / "s.zarr", num_snapshots=10, edge_life=3)
    from graphstream.dynamic.config import PGCConfig
    from graphstream.dynamic.partition import partition_snapshot_store
    partition_snapshot_store(root / "s.zarr", PGCConfig(num_parts=2), out=root / "dyn")
    return {"graph": root / "g.zarr", "partitions": root / "parts", "snapshots": root / "s.zarr",
            "dynamic_partitions": root / "dyn"}


# -- item 8: info ----------------------------------------------------------------------------------

def test_info_graph_keeps_its_keys(outputs, capsys):
    info = _json(capsys, "info", outputs["graph"])
    assert info["kind"] == "graph"
    for key in ("path", "num_nodes", "num_edges", "directed", "max_degree", "mean_degree", "max_out_degree",
                "max_in_degree", "isolated_nodes", "self_loops", "bytes_on_disk", "seconds", "peak_rss_bytes"):
        assert key in info, key
    assert info["num_edges"] == 4000 and info["bytes_on_disk"] == _tree_bytes(outputs["graph"])


def test_info_partitions_recounted_from_the_parts(outputs, capsys):
    path = outputs["partitions"]
    info = _json(capsys, "info", path)
    assert info["kind"] == "partitions" and info["algorithm"] == "spring" and info["num_parts"] == 3
    assert info["checksums"] is True
    assert info["node_data"] == ["features.npy", "train_mask.npy"]
    local = 0
    for entry in info["parts"]:
        part = path / entry["path"]
        ids = np.load(part / "global_ids.npy")
        local += len(ids)
        assert entry["num_inner"] + entry["num_halo"] == len(ids)
        assert entry["num_edges"] == len(np.load(part / "indices.npy"))
        assert entry["bytes"] == sum(f.stat().st_size for f in part.glob("*.npy"))
    assert info["replication_factor"] == pytest.approx(local / info["num_nodes"])
    inner = [p["num_inner"] for p in info["parts"]]
    assert info["node_balance"] == pytest.approx(max(inner) / (sum(inner) / 3))
    code, out, _ = _cli(capsys, "info", path)
    assert code == 0
    lines = out.splitlines()
    assert any(line.startswith("kind:") and line.endswith("partitions") for line in lines)
    assert any(line.strip().startswith("part-00002:") and "halo" in line for line in lines)
    assert any(line.startswith("replication_factor:") for line in lines)


def test_info_snapshots_recounted_from_the_snapshots(outputs, capsys):
    path = outputs["snapshots"]
    info = _json(capsys, "info", path)
    store = open_snapshots(path)
    edges = [len(store.snapshot(t)[0]) for t in range(store.num_snapshots)]
    assert info["kind"] == "snapshots" and info["num_snapshots"] == 10 == len(edges)
    assert (info["edges_per_snapshot_min"], info["edges_per_snapshot_max"]) == (min(edges), max(edges))
    assert info["edges_per_snapshot_mean"] == pytest.approx(np.mean(edges))
    assert info["num_keyframes"] == len(range(0, 10, info["keyframe_every"]))
    attrs = dict(store.attrs)
    assert (info["bytes_full"], info["bytes_stored"]) == (attrs["bytes_full"], attrs["bytes_stored"])
    assert info["delta_ratio"] == pytest.approx(attrs["bytes_stored"] / attrs["bytes_full"])
    assert 0 < info["delta_ratio"] < 1
    assert info["checksums"] is True and info["bytes_on_disk"] == _tree_bytes(path)
    code, out, _ = _cli(capsys, "info", path)
    assert code == 0 and "delta_ratio:" in out and "num_keyframes:" in out


def test_info_dynamic_partitions(outputs, capsys):
    path = outputs["dynamic_partitions"]
    info = _json(capsys, "info", path)
    manifest = json.loads((path / "manifest.json").read_text())
    assert info["kind"] == "dynamic_partitions" and info["num_parts"] == 2 == len(info["parts"])
    assert info["num_snapshots"] == 10 and info["metrics"] == manifest["metrics"]
    for entry in info["parts"]:
        part = open_snapshots(path / entry["path"])
        assert entry["total_snapshot_edges"] == sum(len(part.snapshot(t)[0]) for t in range(part.num_snapshots))
        assert entry["bytes"] == _tree_bytes(path / entry["path"])
    code, out, _ = _cli(capsys, "info", path)
    assert code == 0 and "part-00001:" in out and "node_replication:" in out


def test_info_refuses_what_is_no_output(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text('{"format": "something else"}')
    code, _, err = _cli(capsys, "info", tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_info_and_report_refuse_a_damaged_dataset(outputs, tmp_path, capsys):
    """info and report read a dataset as a reader opens it: a part file cut short or gone is exit 2 naming
    it (they read the manifest only and exited 0)."""
    parts = tmp_path / "parts"
    shutil.copytree(outputs["partitions"], parts)
    indices = parts / "part-00001" / "indices.npy"
    with open(indices, "r+b") as f:
        f.truncate(indices.stat().st_size - 8)
    for command in ("info", "report"):
        code, _, err = _cli(capsys, command, parts)
        assert code == 2 and "part-00001" in err and "indices.npy" in err, (command, err)
    (parts / "part-00002" / "features.npy").unlink()
    indices.unlink()
    code, _, err = _cli(capsys, "info", parts, "--json")
    assert code == 2 and "part-00001" in err and len(err.strip().splitlines()) == 1, err


# -- item 9: estimate ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rmat16(tmp_path_factory):
    root = tmp_path_factory.mktemp("estimate")
    assert main(["generate", "rmat", root / "r.zarr", "--scale", "16", "--undirected", "--json"]) == 0
    return root / "r.zarr"


def test_estimated_store_bytes_against_generate(rmat16, capsys):
    store = open_store(rmat16)
    est = _json(capsys, "estimate", "--nodes", store.num_nodes, "--edges", store.num_edges, "--undirected")
    actual = _tree_bytes(rmat16)
    # the estimate is an upper end: at least the real size, at most 1.3x (1.49x with 6 bytes an edge)
    assert actual <= est["steps"]["generate"]["disk_bytes"] <= 1.3 * actual
    from_store = _json(capsys, "estimate", rmat16, "-k", "4")
    assert from_store["store_bytes"] == actual and from_store["store_bytes_estimated"] is False


@pytest.mark.parametrize(("scale", "edge_factor", "measured"), [(26, 1, 462.5e6), (26, 16, 7.40e9), (28, 1, 2.06e9)])
def test_estimated_store_bytes_grow_with_the_ids_width(scale, edge_factor, measured):
    """Random ids of more bits compress less: 6 bytes an edge held to scale 24, and at scale 28 the disk
    check let a generate start that filled the disk (1.61 GB estimated, 2.06 GB written; docs/estimate.md)."""
    from graphstream.estimate import generate_size, store_bytes
    size = generate_size(scale, edge_factor)
    assert measured <= store_bytes(size.num_edges, num_nodes=size.num_nodes) <= 1.2 * measured


def test_estimated_partition_memory_and_dataset_against_a_run(rmat16, tmp_path, capsys):
    out = tmp_path / "parts"
    # In a fresh process: peak RSS (ru_maxrss) of this pytest process holds every earlier test's peak.
    # Twice: the first run may compile and cache the numba kernels (a fresh clone: 2 GB of LLVM),
    # which the estimate does not model; the second measures the partitioner itself.
    for target in (tmp_path / "warm-up", out):
        proc = subprocess.run([sys.executable, "-m", "graphstream", "partition", str(rmat16), "-k", "4", "--algo",
                               "spring", "--out", str(target), "--json"], capture_output=True, text=True,
                              env={**os.environ, "GRAPHSTREAM_PROGRESS": "0"})
        assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    est = _json(capsys, "estimate", rmat16, "-k", "4", "--algo", "spring", "--rf", run["replication_factor"],
                "--features", 8)
    spring = est["partitioners"]["spring"]
    # partition --out partitions and builds in one process: its peak is the larger of the two steps
    predicted = max(spring["partition"]["peak_rss_bytes"], spring["build"]["peak_rss_bytes"])
    assert predicted / 3 <= run["peak_rss_bytes"] <= predicted * 3
    dataset = _tree_bytes(out)
    assert dataset / 1.5 <= spring["build"]["disk_bytes"] <= dataset * 1.5
    assert spring["feature_split"]["disk_bytes"] == pytest.approx(
        run["replication_factor"] * 2**16 * 8 * 4, rel=1e-6)


def test_estimate_human_output_and_errors(capsys):
    code, out, _ = _cli(capsys, "estimate", "--nodes", 1000, "--edges", 16000, "--features", 4)
    assert code == 0
    assert "partition coarse-refine:" in out and "feature split hash:" in out and "peak memory" in out
    # a first run compiles the kernels: a minute on a small graph that then takes a second (said apart)
    line = next(ln for ln in out.splitlines() if "partition coarse-refine:" in ln)
    assert line.endswith("s on the first run: kernels compiled)"), line
    code, out, _ = _cli(capsys, "estimate", "--nodes", 1000, "--edges", 16000, "--json")
    step = json.loads(out)["partitioners"]["coarse-refine"]["partition"]
    assert step["first_run_extra_seconds"] > 30 > step["seconds"]
    for argv in (["estimate"], ["estimate", "--nodes", 10], ["estimate", "--nodes", 10, "--edges", 5, "-k", 0],
                 ["estimate", "--nodes", 10, "--edges", 5, "--feature-dtype", "nonsense"],
                 # figures for what partition refuses, or a dtype a node data folder cannot hold: exit 0 before
                 ["estimate", "--nodes", 10, "--edges", 100, "-k", 16],
                 ["estimate", "--nodes", 10, "--edges", 5, "--features", 4, "--feature-dtype", "float64"]):
        code, _, err = _cli(capsys, *argv)
        assert code == 2 and len(err.strip().splitlines()) == 1, argv


def test_generate_scale_40_refused_at_once(tmp_path, capsys):
    import time
    start = time.perf_counter()
    code, _, err = _cli(capsys, "generate", "rmat", tmp_path / "big.zarr", "--scale", "40")
    assert code == 2 and time.perf_counter() - start < 10
    assert "needs about" in err and "TB" in err and "free" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())
    monkeypatch_chdir = pytest.MonkeyPatch()   # a relative output is named absolute (ingest's was, generate's not)
    try:
        monkeypatch_chdir.chdir(tmp_path)
        code, _, err = _cli(capsys, "generate", "rmat", "big.zarr", "--scale", "40")
        assert code == 2 and err.split("error: ")[1].startswith(f"{tmp_path}/big.zarr: "), err
    finally:
        monkeypatch_chdir.undo()


Usage = namedtuple("Usage", "total used free")


def test_ingest_and_generate_check_free_disk(tmp_path, capsys, monkeypatch):
    edges = tmp_path / "e.txt"
    edges.write_text("".join(f"{i} {(i * 7) % 1000}\n" for i in range(5000)))
    npy = tmp_path / "e.npy"
    np.save(npy, np.zeros((5000, 2), dtype=np.int32))
    # a disk with 10 kB free: 5,000 edges (~30 kB estimated) do not fit
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10**9, 10**9 - 10_000, 10_000))
    for argv in (["ingest", edges, tmp_path / "a.zarr"], ["ingest", npy, tmp_path / "b.zarr"],
                 ["generate", "rmat", tmp_path / "c.zarr", "--scale", "10"]):
        code, _, err = _cli(capsys, *argv)
        assert code == 2 and "needs about" in err and "10 kB free" in err, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.npy", "e.txt"]
    monkeypatch.undo()
    assert _cli(capsys, "ingest", edges, tmp_path / "a.zarr")[0] == 0


def test_input_edges_estimate(tmp_path):
    from graphstream.commands.estimate import input_edges
    text = tmp_path / "e.txt"
    text.write_text("".join(f"{i} {i + 1}\n" for i in range(200_000)))
    np.save(tmp_path / "e.npy", np.zeros((1234, 2), dtype=np.int64))
    assert input_edges(tmp_path / "e.npy") == 1234
    assert 0.8 * 200_000 <= input_edges(text) <= 1.25 * 200_000


def test_peak_rss_of_a_command_is_its_own():
    """A command started by a large process reports its own peak, not its parent's (ru_maxrss is
    kept across fork and exec on Linux: the CI's first failure of the memory test above)."""
    ballast = np.ones(80_000_000)   # 640 MB in this process
    code = "from graphstream._resources import peak_rss_bytes; print(peak_rss_bytes())"
    child = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert child < 400e6 < ballast.nbytes


def test_ingest_s_disk_check_takes_the_ids_width_from_num_nodes(tmp_path, monkeypatch):
    """With --num-nodes the width of the ids is known: the check took 6 bytes an edge whatever it was, and a
    27-bit ingest onto a small disk passed it, then filled the disk."""
    import graphstream.estimate as estimate
    from graphstream.estimate import store_bytes
    asked = []
    monkeypatch.setattr(estimate, "check_free_disk", lambda out, need, what: asked.append(need))
    edges = np.random.default_rng(0).integers(0, 2**27, (1000, 2))
    np.save(tmp_path / "e.npy", edges)
    assert main(["ingest", str(tmp_path / "e.npy"), str(tmp_path / "g.zarr"), "--num-nodes", str(2**27)]) == 0
    assert asked == [store_bytes(1000, num_nodes=2**27)] and asked[0] > store_bytes(1000)


def test_ingest_relabel_s_disk_check_counts_the_id_map(tmp_path, monkeypatch):
    """The check left the id map out: 200,000 lines of distinct 23-character ids made a 9.2 MB store
    after a 1.2 MB check."""
    import graphstream.estimate as estimate
    asked = []
    monkeypatch.setattr(estimate, "check_free_disk", lambda out, need, what: asked.append(need))
    text = tmp_path / "users.csv"
    text.write_text("".join(f"user_{i:09d}_name,user_{i + 10**8:09d}_name\n" for i in range(20_000)))
    assert main(["ingest", str(text), str(tmp_path / "g.zarr"), "--relabel"]) == 0
    written = sum(f.stat().st_size for f in (tmp_path / "g.zarr").rglob("*") if f.is_file())
    assert asked[0] >= written > 0.5 * text.stat().st_size


def test_dataset_disk_counts_the_parts_blocks_and_json(tmp_path, capsys):
    """At large k the files are small: each takes a whole block, and part.json and the manifest add up.
    The estimate counted the .npy bytes only: 3.4 MB for 25 MiB at k = 1024 on R-MAT s12."""
    from graphstream.ingest.rmat import generate_rmat
    generate_rmat(tmp_path / "g.zarr", scale=10, edge_factor=8, seed=0, undirected=True)
    code, out, _ = _cli(capsys, "partition", tmp_path / "g.zarr", "-k", "256", "--algo", "hash",
                        "--out", tmp_path / "p", "--json")
    rf = json.loads(out)["replication_factor"]
    taken = sum(p.stat().st_blocks * 512 for p in [tmp_path / "p", *(tmp_path / "p").rglob("*")])
    code, out, _ = _cli(capsys, "estimate", tmp_path / "g.zarr", "-k", "256", "--algo", "hash", "--rf", str(rf),
                        "--json")
    estimated = json.loads(out)["partitioners"]["hash"]["build"]["disk_bytes"]
    assert 0.9 * taken <= estimated <= 1.3 * taken, (estimated, taken)


def test_partition_peak_is_the_estimate_s_and_leaves_out_only_the_trial_children():
    from graphstream import estimate
    size = estimate.GraphSize(1 << 22, 1 << 26)   # R-MAT s22, the benchmarks' memory line
    steps = estimate.estimate_steps(size, k=32)["partitioners"]
    children = min(estimate.COARSE_TRIAL_CHILDREN, estimate.usable_cores() - 1) * estimate.COARSE_TRIAL_CHILD_RSS
    for algo in estimate.PARTITION_BYTES_PER_NODE:
        whole = estimate.partition_peak_bytes(size, 32, algo)
        assert whole == steps[algo]["partition"]["peak_rss_bytes"]
        alone = estimate.partition_peak_bytes(size, 32, algo, children=False)
        assert whole - alone == (children if algo == "coarse-refine" else 0)
    # the process alone, R-MAT s22, k = 32: above its measured peaks (501-575 MiB, docs/partition-quality.md)
    assert 575 * 2**20 < estimate.partition_peak_bytes(size, 32, "coarse-refine", children=False) < 2**30
