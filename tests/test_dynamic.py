"""Snapshot stores: every snapshot rebuilt from keyframe + deltas equals the
snapshot built directly from the raw events (an independent numpy reference),
on the real temporal datasets, for several windows, edge lives, keyframe
intervals, sorted and unsorted event orders; bad input is refused."""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import zarr

from graphstream import GraphWriter
from graphstream.cli import main as cli_main
from graphstream.dynamic import apply_delta, apply_delta_vectorized, build_snapshots, diff_sorted, open_snapshots
from graphstream.dynamic.generate import DynamicRmatConfig, dynamic_rmat_steps, generate_dynamic
from graphstream.errors import GraphStreamError, IncompleteStoreError, InputFormatError, ParameterError, StoreError

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "temporal"
DAY = 86400


def _load(name: str):
    path = DATA / name
    if not path.exists():
        pytest.skip(f"dataset {path} absent (expected ../shared/datasets/temporal beside the repo)")
    if name.endswith(".csv"):
        d = np.loadtxt(path, dtype=np.int64, delimiter=",")
        return d[:, 0] - 1, d[:, 1] - 1, d[:, 3]
    d = np.loadtxt(path, dtype=np.int64)
    return d[:, 0] - 1, d[:, 1] - 1, d[:, 2]


class Events:
    """Raw events in memory (the reference side) and their graph store."""

    def __init__(self, path: Path, src, dst, time, shuffle_seed=None, chunk=4096):
        if shuffle_seed is not None:
            p = np.random.default_rng(shuffle_seed).permutation(len(src))
            src, dst, time = src[p], dst[p], time[p]
        self.src, self.dst, self.time = src, dst, time
        self.n = int(max(src.max(), dst.max()) + 1)
        with GraphWriter(path, num_nodes=self.n, with_time=True, chunk_size=chunk) as w:
            w.append(src, dst, time)
        self.path = path

    def windows(self, window=None, num_snapshots=None):
        """Window index of each event, computed with exact rationals in Python."""
        t0 = int(self.time.min())
        span = int(self.time.max()) - t0
        if window is not None:
            w = Fraction(str(window))
            idx = np.array([int(Fraction(int(x) - t0) / w) for x in self.time], dtype=np.int64)
        else:
            idx = (self.time - t0) * num_snapshots // (span + 1)
        return idx

    def reference(self, idx, t, edge_life):
        sel = (idx <= t) & (idx > t - edge_life)
        keys, counts = np.unique(self.src[sel] * self.n + self.dst[sel], return_counts=True)
        return keys, counts


@pytest.fixture(scope="module")
def college(tmp_path_factory):
    return Events(tmp_path_factory.mktemp("dyn") / "college.zarr", *_load("CollegeMsg.txt"))


@pytest.fixture(scope="module")
def bitcoin(tmp_path_factory):
    return Events(tmp_path_factory.mktemp("dyn") / "bitcoin.zarr", *_load("soc-sign-bitcoinotc.csv"))


@pytest.fixture(scope="module")
def bitcoin_shuffled(tmp_path_factory):
    return Events(tmp_path_factory.mktemp("dyn") / "bitcoin_shuf.zarr", *_load("soc-sign-bitcoinotc.csv"),
                  shuffle_seed=7)


