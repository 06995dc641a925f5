"""Partition API, metrics, CLI and property tests (hypothesis) for the streaming partitioners."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from collections import defaultdict

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphstream.cli import main as cli_main
from graphstream.errors import ParameterError
from graphstream.kernels.packing import pack_least_loaded
from graphstream.partition import MAX_PARTS, partition
from graphstream.partition.edge_parts import open_edge_parts, stream_with_parts
from graphstream.partition.hdrf import run as hdrf_run
from graphstream.partition.metrics import vertex_cut_rf, vertex_partition_metrics
from graphstream.partition.spring import run as spring_run
from graphstream.partition.twops import run as twops_run
from graphstream.store import GraphWriter, open_store

ALGOS = [("spring", {}), ("2ps-l", {}), ("2ps-l", {"passes": 2}), ("hdrf", {}), ("dbh", {}),
         ("hash", {}), ("hash", {"mode": "edge"})]
EDGE_ALGOS = {"2ps-l", "hdrf", "dbh"}


def write_store(path, src, dst, n, chunk=64, directed=False):
    with GraphWriter(path, num_nodes=n, directed=directed, chunk_size=chunk) as w:
        w.append(np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))
    return open_store(path)


def is_edge_partition(algo, params):
    return algo in EDGE_ALGOS or params.get("mode") == "edge"


# -- metrics ---------------------------------------------------------------------------------------

def set_metrics(src, dst, owner, n, k, directed=False):
    """The replication factor by sets: u is in the halo of owner[v]'s part for an edge (u, v), and v in
    owner[u]'s unless directed (a directed part holds its inner nodes' in-edges)."""
    present = [{int(owner[x])} for x in range(n)]
    for u, v in zip(src, dst):
        if not directed:
            present[v].add(int(owner[u]))
        present[u].add(int(owner[v]))
    return sum(len(s) for s in present) / n


@pytest.mark.parametrize("directed", [False, True])
def test_replication_factor_by_hand(tmp_path, directed):
    # path 0-1-2-3 plus isolated node 4; parts {0,1}, {2,3,4}
    store = write_store(tmp_path / "g.zarr", [0, 1, 2], [1, 2, 3], 5, directed=directed)
    m = vertex_partition_metrics(store, np.array([0, 0, 1, 1, 1]), 2)
    # undirected: part 0 holds 0,1 + halo 2; part 1 holds 2,3,4 + halo 1: (3 + 4) / 5.
    # directed: the halo is what the built part holds, the in-neighbours feeding inner nodes:
    # part 0 none (0 has no in-edge, 1's source 0 is inner); part 1 node 1 (feeds 2): (2 + 4) / 5.
    assert m["replication_factor"] == pytest.approx(6 / 5 if directed else 7 / 5)
    assert m["node_balance"] == pytest.approx(3 / 2.5)
    # the CSR entries the builder writes: undirected, part 0 rows 0:[1] 1:[0,2] halo 2:[1], part 1 rows
    # 2:[1,3] 3:[2] halo 1:[2]; directed, the in-edges of the inner nodes: part 0 {01}, part 1 {12, 23}
    assert m["part_edges"] == ([1, 2] if directed else [4, 4])
    assert m["edge_balance"] == pytest.approx(2 / 1.5 if directed else 1.0)
    assert m["part_halo"] == ([0, 1] if directed else [1, 1])


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("algo", ["coarse-refine", "dbh"])
def test_the_plan_s_part_edges_are_the_built_parts_num_edges(tmp_path, directed, algo):
    """`partition --json` and the built manifest disagreed: on a directed store the plan counted the
    edges with an owned endpoint where a part holds its inner nodes' in-edges (edge_balance 1.264 against
    1.309), and undirected it counted each edge once where a part holds two entries (half the figure)."""
    from graphstream.assemble import build_partitions
    rng = np.random.default_rng(3)
    n, m = 400, 3000
    src, dst = rng.integers(0, n - 20, m), rng.integers(0, n - 20, m)
    dst[:50] = src[:50]                                  # self-loops
    src[100:200], dst[100:200] = src[300:400], dst[300:400]   # duplicates
    store = write_store(tmp_path / "g.zarr", src, dst, n, chunk=500, directed=directed)
    plan = partition(store, 4, algo, seed=0)
    build_partitions(store, plan, tmp_path / "parts")
    manifest = json.loads((tmp_path / "parts" / "manifest.json").read_text())
    assert plan.metrics["part_edges"] == [p["num_edges"] for p in manifest["parts"]]
    assert plan.metrics["part_edges"] == manifest["metrics"]["part_edges"]
    assert plan.metrics["edge_balance"] == pytest.approx(manifest["metrics"]["edge_balance"])


def test_metrics_in_groups_equal_one_pass(tmp_path, monkeypatch):
    """k spread over several grouped passes (tiny budget) gives the same figures."""
    rng = np.random.default_rng(0)
    n, k = 500, 150
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    store = write_store(tmp_path / "g.zarr", src, dst, n)
    owner = rng.integers(0, k, n)
    one = vertex_partition_metrics(store, owner, k)
    import graphstream.partition.edge_parts as shared
    monkeypatch.setattr(shared, "group_budget_bytes", lambda n: n * 8)   # 64 parts per pass
    assert len(shared.part_groups(n, k, 1 / 8, align=64)) == 3
    many = vertex_partition_metrics(store, owner, k)
    assert many["metrics_passes"] == 3
    for key in ("replication_factor", "node_balance", "edge_balance", "part_halo", "part_edges"):
        assert one[key] == many[key]
    assert one["replication_factor"] == pytest.approx(set_metrics(src, dst, owner, n, k))


@pytest.mark.parametrize("directed", [False, True])
def test_metrics_lanes_equal_one_lane(directed):
    """The halo marking cut into node lanes (one a thread) sets the bits and counts the edges of one lane."""
    from graphstream.cluster import split_range
    from graphstream.kernels.bitsets import new_byte_bitsets
    from graphstream.partition.metrics import _mark_halo
    rng = np.random.default_rng(1)
    n, k = 1000, 70   # nine bytes a node; lanes of 64-node multiples, the last one short
    src, dst = rng.integers(0, n, 5000), rng.integers(0, n, 5000)
    owner = rng.integers(0, k, n).astype(np.int32)
    marked = []
    for count in (1, 3, 7):
        lanes = np.array(split_range(n, count, align=64), dtype=np.int64).reshape(-1, 2)
        assert lanes[0, 0] == 0 and lanes[-1, 1] == n and np.all(lanes[1:, 0] == lanes[:-1, 1])
        assert np.all(lanes[1:, 0] % 64 == 0) and (len(lanes) > 1) == (count > 1)
        bits = new_byte_bitsets(n, k)
        counts = np.zeros((len(lanes), k), dtype=np.int64)
        _mark_halo(src, dst, owner, bits, 0, k, counts, directed, lanes)
        marked.append((bits, counts.sum(axis=0)))
    for bits, counts in marked[1:]:
        assert np.array_equal(bits, marked[0][0]) and np.array_equal(counts, marked[0][1])
    expect = np.zeros(k, dtype=np.int64)   # the builder's CSR entries
    if directed:   # the in-edges of a part's inner nodes
        np.add.at(expect, owner[dst], 1)
    else:   # two entries in each part holding an edge (inner row, other end's row); a self-loop one
        loop = src == dst
        np.add.at(expect, owner[src], np.where(loop, 1, 2))
        np.add.at(expect, owner[dst], np.where(loop | (owner[dst] == owner[src]), 0, 2))
    assert np.array_equal(marked[0][1], expect)


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("hubs_first", [False, True])
@pytest.mark.parametrize("k", [1, 5, 70, MAX_PARTS])
def test_vertex_stream_metrics_equal_the_store_pass(tmp_path, k, hubs_first, directed):
    """coarse-refine's closing figures from its vertex stream equal the store pass's, with self-loops,
    duplicate edges, isolated nodes and blocks smaller than a segment of nodes (and lanes past the
    block's segments); directed, a part's halo is its inner nodes' in-neighbours."""
    from graphstream.partition.metrics import vertex_stream_metrics
    from graphstream.partition.vertex_stream import build_vertex_stream
    rng = np.random.default_rng(k)
    n, m = 3000, 12000
    src, dst = rng.integers(0, n - 100, m), rng.integers(0, n - 100, m)   # the last 100 nodes isolated
    dst[:500] = src[:500]                                                # self-loops
    src[1000:1600], dst[1000:1600] = src[2000:2600], dst[2000:2600]      # duplicates
    src[:40] = 7   # a hub
    store = write_store(tmp_path / "g.zarr", src, dst, n, chunk=1000, directed=directed)
    vs = build_vertex_stream(store, tmp_path / "vs", hubs_first=hubs_first)
    assert (vs.out_degree() is not None) == directed
    owner = rng.integers(0, k, n).astype(np.int32)
    in_stream = owner.copy()
    if vs.new_id is not None:
        in_stream[vs.new_id] = owner
    want = vertex_partition_metrics(store, owner, k)
    for block_entries in (1 << 22, 300):
        got = vertex_stream_metrics(vs, in_stream, k, block_entries)
        assert got["metrics_passes"] == 0
        for key in ("replication_factor", "node_balance", "edge_balance", "part_inner", "part_halo", "part_edges"):
            assert got[key] == want[key], key
    assert want["replication_factor"] == pytest.approx(set_metrics(src, dst, owner, n, k, directed))


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("k", [5, 300])
def test_vertex_stream_metrics_as_tasks_equal_the_pass_here(tmp_path, dask_client, k, directed):
    """On a cluster the stream's node ranges are tasks (several, each of several blocks): the same counts
    as one read here, and as the store's pass; k = 300 reads the owner as uint16."""
    from graphstream.partition.metrics import vertex_stream_metrics
    from graphstream.partition.vertex_stream import build_vertex_stream
    rng = np.random.default_rng(k + directed)
    n, m = 5000, 30000
    src, dst = rng.integers(0, n - 50, m), rng.integers(0, n - 50, m)
    dst[:300] = src[:300]   # self-loops
    src[:60] = 11           # a hub
    store = write_store(tmp_path / "g.zarr", src, dst, n, chunk=2000, directed=directed)
    vs = build_vertex_stream(store, tmp_path / "vs", hubs_first=True)
    owner = rng.integers(0, k, n).astype(np.int32)
    in_stream = owner.copy()
    in_stream[vs.new_id] = owner
    here = vertex_stream_metrics(vs, in_stream, k, 2000)
    tasks = vertex_stream_metrics(vs, in_stream, k, 2000, client=dask_client)
    assert here == tasks
    want = vertex_partition_metrics(store, owner, k)
    for key in ("replication_factor", "part_inner", "part_halo", "part_edges"):
        assert tasks[key] == want[key], key
    assert not any(p.name.startswith("graphstream-metrics-") for p in tmp_path.iterdir())   # its owner shard removed


@pytest.mark.parametrize("n", [0, 10])
def test_vertex_stream_metrics_as_tasks_without_edges(tmp_path, dask_client, n):
    """No edges (no nodes, or isolated ones only): the tasks' figures are the pass's here."""
    from graphstream.partition.metrics import vertex_stream_metrics
    from graphstream.partition.vertex_stream import build_vertex_stream
    store = write_store(tmp_path / "g.zarr", [], [], n)
    vs = build_vertex_stream(store, tmp_path / "vs")
    owner = np.arange(n, dtype=np.int32) % 3
    tasks = vertex_stream_metrics(vs, owner, 3, client=dask_client)
    assert tasks == vertex_stream_metrics(vs, owner, 3)
    assert tasks["part_halo"] == [0, 0, 0] and tasks["replication_factor"] == (1.0 if n else 0.0)


def test_owner_and_vertex_cut_with_many_groups(tmp_path, monkeypatch):
    import graphstream.partition.edge_parts as shared
    rng = np.random.default_rng(1)
    n, k = 400, 40
    src, dst = rng.integers(0, n, 2500), rng.integers(0, n, 2500)
    store = write_store(tmp_path / "g.zarr", src, dst, n)
    plan = partition(store, k, "dbh", work_dir=tmp_path / "a")
    monkeypatch.setattr(shared, "group_budget_bytes", lambda n: n * 4 * 3)   # 3 parts per pass
    plan2 = partition(store, k, "dbh", work_dir=tmp_path / "b")
    np.testing.assert_array_equal(plan.owner, plan2.owner)
    assert plan2.metrics["passes"] > plan.metrics["passes"]
    assert vertex_cut_rf(store, plan.edge_parts_path, k) == pytest.approx(plan.metrics["vertex_cut_rf"])


def test_pack_least_loaded_ties_lowest_part():
    loads = np.array([0, 0, 0], dtype=np.int64)
    out = pack_least_loaded(np.array([5, 3, 3, 1, 1], dtype=np.int64), loads)
    assert out.tolist() == [0, 1, 2, 1, 2] and loads.tolist() == [5, 4, 4]


def test_large_k_bitsets(tmp_path):
    """k = MAX_PARTS works (replica sets of 16 words per node)."""
    rng = np.random.default_rng(2)
    n = 3000
    src, dst = rng.integers(0, n, 4000), rng.integers(0, n, 4000)
    store = write_store(tmp_path / "g.zarr", src, dst, n, chunk=1000)
    plan = partition(store, MAX_PARTS, "hdrf", work_dir=tmp_path / "w")
    parts = open_edge_parts(plan.edge_parts_path)[:]
    assert parts.min() >= 0 and parts.max() < MAX_PARTS
    assert len(np.unique(parts)) > 512          # parts beyond the first words are used
    assert plan.owner.max() < MAX_PARTS


# -- properties ------------------------------------------------------------------------------------

@st.composite
def small_graphs(draw):
    n = draw(st.integers(2, 40))
    m = draw(st.integers(1, 150))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    k = draw(st.integers(1, min(n, 9)))
    return np.array(src), np.array(dst), n, k


def _run_all(store, k, seed, tmp, algos=ALGOS):
    out = {}
    for algo, params in algos:
        key = algo + str(sorted(params.items()))
        plan = partition(store, k, algo, seed=seed, work_dir=tmp / key, **params)
        parts = open_edge_parts(plan.edge_parts_path)[:] if plan.edge_parts_path else None
        out[key] = (algo, params, plan, parts)
    return out


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(g=small_graphs(), chunk_a=st.integers(1, 50), seed=st.integers(0, 3))
def test_properties(tmp_path_factory, g, chunk_a, seed):
    src, dst, n, k = g
    tmp = tmp_path_factory.mktemp("prop")
    a = write_store(tmp / "a.zarr", src, dst, n, chunk=chunk_a)
    b = write_store(tmp / "b.zarr", src, dst, n, chunk=1024)
    ra = _run_all(a, k, seed, tmp / "ra")
    rb = _run_all(b, k, seed, tmp / "rb")
    # the seeded algorithms run twice: same seed, same result
    again = _run_all(a, k, seed, tmp / "again", [x for x in ALGOS if x[0] in ("hdrf", "dbh", "hash")])
    m = len(src)
    for key, (algo, params, plan, parts) in ra.items():
        # every node owned exactly once, by a part in range
        assert plan.owner.shape == (n,) and plan.owner.min() >= 0 and plan.owner.max() < k
        assert plan.metrics["replication_factor"] >= 1.0
        if is_edge_partition(algo, params):
            # every edge assigned exactly once, in range
            assert parts.shape == (m,) and parts.min() >= 0 and parts.max() < k
            if algo == "2ps-l":
                cap = int(1.05 * m / k)
                assert np.bincount(parts, minlength=k).max() <= max(cap, -(-m // k))
            # owner = the part with most of the node's edges
            counts = defaultdict(lambda: np.zeros(k, dtype=int))
            for u, v, p in zip(src, dst, parts):
                counts[u][p] += 1
                counts[v][p] += 1
            for x, c in counts.items():
                assert plan.owner[x] == int(np.argmax(c))
        # same seed, same result; independent of the store's chunk size
        for other in (rb, again):
            if key not in other:
                continue
            np.testing.assert_array_equal(plan.owner, other[key][2].owner)
            if parts is not None:
                np.testing.assert_array_equal(parts, other[key][3])


def test_batch_size_independence(tmp_path):
    rng = np.random.default_rng(7)
    n = 200
    src, dst = rng.integers(0, n, 1200), rng.integers(0, n, 1200)
    store = write_store(tmp_path / "g.zarr", src, dst, n, chunk=100)
    for run in (spring_run, twops_run, hdrf_run):
        outs = []
        for i, bs in enumerate((7, 100, 5000)):
            plan = run(store, 6, seed=1, work_dir=tmp_path / f"{run.__module__}{i}", batch_size=bs)
            parts = open_edge_parts(plan.edge_parts_path)[:] if plan.edge_parts_path else None
            outs.append((plan.owner, parts))
        for owner, parts in outs[1:]:
            np.testing.assert_array_equal(owner, outs[0][0])
            if parts is not None:
                np.testing.assert_array_equal(parts, outs[0][1])


def test_seed_changes_random_choices(tmp_path):
    rng = np.random.default_rng(3)
    n = 300
    store = write_store(tmp_path / "g.zarr", rng.integers(0, n, 2000), rng.integers(0, n, 2000), n)
    a = partition(store, 8, "dbh", seed=0, work_dir=tmp_path / "a").owner
    b = partition(store, 8, "dbh", seed=1, work_dir=tmp_path / "b").owner
    assert not np.array_equal(a, b)


def test_part_array_is_chunk_aligned(tmp_path):
    rng = np.random.default_rng(4)
    store = write_store(tmp_path / "g.zarr", rng.integers(0, 50, 1000), rng.integers(0, 50, 1000), 50, chunk=64)
    plan = partition(store, 4, "hdrf", work_dir=tmp_path / "w")
    arr = zarr.open_array(plan.edge_parts_path, mode="r")
    assert arr.chunks == (64,) and arr.shape == (1000,)
    assert arr.attrs["complete"] is True and arr.attrs["num_parts"] == 4
    n_batches = sum(1 for _ in stream_with_parts(store, arr))
    assert n_batches == 16



@pytest.mark.parametrize("algo", ["hdrf", "2ps-l", "coarse-refine"])
def test_without_a_work_dir_nothing_is_left_behind(tmp_path, monkeypatch, algo):
    """part[e] (2 bytes an edge) in a folder of its own that no caller would know to remove: the API's
    default work folder goes before partition() returns, and the plan does not point into it."""
    rng = np.random.default_rng(5)
    store = write_store(tmp_path / "g.zarr", rng.integers(0, 60, 800), rng.integers(0, 60, 800), 60, chunk=128)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    plan = partition(store, 4, algo)
    assert plan.edge_parts_path is None
    assert list(scratch.iterdir()) == []
    kept = partition(store, 4, algo, work_dir=tmp_path / "w")
    np.testing.assert_array_equal(plan.owner, kept.owner)
    if algo != "coarse-refine":
        assert open_edge_parts(kept.edge_parts_path)[:].shape == (800,)


def test_a_direct_run_without_a_work_dir_keeps_part_e_until_exit(tmp_path):
    """An edge partitioner's own run(), called without work_dir: its plan's part[e] readable while the
    process lives (a forked child's exit leaves it), and its folder gone when the process exits (it used
    to stay in the temporary folder), with a killed process's folder."""
    rng = np.random.default_rng(5)
    write_store(tmp_path / "g.zarr", rng.integers(0, 60, 800), rng.integers(0, 60, 800), 60, chunk=128)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    killed = scratch / f"graphstream-parts-{dead.pid}-x"   # a killed run's: its process, and its lock, gone
    killed.mkdir()
    (killed / ".owner.lock").touch()
    code = textwrap.dedent(f"""
        import atexit
        import os
        from graphstream.partition import hdrf
        from graphstream.partition.edge_parts import open_edge_parts
        from graphstream.store import open_store
        plan = hdrf.run(open_store({str(tmp_path / "g.zarr")!r}), 4)
        child = os.fork()
        if child == 0:   # a forked child that runs the exit handlers it inherits: the folder is not its own
            atexit._run_exitfuncs()
            os._exit(0)
        os.waitpid(child, 0)
        assert open_edge_parts(plan.edge_parts_path)[:].shape == (800,)
        print(sorted(os.listdir({str(scratch)!r})))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TMPDIR": str(scratch), "GRAPHSTREAM_PROGRESS": "0"})
    assert done.returncode == 0, done.stderr[-2000:]
    during = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert len(during) == 1 and during[0].startswith("graphstream-parts-")
    assert list(scratch.iterdir()) == []


# -- parameters and CLI ----------------------------------------------------------------------------

@pytest.fixture
def small_store(tmp_path):
    rng = np.random.default_rng(0)
    return write_store(tmp_path / "g.zarr", rng.integers(0, 100, 600), rng.integers(0, 100, 600), 100)


@pytest.mark.parametrize("k,algo,params,msg", [
    (0, "dbh", {}, "k must be in"),
    (MAX_PARTS + 1, "dbh", {}, "k must be in"),
    (101, "dbh", {}, "exceeds the number of nodes"),
    (4, "metis-ish", {}, "unknown algorithm"),
    (4, "spring", {"tau": -1.0}, "tau must be"),
    (4, "2ps-l", {"passes": 0}, "passes must be"),
    (4, "hdrf", {"lam": -1.0}, "lam must be"),
    (4, "hdrf", {"tau": 3.0}, "does not apply to hdrf"),
    (4, "hash", {"mode": "both"}, "mode must be"),
    (4, "hdrf", {"lam": float("inf")}, "lam must be a finite number"),   # every edge went to part 0
    (4, "spring", {"tau": float("inf")}, "tau must be a finite number"),
    (4, "hdrf", {"balance": 1.2}, "balance does not apply to hdrf"),
    (4, "dbh", {"balance": 2.0}, "balance does not apply to dbh"),
    (4, "hash", {"balance": 1.05}, "balance does not apply to hash"),
    (4, "coarse-refine", {"edge_balance": float("inf")}, "invalid edge_balance=inf"),
    # a fraction of a sweep ran as a TypeError in range() deep in the run; a string as a comparison's
    (4, "coarse-refine", {"lp_passes": 2.5}, r"invalid lp_passes=2.5: expected a whole number >= 0"),
    (4, "coarse-refine", {"cluster_cap_factor": "200"}, r"invalid cluster_cap_factor='200': expected a finite"),
])
def test_bad_parameters(small_store, k, algo, params, msg):
    with pytest.raises(ParameterError, match=msg):
        partition(small_store, k, algo, **params)


def test_spring_s_balance_is_its_merge_cap(small_store, capsys):
    """DESIGN.md's `partition ... --algo spring ... [--balance 1.05]` was refused ("balance does not apply to
    spring"): it is SPRING's beta (specs/partitioners.md), which the CLI could not set at all."""
    for beta in (1.05, 1.5):
        assert partition(small_store, 4, "spring", balance=beta).params["beta"] == beta
        np.testing.assert_array_equal(partition(small_store, 4, "spring", balance=beta).owner,
                                      partition(small_store, 4, "spring", beta=beta).owner)
    assert run_cli("partition", small_store.path, "-k", 4, "--algo", "spring", "--balance", 1.5, "--json") == 0
    assert json.loads(capsys.readouterr().out)["params"]["beta"] == 1.5
    assert partition(small_store, 4, "spring", balance=1.5, beta=1.2).params["beta"] == 1.2   # beta itself wins


@pytest.mark.parametrize("algo", ["coarse-refine", "2ps-l"])
def test_a_balance_of_k_or_more_caps_nothing_and_is_recorded_as_k(small_store, algo):
    """1e17 overflowed the caps' int64 (a traceback); a cap of k x the mean holds everything already."""
    huge = partition(small_store, 4, algo, balance=1e17, metrics=False)
    assert huge.params["balance"] == 4.0
    np.testing.assert_array_equal(huge.owner, partition(small_store, 4, algo, balance=4.0, metrics=False).owner)


def test_an_edge_balance_of_k_or_more_is_no_cap(small_store):
    plain = partition(small_store, 4, "coarse-refine", metrics=False)
    for f in (4.0, 1e17):
        np.testing.assert_array_equal(partition(small_store, 4, "coarse-refine", edge_balance=f, metrics=False).owner,
                                      plain.owner)


def test_bad_balance_and_seed(small_store):
    with pytest.raises(ParameterError, match="balance"):
        partition(small_store, 4, "2ps-l", balance=0.5)
    with pytest.raises(ParameterError, match="seed"):
        partition(small_store, 4, "dbh", seed=-1)


def run_cli(*args):
    return cli_main([str(a) for a in args])


def test_cli_json_metrics(small_store, capsys):
    for algo in ("spring", "2ps-l", "hdrf", "dbh", "hash"):
        assert run_cli("partition", small_store.path, "-k", 4, "--algo", algo, "--json") == 0
        out = json.loads(capsys.readouterr().out)
        for key in ("replication_factor", "node_balance", "edge_balance", "seconds", "passes",
                    "peak_rss_bytes", "algorithm", "k", "num_nodes", "num_edges"):
            assert key in out, (algo, key)
        assert out["algorithm"] == algo and out["k"] == 4
        assert out["num_parts"] == 4   # the manifest's and the snapshot partitioners' name for it too
        assert ("vertex_cut_rf" in out) == (algo in EDGE_ALGOS)


def test_cli_parameters_reach_the_algorithm(small_store, capsys):
    assert run_cli("partition", small_store.path, "-k", 4, "--algo", "spring", "--tau", 77, "--json") == 0
    assert json.loads(capsys.readouterr().out)["params"]["tau"] == 77.0
    assert run_cli("partition", small_store.path, "-k", 4, "--algo", "2ps-l", "--passes", 3, "--json") == 0
    assert json.loads(capsys.readouterr().out)["params"]["passes"] == 3
    assert run_cli("partition", small_store.path, "-k", 4, "--algo", "hdrf", "--lambda", 2, "--json") == 0
    assert json.loads(capsys.readouterr().out)["params"]["lam"] == 2.0
    assert run_cli("partition", small_store.path, "-k", 4, "--edge-balance", 1.2, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["algorithm"] == "coarse-refine" and out["params"]["edge_balance"] == 1.2
    assert run_cli("partition", small_store.path, "-k", 4, "--preset", "fast", "--passes", 3, "--json") == 0
    out = json.loads(capsys.readouterr().out)["params"]
    assert out["preset"] == "fast" and out["coarse_trials"] == 1 and out["refine_passes"] == 3   # --passes wins


@pytest.mark.parametrize("args", [
    ["-k", 0, "--algo", "dbh"],
    ["-k", 5000, "--algo", "dbh"],
    ["-k", 4, "--algo", "nope"],
    ["-k", 4, "--algo", "dbh", "--lambda", 2],
    ["-k", 4, "--algo", "spring", "--edge-balance", 1.1],
    ["-k", 4, "--edge-balance", 0.5],
    ["-k", 4, "--algo", "spring", "--preset", "fast"],
    ["--algo", "dbh"],
])
def test_cli_bad_input_exit_2(small_store, capsys, args):
    assert run_cli("partition", small_store.path, *args) == 2
    err = capsys.readouterr().err
    assert "error:" in err and err.count("\n") == 1


def test_cli_presets_are_coarse_refines():
    """The CLI names the presets itself (its --help imports no numba); they must be PRESETS' keys."""
    import argparse

    from graphstream.commands import partition as command
    from graphstream.partition import coarse_refine
    parser = argparse.ArgumentParser()
    command.configure(parser)
    choices, = [a.choices for a in parser._actions if a.dest == "preset"]
    assert list(choices) == list(coarse_refine.PRESETS)


def test_cli_unknown_preset_exit_2(small_store, capsys):
    with pytest.raises(SystemExit) as exc:   # argparse's own refusal of a choice, exit 2 as well
        run_cli("partition", small_store.path, "-k", 4, "--preset", "fastest")
    assert exc.value.code == 2 and "invalid choice: 'fastest'" in capsys.readouterr().err


def test_cli_empty_and_incomplete_stores(tmp_path, capsys):
    with GraphWriter(tmp_path / "empty.zarr", num_nodes=10) as w:
        pass
    assert run_cli("partition", tmp_path / "empty.zarr", "-k", 2, "--algo", "dbh") == 2
    assert "empty graph" in capsys.readouterr().err
    w = GraphWriter(tmp_path / "partial.zarr", num_nodes=10, chunk_size=2)
    w.append(np.array([0, 1, 2]), np.array([1, 2, 3]))
    w._flush(whole_chunks_only=False)
    w._wait()                                  # data on disk, never marked complete
    assert run_cli("partition", tmp_path / "partial.zarr", "-k", 2, "--algo", "dbh") == 2
    assert "incomplete" in capsys.readouterr().err
    assert run_cli("partition", tmp_path / "missing.zarr", "-k", 2) == 2


def test_cli_entry_point_exit_code(small_store):
    """Through a real process: the installed command exits 2 on bad input."""
    proc = subprocess.run([sys.executable, "-m", "graphstream", "partition", small_store.path, "-k", "0",
                           "--algo", "dbh"], capture_output=True, text=True)
    assert proc.returncode == 2 and "k must be in" in proc.stderr and proc.stdout == ""
