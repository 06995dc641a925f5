"""PGC and the baselines on the real temporal datasets: every instance in
exactly one chunk, the chunk cap respected, metrics equal to a plain-Python
recount, and per-part sequences holding each owned instance's full spatial
neighbourhood at every snapshot."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphstream import GraphWriter
from graphstream.cli import main as cli_main
from graphstream.dynamic import build_snapshots, open_snapshots
from graphstream.dynamic.baselines import sequence_partition, snapshot_partition
from graphstream.dynamic.partition import open_dynamic_partitions, partition_snapshot_store, with_fitted_costs
from graphstream.dynamic.pgc import PGCConfig, pgc
from graphstream.errors import GraphStreamError, ParameterError

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "temporal"
DAY = 86400


def _snapshot_store(tmp: Path, name: str, window: int, life: int, every: int) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"dataset {path} absent (expected ../shared/datasets/temporal beside the repo)")
    if name.endswith(".csv"):
        d = np.loadtxt(path, dtype=np.int64, delimiter=",")
        src, dst, time = d[:, 0] - 1, d[:, 1] - 1, d[:, 3]
    else:
        d = np.loadtxt(path, dtype=np.int64)
        src, dst, time = d[:, 0] - 1, d[:, 1] - 1, d[:, 2]
    with GraphWriter(tmp / "events.zarr", with_time=True, chunk_size=8192) as w:
        w.append(src, dst, time)
    build_snapshots(tmp / "events.zarr", tmp / "snaps.zarr", window=window, edge_life=life, keyframe_every=every)
    return tmp / "snaps.zarr"


@pytest.fixture(scope="module")
def college(tmp_path_factory):
    return _snapshot_store(tmp_path_factory.mktemp("pgc"), "CollegeMsg.txt", 7 * DAY, 2, 4)


@pytest.fixture(scope="module")
def bitcoin(tmp_path_factory):
    return _snapshot_store(tmp_path_factory.mktemp("pgc"), "soc-sign-bitcoinotc.csv", 60 * DAY, 3, 5)


class Reference:
    """The spatio-temporal instance graph built plainly from the snapshots."""

    def __init__(self, path: Path):
        snaps = open_snapshots(path)
        self.snaps = [tuple(a.astype(np.int64) for a in snaps.snapshot(t)) for t in range(len(snaps))]
        self.inst = {}
        for t, (s, d) in enumerate(self.snaps):
            for v in np.union1d(s, d).tolist():
                self.inst[(v, t)] = len(self.inst)
        self.num = len(self.inst)
        self.degree = np.zeros(self.num, dtype=np.int64)
        for t, (s, d) in enumerate(self.snaps):
            for a, b in zip(s.tolist(), d.tolist()):
                if a != b:
                    self.degree[self.inst[(a, t)]] += 1
                    self.degree[self.inst[(b, t)]] += 1
        self.temporal = []
        last = {}
        for (v, t), i in self.inst.items():  # insertion order is (t, v) sorted
            if v in last:
                self.temporal.append((last[v], i))
            last[v] = i

    def cuts(self, inst_part):
        spatial = sum(int(inst_part[self.inst[(a, t)]] != inst_part[self.inst[(b, t)]])
                      for t, (s, d) in enumerate(self.snaps) for a, b in zip(s.tolist(), d.tolist()) if a != b)
        temporal = sum(int(inst_part[i] != inst_part[j]) for i, j in self.temporal)
        return spatial, temporal


@pytest.fixture(scope="module")
def college_ref(college):
    return Reference(college)


@pytest.mark.parametrize("cap_by", ["volume", "instances"])
def test_pgc_chunks_cover_instances_once_and_respect_cap(college, college_ref, cap_by):
    ref = college_ref
    cfg = PGCConfig(num_parts=4, cap_by=cap_by, seed=3)
    res = pgc(open_snapshots(college), cfg)
    try:
        g = res.graph
        assert g.num_instances == ref.num == len(res.chunk_of) == len(res.inst_part)
        # the implicit graph equals the plain one: degrees and temporal links
        np.testing.assert_array_equal(g.deg, ref.degree)
        prev = np.full(ref.num, -1)
        nxt = np.full(ref.num, -1)
        for i, j in ref.temporal:
            prev[j], nxt[i] = i, j
        np.testing.assert_array_equal(g.prev, prev)
        np.testing.assert_array_equal(g.next, nxt)
        # every instance in exactly one chunk: ids dense in [0, C), each chunk used
        chunk = np.asarray(res.chunk_of)
        assert chunk.min() == 0 and chunk.max() == res.num_chunks - 1
        assert len(np.unique(chunk)) == res.num_chunks
        # the cap: a chunk of more than one instance never exceeds it
        vol = (1.0 + ref.degree) if cap_by == "volume" else np.ones(ref.num)
        size = np.bincount(chunk, weights=vol)
        members = np.bincount(chunk)
        cap = res.metrics["chunk_cap"]
        assert np.all((size <= cap + 1e-9) | (members == 1))
        assert res.num_chunks < ref.num  # label propagation merged something
        # every chunk entirely in one part
        part = np.asarray(res.inst_part)
        assert np.all(np.bincount(chunk, weights=part) == part[np.unique(chunk, return_index=True)[1]] * members)
        spatial, temporal = ref.cuts(part)
        assert res.metrics["cut_spatial_edges"] == spatial
        assert res.metrics["cut_temporal_edges"] == temporal
        loads = np.bincount(part, weights=1.0 + ref.degree, minlength=4)
        assert res.metrics["balance_lambda"] == pytest.approx(loads.max() / loads.min())
        assert res.metrics["balance_lambda"] < 1.3
    finally:
        res.graph.arrays.close()


def test_baselines_cut_what_they_should(college, college_ref):
    ref = college_ref
    cfg = PGCConfig(num_parts=3)
    snap = snapshot_partition(open_snapshots(college), cfg)
    seq = sequence_partition(open_snapshots(college), cfg)
    try:
        part = np.asarray(snap.inst_part)
        assert np.all(np.diff(part) >= 0)  # contiguous time ranges
        assert snap.metrics["cut_spatial_edges"] == 0
        assert (snap.metrics["cut_spatial_edges"], snap.metrics["cut_temporal_edges"]) == ref.cuts(part)
        part = np.asarray(seq.inst_part)
        owner = {}
        for (v, _t), i in ref.inst.items():
            assert owner.setdefault(v, part[i]) == part[i]  # all of a node's instances together
        assert seq.metrics["cut_temporal_edges"] == 0
        assert (seq.metrics["cut_spatial_edges"], seq.metrics["cut_temporal_edges"]) == ref.cuts(part)
    finally:
        snap.graph.arrays.close()
        seq.graph.arrays.close()


def test_memory_mapped_labels_give_the_same_partition(bitcoin, tmp_path):
    a = pgc(open_snapshots(bitcoin), PGCConfig(num_parts=4, seed=1, rounds=5))
    b = pgc(open_snapshots(bitcoin), PGCConfig(num_parts=4, seed=1, rounds=5, memory_budget=0,
                                               scratch_dir=str(tmp_path)))
    try:
        assert not a.metrics["labels_memory_mapped"] and b.metrics["labels_memory_mapped"]
        np.testing.assert_array_equal(a.inst_part, b.inst_part)
    finally:
        a.graph.arrays.close()
        b.graph.arrays.close()
    assert list(tmp_path.iterdir()) == []  # scratch files removed


@pytest.mark.parametrize("algo", ["pgc", "snapshot", "sequence"])
@pytest.mark.parametrize("which", ["college", "bitcoin"])
def test_part_sequences_hold_full_neighbourhoods(which, algo, request, tmp_path):
    path = request.getfixturevalue(which)
    out = tmp_path / "parts"
    report = partition_snapshot_store(str(path), PGCConfig(num_parts=3, seed=0), algo=algo, out=str(out),
                                      overwrite=False)
    for key in ("balance_lambda", "cut_spatial_weight", "cut_temporal_weight", "seconds", "peak_rss_bytes"):
        assert key in report
    parts = open_dynamic_partitions(out)
    snaps = open_snapshots(path)
    assert parts.num_parts == 3 and parts.num_snapshots == len(snaps)
    assert parts.manifest["format"] == "graphstream.dynamic_partitions"
    for part in parts:
        assert np.all(np.diff(part.global_ids) > 0)
        assert part.keyframe_every == snaps.keyframe_every
    owned_count = 0
    for t in range(len(snaps)):
        src, dst = (a.astype(np.int64) for a in snaps.snapshot(t))
        owner = {}
        for part in parts:
            owned = part.to_global(part.owned(t)).astype(np.int64)
            for v in owned.tolist():
                assert v not in owner  # each instance owned exactly once
                owner[v] = part.part
            ls, ld = part.snapshot(t)
            got = part.to_global(ls).astype(np.int64) * snaps.num_nodes + part.to_global(ld)
            assert np.all(np.diff(got) > 0)  # canonical order kept by the local ids
            mine = np.isin(src, owned) | np.isin(dst, owned)
            want = src[mine] * snaps.num_nodes + dst[mine]
            np.testing.assert_array_equal(got, want)  # owned instances' full neighbourhood, nothing else
            if t:
                (asrc, _), (rsrc, _) = part.delta(t)
                assert len(asrc) + len(rsrc) >= 0
        assert set(owner) == set(np.union1d(src, dst).tolist())
        owned_count += len(owner)
    assert owned_count == sum(p["num_owned_instances"] for p in parts.manifest["parts"])


def test_cli_partition_on_snapshot_store(college, tmp_path, capsys):
    argv = ["partition", str(college), "-k", "2", "--algo", "pgc", "--json"]
    assert cli_main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["algorithm"] == "pgc" and res["num_parts"] == 2 and res["balance_lambda"] >= 1.0
    assert cli_main(["partition", str(college), "-k", "2", "--algo", "hdrf"]) == 2
    assert cli_main(["partition", str(college), "-k", "0", "--algo", "pgc"]) == 2
    capsys.readouterr()
    # without --algo a snapshot store gets its own default, pgc (as --help says), not coarse-refine
    assert cli_main(["partition", str(college), "-k", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["algorithm"] == "pgc"
    with pytest.raises(ParameterError):
        partition_snapshot_store(str(college), PGCConfig(num_parts=None, seed=0), algo="pgc")
    with pytest.raises(GraphStreamError):
        open_dynamic_partitions(tmp_path)
    # a graph store's options were ignored here without a word (exit 0, a --halo-hops 2 --out that is not)
    for extra in (["--halo-hops", "2", "--out", str(tmp_path / "hh")], ["--tau", "3"], ["--preset", "fast"],
                  ["--nodes", str(tmp_path)], ["--passes", "2"], ["--edge-balance", "1.1"]):
        assert cli_main(["partition", str(college), "-k", "2", *extra]) == 2, extra
        assert f"{extra[0]}: for graph stores only" in capsys.readouterr().err
    assert not (tmp_path / "hh").exists()
    # the in-memory budget of the instance arrays: the CLI could not set it (a 550 MiB cgroup killed the run
    # that PGCConfig(memory_budget=...) finished); the same parts memory-mapped as in memory
    assert cli_main(["partition", str(college), "-k", "2", "--memory-budget", "0", "--json"]) == 0
    mapped = json.loads(capsys.readouterr().out)
    assert mapped["labels_memory_mapped"] is True and res["labels_memory_mapped"] is False
    for key in ("cut_weight", "cut_spatial_edges", "cut_temporal_edges", "balance_lambda", "num_chunks"):
        assert mapped[key] == res[key], key
    assert cli_main(["partition", str(college), "-k", "2", "--memory-budget", "-1"]) == 2
    assert "memory_budget" in capsys.readouterr().err
    # the time-cut baselines balance by their own rule: --balance 1.0 and 3.0 gave the same parts
    for algo in ("snapshot", "sequence"):
        assert cli_main(["partition", str(college), "-k", "2", "--algo", algo, "--balance", "1.0"]) == 2
        assert f"--algo {algo} balances by its own rule" in capsys.readouterr().err


def test_the_window_is_shown_in_the_store_s_time_unit():
    """window_seconds is in the store's time unit (ns for datetime columns); the text showed it as a
    duration in seconds ("24000000000 h 00 min" for one day of nanoseconds)."""
    from graphstream._report import format_value
    assert format_value("window_seconds", 86_400_000_000_000.0) == "86,400,000,000,000 (in the store's time unit)"
    assert format_value("window_seconds", 2.5) == "2.5 (in the store's time unit)"
    assert format_value("write_seconds", 7200) == "2 h 00 min"


def test_fitted_cost_model_is_usable(college):
    from graphstream.dynamic.pgc import fit_cost_model
    ic, ec = fit_cost_model(feature_dim=16, hidden=16, sizes=(1000, 4000), degrees=(2, 16))
    assert ic == 1.0 and ec >= 0.0
    config = with_fitted_costs(PGCConfig(num_parts=2, seed=0), feature_dim=16)
    report = partition_snapshot_store(str(college), config, algo="pgc")
    assert report["balance_lambda"] is not None and report["balance_lambda"] < 1.3


def test_a_weighted_store_s_snapshots_warn_and_a_missing_scratch_parent_is_named(tmp_path, capsys):
    """The weights were dropped without a word; PGCConfig(scratch_dir="/nonexistent/x") was a raw
    FileNotFoundError from inside the partitioning."""
    rng = np.random.default_rng(0)
    with GraphWriter(tmp_path / "w.zarr", with_time=True, with_weight=True) as w:
        w.append(rng.integers(0, 20, 200), rng.integers(0, 20, 200), np.arange(200), rng.random(200))
    capsys.readouterr()
    for extra in ((), ("--workers", "2")):   # on a cluster it was said on a worker's stderr only
        assert cli_main(["snapshots", str(tmp_path / "w.zarr"), str(tmp_path / "s.zarr"), "--num-snapshots", "4",
                         "--overwrite", *extra]) == 0
        assert "edge weights are not carried into the snapshots" in capsys.readouterr().err, extra
    with pytest.raises(ParameterError, match="scratch_dir .*: folder .*nonexistent does not exist"):
        PGCConfig(num_parts=2, scratch_dir=str(tmp_path / "nonexistent" / "x"))
