"""The partition report: what a partitioned dataset costs a trainer, as figures, plots and a page.

One dataset's figures come from its ``manifest.json`` (its entries are
measured from the written part files by the builder, so nothing here reads a
part): per part the inner nodes (owned), the halo nodes (copies of
neighbours owned elsewhere) and the local edges; the replication factor
(RF = sum of inner + halo over the node count, the nodes the trainers load
together) and the balances (largest over mean, as the manifest defines them).

When several partitionings of one graph sit beside each other (sibling
folders, the usual ``p4``, ``p8``, ``p16``), the report adds RF against k,
one line per algorithm. "One graph" is the graph key of
:func:`graph_key`: the source store the builder recorded and its node and
edge counts. Used by ``graphstream report`` and the service's report call;
plots are drawn with matplotlib's object API (no pyplot state), so two
threads may draw at once.
"""
from __future__ import annotations

import base64
import html
import io
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import path_argument
from .store.partitions import open_partitions
from .store.partitions_manifest import MANIFEST, PartitionsError, PartitionsManifest, balance, read_manifest

PLOT_FORMATS = ("png", "svg")
# Part tables longer than this are left out of the HTML page (the plots still show every part).
HTML_TABLE_PARTS = 64


@dataclass(frozen=True, slots=True)
class RFPoint:
    """One partitioning of the graph: where it is, how it was made and its RF."""
    path: str
    algorithm: str
    k: int
    replication_factor: float


@dataclass(frozen=True, slots=True)
class PartitionReport:
    """The report of one partitioned dataset (``to_dict`` is the JSON of the CLI and the API)."""
    path: str
    algorithm: str
    num_parts: int
    num_nodes: int
    num_edges: int
    directed: bool
    halo_hops: int            # every node within halo_hops - 1 hops of a part's inner ones has its whole row
    part_inner: list[int]
    part_halo: list[int]
    part_edges: list[int]
    replication_factor: float
    node_balance: float       # largest part's inner nodes over the mean
    edge_balance: float       # largest part's local edges over the mean
    local_balance: float      # largest part's inner + halo nodes over the mean (what a trainer's memory sees)
    halo_fraction: float      # halo nodes over all local nodes
    graph: dict[str, Any]     # the graph key (source store, counts): what "the same graph" means
    rf_vs_k: list[RFPoint] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def graph_key(manifest: PartitionsManifest) -> dict[str, Any]:
    """What identifies the partitioned graph: the source store the builder recorded (an absolute path)
    and the counts. Datasets without a recorded source match only themselves (``store`` None)."""
    source = manifest.extra.get("source")
    store = source.get("store") if isinstance(source, dict) else None
    return {"store": store, "num_nodes": manifest.num_nodes, "num_edges": manifest.num_edges,
            "directed": manifest.directed}


def partition_report(parts_dir: str | os.PathLike, *, siblings: bool = True) -> PartitionReport:
    """The report of the dataset at ``parts_dir`` (a :class:`PartitionsError` if it is not one);
    ``siblings``: look beside it for other partitionings of the same graph (RF against k)."""
    parts_dir = path_argument(parts_dir, "parts_dir")   # reported as every handle reports it: absolute
    folder = Path(parts_dir)
    m = open_partitions(folder).info   # its files checked as a reader checks them (sizes, headers)
    inner = [p.num_inner for p in m.parts]
    halo = [p.num_halo for p in m.parts]
    edges = [p.num_edges for p in m.parts]
    local = [a + b for a, b in zip(inner, halo, strict=True)]
    key = graph_key(m)
    rf = sum(local) / m.num_nodes if m.num_nodes else 1.0
    points = [RFPoint(str(parts_dir), m.algorithm, m.num_parts, rf)]
    if siblings and key["store"] is not None:
        points = _same_graph(folder, key, m.halo_hops, points[0])
    return PartitionReport(
        path=str(parts_dir), algorithm=m.algorithm, num_parts=m.num_parts, num_nodes=m.num_nodes,
        num_edges=m.num_edges, directed=m.directed, halo_hops=m.halo_hops, part_inner=inner, part_halo=halo,
        part_edges=edges,
        replication_factor=rf, node_balance=balance(inner, m.num_nodes, m.num_parts),
        edge_balance=balance(edges, sum(edges), m.num_parts), local_balance=balance(local, sum(local), m.num_parts),
        halo_fraction=sum(halo) / sum(local) if sum(local) else 0.0, graph=key, rf_vs_k=points)


