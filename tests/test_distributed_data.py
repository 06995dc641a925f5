"""The data-parallel stages on a real dask cluster (generate, ingest, degrees/info, snapshots, PGC):
each one's output against the in-process run, file by file (specs/distributed.md: bit-identical)."""
from __future__ import annotations

import filecmp
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphstream.cluster import ClusterConfig, open_client
from graphstream.errors import GraphStreamError
from graphstream.ingest import IngestConfig, ingest
from graphstream.ingest.rmat import generate_rmat
from graphstream.store import degree_pass, open_store
from graphstream.store.verify import verify

# Small read blocks: byte-range pieces are at least one block (and the sniffed head), so files of a
# few hundred KB are cut into several pieces; small chunks give the write tasks several chunks each.
SMALL = {"block_bytes": 1 << 16, "rows_per_block": 1 << 13, "chunk_size": 7000}


def assert_same_files(a: Path, b: Path) -> None:
    """Every file (chunks, zarr.json of the group and arrays) byte for byte."""
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    assert files_a, f"{a} holds no files"
    differ = [str(f) for f in files_a if not filecmp.cmp(a / f, b / f, shallow=False)]
    assert not differ, f"files differ: {differ}"


def no_leftovers(folder: Path) -> list[str]:
    """Hidden siblings (temporary stores, shard folders) left in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.fixture(scope="module")
def edges() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    n = 30_000
    return (rng.integers(0, 3000, n), rng.integers(0, 3000, n), rng.integers(0, 10**6, n),
            np.round(rng.random(n), 3))


def _write_text(path: Path, src, dst, *, header: str = "# a comment\nsrc dst\n", sep: str = " ", extra=()) -> Path:
    rows = zip(src, dst, *extra, strict=True)
    path.write_text(header + "".join(sep.join(map(str, r)) + "\n" for r in rows))
    return path


# -- generate ---------------------------------------------------------------------------------------

def test_generate_is_the_same_store_for_any_worker_count(dask_client, tmp_path):
    args = {"scale": 12, "edge_factor": 8, "seed": 3, "chunk_size": 3000}
    generate_rmat(tmp_path / "local.zarr", **args)
    generate_rmat(tmp_path / "two.zarr", **args, client=dask_client)
    with open_client(ClusterConfig(workers=1)) as one:
        generate_rmat(tmp_path / "one.zarr", **args, client=one)
    assert_same_files(tmp_path / "local.zarr", tmp_path / "two.zarr")
    assert_same_files(tmp_path / "local.zarr", tmp_path / "one.zarr")
    assert verify(tmp_path / "two.zarr").to_dict()["ok"]
    assert no_leftovers(tmp_path) == []


# -- ingest -----------------------------------------------------------------------------------------

def _inputs(kind: str, folder: Path, edges) -> tuple[list[Path], dict]:
    """Input files of one kind and the ingest options they need."""
    src, dst, time, weight = edges
    if kind == "text":
        return [_write_text(folder / "e.txt", src, dst)], {}
    if kind == "csv-time-weight":
        return [_write_text(folder / "e.csv", src, dst, header="src,dst,time,weight\n", sep=",",
                            extra=(time, weight))], {"time_column": "time", "weight_column": "weight"}
    if kind == "gzip":
        path = _write_text(folder / "e.txt", src, dst)
        gz = folder / "e.txt.gz"
        gz.write_bytes(gzip.compress(path.read_bytes()))
        return [gz], {}
    if kind == "npy":
        np.save(folder / "e.npy", np.stack([src, dst], axis=1))
        return [folder / "e.npy"], {}
    if kind == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.table({"s": src, "d": dst}), folder / "e.parquet", row_group_size=4000)
        return [folder / "e.parquet"], {}
    if kind == "multi-file":
        half = len(src) // 2
        return [_write_text(folder / "a.txt", src[:half], dst[:half]),
                _write_text(folder / "b.txt", src[half:], dst[half:], header="")], {}
    if kind == "text-wide-ids":   # ids past 16 bits (up to 2,999,999): the shards narrow them to int32 only
        return [_write_text(folder / "e.txt", src * 1000, dst * 1000 + 999)], {}
    if kind == "text-64-bit-ids":   # one id past 2**31 mid-file: its piece's blocks before it were narrowed
        big = src.copy()
        big[len(big) // 2] = 2**31 + 5
        return [_write_text(folder / "e.txt", big, dst)], {"num_nodes": 2**31 + 10}
    if kind == "relabel":   # sparse 64-bit and negative ids
        return [_write_text(folder / "e.txt", src * 10**12 - 7, dst * -3)], {"relabel": True}
    if kind == "relabel-strings":
        return [_write_text(folder / "e.txt", [f"u{s}" for s in src], [f"v{d}" for d in dst])], {"relabel": True}
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["text", "text-wide-ids", "text-64-bit-ids", "csv-time-weight", "gzip", "npy", "parquet", "multi-file",
                                  "relabel", "relabel-strings"])
def test_ingest_is_the_same_store_on_a_cluster(dask_client, tmp_path, edges, kind):
    files, options = _inputs(kind, tmp_path, edges)
    source = [str(f) for f in files] if len(files) > 1 else files[0]
    local = ingest(source, tmp_path / "local.zarr", **SMALL, **options)
    ingest(source, tmp_path / "cluster.zarr", **SMALL, **options, client=dask_client)
    assert_same_files(tmp_path / "local.zarr", tmp_path / "cluster.zarr")
    assert local.num_edges == len(edges[0])
    assert verify(tmp_path / "cluster.zarr").to_dict()["ok"]
    assert no_leftovers(tmp_path) == []


# lines the count must read as the parser does: comments ("#", "%"), empty and blank lines, lines led by
# blanks, CRLF ends, a last line without its newline
_AWKWARD = ["# c", "", "  ", "%x", "\t7 8", "  9 10\r", "\r", " # c2", "11 12", "13\t14 ", "\t", " \t15 16"]


def _awkward_text(path: Path, src, dst, *, header: bool = True, last_newline: bool = False) -> Path:
    rng = np.random.default_rng(3)
    lines = ["# an awkward file", "src dst"] if header else []
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        lines.append(f"{s} {d}")
        if rng.random() < 0.05:
            lines.append(_AWKWARD[rng.integers(len(_AWKWARD))])
    path.write_text("\n".join(lines) + ("\n" if last_newline else ""))
    return path


@pytest.mark.parametrize("header", [True, False])
def test_edge_lines_are_counted_as_the_parser_reads_them(tmp_path, edges, header):
    from graphstream.ingest._text_kernels import count_edge_lines, scan_edge_lines
    from graphstream.ingest.blocks import line_cuts
    from graphstream.ingest.pipeline import _plan, blocks
    path = _awkward_text(tmp_path / "e.txt", edges[0][:5000], edges[1][:5000], header=header)
    plan = _plan(str(path), IngestConfig(fmt="snap"))
    data = np.frombuffer(path.read_bytes(), dtype=np.uint8)
    assert plan.layout.header_line == (2 if header else 0)
    whole = count_edge_lines(data, plan.layout.header_line)
    assert whole == sum(len(b.src) for b in blocks(str(path), plan, IngestConfig()))
    assert scan_edge_lines(data, 0, 0, plan.layout.header_line, -1, -1)[0] == whole   # the walk agrees
    cuts = line_cuts(path, 9, min_bytes=1 << 12)
    assert len(cuts) > 3
    per_range = [sum(len(b.src) for b in blocks(str(path), plan, IngestConfig(), piece=(a, b))) for a, b in cuts]
    skips = [plan.layout.header_line if a == 0 else 0 for a, _ in cuts]
    assert [count_edge_lines(data[a:b], k) for (a, b), k in zip(cuts, skips, strict=True)] == per_range
    assert sum(per_range) == whole > 5000   # five of the awkward lines hold a row


@pytest.mark.parametrize(("chunk_size", "last_newline", "files"), [(7000, True, 1), (97, False, 1), (13, True, 1),
                                                                   (4099, False, 2)])
def test_awkward_text_is_the_same_store_in_one_parse(dask_client, tmp_path, monkeypatch, edges, chunk_size,
                                                     last_newline, files):
    """Plain text takes the counted path (count, then one parse that writes whole chunks): chunk bounds
    anywhere in the byte ranges, ranges with no chunk beginning in them, a header in a later file."""
    import graphstream.ingest.distributed as dist
    src, dst = edges[0].copy(), edges[1].copy()
    src[:60] = dst[:60] = 0   # all-zero chunks (13 edges): written as files too, as in-process
    cut = len(src) // files
    paths = [str(_awkward_text(tmp_path / f"e{i}.txt", src[i * cut:(i + 1) * cut], dst[i * cut:(i + 1) * cut],
                               header=i == files - 1, last_newline=last_newline)) for i in range(files)]
    source = paths if files > 1 else paths[0]
    options = {**SMALL, "chunk_size": chunk_size}
    ingest(source, tmp_path / "local.zarr", **options)
    stages = []
    run_tasks = dist.run_tasks
    monkeypatch.setattr(dist, "run_tasks", lambda client, stage, *a, **kw: (stages.append(stage),
                                                                            run_tasks(client, stage, *a, **kw))[1])
    ingest(source, tmp_path / "cluster.zarr", **options, client=dask_client)
    assert stages == ["ingest: count", "ingest: parse"]
    assert_same_files(tmp_path / "local.zarr", tmp_path / "cluster.zarr")
    assert open_store(tmp_path / "cluster.zarr").num_edges > files * cut
    assert no_leftovers(tmp_path) == []


def test_a_range_that_parses_more_edges_than_counted_is_an_error_not_a_shifted_store(tmp_path, edges):
    """The guard against the count's rule and the parser's ever disagreeing: a task stops before it would
    write into the next task's chunks."""
    from graphstream.errors import StoreError
    from graphstream.ingest.distributed import TextRange, _parse_chunks_task
    from graphstream.ingest.pipeline import _plan
    from graphstream.store import GraphWriter
    path = _write_text(tmp_path / "e.txt", edges[0][:100], edges[1][:100], header="")
    config = IngestConfig(fmt="snap", chunk_size=7)
    plan = _plan(str(path), config)
    size = path.stat().st_size
    with GraphWriter(tmp_path / "g.zarr", id_dtype=np.int32, chunk_size=7) as writer:
        writer.preallocate(100)
        staging = Path(writer.staging_path)
        for counted in (60, 63):   # the task owns edges [0, 63), chunks 0..8: a chunk bound or not
            with pytest.raises(StoreError, match="the parse reached edge 100 where the count of edge lines"):
                _parse_chunks_task(0, 63, [(0, TextRange(str(path), 0, size, 0, 0, counted))],
                                   path=writer.staging_path, plans=[plan], config=config, int32_ids=True)
        assert sorted(int(p.name) for p in (staging / "src" / "c").iterdir()) == list(range(9))
        _parse_chunks_task(0, 100, [(0, TextRange(str(path), 0, size, 0, 0, 100))], path=writer.staging_path,
                           plans=[plan], config=config, int32_ids=True)   # counted right: no error
        assert len(list((staging / "src" / "c").iterdir())) == 15
        writer.abort()


