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


def test_a_second_thread_on_a_held_output_is_refused(tmp_path):
    """The lock was re-entrant for the whole process: two threads on one work folder both took it and
    wrote each other's vertex stream (a wrong plan and RF, a truncated file, once a SIGBUS). It stays
    re-entrant within the thread that holds it."""
    import threading

    from graphstream._atomic import output_lock
    from graphstream.errors import OutputLockedError

    target = tmp_path / "work"
    held, release, seen = threading.Event(), threading.Event(), []

    def holder() -> None:
        with output_lock(target):
            with output_lock(target):   # the command and the writer it calls: one thread
                held.set()
                release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(30)
    try:
        with output_lock(target):
            seen.append("taken")
    except OutputLockedError as exc:
        seen.append(str(exc))
    release.set()
    thread.join()
    assert len(seen) == 1 and "in use by another thread of this process" in seen[0], seen
    with output_lock(target):   # free again once the holder let go
        pass


@pytest.mark.parametrize("call", ["writer", "ingest undirected", "ingest relabel", "build"])
def test_yes_no_settings_refuse_strings(graph, tmp_path, call):
    """``overwrite="no"`` replaced an existing output ("no" is a true value); ``undirected="false"`` stored
    an undirected graph."""
    root, plan = graph
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n1 2\n")
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "x").write_text("mine")
    calls = {
        "writer": lambda: GraphWriter(keep, overwrite="no"),
        "ingest undirected": lambda: __import__("graphstream.ingest", fromlist=["ingest"]).ingest(
            edges, tmp_path / "u.zarr", undirected="false"),
        "ingest relabel": lambda: __import__("graphstream.ingest", fromlist=["ingest"]).ingest(
            edges, tmp_path / "u.zarr", relabel="no"),
        "build": lambda: build_partitions(root / "g.zarr", plan, keep, overwrite="no"),
    }
    with pytest.raises(ParameterError, match="must be True or False"):
        calls[call]()
    assert (keep / "x").read_text() == "mine" and not (tmp_path / "u.zarr").exists()


def test_algorithm_parameters_take_numpy_numbers(graph):
    """``passes=np.int64(2)``, ``tau=np.float32(100)`` were refused ("must be an integer >= 1, got
    np.int64(2)") where k and seed take numpy numbers."""
    root, _ = graph
    assert partition(root / "g.zarr", 4, "2ps-l", passes=np.int64(2)).owner.shape == (200,)
    assert partition(root / "g.zarr", 4, "spring", tau=np.float32(100)).owner.shape == (200,)


def test_snapshot_partitioning_takes_the_same_k_as_the_cli(graph):
    """PGCConfig took k = 1025 (the CLI refuses k > 1024) and k above the store's node count."""
    root, _ = graph
    with pytest.raises(ParameterError, match="-k must be in"):
        PGCConfig(num_parts=1025)
    with pytest.raises(ParameterError, match="exceeds the number of nodes"):
        partition_snapshot_store(root / "s.zarr", PGCConfig(num_parts=1000))


def test_many_open_parts_raise_the_open_files_limit(graph, tmp_path):
    """Each memory-mapped part array holds a file descriptor: under a soft limit of 1024 a 300-part
    dataset failed at part 169 with a bare "Too many open files". The soft limit is raised to the hard
    one when that happens; where it cannot be, the error names the file and the way out."""
    import subprocess
    import sys

    root, _ = graph
    parts = tmp_path / "parts"
    owner = (np.arange(200) % 40).astype(np.int32)
    from graphstream.partition.plan import PartitionPlan
    build_partitions(root / "g.zarr", PartitionPlan(algorithm="test", num_parts=40, owner=owner, params={"k": 40},
                                                    metrics={}), parts)
    script = (
        "import resource, sys, graphstream\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64 if sys.argv[2] == 'hard' else hard))\n"
        "ds = graphstream.open_partitions(sys.argv[1]); kept = []\n"
        "try:\n"
        "    for p in ds:\n"
        "        kept.append((p.global_ids, p.indptr, p.indices, p.degree))\n"
        "except graphstream.errors.GraphStreamError as exc:\n"
        "    print('error:', exc); sys.exit(2)\n"
        "print('read', len(kept))\n")
    raised = subprocess.run([sys.executable, "-c", script, str(parts), "soft"], capture_output=True, text=True)
    assert raised.returncode == 0 and "read 40" in raised.stdout, raised.stdout + raised.stderr
    capped = subprocess.run([sys.executable, "-c", script, str(parts), "hard"], capture_output=True, text=True)
    assert capped.returncode == 2 and "too many open files (limit 64" in capped.stdout, capped.stdout + capped.stderr