def _same_graph(folder: Path, key: dict[str, Any], halo_hops: int, own: RFPoint) -> list[RFPoint]:
    """RF of every partitioning of the graph ``key`` with ``halo_hops`` in ``folder``'s parent (``own``
    for ``folder``), sorted by algorithm and k. Siblings that are not readable partitioned datasets are
    skipped: they are not this report's subject; nor are those of other hops, whose RF counts a wider
    halo (a 2-hop k = 4 beside a 1-hop one drew a jump in one algorithm's line)."""
    points = [own]
    try:
        candidates = sorted(folder.parent.iterdir())
    except OSError:
        return points
    for sibling in candidates:
        try:   # a sibling that is a loop of symbolic links is no dataset, and not this report's to refuse
            if sibling.name.startswith(".") or sibling.resolve() == folder.resolve() \
                    or not (sibling / MANIFEST).is_file():
                continue
        except (OSError, RuntimeError):
            continue
        try:
            m = read_manifest(sibling)
        except (PartitionsError, OSError):
            continue
        if graph_key(m) != key or m.halo_hops != halo_hops:
            continue
        local = sum(p.num_nodes for p in m.parts)
        path = str(Path(own.path).parent / sibling.name)
        points.append(RFPoint(path, m.algorithm, m.num_parts, local / m.num_nodes if m.num_nodes else 1.0))
    return sorted(points, key=lambda p: (p.algorithm, p.k, p.path))


# -- plots ----------------------------------------------------------------------------------------

def plot_names(report: PartitionReport) -> list[str]:
    """The plots a report has: part sizes and edges always, RF against k when the graph has several k."""
    names = ["sizes", "edges"]
    if len({p.k for p in report.rf_vs_k}) >= 2:
        names.append("rf_vs_k")
    return names


def render_plot(report: PartitionReport, name: str, fmt: str = "png") -> bytes:
    """One plot of :func:`plot_names` as PNG or SVG bytes."""
    if fmt not in PLOT_FORMATS:
        raise ValueError(f"plot format {fmt!r}: expected one of {PLOT_FORMATS}")
    if name not in plot_names(report):
        raise KeyError(name)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 3.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    {"sizes": _plot_sizes, "edges": _plot_edges, "rf_vs_k": _plot_rf}[name](ax, report)
    out = io.BytesIO()
    fig.savefig(out, format=fmt, metadata={"Software": None} if fmt == "png" else {"Date": None})
    return out.getvalue()


def _part_axis(ax, k: int) -> list[int]:
    x = list(range(k))
    ax.set_xlabel("part")
    ax.margins(y=0.2)   # room above the tallest bar for the legend (bars keep their floor at 0)
    if k <= 32:
        ax.set_xticks(x)
    return x


def _plot_sizes(ax, r: PartitionReport) -> None:
    x = _part_axis(ax, r.num_parts)
    ax.bar(x, r.part_inner, color="#3b75af", label="inner (owned)")
    ax.bar(x, r.part_halo, bottom=r.part_inner, color="#f0a35e", label="halo (copies)")
    ax.set_ylabel("nodes")
    ax.set_title(f"part sizes: inner vs halo  (RF {r.replication_factor:.3f}, node balance {r.node_balance:.3f})")
    ax.legend(loc="upper right", fontsize="small")