CASES = [
    # dataset, window (s), num_snapshots, edge_life, keyframe_every, extra build kwargs
    ("college", DAY, None, 1, 4, {}),
    ("college", 7 * DAY, None, 4, 3, {}),
    ("college", None, 25, 2, 1, {"buffer_events": 500}),
    ("college", 2.5 * DAY, None, 3, 8, {}),
    ("bitcoin", 30 * DAY, None, 1, 8, {}),
    ("bitcoin", None, 40, 4, 5, {}),
    ("bitcoin_shuffled", 30 * DAY, None, 4, 4, {"buffer_events": 1000, "bucket_events": 3000}),
    ("bitcoin_shuffled", None, 60, 1, 7, {}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-W{c[1]}-T{c[2]}-L{c[3]}-K{c[4]}")
def test_rebuilt_snapshots_equal_direct_ones(case, request, tmp_path):
    name, window, num, life, every, extra = case
    ev = request.getfixturevalue(name)
    out = tmp_path / "snaps.zarr"
    res = build_snapshots(ev.path, out, window=window, num_snapshots=num, edge_life=life,
                          keyframe_every=every, **extra)
    idx = ev.windows(window, num)
    snaps = open_snapshots(out)
    assert len(snaps) == int(idx.max()) + 1 == res.num_snapshots
    assert snaps.keyframe_every == every and snaps.keyframes == list(range(0, len(snaps), every))
    assert res.sorted_input == (not name.endswith("shuffled"))
    refs = [ev.reference(idx, t, life) for t in range(len(snaps))]
    # random access order first (each from its keyframe), then a forward scan (cached)
    order = list(np.random.default_rng(1).permutation(len(snaps))) + list(range(len(snaps)))
    for t in order:
        keys, counts = refs[t]
        src, dst, cnt = snaps.snapshot(t, with_counts=True)
        assert src.dtype == np.int32
        np.testing.assert_array_equal(src.astype(np.int64) * ev.n + dst, keys)
        np.testing.assert_array_equal(cnt, counts)
    prev_keys = np.empty(0, dtype=np.int64)
    for t in range(len(snaps)):
        keys, _ = refs[t]
        (asrc, adst), (rsrc, rdst) = snaps.delta(t)
        np.testing.assert_array_equal(asrc.astype(np.int64) * ev.n + adst, np.setdiff1d(keys, prev_keys))
        np.testing.assert_array_equal(rsrc.astype(np.int64) * ev.n + rdst, np.setdiff1d(prev_keys, keys))
        if t:
            d = snaps.delta(t)
            # the device-style rebuild from positions gives the same list
            rebuilt = apply_delta_vectorized(prev_keys, d.removed_pos,
                                             d.added_src.astype(np.int64) * ev.n + d.added_dst)
            np.testing.assert_array_equal(rebuilt, keys)
        prev_keys = keys
    nodes = [len(np.union1d(k // ev.n, k % ev.n)) for k, _ in refs]
    np.testing.assert_array_equal(snaps.counts.num_nodes, nodes)
    np.testing.assert_array_equal(snaps.counts.num_edges, [len(k) for k, _ in refs])
    # byte accounting: full = every snapshot's pairs; stored = keyframes + deltas
    ids = 4
    assert res.totals.bytes_full == sum(len(k) for k, _ in refs) * 2 * ids
    kf = sum(len(refs[t][0]) for t in snaps.keyframes) * 2 * ids
    adds = sum(len(np.setdiff1d(refs[t][0], refs[t - 1][0])) for t in range(1, len(refs)))
    rems = sum(len(np.setdiff1d(refs[t - 1][0], refs[t][0])) for t in range(1, len(refs)))
    assert res.totals.bytes_stored == kf + adds * 2 * ids + rems * 4


def test_delta_kernels_against_sets():
    rng = np.random.default_rng(0)
    for _ in range(30):
        a = np.unique(rng.integers(0, 300, rng.integers(0, 120)))
        b = np.unique(rng.integers(0, 300, rng.integers(0, 120)))
        ac = rng.integers(1, 5, len(a))
        bc = rng.integers(1, 5, len(b))
        d = diff_sorted(a, ac, b, bc)
        np.testing.assert_array_equal(d.added_keys, np.setdiff1d(b, a))
        np.testing.assert_array_equal(a[d.removed_pos], np.setdiff1d(a, b))
        k, c = apply_delta(a, ac, d.removed_pos, d.added_keys, d.added_counts, d.changed_pos, d.changed_counts)
        np.testing.assert_array_equal(k, b)
        np.testing.assert_array_equal(c, bc)
        np.testing.assert_array_equal(apply_delta_vectorized(a, d.removed_pos, d.added_keys), b)


def test_declared_sorted_but_not_monotonic_is_refused(bitcoin_shuffled, tmp_path):
    with pytest.raises(InputFormatError, match="steps back at edge"):
        build_snapshots(bitcoin_shuffled.path, tmp_path / "s.zarr", window=DAY, assume_sorted=True)
    assert not (tmp_path / "s.zarr").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary leftovers
    # a store that declares itself sorted through its attribute
    st = tmp_path / "declared.zarr"
    ev = bitcoin_shuffled
    with GraphWriter(st, num_nodes=ev.n, with_time=True, attrs={"sorted_by_time": True}) as w:
        w.append(ev.src, ev.dst, ev.time)
    with pytest.raises(InputFormatError, match="declared sorted"):
        build_snapshots(st, tmp_path / "s2.zarr", window=DAY)
    assert cli_main(["snapshots", str(st), str(tmp_path / "s3.zarr"), "--window", "86400"]) == 2


def test_bad_parameters(college, tmp_path):
    out = tmp_path / "s.zarr"
    for kwargs, err in [({"window": 0}, ParameterError), ({"window": -5}, ParameterError),
                        ({"num_snapshots": 0}, ParameterError),
                        ({"window": DAY, "keyframe_every": 0}, ParameterError),
                        ({"window": DAY, "edge_life": 0}, ParameterError),
                        ({}, ParameterError), ({"window": DAY, "num_snapshots": 3}, ParameterError)]:
        with pytest.raises(err):
            build_snapshots(college.path, out, **kwargs)
    notime = tmp_path / "notime.zarr"
    with GraphWriter(notime, num_nodes=4) as w:
        w.append(np.array([0, 1]), np.array([1, 2]))
    with pytest.raises(StoreError, match="no time column"):
        build_snapshots(notime, out, window=1)
    for argv in (["snapshots", str(notime), str(out), "--window", "1"],
                 ["snapshots", str(college.path), str(out), "--window", "0"],
                 ["snapshots", str(college.path), str(out), "--window", "-1"],
                 ["snapshots", str(college.path), str(out), "--window", "10", "--keyframe-every", "0"],
                 ["snapshots", str(college.path), str(out), "--num-snapshots", "0"]):
        assert cli_main(argv) == 2, argv
    assert not out.exists()


def test_unsorted_flag_on_sorted_events(college, tmp_path, capsys, monkeypatch):
    """--unsorted on sorted events logged "events are not sorted by time" beside sorted_input true;
    the snapshots are those of the sorted path."""
    monkeypatch.setenv("GRAPHSTREAM_PROGRESS", "1")
    base = ["snapshots", str(college.path), "--window", str(7 * DAY), "--json"]
    assert cli_main([*base[:2], str(tmp_path / "a.zarr"), *base[2:], "--unsorted"]) == 0
    out, err = capsys.readouterr()
    res = json.loads(out)
    assert res["sorted_input"] and res["bucketed"] and "--unsorted; bucketing" in err and "not sorted" not in err
    assert cli_main([*base[:2], str(tmp_path / "b.zarr"), *base[2:]]) == 0
    a, b = open_snapshots(tmp_path / "a.zarr"), open_snapshots(tmp_path / "b.zarr")
    assert len(a) == len(b) and all(np.array_equal(a.snapshot_keys(t)[0], b.snapshot_keys(t)[0]) for t in range(len(a)))


def test_cli_json_overwrite_and_incomplete(college, tmp_path, capsys):
    out = tmp_path / "s.zarr"
    argv = ["snapshots", str(college.path), str(out), "--window", str(7 * DAY), "--edge-life", "2",
            "--keyframe-every", "4", "--json"]
    assert cli_main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    for key in ("num_snapshots", "num_nodes", "bytes_full", "bytes_stored", "seconds", "peak_rss_bytes",
                "transfer_bytes_delta"):
        assert key in res
    assert res["num_nodes"] == college.n and res["num_snapshots"] == len(open_snapshots(out))
    assert cli_main(argv) == 2  # exists
    assert cli_main(argv + ["--overwrite"]) == 0
    capsys.readouterr()
    zarr.open_group(str(out), mode="r+").attrs["complete"] = False
    with pytest.raises(IncompleteStoreError):
        open_snapshots(out)
    with pytest.raises(StoreError):
        open_snapshots(college.path)  # a graph store, not a snapshot store
    with pytest.raises(GraphStreamError):
        open_snapshots(tmp_path / "missing.zarr")


def test_generator_churn_is_controlled_and_seeded(tmp_path):
    cfg = DynamicRmatConfig(scale=12, edges_per_snapshot=20000, num_snapshots=6, churn=0.1, seed=5)
    a = [(s.copy(), d.copy()) for _, s, d in dynamic_rmat_steps(cfg)]
    b = [(s.copy(), d.copy()) for _, s, d in dynamic_rmat_steps(cfg)]
    for (s1, d1), (s2, d2) in zip(a, b):
        np.testing.assert_array_equal(s1, s2)
        np.testing.assert_array_equal(d1, d2)
    for (s0, d0), (s1, d1) in zip(a, a[1:]):
        assert np.count_nonzero((s0 != s1) | (d0 != d1)) <= cfg.replaced_per_step
        assert np.count_nonzero((s0 != s1) | (d0 != d1)) >= 0.95 * cfg.replaced_per_step
    store = generate_dynamic(tmp_path / "g.zarr", cfg)
    assert store.num_edges == cfg.num_events and store.attrs["sorted_by_time"] is True
    res = build_snapshots(tmp_path / "g.zarr", tmp_path / "gs.zarr", window=1, keyframe_every=4)
    snaps = open_snapshots(tmp_path / "gs.zarr")
    assert len(snaps) == cfg.num_snapshots
    for t, (s, d) in enumerate(a):
        np.testing.assert_array_equal(snaps.snapshot_keys(t)[0], np.unique(s.astype(np.int64) * 4096 + d))
    assert res.totals.transfer_bytes_delta < res.totals.transfer_bytes_full / 2


def test_sequence_ships_a_full_snapshot_then_deltas(college, tmp_path):
    build_snapshots(college.path, tmp_path / "s.zarr", window=3 * DAY, edge_life=2, keyframe_every=5)
    snaps = open_snapshots(tmp_path / "s.zarr")
    n = snaps.num_nodes
    start = 3
    resident = None
    for t, item in snaps.sequence(start, start + 9):
        if t == start:
            src, dst = item
            resident = src.astype(np.int64) * n + dst
        else:
            added = item.added_src.astype(np.int64) * n + item.added_dst
            resident = apply_delta_vectorized(resident, item.removed_pos, added)
        np.testing.assert_array_equal(resident, snaps.snapshot_keys(t)[0])


def test_empty_windows_cost_the_writer_no_memory(tmp_path):
    """Each empty window kept empty arrays and Python ints in the writer, about 1.1 KB a snapshot
    (CollegeMsg --window 60: 279k snapshots, 514 MiB; a 1M-window store 1.3 GB): now bounded by the
    writer's chunk buffers. 40k snapshots, one edge each 1000th, measured with tracemalloc."""
    import tracemalloc

    from graphstream.store.snapshots import SnapshotWriter
    writer = SnapshotWriter(tmp_path / "s.zarr", num_nodes=100, keyframe_every=8)
    one, none = (np.array([7], dtype=np.int64), np.array([1], dtype=np.int64)), (np.zeros(0, np.int64),) * 2
    for t in range(2_000):   # its kernels compiled and loaded first (tens of MB, whatever the count)
        writer.append(*(one if t % 1000 == 0 else none))
    tracemalloc.start()
    for t in range(2_000, 42_000):
        writer.append(*(one if t % 1000 == 0 else none))
    grown = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    writer.close()
    assert grown < 8 * 2**20, grown          # the buffers: 7 columns x 64 Ki int64 = 3.5 MiB
    store = open_snapshots(tmp_path / "s.zarr")
    assert len(store) == 42_000 and int(store.counts.num_edges.sum()) == 42
    assert store.snapshot_keys(1000)[0].tolist() == [7] and store.snapshot_keys(1001)[0].size == 0


def test_bucket_ranges_are_the_greedy_ones():
    """The bucketed path's window ranges, found by binary search over the running total (it walked a
    Python list of one int a window: 3.6 GB at 10^8 windows), are those of the plain greedy walk."""
    from graphstream.dynamic.snapshots import _bucket_ranges

    def greedy(hist, target):
        ranges, start, total = [], 0, 0
        for w, n in enumerate(hist.tolist()):
            if total and total + n > target:
                ranges.append((start, w))
                start, total = w, 0
            total += n
        return ranges + [(start, len(hist))]

    rng = np.random.default_rng(1)
    for _ in range(500):
        n = int(rng.integers(1, 60))
        hist = rng.integers(0, 12, n) * (rng.random(n) < rng.random())
        hist[rng.integers(0, n)] = 50 if rng.random() < 0.3 else hist[0]   # a window above the target alone
        target = int(rng.integers(1, 30))
        assert _bucket_ranges(hist, target) == greedy(hist, target), (hist.tolist(), target)
