"""graphstream report: the figures equal the manifest and a recount from the part files, RF against k
gathers the partitionings of the same graph only, and --html writes a page with the plots."""
from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from graphstream.cli import main
from graphstream.report import partition_report, plot_names, render_plot

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def partitionings(tmp_path_factory):
    """One graph partitioned at k = 2, 4, 8 side by side, and another graph's partitioning beside them."""
    from graphstream.ingest.rmat import generate_rmat

    root = tmp_path_factory.mktemp("report")
    generate_rmat(root / "g.zarr", scale=10, edge_factor=8, seed=0)
    generate_rmat(root / "other.zarr", scale=10, edge_factor=8, seed=1)
    for k in (2, 4, 8):
        assert main(["partition", str(root / "g.zarr"), "-k", str(k), "--algo", "hash", "--out", str(root / f"p{k}")]) == 0
    assert main(["partition", str(root / "other.zarr"), "-k", "4", "--algo", "dbh", "--out", str(root / "other-p4")]) == 0
    return root


def _recount(folder) -> dict:
    """Inner, halo and edges of every part from its files (part.json, global_ids.npy, indices.npy)."""
    inner, halo, edges = [], [], []
    for part in sorted(folder.glob("part-*")):
        num_inner = json.loads((part / "part.json").read_text())["num_inner"]
        num_local = len(np.load(part / "global_ids.npy", mmap_mode="r"))
        inner.append(num_inner)
        halo.append(num_local - num_inner)
        edges.append(len(np.load(part / "indices.npy", mmap_mode="r")))
    return {"inner": inner, "halo": halo, "edges": edges}


def test_figures_equal_manifest_and_recount(partitionings):
    folder = partitionings / "p4"
    report = partition_report(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    counted = _recount(folder)
    assert report.part_inner == counted["inner"] == [p["num_inner"] for p in manifest["parts"]]
    assert report.part_halo == counted["halo"] == [p["num_halo"] for p in manifest["parts"]]
    assert report.part_edges == counted["edges"] == [p["num_edges"] for p in manifest["parts"]]
    n = manifest["num_nodes"]
    assert report.replication_factor == pytest.approx((sum(counted["inner"]) + sum(counted["halo"])) / n)
    assert report.replication_factor == pytest.approx(manifest["metrics"]["replication_factor"])
    assert report.node_balance == pytest.approx(max(counted["inner"]) / (n / 4))
    assert report.node_balance == pytest.approx(manifest["metrics"]["node_balance"])
    assert report.edge_balance == pytest.approx(max(counted["edges"]) / (sum(counted["edges"]) / 4))
    assert report.halo_fraction == pytest.approx(sum(counted["halo"]) / (sum(counted["inner"]) + sum(counted["halo"])))


def test_rf_against_k_is_the_same_graph_only(partitionings):
    report = partition_report(partitionings / "p4")
    points = {(p.algorithm, p.k): p for p in report.rf_vs_k}
    assert set(points) == {("hash", 2), ("hash", 4), ("hash", 8)}   # other-p4 is another graph
    for k in (2, 8):
        assert points[("hash", k)].replication_factor == pytest.approx(
            partition_report(partitionings / f"p{k}", siblings=False).replication_factor)
    assert plot_names(report) == ["sizes", "edges", "rf_vs_k"]
    alone = partition_report(partitionings / "other-p4")
    assert [p.k for p in alone.rf_vs_k] == [4] and plot_names(alone) == ["sizes", "edges"]


def test_rf_against_k_keeps_other_halo_hops_apart(tmp_path, capsys):
    """A --halo-hops 2 dataset beside 1-hop ones was drawn in their line (a jump at its k), and neither
    report --json nor info --json said it was 2-hop."""
    from graphstream.ingest.rmat import generate_rmat

    generate_rmat(tmp_path / "g.zarr", scale=9, edge_factor=8, seed=0, undirected=True)
    for name, extra in (("k2", ["-k", "2"]), ("k4", ["-k", "4"]), ("k4h2", ["-k", "4", "--halo-hops", "2"])):
        assert main(["partition", str(tmp_path / "g.zarr"), "--algo", "hash", "--out", str(tmp_path / name),
                     *extra]) == 0
    one_hop, two_hop = partition_report(tmp_path / "k4"), partition_report(tmp_path / "k4h2")
    assert one_hop.halo_hops == 1 and two_hop.halo_hops == 2
    assert sorted(p.k for p in one_hop.rf_vs_k) == [2, 4] and [p.k for p in two_hop.rf_vs_k] == [4]
    assert two_hop.replication_factor > one_hop.replication_factor
    capsys.readouterr()
    assert main(["info", str(tmp_path / "k4h2"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["halo_hops"] == 2


def test_plots_png_and_svg(partitionings):
    report = partition_report(partitionings / "p8")
    assert render_plot(report, "sizes", "png").startswith(b"\x89PNG")
    svg = render_plot(report, "rf_vs_k", "svg")
    assert b"<svg" in svg[:500]
    with pytest.raises(KeyError):
        render_plot(partition_report(partitionings / "other-p4"), "rf_vs_k")


def test_cli_json_and_html(partitionings, capsys):
    folder = partitionings / "p4"
    assert main(["report", str(folder), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["part_inner"] == partition_report(folder).part_inner
    assert [p["k"] for p in result["rf_vs_k"]] == [2, 4, 8]

    page = partitionings / "p4.html"
    assert main(["report", str(folder), "--html", str(page), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["html"] == str(page)
    text = page.read_text()
    images = re.findall(r'id="plot-(\w+)" alt="\w+" src="data:image/png;base64,([^"]+)"', text)
    assert [name for name, _ in images] == ["sizes", "edges", "rf_vs_k"]
    assert all(base64.b64decode(data).startswith(b"\x89PNG") for _, data in images)
    assert f"{result['replication_factor']:.4f}" in text

    # an existing page is kept without --overwrite; a page inside the dataset is refused
    assert main(["report", str(folder), "--html", str(page)]) == 2
    assert main(["report", str(folder), "--html", str(page), "--overwrite"]) == 0
    assert main(["report", str(folder), "--html", str(folder / "r.html")]) == 2
    assert "lies inside" in capsys.readouterr().err
    assert main(["report", str(partitionings / "g.zarr")]) == 2   # a graph store is not a partitioned dataset


def test_a_resumed_steps_line_counts_its_own_units(monkeypatch, capsys):
    """A training run resumed at epoch 25 of 40 said "40 epochs in 0.50 s (79.6 epochs/s)" for its 15."""
    from graphstream._report import progress
    monkeypatch.setenv("GRAPHSTREAM_PROGRESS", "")
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    capsys.readouterr()
    with progress(40, "train", unit="epoch", initial=25) as bar:
        assert bar.n == 25
        bar.update(15)
    err = capsys.readouterr().err
    assert "train: 15 epochs in" in err, err