def _plot_edges(ax, r: PartitionReport) -> None:
    x = _part_axis(ax, r.num_parts)
    ax.bar(x, r.part_edges, color="#519e3e")
    if r.num_parts:
        ax.axhline(sum(r.part_edges) / r.num_parts, color="black", linestyle="--", linewidth=1, label="mean")
        ax.legend(loc="upper right", fontsize="small")
    ax.set_ylabel("local edges")
    ax.set_title(f"edges per part  (edge balance {r.edge_balance:.3f})")


def _plot_rf(ax, r: PartitionReport) -> None:
    for algorithm in sorted({p.algorithm for p in r.rf_vs_k}):
        points = sorted((p.k, p.replication_factor) for p in r.rf_vs_k if p.algorithm == algorithm)
        ax.plot([k for k, _ in points], [rf for _, rf in points], marker="o", label=algorithm)
    ax.plot([r.num_parts], [r.replication_factor], marker="o", markersize=12, markerfacecolor="none",
            markeredgecolor="black", linestyle="none", label="this dataset")
    ks = sorted({p.k for p in r.rf_vs_k})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel("k (parts)")
    ax.set_ylabel("replication factor")
    ax.set_title("replication factor against k (same graph)")
    ax.legend(fontsize="small")


# -- the page -------------------------------------------------------------------------------------

def report_html(report: PartitionReport) -> str:
    """A self-contained HTML page: the figures, the plots (PNG embedded as data URIs) and, up to
    :data:`HTML_TABLE_PARTS` parts, the per-part table."""
    e = html.escape
    figures = [("algorithm", report.algorithm), ("parts (k)", report.num_parts),
               ("nodes", f"{report.num_nodes:,}"), ("edges", f"{report.num_edges:,}"),
               ("directed", "yes" if report.directed else "no"), ("halo hops", report.halo_hops),
               ("replication factor", f"{report.replication_factor:.4f}"),
               ("node balance", f"{report.node_balance:.4f}"), ("edge balance", f"{report.edge_balance:.4f}"),
               ("local balance (inner + halo)", f"{report.local_balance:.4f}"),
               ("halo fraction", f"{report.halo_fraction:.4f}")]
    rows = "\n".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in figures)
    plots = "\n".join(
        f'<figure><img id="plot-{name}" alt="{name}" src="data:image/png;base64,'
        f'{base64.b64encode(render_plot(report, name, "png")).decode()}"></figure>'
        for name in plot_names(report))
    parts = ""
    if report.num_parts <= HTML_TABLE_PARTS:
        body = "\n".join(f"<tr><td>{i}</td><td>{a:,}</td><td>{b:,}</td><td>{c:,}</td></tr>" for i, (a, b, c)
                         in enumerate(zip(report.part_inner, report.part_halo, report.part_edges, strict=True)))
        parts = ("<h2>Parts</h2><table><tr><th>part</th><th>inner</th><th>halo</th><th>edges</th></tr>\n"
                 f"{body}</table>")
    rf = ""
    if len(report.rf_vs_k) > 1:
        body = "\n".join(f"<tr><td>{e(p.path)}</td><td>{e(p.algorithm)}</td><td>{p.k}</td>"
                         f"<td>{p.replication_factor:.4f}</td></tr>" for p in report.rf_vs_k)
        rf = ("<h2>Partitionings of the same graph</h2><table><tr><th>dataset</th><th>algorithm</th><th>k</th>"
              f"<th>RF</th></tr>\n{body}</table>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>graphstream report: {e(report.path)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:60em}}table{{border-collapse:collapse;margin:1em 0}}
th,td{{border:1px solid #ccc;padding:.2em .6em;text-align:right}}th{{text-align:left}}
img{{max-width:100%}}</style></head>
<body><h1>Partition report: {e(report.path)}</h1>
<table>{rows}</table>
{plots}
{parts}
{rf}
</body></html>
"""