def test_an_id_past_int32_without_a_node_count_takes_the_store_again_as_int64(dask_client, tmp_path, monkeypatch,
                                                                                edges):
    import graphstream.ingest.pipeline as pipeline
    # the ids are sparse (2**31 nodes, 30,000 edges): let the store through as a machine with room would
    monkeypatch.setattr(pipeline, "node_state_shortfall", lambda *a: None)
    big = edges[0].copy()
    big[len(big) // 2] = 2**31 + 5
    path = _write_text(tmp_path / "e.txt", big, edges[1])
    local = ingest(path, tmp_path / "local.zarr", **SMALL)
    cluster = ingest(path, tmp_path / "cluster.zarr", **SMALL, client=dask_client)
    assert local.id_dtype == cluster.id_dtype == np.int64
    assert cluster.num_nodes == 2**31 + 6
    assert_same_files(tmp_path / "local.zarr", tmp_path / "cluster.zarr")
    assert no_leftovers(tmp_path) == []


def test_text_is_cut_into_byte_ranges_at_line_ends(tmp_path, edges):
    from graphstream.ingest.blocks import line_cuts
    path = _write_text(tmp_path / "e.txt", edges[0], edges[1])
    cuts = line_cuts(path, 8, min_bytes=1 << 16)
    data = path.read_bytes()
    assert len(cuts) > 2 and cuts[0][0] == 0 and cuts[-1][1] == len(data)
    assert all(b == c for (_, b), (c, _) in zip(cuts, cuts[1:], strict=False))
    assert all(data[a - 1:a] == b"\n" for a, _ in cuts[1:])


def test_a_bad_line_in_a_later_byte_range_is_named_by_its_line(dask_client, tmp_path, edges):
    src, dst = edges[0].tolist(), edges[1].tolist()
    dst[25_000] = -5   # line 25_003 (a comment and a header first): deep in a later piece
    path = _write_text(tmp_path / "bad.txt", src, dst)
    with pytest.raises(GraphStreamError) as local:
        ingest(path, tmp_path / "local.zarr", **SMALL)
    with pytest.raises(GraphStreamError) as cluster:
        ingest(path, tmp_path / "cluster.zarr", **SMALL, client=dask_client)
    assert str(cluster.value) == str(local.value)
    assert f"{path}:25003:" in str(cluster.value)
    assert no_leftovers(tmp_path) == []


# -- degrees, info ----------------------------------------------------------------------------------

# degree vectors returned (small) / two ranges' shards summed here / summed by a wave of node-range tasks
# (more ranges than CLIENT_SUM_MAX_RANGES) / one range's shard read as the sums (one worker)
@pytest.mark.parametrize(("scale", "workers", "sum_wave"), [(10, 2, False), (17, 2, False), (17, 2, True),
                                                            (17, 1, False)])
def test_degrees_and_info_equal_the_in_process_pass(dask_client, tmp_path, monkeypatch, scale, workers, sum_wave):
    import graphstream.cluster
    from graphstream.commands.info import store_stats
    from graphstream.store import degrees
    store = generate_rmat(tmp_path / "g.zarr", scale=scale, edge_factor=2, chunk_size=20_000)
    local = degree_pass(store)
    if sum_wave:
        monkeypatch.setattr(degrees, "CLIENT_SUM_MAX_RANGES", 1)
    stages = []
    run_tasks = graphstream.cluster.run_tasks
    monkeypatch.setattr(graphstream.cluster, "run_tasks", lambda c, stage, *a, **kw: stages.append(stage)
                        or run_tasks(c, stage, *a, **kw))
    if workers == 1:
        with open_client(ClusterConfig(workers=1)) as one:
            cluster = degree_pass(store, client=one)
    else:
        cluster = degree_pass(store, client=dask_client)
    assert stages[0] == "degree pass" and stages[1:] == (["degree sums"] if sum_wave else [])
    src, dst = store.array("src")[:], store.array("dst")[:]
    assert np.array_equal(cluster.out_degree, np.bincount(src, minlength=store.num_nodes))
    assert np.array_equal(cluster.in_degree, np.bincount(dst, minlength=store.num_nodes))
    assert np.array_equal(cluster.out_degree, local.out_degree) and np.array_equal(cluster.in_degree, local.in_degree)
    assert cluster.self_loops == local.self_loops == int(np.count_nonzero(src == dst))
    drop = ("seconds", "peak_rss_bytes")
    a = {k: v for k, v in store_stats(str(tmp_path / "g.zarr")).items() if k not in drop}
    b = {k: v for k, v in store_stats(str(tmp_path / "g.zarr"), client=dask_client).items() if k not in drop}
    assert a == b
    assert no_leftovers(tmp_path) == []


# -- snapshots, PGC ---------------------------------------------------------------------------------

def test_snapshots_and_pgc_are_the_same_on_a_cluster(dask_client, tmp_path, edges):
    from graphstream.dynamic.partition import partition_snapshot_store
    from graphstream.dynamic.pgc import PGCConfig
    from graphstream.dynamic.snapshots import build_snapshots
    path = _write_text(tmp_path / "e.csv", edges[0], edges[1], header="src,dst,time\n", sep=",", extra=(edges[2],))
    ingest(path, tmp_path / "events.zarr", time_column=2)
    args = {"num_snapshots": 12, "edge_life": 2, "keyframe_every": 4}
    local = build_snapshots(tmp_path / "events.zarr", tmp_path / "local.zarr", **args)
    cluster = build_snapshots(tmp_path / "events.zarr", tmp_path / "cluster.zarr", **args, client=dask_client)
    assert_same_files(tmp_path / "local.zarr", tmp_path / "cluster.zarr")
    assert cluster.path == str(tmp_path / "cluster.zarr") and cluster.totals == local.totals
    config = PGCConfig(num_parts=3)
    a = partition_snapshot_store(tmp_path / "local.zarr", config, out=tmp_path / "parts-local")
    b = partition_snapshot_store(tmp_path / "local.zarr", config, out=tmp_path / "parts-cluster", client=dask_client)
    timing = ("seconds", "peak_rss_bytes", "phases", "out")
    assert {k: v for k, v in a.items() if k not in timing} == {k: v for k, v in b.items() if k not in timing}
    assert b["out"] == str(tmp_path / "parts-cluster")
    parts = sorted(p.relative_to(tmp_path / "parts-local") for p in (tmp_path / "parts-local").rglob("*") if p.is_file())
    differ = [str(f) for f in parts if not filecmp.cmp(tmp_path / "parts-local" / f, tmp_path / "parts-cluster" / f,
                                                       shallow=False)]
    assert differ == ["manifest.json"]   # its timings (and so its checksum) only:
    ma, mb = (json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("parts-local", "parts-cluster"))
    for m in (ma, mb):
        m.pop("crc32c")
        m["metrics"] = {k: v for k, v in m["metrics"].items() if k not in ("phases", "peak_rss_bytes")
                        and "seconds" not in k}
    assert ma == mb
    assert no_leftovers(tmp_path) == []


# -- the CLI ----------------------------------------------------------------------------------------

def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphstream", *argv], capture_output=True, text=True,
                          env={**__import__("os").environ, "GRAPHSTREAM_PROGRESS": "0"})


def test_cli_generate_and_ingest_on_two_workers(tmp_path, edges):
    run = _cli("generate", "rmat", str(tmp_path / "g.zarr"), "--scale", "10", "--workers", "2", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["cluster"] == {"mode": "local", "workers": 2, "threads_per_worker": 1}
    assert len(result["worker_peak_rss_bytes"]) == 2
    assert open_store(tmp_path / "g.zarr").num_edges == 16 << 10
    # a missing input: exit 2, one line naming it
    run = _cli("ingest", str(tmp_path / "nowhere.txt"), str(tmp_path / "x.zarr"), "--workers", "1")
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == f"graphstream ingest: error: {tmp_path / 'nowhere.txt'}: no such file"
    assert not (tmp_path / "x.zarr").exists()
