"""Integrity (issue 14, item 1): checksums on every chunk and file, `graphstream verify`, and the
corruption sweep: every file of a small graph store, snapshot store and partitioned dataset is
flipped, truncated and deleted in turn; `verify` must refuse every damaged data file, and every
reader must either refuse (a GraphStreamError: exit 2 from the CLI) or return exactly the original
contents (damage to metadata that no reader uses, e.g. an unused fill value, changes nothing)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec

from graphstream import GraphWriter, open_partitions, open_store
from graphstream.assemble import build_partitions
from graphstream.errors import CorruptDataError, GraphStreamError
from graphstream.partition.plan import PartitionPlan
from graphstream.store import PartitionsError, open_snapshots
from graphstream.store.integrity import file_digest, seal
from graphstream.store.verify import verify

DAMAGES = ("flip", "truncate", "delete")


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "flip":
        b = bytearray(data)
        b[len(b) // 2] ^= 0x10
        path.write_bytes(bytes(b))
    elif how == "truncate":
        path.write_bytes(data[:len(data) // 2])
    else:
        path.unlink()


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _is_data(rel: str) -> bool:
    """Files whose bytes are data (chunks, .npy) or checksummed metadata (group attributes, manifest)."""
    name = Path(rel).name
    return name != "zarr.json" or "/" not in rel.replace("\\", "/")


# -- fixtures: one small output of each kind ---------------------------------------------------

def _read_graph(path: Path) -> dict:
    store = open_store(path)
    cols = {c: np.concatenate([getattr(b, c) for b in store.stream(columns=store.columns)])
            for c in store.columns}
    cols["id_map"] = store.id_map()
    return cols


def _read_snapshots(path: Path) -> list:
    store = open_snapshots(path)
    return [store.snapshot(t, with_counts=True) for t in range(len(store))]


def _read_partitions(path: Path) -> list:
    return [{k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in part.to_torch().items()}
            for part in open_partitions(path)]


def _read_dynamic(path: Path) -> list:
    from graphstream.store import open_dynamic_partitions
    parts = open_dynamic_partitions(path)
    return [(part.global_ids, [part.snapshot(t, with_counts=True) for t in range(len(part))],
             [part.owned(t) for t in range(len(part))]) for part in parts]


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return a is not None and b is not None and np.array_equal(a, b)
    return a == b


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("integrity")
    rng = np.random.default_rng(3)
    n, e = 200, 3000
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    time = np.sort(rng.integers(0, 10_000, e))
    with GraphWriter(root / "g.zarr", num_nodes=n, with_time=True, chunk_size=512) as w:
        w.append(src, dst, time)
        w.write_array("id_map", np.arange(n, dtype=np.int64) * 7)
    from graphstream.dynamic import build_snapshots
    build_snapshots(root / "g.zarr", root / "s.zarr", num_snapshots=12, edge_life=3)
    nodes = root / "nodes"
    nodes.mkdir()
    np.save(nodes / "features.npy", rng.standard_normal((n, 8)).astype(np.float32))
    np.save(nodes / "labels.npy", rng.integers(0, 4, n))
    np.save(nodes / "train_mask.npy", rng.random(n) < 0.5)
    owner = rng.integers(0, 3, n).astype(np.int32)
    plan = PartitionPlan(algorithm="test", num_parts=3, owner=owner, params={"k": 3}, metrics={})
    build_partitions(open_store(root / "g.zarr"), plan, root / "parts", nodes=nodes)
    from graphstream.dynamic.config import PGCConfig
    from graphstream.dynamic.partition import partition_snapshot_store
    partition_snapshot_store(root / "s.zarr", PGCConfig(num_parts=2), out=root / "dyn")
    return {"graph": (root / "g.zarr", _read_graph), "snapshots": (root / "s.zarr", _read_snapshots),
            "partitions": (root / "parts", _read_partitions), "dynamic_partitions": (root / "dyn", _read_dynamic)}


def test_clean_outputs_verify(outputs):
    for kind, (path, _) in outputs.items():
        report = verify(path)
        assert report.kind == kind and report.checksums and not report.problems
        assert report.chunks + report.files > 0


@pytest.mark.parametrize("kind", ["graph", "snapshots", "partitions", "dynamic_partitions"])
def test_corruption_sweep(outputs, kind, tmp_path):
    """Every file x (flip, truncate, delete): verify refuses damaged data; readers refuse or are exact."""
    path, read = outputs[kind]
    original = read(path)
    refused_by_verify = silent = 0
    for rel in _files(path):
        for how in DAMAGES:
            copy = tmp_path / f"{kind}-{how}"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(path, copy)
            _damage(copy / rel, how)
            try:
                verify(copy)
            except GraphStreamError:
                refused_by_verify += 1
            else:
                assert not _is_data(rel), f"verify accepted {how} of data file {rel}"
            try:
                got = read(copy)
            except GraphStreamError:
                continue
            # A reader that did not refuse must have returned exactly the original contents.
            assert _same(got, original), f"reader returned wrong data after {how} of {rel}"
            silent += 1
    assert refused_by_verify > 0.9 * 3 * len(_files(path))


def test_damaged_chunk_message_names_array_chunk_and_file(outputs, tmp_path):
    path = tmp_path / "g.zarr"
    shutil.copytree(outputs["graph"][0], path)
    _damage(path / "dst" / "c" / "2", "flip")
    with pytest.raises(CorruptDataError, match=r"array 'dst' chunk 2 \(.*dst/c/2\) is damaged: its CRC-32C"):
        _read_graph(path)
    (path / "dst" / "c" / "2").unlink()
    with pytest.raises(CorruptDataError, match=r"array 'dst' chunk 2 .* the chunk file is missing"):
        _read_graph(path)


def test_damaged_part_file_message(outputs, tmp_path):
    path = tmp_path / "parts"
    shutil.copytree(outputs["partitions"][0], path)
    _damage(path / "part-00001" / "indices.npy", "flip")
    with pytest.raises(CorruptDataError, match=r"part 1 \(part-00001\): indices.npy fails its checksum"):
        _ = open_partitions(path)[1].indices
    shutil.copy(outputs["partitions"][0] / "part-00001" / "indices.npy", path / "part-00001" / "indices.npy")
    np.save(path / "part-00002" / "degree.npy", np.zeros(3, np.int64))   # replaced by one of another length
    with pytest.raises(GraphStreamError, match=r"part 2 .*degree.npy"):
        open_partitions(path)


def test_manifest_records_every_file(outputs):
    path = outputs["partitions"][0]
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["version"] == 2
    for entry in manifest["parts"]:
        part = path / entry["path"]
        assert sorted(entry["files"]) == sorted(p.name for p in part.glob("*.npy"))
        for name, digest in entry["files"].items():
            assert file_digest(part / name).to_json() == digest


def test_edited_manifest_is_caught_by_its_checksum(outputs, tmp_path):
    path = tmp_path / "parts"
    shutil.copytree(outputs["partitions"][0], path)
    doc = json.loads((path / "manifest.json").read_text())
    doc["algorithm"] = "hdrg"   # a change no structural check can see
    (path / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(CorruptDataError, match="fails its checksum"):
        open_partitions(path)
    (path / "manifest.json").write_text(json.dumps(seal(doc)))
    assert open_partitions(path).info.algorithm == "hdrg"


def test_verify_content_checks_behind_checksums(outputs, tmp_path):
    """Damage written consistently (re-checksummed) is still found by the content checks."""
    from graphstream.store.integrity import file_digest as digest
    path = tmp_path / "parts"
    shutil.copytree(outputs["partitions"][0], path)
    indptr = np.load(path / "part-00000" / "indptr.npy")
    indptr[1], indptr[2] = indptr[2] + 1, indptr[1]
    np.save(path / "part-00000" / "indptr.npy", indptr)
    doc = json.loads((path / "manifest.json").read_text())
    doc["parts"][0]["files"]["indptr.npy"] = digest(path / "part-00000" / "indptr.npy").to_json()
    (path / "manifest.json").write_text(json.dumps(seal(doc)))
    with pytest.raises(CorruptDataError, match="indptr decreases"):
        verify(path)
    with pytest.raises(GraphStreamError, match="indptr.npy is not a CSR row index"):   # readers too
        open_partitions(path)[0].to_torch()


def test_store_column_of_the_wrong_dtype_refused_at_open(tmp_path):
    path = tmp_path / "g.zarr"
    with GraphWriter(path, num_nodes=10, with_weight=True) as w:
        w.append(np.arange(5), np.arange(5), weight=np.ones(5, np.float32))
    group = zarr.open_group(path, mode="r+")
    del group["weight"]
    group.create_array("weight", shape=(5,), dtype=np.float64)[...] = np.ones(5)
    with pytest.raises(GraphStreamError, match="column 'weight' has dtype float64, the format says float32"):
        open_store(path)


# -- stores written before checksums (format version 1) stay readable -------------------------

def _v1_store(path: Path, src, dst, n: int) -> None:
    group = zarr.open_group(path, mode="w-")
    group.attrs.update({"format": "graphstream.graph", "version": 1, "complete": False})
    for name, values in (("src", src), ("dst", dst)):
        arr = group.create_array(name, shape=values.shape, chunks=(64,), dtype=np.int32,
                                 compressors=BloscCodec(cname="zstd", clevel=3, shuffle="shuffle"))
        arr[...] = values
    group.attrs.update({"num_nodes": n, "num_edges": len(src), "directed": True, "id_dtype": "int32",
                        "source": "v1", "complete": True})


def test_version1_store_readable_and_says_unchecked(tmp_path):
    src, dst = np.arange(100, dtype=np.int32) % 10, (np.arange(100, dtype=np.int32) * 3) % 10
    _v1_store(tmp_path / "old.zarr", src, dst, 10)
    store = open_store(tmp_path / "old.zarr")
    assert not store.checksums and not store.info.checksums
    np.testing.assert_array_equal(_read_graph(tmp_path / "old.zarr")["dst"], dst)
    report = verify(tmp_path / "old.zarr").to_dict()
    assert report["ok"] and report["version"] == 1 and not report["checksums"] and "note" in report


@pytest.mark.parametrize("damaged", ["degree.npy", "global_ids.npy"])
def test_verify_names_the_damaged_file_only(outputs, tmp_path, damaged):
    """A flipped byte in a part's degree.npy was reported, and then its nodes as "owned by no part" too:
    the part's ownership is read from its global_ids.npy, checked on its own (and not judged when that
    file is the damaged one)."""
    path = tmp_path / "parts"
    shutil.copytree(outputs["partitions"][0], path)
    _damage(path / "part-00001" / damaged, "flip")
    with pytest.raises(CorruptDataError) as caught:
        verify(path)
    problems = caught.value.report.problems
    assert len(problems) == 1 and damaged in problems[0] and "part 1" in problems[0], problems


@pytest.mark.parametrize("edit, named", [
    ("node_counts", "active nodes, node_counts says"),
    ("kf_count", "its keyframe differs from the snapshot its deltas rebuild"),
])
def test_verify_checks_a_snapshot_store_against_itself(outputs, tmp_path, edit, named):
    """Values rewritten through zarr (their chunks' checksums valid) that contradict the rest of the
    store passed verify: a node count, and a keyframe (12 snapshots, keyframe every 8: snapshot 8's)
    that is not what the deltas before it rebuild."""
    path = tmp_path / "s.zarr"
    shutil.copytree(outputs["snapshots"][0], path)
    group = zarr.open_group(str(path), mode="r+")
    if edit == "node_counts":
        group["node_counts"][5] = int(group["node_counts"][5]) + 7
    else:   # the first count of keyframe 1 (snapshot 8)
        first = int(group["kf_offsets"][1])
        group["kf_count"][first] = int(group["kf_count"][first]) + 1
    with pytest.raises(CorruptDataError, match=named):
        verify(path)


def test_info_refuses_a_snapshot_store_without_one_of_its_arrays(outputs, tmp_path):
    """A deleted array (chg_count) was found only by the reader that reached for it: info exited 0."""
    path = tmp_path / "s.zarr"
    shutil.copytree(outputs["snapshots"][0], path)
    shutil.rmtree(path / "chg_count")
    proc = _cli("info", path)
    assert proc.returncode == 2 and "lacks the array(s) ['chg_count']" in proc.stderr, proc.stderr


@pytest.mark.parametrize("kind", ["graph", "snapshots", "partitions", "dynamic_partitions"])
def test_a_version_edited_down_does_not_turn_the_seal_off(outputs, kind, tmp_path):
    """Metadata sealed by its CRC-32C, its version edited to 1 (which wrote no seal) and a figure edited
    beside it, the seal left in place: refused as edited, as it is without the version's edit."""
    path = tmp_path / kind
    shutil.copytree(outputs[kind][0], path)
    meta = path / ("zarr.json" if kind in ("graph", "snapshots") else "manifest.json")
    doc = json.loads(meta.read_text())
    attrs = doc["attributes"] if kind in ("graph", "snapshots") else doc
    assert "crc32c" in attrs
    attrs["version"] = 1
    attrs["num_nodes"] += 1
    meta.write_text(json.dumps(doc))
    with pytest.raises(CorruptDataError, match="fails its checksum"):
        verify(path)


def test_version1_partitions_readable(outputs, tmp_path):
    path = tmp_path / "parts"
    shutil.copytree(outputs["partitions"][0], path)
    _as_version1(path)
    dataset = open_partitions(path)
    assert not dataset.info.checksums
    assert _same(_read_partitions(path), _read_partitions(outputs["partitions"][0]))


def _as_version1(path: Path) -> None:
    doc = json.loads((path / "manifest.json").read_text())
    doc.pop("crc32c")
    doc["version"] = 1
    for entry in doc["parts"]:
        entry.pop("files")
    (path / "manifest.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("change, named", [
    (lambda a: a[:, :3].copy(), "rows of shape (3,)"),                 # fewer feature columns than part 0
    (lambda a: a.astype(np.float64), "features must be float32 or float16"),
    (lambda a: a.astype("U8"), "features must be float32 or float16, got <U8"),
])
def test_version1_node_data_unlike_part_0_refused(outputs, tmp_path, change, named):
    """A version 1 dataset (no checksums) whose part 1 holds features of another width or dtype was
    exported as it was (PyG parts of 3 and 8 columns), or crashed the export with a traceback; verify
    passed it. open_partitions now holds every part's node data to the folder's rules and to part 0's."""
    path = tmp_path / "parts"
    shutil.copytree(outputs["partitions"][0], path)
    _as_version1(path)
    file = path / "part-00001" / "features.npy"
    np.save(file, change(np.load(file)))
    with pytest.raises(PartitionsError, match=re.escape(named)):
        open_partitions(path)
    for proc in (_cli("verify", path), _cli("export", path, "--to", "pyg", tmp_path / "pyg")):
        assert proc.returncode == 2 and "part 1" in proc.stderr and "features" in proc.stderr, proc.stderr
    assert not (tmp_path / "pyg").exists()


def test_version1_float_labels_refused(outputs, tmp_path):
    """Float labels were cast to int64 by the export (3.7 -> 3) with exit 0."""
    path = tmp_path / "parts"
    shutil.copytree(outputs["partitions"][0], path)
    _as_version1(path)
    for part in sorted(path.glob("part-*")):
        np.save(part / "labels.npy", np.load(part / "labels.npy").astype(np.float32) + 0.7)
    with pytest.raises(PartitionsError, match="labels must be integers"):
        open_partitions(path)


# -- the CLI: exit 2 with one line naming the damage -------------------------------------------

def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphstream", *map(str, args)], capture_output=True, text=True)


def test_cli_commands_refuse_damage(outputs, tmp_path):
    store = tmp_path / "g.zarr"
    shutil.copytree(outputs["graph"][0], store)
    _damage(store / "src" / "c" / "3", "flip")
    parts = tmp_path / "parts"
    shutil.copytree(outputs["partitions"][0], parts)
    _damage(parts / "part-00000" / "features.npy", "flip")
    runs = {
        "verify store": _cli("verify", store, "--json"),
        "info": _cli("info", store),
        "partition --out": _cli("partition", store, "-k", "2", "--out", tmp_path / "out"),
        "verify dataset": _cli("verify", parts),
        "export pyg": _cli("export", parts, "--to", "pyg", tmp_path / "pyg"),
        "train": _cli("train", parts, "--epochs", "1"),
    }
    for what, proc in runs.items():
        assert proc.returncode == 2, (what, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, (what, proc.stderr)
        assert "chunk 3" in lines[0] or "features.npy" in lines[0], (what, lines[0])
    assert not (tmp_path / "out").exists() and not (tmp_path / "pyg").exists()
    ok = _cli("verify", outputs["snapshots"][0], "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["ok"] is True


@pytest.mark.parametrize("bad_path", ["/etc", "../outside"])
def test_part_paths_outside_the_dataset_refused_by_every_reader(outputs, tmp_path, bad_path):
    """Item 5: a manifest (even one whose checksum was recomputed) cannot send a reader outside DIR."""
    parts = tmp_path / "parts"
    shutil.copytree(outputs["partitions"][0], parts)
    shutil.copytree(parts / "part-00001", tmp_path / "outside")   # something readable out there
    doc = json.loads((parts / "manifest.json").read_text())
    doc["parts"][1]["path"] = bad_path
    (parts / "manifest.json").write_text(json.dumps(seal(doc)))
    for args in (("verify", parts), ("export", parts, "--to", "pyg", tmp_path / "pyg"),
                 ("train", parts, "--epochs", "1")):
        proc = _cli(*args)
        assert proc.returncode == 2 and "must be relative and inside the dataset folder" in proc.stderr, \
            (args, proc.stderr)


@pytest.mark.parametrize("kind, array", [("graph", "dst"), ("graph", "time"), ("snapshots", "add_src")])
def test_an_array_without_its_checksum_codec_is_refused(outputs, kind, array, tmp_path):
    """The crc32c step deleted from one array's zarr.json (which no seal covers) turned that array's checks
    off: a flipped byte in its chunks was then read as data by verify and partition, exit 0."""
    path = tmp_path / kind
    shutil.copytree(outputs[kind][0], path)
    meta = path / array / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["codecs"] = [c for c in doc["codecs"] if c["name"] != "crc32c"]
    meta.write_text(json.dumps(doc))
    proc = _cli("verify", path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"array {array!r} has no CRC-32C checksum codec in its zarr.json" in proc.stderr, proc.stderr


@pytest.mark.parametrize("kind, array", [("graph", "time"), ("snapshots", "add_src")])
def test_an_array_declared_big_endian_is_refused(outputs, kind, array, tmp_path):
    """"little" edited to "big" in one array's zarr.json (no seal covers it): every value read byte-swapped,
    and verify said ok, info exit 0."""
    path = tmp_path / kind
    shutil.copytree(outputs[kind][0], path)
    meta = path / array / "zarr.json"
    meta.write_text(meta.read_text().replace('"little"', '"big"'))
    for command in ("verify", "info"):
        proc = _cli(command, path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"array {array!r} metadata (zarr.json) is damaged: its bytes are declared big-endian" in proc.stderr


def test_an_array_without_its_zarr_json_is_one_line(outputs, tmp_path):
    """zarr's ZarrUserWarning ("Object at dst is not recognized ...") and its source line came before the
    one-line error."""
    path = tmp_path / "g.zarr"
    shutil.copytree(outputs["graph"][0], path)
    (path / "dst" / "zarr.json").unlink()
    for command in ("verify", "info"):
        proc = _cli(command, path)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "missing ['dst']" in proc.stderr


def test_verify_names_every_problem_and_prints_its_report(outputs, tmp_path):
    """The line named the first 4 problems ("and N more" hid the rest) and --json printed nothing."""
    path = tmp_path / "g.zarr"
    shutil.copytree(outputs["graph"][0], path)
    chunks = sorted((path / "src" / "c").iterdir(), key=lambda p: int(p.name))
    assert len(chunks) >= 6
    for chunk in chunks[:6]:
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 1
        chunk.write_bytes(bytes(data))
    proc = _cli("verify", path, "--json")
    assert proc.returncode == 2
    report = json.loads(proc.stdout)
    assert report["ok"] is False and len(report["problems"]) == 6
    for chunk in chunks[:6]:
        assert f"src/c/{chunk.name})" in proc.stderr
    # the damaged chunks were read and checked too (only the intact ones were counted: 0 of a damaged store)
    clean = json.loads(_cli("verify", outputs["graph"][0], "--json").stdout)
    assert report["chunks_checked"] == clean["chunks_checked"] and report["bytes_checked"] < clean["bytes_checked"]


def test_verify_counts_a_dynamic_partition_s_snapshots_once(outputs):
    """Its "snapshots" was the parts' sum (4 parts x 10 snapshots: 40), a snapshot store's the count."""
    dynamic = json.loads(_cli("verify", outputs["dynamic_partitions"][0], "--json").stdout)
    store = json.loads(_cli("verify", outputs["snapshots"][0], "--json").stdout)
    assert dynamic["snapshots"] == store["snapshots"] == 12 and dynamic["parts"] == 2


def test_an_unreadable_chunk_is_not_called_damaged(outputs, monkeypatch):
    """A chunk file without read permission was "damaged: PermissionError ...": an operator could delete
    good data as corrupt. It is the permission error, naming the file (the CLI: exit 2, one line)."""
    checked = open_store(outputs["graph"][0]).array("src")

    class Denied:
        metadata = checked._array.metadata

        def __getitem__(self, key):
            raise PermissionError(13, "Permission denied", checked.chunk_file(0))
    monkeypatch.setattr(checked, "_array", Denied())
    with pytest.raises(PermissionError, match="Permission denied"):
        checked[0:10]


def _swap(a: Path, b: Path) -> None:
    data = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(data)


@pytest.mark.parametrize("kind, how", [
    ("graph", "swap"),           # two chunks of src change places
    ("graph", "other array"),    # dst's chunk 0 replaced by src's chunk 0
    ("graph", "id_map"),         # id_map's chunk from another store of the same shape
    ("snapshots", "other array"),   # kf_dst's chunk replaced by kf_src's
])
def test_an_intact_chunk_in_the_wrong_place_is_found_by_verify(outputs, kind, how, tmp_path):
    """Each chunk's own CRC-32C says its bytes are intact, not that it is the chunk written there: two
    swapped chunks, or one copied from another array or store, passed verify (exit 0, a wrong graph)."""
    path = tmp_path / kind
    shutil.copytree(outputs[kind][0], path)
    if how == "swap":
        array = "src"
        chunks = sorted((path / array / "c").iterdir(), key=lambda p: int(p.name))
        assert len(chunks) >= 3
        _swap(chunks[1], chunks[2])
    elif how == "other array":
        array = "dst" if kind == "graph" else "kf_dst"
        shutil.copyfile(path / array.replace("dst", "src") / "c" / "0", path / array / "c" / "0")
    else:
        array = "id_map"
        other = tmp_path / "other.zarr"
        with GraphWriter(other, num_nodes=200, chunk_size=512) as w:
            w.append(np.arange(10), np.arange(10))
            w.write_array("id_map", np.arange(200, dtype=np.int64) * 9)
        shutil.copyfile(other / "id_map" / "c" / "0", path / "id_map" / "c" / "0")
    with pytest.raises(CorruptDataError, match=f"array {array!r} holds chunk files that are each intact but "
                                               "not the ones written there") as info:
        verify(path)
    assert info.value.json_result["chunk_order_checked"] is True
    problems = info.value.json_result["problems"]
    assert sum("not the ones written there" in p for p in problems) == 1, problems
    proc = _cli("verify", path)
    assert proc.returncode == 2 and "not the ones written there" in proc.stderr, proc.stderr


def test_every_array_records_its_chunks_digest(outputs):
    """What the writers record: one digest a local array, of both store kinds, checked by a clean verify."""
    for kind in ("graph", "snapshots"):
        group = zarr.open_group(str(outputs[kind][0]), mode="r")
        assert sorted(group.attrs["chunks_crc32c"]) == sorted(group.array_keys())
        assert verify(outputs[kind][0]).chunk_order


def test_a_store_written_before_the_chunks_digest_still_verifies(outputs, tmp_path):
    """A store of the same version without the attribute (written before it was recorded): verified as
    before, saying the order was not checked."""
    path = tmp_path / "g.zarr"
    shutil.copytree(outputs["graph"][0], path)
    meta = path / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"].pop("chunks_crc32c")
    doc["attributes"] = seal(doc["attributes"])
    meta.write_text(json.dumps(doc))
    report = verify(path)
    assert not report.problems and report.to_dict()["chunk_order_checked"] is False


def test_a_deleted_chunks_digest_is_caught_by_the_seal(outputs, tmp_path):
    path = tmp_path / "g.zarr"
    shutil.copytree(outputs["graph"][0], path)
    meta = path / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"].pop("chunks_crc32c")
    meta.write_text(json.dumps(doc))
    with pytest.raises(CorruptDataError, match="fails its checksum"):
        verify(path)


def test_a_derived_store_records_its_own_digest(tmp_path):
    """Attributes copied from another store (its digest among them) are replaced by the new store's own."""
    first = tmp_path / "a.zarr"
    with GraphWriter(first, num_nodes=50, chunk_size=16) as w:
        w.append(np.arange(40) % 50, np.arange(40)[::-1] % 50)
    copied = open_store(first).attrs
    assert "chunks_crc32c" in copied
    second = tmp_path / "b.zarr"
    with GraphWriter(second, num_nodes=50, chunk_size=16, attrs={"chunks_crc32c": copied["chunks_crc32c"]}) as w:
        w.append(np.arange(40) % 7, np.arange(40) % 11)
    assert verify(second).chunk_order


def test_a_part_folder_in_another_part_s_place_is_refused(outputs, tmp_path):
    """Dynamic partitions: part 0's folder copied over part 1's (or the two swapped) passed verify, each
    part store intact on its own (exit 0, a part's data gone)."""
    path = tmp_path / "dyn"
    shutil.copytree(outputs["dynamic_partitions"][0], path)
    shutil.rmtree(path / "part-00001")
    shutil.copytree(path / "part-00000", path / "part-00001")
    proc = _cli("verify", path)
    assert proc.returncode == 2 and "holds part 0 of 2" in proc.stderr and "part 1 of 2" in proc.stderr, proc.stderr


def test_a_delta_that_does_not_fit_is_refused_before_any_write():
    """Removed positions out of order (a store edited or damaged under valid checksums): the delta
    kernel, which has no bounds checks, wrote 999 entries into an output of 500 (a heap corruption: a
    crash later, or silently wrong memory). Run in a child, where a corrupted heap cannot take the
    test runner down."""
    script = ("import numpy as np\n"
              "from graphstream.store.delta import apply_delta\n"
              "from graphstream.errors import CorruptDataError\n"
              "prev = np.arange(1000, dtype=np.int64)\n"
              "removed = np.concatenate([[999], np.arange(499)]).astype(np.int64)\n"
              "try:\n"
              "    apply_delta(prev, np.ones(1000, dtype=np.int64), removed, np.empty(0, np.int64), np.empty(0, np.int64))\n"
              "except CorruptDataError as exc:\n"
              "    print('refused:', exc)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "refused: a delta does not match" in proc.stdout, proc.stdout + proc.stderr


def test_a_chunk_of_removed_positions_from_another_part_is_no_crash(outputs, tmp_path):
    """A ``rem_pos`` chunk copied from another part (intact, in range, not this part's): verify died in
    the delta kernel, which wrote past its output ("free(): invalid next size", exit 134)."""
    path = tmp_path / "dyn"
    shutil.copytree(outputs["dynamic_partitions"][0], path)
    src, dst = path / "part-00001" / "rem_pos" / "c" / "0", path / "part-00000" / "rem_pos" / "c" / "0"
    if src.read_bytes() == dst.read_bytes():
        pytest.skip("the two parts' rem_pos chunks are the same here")
    shutil.copyfile(src, dst)
    proc = _cli("verify", path)
    assert proc.returncode == 2 and "rem_pos" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def _write_graph(path: Path, seed: int, e: int, *, overwrite: bool = False) -> None:
    rng = np.random.default_rng(seed)
    with GraphWriter(path, num_nodes=100, chunk_size=256, overwrite=overwrite) as w:
        w.append(rng.integers(0, 100, e), rng.integers(0, 100, e))


@pytest.mark.parametrize("new_edges", [3000, 1000], ids=["as-large", "smaller"])
def test_a_store_replaced_under_an_open_handle_is_refused(tmp_path, new_edges):
    """Another run's --overwrite swaps a new folder in at the path of a store that is open: its chunks pass
    their own checksums, so reading on took the new graph's edges under the old one's shape (a mixed graph,
    no error), or called a smaller replacement damaged."""
    from graphstream.errors import StoreReplacedError
    path = tmp_path / "g.zarr"
    _write_graph(path, 0, 3000)
    store = open_store(path)
    batches = store.stream(prefetch=0)
    next(batches)
    _write_graph(path, 1, new_edges, overwrite=True)
    with pytest.raises(StoreReplacedError, match="replaced or removed while it was being read"):
        list(batches)
    assert len(np.concatenate([b.src for b in open_store(path).stream()])) == new_edges   # a new open reads it


def test_a_snapshot_store_replaced_under_an_open_handle_is_refused(outputs, tmp_path):
    from graphstream.errors import StoreReplacedError
    path = tmp_path / "s.zarr"
    shutil.copytree(outputs["snapshots"][0], path)
    store = open_snapshots(path)
    store.snapshot(0)
    moved = tmp_path / "old.zarr"
    path.rename(moved)
    shutil.copytree(moved, path)   # the same bytes in another folder: still not the store that was opened
    with pytest.raises(StoreReplacedError):
        store.snapshot(len(store) - 1)


@pytest.mark.parametrize("other", ["another-algorithm", "another-store"])
def test_a_part_folder_of_another_partitioning_is_refused(outputs, tmp_path, other):
    """A part folder of the same place from another partitions folder (another algorithm on the same
    store, or another snapshot store): verify said ok, info and train mixed the two."""
    from graphstream.dynamic import build_snapshots
    from graphstream.dynamic.config import PGCConfig
    from graphstream.dynamic.partition import partition_snapshot_store
    from graphstream.store import open_dynamic_partitions
    source = outputs["snapshots"][0]
    if other == "another-store":
        source = tmp_path / "s9.zarr"
        build_snapshots(outputs["graph"][0], source, num_snapshots=9, edge_life=3)
    partition_snapshot_store(source, PGCConfig(num_parts=2), out=tmp_path / "other",
                             algo="sequence" if other == "another-algorithm" else "pgc")
    mixed = tmp_path / "mixed"
    shutil.copytree(outputs["dynamic_partitions"][0], mixed)
    shutil.rmtree(mixed / "part-00000")
    shutil.copytree(tmp_path / "other" / "part-00000", mixed / "part-00000")
    with pytest.raises(CorruptDataError, match="of another partitioning"):
        open_dynamic_partitions(mixed).part(0)
    with pytest.raises(CorruptDataError, match="of another partitioning"):
        verify(mixed)


def test_verify_finds_instances_owned_twice_or_by_no_part(outputs, tmp_path):
    """Folders written before the partitioning was recorded have only the parts' places to compare: a part
    of another partitioning of the same store passed, its instances owned twice or by no part."""
    from graphstream.dynamic.config import PGCConfig
    from graphstream.dynamic.partition import partition_snapshot_store
    partition_snapshot_store(outputs["snapshots"][0], PGCConfig(num_parts=2), out=tmp_path / "seq", algo="sequence")
    mixed = tmp_path / "mixed"
    shutil.copytree(outputs["dynamic_partitions"][0], mixed)
    shutil.rmtree(mixed / "part-00000")
    shutil.copytree(tmp_path / "seq" / "part-00000", mixed / "part-00000")
    # as written before: no "partitioning" in the manifest or in the parts' (sealed) attributes
    doc = json.loads((mixed / "manifest.json").read_text())
    doc.pop("partitioning", None)
    (mixed / "manifest.json").write_text(json.dumps(seal(doc)))
    for part in ("part-00000", "part-00001"):
        group = zarr.open_group(mixed / part, mode="r+")
        attrs = dict(group.attrs)
        attrs.pop("partitioning", None)
        group.attrs.clear()
        group.attrs.update(seal(attrs))
    with pytest.raises(CorruptDataError, match=r"snapshot \d+: \d+ (node\(s\) owned by more than one part|"
                                               r"active node\(s\) owned by no part)"):
        verify(mixed)


def test_the_partitioning_digest_leaves_out_the_run_s_own_settings():
    """--work-dir (scratch_dir) or a memory budget do not change the parts: a part of such a run was
    refused as one of another partitioning."""
    from graphstream.store.dynamic_partitions import partitioning_id
    attrs, params = {"format": "s", "crc32c": 7}, {"num_parts": 2, "seed": 0, "scratch_dir": None,
                                                   "memory_budget": None}
    same = partitioning_id(attrs, "pgc", {**params, "scratch_dir": "/tmp/w", "memory_budget": 1 << 20})
    assert partitioning_id(attrs, "pgc", params) == same
    assert partitioning_id(attrs, "pgc", {**params, "seed": 1}) != same


def test_verify_says_a_store_replaced_during_it_was_replaced(outputs, tmp_path, monkeypatch):
    """verify's last step reads the chunk files directly: a store swapped just before it was reported as
    chunks 'not the ones written there'."""
    from graphstream.errors import StoreReplacedError
    from graphstream.store import verify as verify_module
    path = tmp_path / "g.zarr"
    shutil.copytree(outputs["graph"][0], path)
    real = verify_module.check_chunks_digests

    def swap_then_check(*args, **kwargs):
        if not (tmp_path / "old.zarr").exists():
            path.rename(tmp_path / "old.zarr")
            _write_graph(path, 7, 3000)
        return real(*args, **kwargs)

    monkeypatch.setattr(verify_module, "check_chunks_digests", swap_then_check)
    with pytest.raises(StoreReplacedError, match="while it was being verified"):
        verify(path)


# -- node data folders (graphstream dataset's): node_data.json ----------------------------------------

@pytest.fixture
def node_folder(tmp_path) -> Path:
    """A folder as `graphstream dataset` writes it: graph.zarr, the .npy files and node_data.json."""
    from graphstream.store.nodedata import write_manifest

    folder = tmp_path / "data"
    folder.mkdir()
    rng = np.random.default_rng(0)
    with GraphWriter(folder / "graph.zarr", num_nodes=50, directed=False, chunk_size=64) as w:
        w.append(rng.integers(0, 50, 200), rng.integers(0, 50, 200))
    np.save(folder / "features.npy", rng.random((50, 8), dtype=np.float32))
    np.save(folder / "labels.npy", rng.integers(0, 3, 50))
    np.save(folder / "train_mask.npy", rng.random(50) < 0.5)
    write_manifest(folder)
    return folder


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_node_data_is_found_before_it_is_split(node_folder, tmp_path, how):
    """A byte flipped in a dataset folder's features.npy: `partition --nodes` exit 0 and `verify` of the
    result "ok" (the parts checksummed anew over the damage); `verify` and `info` did not take the folder."""
    report = verify(node_folder).to_dict()
    assert report["ok"] and report["kind"] == "node_data" and report["files_checked"] == 3 and report["checksums"]
    _damage(node_folder / "features.npy", how)
    with pytest.raises(CorruptDataError, match="features.npy"):
        verify(node_folder)
    proc = _cli("partition", node_folder / "graph.zarr", "-k", 2, "--out", tmp_path / "parts", "--nodes", node_folder)
    assert proc.returncode == 2 and "features.npy" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "parts").exists()
    plan = PartitionPlan(owner=np.arange(50, dtype=np.int32) % 2, num_parts=2, algorithm="test")
    if how == "flip":   # the library's builder checks them too
        with pytest.raises(CorruptDataError, match="features.npy fails its checksum"):
            build_partitions(node_folder / "graph.zarr", plan, tmp_path / "p2", nodes=node_folder)


def test_a_node_data_folder_is_described_and_verified(node_folder):
    proc = _cli("info", node_folder, "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["kind"] == "node_data" and info["num_nodes"] == 50 and info["checksums"] is True
    assert info["files"]["features.npy"] == "50 x 8 float32"
    (node_folder / "node_data.json").unlink()   # a folder saved by hand: read as before, said unchecksummed
    report = verify(node_folder).to_dict()
    assert report["ok"] and report["checksums"] is False and "no node_data.json" in report["note"]


def test_a_damaged_node_data_manifest_is_refused(node_folder, tmp_path):
    text = (node_folder / "node_data.json").read_text()
    (node_folder / "node_data.json").write_text(text.replace('"version": 1', '"version": 2'))
    proc = _cli("partition", node_folder / "graph.zarr", "-k", 2, "--out", tmp_path / "parts", "--nodes", node_folder)
    assert proc.returncode == 2 and "node_data.json" in proc.stderr, proc.stderr
    with pytest.raises(CorruptDataError, match="node_data.json"):
        verify(node_folder)


def test_a_node_data_manifest_never_sends_a_reader_out_of_its_folder(node_folder, tmp_path):
    """node_data.json's file names were read as paths: a sealed manifest naming "../secret.npy" or an
    absolute path had that file read and checksummed, as the dataset manifest's file names never are."""
    (tmp_path / "secret.npy").write_bytes(b"x" * 10)
    doc = json.loads((node_folder / "node_data.json").read_text())
    for name in ("../secret.npy", str(tmp_path / "secret.npy")):
        files = {**doc["files"], name: file_digest(tmp_path / "secret.npy").to_json()}
        (node_folder / "node_data.json").write_text(json.dumps(seal({**doc, "files": files})))
        with pytest.raises(CorruptDataError, match="is not a file of this folder"):
            verify(node_folder)


def test_overwrite_replaces_a_dataset_folder_with_its_manifest(node_folder):
    """node_data.json is one of the folder's own entries: --overwrite may replace the folder."""
    from graphstream._atomic import replaceable

    assert replaceable(node_folder)
    for name in ("other.npy", "extra_mask.npy"):   # a user's array beside them: removed with the folder
        np.save(node_folder / name, np.zeros(3))
        assert not replaceable(node_folder), name
        (node_folder / name).unlink()
    (node_folder / "notes.txt").write_text("mine")
    assert not replaceable(node_folder)


def test_a_file_added_or_replaced_by_hand_is_refused_with_the_way_out(node_folder, tmp_path):
    """A mask saved beside the listed files was split into the parts unchecked while verify and info said
    "checksums: yes"; a file rewritten on purpose failed as "damaged" with no word on what to do."""
    from graphstream.errors import NodeDataError
    from graphstream.store.nodedata import open_node_data

    np.save(node_folder / "foo_mask.npy", np.ones(50, dtype=bool))
    with pytest.raises(NodeDataError, match="foo_mask.npy not in node_data.json .* remove node_data.json"):
        open_node_data(node_folder, 50)
    with pytest.raises(CorruptDataError, match="foo_mask.npy not in node_data.json"):
        verify(node_folder)
    (node_folder / "foo_mask.npy").unlink()
    np.save(node_folder / "features.npy", np.ones((50, 8), dtype=np.float32))   # the user's own, same size
    with pytest.raises(CorruptDataError, match="fails its checksum.*remove node_data.json"):
        open_node_data(node_folder, 50, checksums=True)
    with pytest.raises(CorruptDataError, match="fails its checksum.*remove node_data.json"):
        verify(node_folder)
    (node_folder / "node_data.json").unlink()
    assert open_node_data(node_folder, 50, checksums=True).digests is None


def test_graphstream_dataset_writes_the_manifest(tmp_path):
    from graphstream.ingest.datasets import load_dataset

    root = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if not (root / "planetoid").is_dir():
        pytest.skip("the shared datasets are not here")
    load_dataset("cora", tmp_path / "cora", root=root)
    doc = json.loads((tmp_path / "cora" / "node_data.json").read_text())
    assert sorted(doc["files"]) == ["features.npy", "labels.npy", "test_mask.npy", "train_mask.npy", "val_mask.npy"]
    assert doc["files"]["features.npy"] == file_digest(tmp_path / "cora" / "features.npy").to_json()
    assert verify(tmp_path / "cora").to_dict()["files_checked"] == 5