def test_bad_arguments_are_parameter_errors(graph, tmp_path):
    """Each raised a built-in exception (TypeError, FileExistsError, FileNotFoundError) or was taken as it
    was (time_column=2.0 as column 2, prefetch=-1)."""
    from graphstream.ingest import ingest

    root, plan = graph
    edges = tmp_path / "e.txt"
    edges.write_text("0 1 5\n1 2 6\n")
    (tmp_path / "afile").write_text("")
    store = open_store(root / "g.zarr")
    calls = {
        "num_nodes='10'": lambda: ingest(edges, tmp_path / "a.zarr", num_nodes="10"),
        "time_column=2.0": lambda: ingest(edges, tmp_path / "b.zarr", time_column=2.0),
        "start=10.5": lambda: next(iter(store.stream(start=10.5))),
        "prefetch=-1": lambda: next(iter(store.stream(prefetch=-1))),
        "work_dir=a file": lambda: partition(root / "g.zarr", 2, "hdrf", work_dir=tmp_path / "afile"),
    }
    for case, call in calls.items():
        with pytest.raises(ParameterError):
            call()
        assert not (tmp_path / "a.zarr").exists() and not (tmp_path / "b.zarr").exists(), case
    # a work folder that does not exist yet is made, as partition() makes its own
    build_partitions(root / "g.zarr", plan, tmp_path / "parts", work_dir=tmp_path / "new" / "work")
    assert (tmp_path / "new" / "work").is_dir()


def test_handles_outlive_the_callers_working_folder(graph, tmp_path, monkeypatch):
    """A store and a dataset opened by a relative path, then os.chdir (a notebook's): the store's reads
    failed as "replaced while it was being read", the part's files as "missing"."""
    from graphstream import open_partitions

    root, _ = graph
    monkeypatch.chdir(root)
    store, dataset = open_store("g.zarr"), open_partitions("parts")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert sum(len(batch) for batch in store.stream()) == store.num_edges
    assert dataset[0].indices.shape[0] == dataset.info.parts[0].num_edges
    assert partition(store, 2, "hash").num_parts == 2


def test_writer_arguments_are_checked_at_the_call(tmp_path):
    """close(attrs={"num_nodes": 1}) sealed a store whose ids reach 5 as complete; GraphWriter(None) wrote a
    store named 'None'; clevel=10 failed in blosc at close; close(num_nodes=2.5) recorded 2."""
    writer = GraphWriter(tmp_path / "g.zarr", chunk_size=4, attrs={"directed": False, "mine": 1})
    writer.append(np.array([0, 5]), np.array([1, 2]))
    store = writer.close(attrs={"num_nodes": 1, "chunk_size": 7, "num_edges": 9})   # the format's: the writer's
    assert (store.num_nodes, store.num_edges, store.chunk_size, store.directed) == (6, 2, 4, True)
    assert store.attrs["mine"] == 1
    calls = {
        "attrs not JSON": lambda w: w.close(attrs={"x": object()}),
        "close num_nodes 2.5": lambda w: w.close(num_nodes=2.5),
        "close num_nodes -1": lambda w: w.close(num_nodes=-1),
    }
    for case, call in calls.items():
        writer = GraphWriter(tmp_path / "h.zarr")
        writer.append(np.array([0, 5]), np.array([1, 2]))
        with pytest.raises(ParameterError):
            call(writer)
        writer.abort()
        assert not (tmp_path / "h.zarr").exists(), case
    for case, make in {"path None": lambda: GraphWriter(None), "path 123": lambda: GraphWriter(123),
                       "clevel 10": lambda: GraphWriter(tmp_path / "c.zarr", clevel=10),
                       "attrs str": lambda: GraphWriter(tmp_path / "c.zarr", attrs="x")}.items():
        with pytest.raises(ParameterError):
            make()
        assert not (tmp_path / "c.zarr").exists() and not (tmp_path / "None").exists(), case


def test_wrong_types_name_the_argument(graph, tmp_path):
    """Each was a TypeError or AttributeError from deep inside, or a wrong result (columns="src" read as
    the columns 's', 'r', 'c'; metrics="no" ran the metrics; snapshot(2.5) was snapshot 2)."""
    from graphstream import open_partitions, open_snapshots

    root, plan = graph
    store, dataset = open_store(root / "g.zarr"), open_partitions(root / "parts")
    refused = {
        "columns 'src'": lambda: next(iter(store.stream(columns="src"))),
        "columns twice": lambda: next(iter(store.stream(columns=("src", "src")))),
        "no columns": lambda: next(iter(store.stream(columns=()))),
        "k None": lambda: partition(store, None, "hash"),
        "metrics 'no'": lambda: partition(store, 2, "hash", metrics="no"),
        "config 'x'": lambda: build_partitions(store, plan, tmp_path / "p", config="x"),
        "out_dir None": lambda: build_partitions(store, plan, None),
        "open_partitions None": lambda: open_partitions(None),
    }
    for case, call in refused.items():
        with pytest.raises(ParameterError):
            call()
        assert not (tmp_path / "p").exists(), case
    for case, call in {"part '0'": lambda: dataset["0"], "parts [0:2]": lambda: dataset[0:2],
                       "snapshot 2.5": lambda: open_snapshots(root / "s.zarr").snapshot(2.5)}.items():
        with pytest.raises(TypeError):
            call()
    # an opened dataset is taken where its folder is
    assert export(dataset, tmp_path / "pyg", "pyg").num_parts == len(dataset)


