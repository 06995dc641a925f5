"""One replication factor, everywhere (issue 18, item 1).

For directed and undirected stores, several algorithms and k: every replication-factor figure that
``graphstream partition`` prints (its --json output with and without --out, the manifest's metrics,
the per-part lists, ``parts[].num_halo`` and the log lines) equals the recount from the written parts:
sum over parts of their local nodes / num_nodes. The written halo itself is checked against the
definition (undirected: every neighbour of an inner node; directed: its in-neighbours).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from graphstream.cli import main
from graphstream.store import open_partitions, open_store

COLLEGE_MSG = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "temporal" / "CollegeMsg.txt"

CASES = [("coarse-refine", 4), ("coarse-refine", 7), ("hdrf", 4), ("spring", 7), ("2ps-l", 5), ("dbh", 3),
         ("hash", 3)]
# "replication factor X" or "replication factor A -> B" in a log line: B (or X) is the figure after
RF_IN_LOG = re.compile(r"replication factor (?:(\d+\.\d+) -> )?(\d+\.\d+)")


@pytest.fixture(autouse=True)
def _log_lines(monkeypatch):
    """The log lines are under test: as when stderr is a file (conftest turns them off)."""
    monkeypatch.delenv("GRAPHSTREAM_PROGRESS", raising=False)


def _cli(capsys, argv: list[str]) -> tuple[dict, str]:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("rf_truth")
    made = {}
    for name, argv in {
        "rmat-directed": ["generate", "rmat", "--scale", "9", "--edge-factor", "8", "--seed", "3"],
        "rmat-undirected": ["generate", "rmat", "--scale", "9", "--edge-factor", "8", "--seed", "3",
                            "--undirected"],
        "collegemsg-directed": ["ingest", str(COLLEGE_MSG), "--one-based", "--time-column", "2"],
    }.items():
        if name.startswith("collegemsg") and not COLLEGE_MSG.is_file():
            continue
        path = root / f"{name}.zarr"
        assert main([*argv, str(path)]) == 0
        made[name] = path
    return made


def _edges(store_path: Path) -> tuple[np.ndarray, np.ndarray, int, bool]:
    store = open_store(store_path)
    src, dst = [], []
    for batch in store.stream():
        src.append(np.asarray(batch.src, dtype=np.int64))
        dst.append(np.asarray(batch.dst, dtype=np.int64))
    return np.concatenate(src), np.concatenate(dst), store.num_nodes, store.directed


def _holders(src, dst, owner, n, both_directions: bool) -> int:
    """Sum over nodes of the parts that hold them: u is in owner[v]'s part for every u -> v (and the
    reverse when ``both_directions``)."""
    pairs = {(int(x), int(p)) for x, p in zip(range(n), owner)}
    pairs |= set(zip(src.tolist(), owner[dst].tolist()))
    if both_directions:
        pairs |= set(zip(dst.tolist(), owner[src].tolist()))
    return len(pairs)


def _recount(out_dir: Path, src, dst, n, directed) -> dict:
    """Per part inner and halo counts from the written parts, each halo checked against its definition."""
    ds = open_partitions(out_dir)
    owner = np.full(n, -1, dtype=np.int64)
    inner_counts, halo_counts, local = [], [], 0
    for p, part in enumerate(ds):
        ids = np.asarray(part.global_ids, dtype=np.int64)
        inner, halo = ids[:part.num_inner], ids[part.num_inner:]
        assert (owner[inner] == -1).all(), "a node is inner in two parts"
        owner[inner] = p
        inner_counts.append(len(inner))
        halo_counts.append(len(halo))
        local += len(ids)
    assert (owner >= 0).all(), "a node is inner in no part"
    for p, part in enumerate(ds):
        feeds = np.isin(dst, np.flatnonzero(owner == p))
        want = set(src[feeds].tolist())                       # in-neighbours of inner nodes
        if not directed:
            want |= set(dst[np.isin(src, np.flatnonzero(owner == p))].tolist())
        want -= set(np.flatnonzero(owner == p).tolist())
        assert set(np.asarray(part.global_ids[part.num_inner:]).tolist()) == want, f"part {p}: halo"
    return {"rf": local / n, "part_inner": inner_counts, "part_halo": halo_counts, "owner": owner}


@pytest.mark.parametrize("algo,k", CASES)
@pytest.mark.parametrize("name", ["rmat-directed", "rmat-undirected", "collegemsg-directed"])
def test_one_replication_factor(stores, tmp_path, capsys, name, algo, k):
    if name not in stores:
        pytest.skip(f"{COLLEGE_MSG} absent")
    store = stores[name]
    src, dst, n, directed = _edges(store)
    assert directed == name.endswith("-directed")
    out = tmp_path / "parts"
    built, log_built = _cli(capsys, ["partition", str(store), "-k", str(k), "--algo", algo, "--out", str(out)])
    alone, log_alone = _cli(capsys, ["partition", str(store), "-k", str(k), "--algo", algo])
    truth = _recount(out, src, dst, n, directed)
    rf = truth["rf"]
    # the recount follows the definition: nodes x the parts holding them (in-neighbours when directed)
    assert rf == pytest.approx(_holders(src, dst, truth["owner"], n, not directed) / n, rel=1e-12)

    manifest = json.loads((out / "manifest.json").read_text())
    assert [e["num_halo"] for e in manifest["parts"]] == truth["part_halo"]
    assert [e["num_inner"] for e in manifest["parts"]] == truth["part_inner"]
    for where, doc in (("manifest", manifest["metrics"]), ("--out --json", built), ("--json", alone)):
        assert doc["replication_factor"] == pytest.approx(rf, rel=1e-12), where
        assert doc.get("replication_factor_metrics", rf) == pytest.approx(rf, rel=1e-12), where
        assert doc["part_halo"] == truth["part_halo"], where
        assert doc["part_inner"] == truth["part_inner"], where
        assert (sum(doc["part_inner"]) + sum(doc["part_halo"])) / n == pytest.approx(rf, rel=1e-12), where
    # the objective coarse-refine minimises is reported under its own name, and is what it says
    if algo == "coarse-refine":
        both = _holders(src, dst, truth["owner"], n, True) / n
        for doc in (manifest["metrics"], built, alone):
            assert doc["undirected_halo_rf"] == pytest.approx(both, rel=1e-12)
        if directed:
            assert both > rf
    # log lines: every figure called "replication factor" (the one after "->" in a before/after pair)
    figures = [float(m.group(2)) for m in RF_IN_LOG.finditer(log_built + log_alone)]
    assert len(figures) == (3 if algo == "coarse-refine" else 1)   # cr logs once a run, the build once
    assert all(f == pytest.approx(rf, abs=5e-5) for f in figures), (figures, rf)
    assert not re.search(r"\bRF\b", log_built + log_alone), "an unnamed RF figure in the log"
