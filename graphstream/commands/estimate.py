"""graphstream estimate (STORE.zarr | --nodes N --edges M) [--features F]: disk, memory and time of each step.

The model and the source of each of its constants are in :mod:`graphstream.estimate`
(docs/estimate.md); this module reads the sizes (a store's attributes and bytes on disk,
an input file's edge count for ``ingest``) and prints the figures.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import ParameterError, path_argument

# The human summary: sizes, then one line per step (--verbose and --json: every figure).
SUMMARY = ("path", "num_nodes", "num_edges", "directed", "k", "features", "store_bytes", "summary")

SAMPLE_BYTES = 4 << 20   # text read to measure bytes per line (and the compression ratio)


def configure(p) -> None:
    from ..estimate import ALGORITHMS
    p.description = ("Estimate the disk, peak memory and time of generate/ingest, each partitioner, the build "
                     "and the feature split, from the per-edge and per-node costs measured on this project "
                     "(docs/estimate.md). Sizes come from a graph store, or from --nodes and --edges.")
    p.add_argument("store", nargs="?", default=None, help="graph store (.zarr); or give --nodes and --edges")
    p.add_argument("--nodes", type=int, default=None, metavar="N", help="node count of a graph not yet ingested")
    p.add_argument("--edges", type=int, default=None, metavar="M", help="edge count of a graph not yet ingested")
    p.add_argument("--undirected", action="store_true", help="with --nodes/--edges: the graph is undirected")
    p.add_argument("--relabel", action="store_true",
                   help="ingest with --relabel: its map of the input's ids in memory (40 bytes an id)")
    p.add_argument("--features", type=int, default=0, metavar="F", help="node features per node (default 0)")
    p.add_argument("--feature-dtype", default="float32", metavar="DTYPE",
                   help="dtype of the features: float32 (default) or float16, what a node data folder holds")
    p.add_argument("-k", "--parts", dest="k", type=int, default=16, help="number of parts (default 16)")
    p.add_argument("--algo", action="append", choices=ALGORITHMS, default=None,
                   help="partitioner to estimate (repeatable; default: all)")
    p.add_argument("--rf", type=float, default=None,
                   help="replication factor to size the dataset with (default: the one measured on "
                        "MUSAE facebook for each algorithm and k, docs/estimate.md)")
    p.set_defaults(run=run)


def graph_size(args):
    """The :class:`GraphSize` the flags describe (a store, or --nodes/--edges)."""
    from ..estimate import GraphSize
    if args.feature_dtype not in ("float32", "float16"):   # what a node data folder may hold (docs/format.md)
        raise ParameterError(f"--feature-dtype {args.feature_dtype!r}: features are float32 or float16")
    itemsize = np.dtype(args.feature_dtype).itemsize
    if args.features < 0:
        raise ParameterError(f"--features must be >= 0, got {args.features}")
    if args.store is not None:
        if args.nodes is not None or args.edges is not None:
            raise ParameterError("give a store or --nodes and --edges, not both")
        from ..store import open_store
        from .info import _disk_bytes
        store = open_store(args.store)
        if args.k > store.num_nodes:   # partition refuses it: parts that could hold no node
            raise ParameterError(f"k = {args.k} exceeds the number of nodes ({store.num_nodes}) of {args.store}")
        return GraphSize(num_nodes=store.num_nodes, num_edges=store.num_edges, directed=store.directed,
                         with_time=store.has_time, with_weight=store.has_weight, features=args.features,
                         feature_itemsize=itemsize, store_bytes=_disk_bytes(args.store))
    if args.nodes is None or args.edges is None:
        raise ParameterError("give a graph store, or both --nodes N and --edges M")
    if args.nodes < 1 or args.edges < 0:
        raise ParameterError(f"--nodes must be >= 1 and --edges >= 0, got {args.nodes} and {args.edges}")
    if args.k > args.nodes:   # partition refuses it: parts that could hold no node
        raise ParameterError(f"k = {args.k} exceeds the number of nodes ({args.nodes})")
    return GraphSize(num_nodes=args.nodes, num_edges=args.edges, directed=not args.undirected,
                     features=args.features, feature_itemsize=itemsize)


def _line(step: dict) -> str:
    from .._report import format_bytes, format_seconds
    disk = format_bytes(step["disk_bytes"])
    scratch = f" (+{format_bytes(step['scratch_bytes'])} scratch)" if step["scratch_bytes"] else ""
    first = (f" (+{format_seconds(step['first_run_extra_seconds'])} on the first run: kernels compiled)"
             if step["first_run_extra_seconds"] else "")
    return (f"disk {disk}{scratch}, peak memory {format_bytes(step['peak_rss_bytes'])}, "
            f"~{format_seconds(step['seconds'])}{first}")


def run(args) -> dict:
    from ..estimate import ALGORITHMS, estimate_steps
    from ..partition import check_num_parts
    check_num_parts(args.k)   # what partition takes
    if args.rf is not None and not 1.0 <= args.rf <= args.k:
        raise ParameterError(f"--rf must be between 1 and k ({args.k}), got {args.rf}")
    size = graph_size(args)
    algos = tuple(dict.fromkeys(args.algo)) if args.algo else ALGORITHMS
    path = args.store and path_argument(args.store, "path")   # absolute, as every path reported
    result = {"path": path, **estimate_steps(size, k=args.k, algorithms=algos, rf=args.rf, relabel=args.relabel)}
    summary = {name: _line(step) for name, step in result["steps"].items()}
    for algo, steps in result["partitioners"].items():
        summary[f"partition {algo}"] = _line(steps["partition"])
        summary[f"build {algo} (rf {steps['replication_factor']:.2f})"] = _line(steps["build"])
        if "feature_split" in steps:
            summary[f"feature split {algo}"] = _line(steps["feature_split"])
    result["summary"] = summary
    return result


# -- what ingest will write (used by `graphstream ingest` before it writes) --------------------------

def input_edges(path: str | os.PathLike, fmt: str = "auto") -> int:
    """The edge count of an input file: exact for .npy and parquet (their headers), else the
    decompressed size over the mean line length of the first few MiB (an estimate)."""
    return input_size(path, fmt)[0]


def input_size(path: str | os.PathLike, fmt: str = "auto") -> tuple[int, int]:
    """(edges, id bytes) of an input file: the edges as :func:`input_edges` counts them; the id bytes bound
    what ``--relabel``'s id map can hold (every distinct id is written once in the input): the text's
    decompressed size (an estimate for compressed text, as the edges), twice a binary file's (its ids
    widened to the map's int64)."""
    from ..ingest.sniff import detect_format
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt == "npy":   # ingest's own reading of the header: a file shorter than it says is named as such
        from ..ingest.sources import npy_rows
        return npy_rows(path), 2 * os.path.getsize(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq
        return int(pq.ParquetFile(str(path)).metadata.num_rows), 2 * os.path.getsize(path)
    from ..ingest.blocks import open_text, read_block
    f, raw = open_text(path)
    try:   # read_block: damaged compressed data is the one-line InputFormatError ingest gives
        sample = read_block(f, str(path), SAMPLE_BYTES)
        consumed = raw.position() or 1
        more = bool(read_block(f, str(path), 1))
    finally:
        f.close()
    lines = sample.count(b"\n") + (1 if sample and not sample.endswith(b"\n") else 0)
    if not more or not sample:
        return lines, len(sample)
    # decompressed bytes per raw byte read so far (1 for plain text), applied to the whole file
    total = os.path.getsize(path) * max(len(sample) / consumed, 1.0)
    return int(total / len(sample) * lines), int(total)