def test_the_errors_are_importable_from_the_package():
    import graphstream
    from graphstream import errors

    for name in ("OutputLockedError", "ParameterError", "StoreError", "PartitionsError", "ClusterError",
                 "InvalidIdError", "OutputExistsError", "CorruptDataError"):
        cls = getattr(graphstream, name)
        assert cls is getattr(errors, name) and issubclass(cls, graphstream.GraphStreamError), name
    from graphstream.cluster import ClusterError
    from graphstream.store import PartitionsError
    assert ClusterError is graphstream.ClusterError and PartitionsError is graphstream.PartitionsError


def test_a_path_through_a_symbolic_link_and_up_means_what_it_means_to_the_kernel(graph, tmp_path, monkeypatch):
    """`lnk/../st.zarr`, lnk a link to real/sub: the absolute paths made of it dropped `lnk/..` as text,
    so the store was "missing" and an output was written one folder off."""
    import shutil

    root, _ = graph
    (tmp_path / "real" / "sub").mkdir(parents=True)
    shutil.copytree(root / "g.zarr", tmp_path / "real" / "st.zarr")
    (tmp_path / "lnk").symlink_to("real/sub")
    monkeypatch.chdir(tmp_path)
    assert open_store("lnk/../st.zarr").num_edges == open_store(root / "g.zarr").num_edges
    with GraphWriter("lnk/../out.zarr") as w:
        w.append(np.array([0]), np.array([1]))
    assert (tmp_path / "real" / "out.zarr").is_dir() and not (tmp_path / "out.zarr").exists()


def test_a_local_file_url_is_a_local_path(tmp_path):
    """GraphWriter("file:///...") wrote through fsspec in place (no atomic swap) and a missing parent folder
    was a raw FileNotFoundError; any other URL that cannot be created, a raw fsspec error."""
    from graphstream.errors import StoreError

    url = f"file://{tmp_path}/g.zarr"
    with GraphWriter(url, num_nodes=3) as w:
        w.append(np.array([0, 1]), np.array([1, 2]))
    assert open_store(url).path == str(tmp_path / "g.zarr")
    assert open_store(tmp_path / "g.zarr").num_edges == 2
    with pytest.raises(StoreError, match="parent folder .* does not exist"):
        GraphWriter(f"file://{tmp_path}/missing/g.zarr", num_nodes=3)
    with pytest.raises(ParameterError, match="not a local file URL"):
        GraphWriter("file://g.zarr", num_nodes=3)
    with pytest.raises(StoreError, match="nosuch://a/g.zarr: cannot create the store there"):
        GraphWriter("nosuch://a/g.zarr", num_nodes=3)


@pytest.mark.parametrize("name", [".", "./", ".."])
def test_the_api_refuses_an_output_named_by_the_current_folder(tmp_path, monkeypatch, name):
    """Absolute paths made of "." read as the folder itself (Path("/w/.") is "/w"): GraphWriter(".",
    overwrite=True) in an empty folder took the working folder for its output, to be replaced whole."""
    work = tmp_path / "w"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(ParameterError, match="an output is named by a new folder"):
        GraphWriter(name, num_nodes=2, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"] and not list(work.iterdir())


def test_snapshot_outputs_take_names_and_file_urls_as_the_other_writers(tmp_path, monkeypatch):
    """SnapshotWriter("nx/.") wrote a store named nx; build_snapshots("file:///...") said "folder file:/...
    does not exist"; a URL whose protocol's package is missing (s3fs) was an ImportError traceback."""
    from graphstream.errors import StoreError
    from graphstream.store.snapshots import SnapshotWriter

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ParameterError, match="an output is named by a new folder"):
        SnapshotWriter("nx/.", num_nodes=4)
    assert not (tmp_path / "nx").exists()
    with GraphWriter(tmp_path / "t.zarr", num_nodes=4, with_time=True) as w:
        w.append(np.array([0, 1, 2]), np.array([1, 2, 3]), time=np.array([0, 5, 9]))
    build_snapshots(f"file://{tmp_path}/t.zarr", f"file://{tmp_path}/s.zarr", num_snapshots=2)
    assert (tmp_path / "s.zarr" / "zarr.json").is_file()
    monkeypatch.setattr("zarr.open_group", lambda *a, **k: (_ for _ in ()).throw(ImportError("Install s3fs")))
    with pytest.raises(StoreError, match="s3://bucket/g.zarr: cannot create the store there .*Install s3fs"):
        GraphWriter("s3://bucket/g.zarr", num_nodes=3)
