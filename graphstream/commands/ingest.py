"""graphstream ingest SRC [SRC ...] OUT.zarr: read edge files into a graph store."""
from __future__ import annotations

import os

from .._atomic import claim_outputs
from .._resources import Stopwatch, peak_rss_bytes
from ..cluster import cluster_report, open_client
from ..errors import GraphStreamError, whole_number
from ..store import DEFAULT_CHUNK, MAX_CHUNK
from .flags import add_cluster, add_overwrite, cluster_config

# What the human summary shows (graphstream.cli; --verbose and --json show every key).
SUMMARY = ("path", "format", "header", "num_nodes", "num_edges", "directed", "has_time", "has_weight", "has_id_map",
           "input_bytes", "seconds", "edges_per_second", "peak_rss_bytes")


def _column(value: str) -> int | str:
    """A 0-based column index, or a header name."""
    return int(value) if value.lstrip("-").isdigit() else value


def configure(p) -> None:
    p.add_argument("source", nargs="+", metavar="SRC",
                   help="edge file; several files (one format) are stored one after the other")
    p.add_argument("out", help="output graph store (.zarr)")
    p.add_argument("--format", dest="fmt", default="auto",
                   choices=["auto", "snap", "csv", "tsv", "npy", "parquet"],
                   help="input format (default: npy/parquet by content, csv/tsv by name, else snap)")
    p.add_argument("--undirected", action="store_true", help="record the graph as undirected")
    p.add_argument("--one-based", action="store_true", help="ids start at 1: subtract 1 from each (not with --relabel)")
    p.add_argument("--relabel", action="store_true",
                   help="map arbitrary ids (sparse, 64-bit, strings) to 0..n-1 and save the id map")
    p.add_argument("--src-column", type=_column, default=0, metavar="N",
                   help="source id column: 0-based index or header name (default 0)")
    p.add_argument("--dst-column", type=_column, default=1, metavar="N",
                   help="destination id column: 0-based index or header name (default 1)")
    p.add_argument("--time-column", type=_column, default=None, metavar="N",
                   help="timestamp column, stored as int64 (default none)")
    p.add_argument("--weight-column", type=_column, default=None, metavar="N",
                   help="weight column, stored as float32 (default none)")
    p.add_argument("--delimiter", default=None, metavar="D",
                   help="field delimiter (default: blanks or comma; ',' for csv, tab for tsv; '\\t' = tab)")
    p.add_argument("--header", default="auto", choices=["auto", "yes", "no"],
                   help="whether the first data line is a header: auto (default) decides by its id fields and "
                        "logs why (docs/ingest.md), yes or no decide")
    p.add_argument("--num-nodes", type=int, default=None, metavar="N",
                   help="declared node count (ids must be below it; default max id + 1; with --relabel, "
                        "the number of distinct ids, if given)")
    p.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK, metavar="N",
                   help=f"edges per stored chunk (default {DEFAULT_CHUNK})")
    add_overwrite(p, "an existing output")
    add_cluster(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from ..ingest import IngestConfig, ingest  # imported first: "seconds" times the ingest, not Python's imports
    watch = Stopwatch()
    whole_number(args.chunk_size, "--chunk-size", 1, MAX_CHUNK)
    if args.num_nodes is not None:   # named as the flag (the config names its field)
        whole_number(args.num_nodes, "--num-nodes", 0)
    config = IngestConfig(fmt=args.fmt, undirected=args.undirected, one_based=args.one_based, relabel=args.relabel,
                          src_column=args.src_column, dst_column=args.dst_column, time_column=args.time_column,
                          weight_column=args.weight_column, delimiter=args.delimiter, header=args.header,
                          num_nodes=args.num_nodes, chunk_size=args.chunk_size, overwrite=args.overwrite)
    cluster = cluster_config(args, "source", "out")
    sources = args.source
    _check_disk(args)
    # before anything is touched: OUT apart from the inputs, locked, leftovers of killed runs cleared
    inputs = {"input file" if len(sources) == 1 else f"input file {i + 1}": s for i, s in enumerate(sources)}
    with claim_outputs({"OUT": args.out}, inputs, args.overwrite), open_client(cluster) as client:
        store = ingest(sources[0] if len(sources) == 1 else sources, args.out, config, client=client)
        on_cluster = cluster_report(cluster, client)
    seconds = watch.seconds
    result = store.info.to_dict()
    result.update({
        "format": store.attrs.get("ingest", {}).get("format"),
        "header": store.attrs.get("ingest", {}).get("header"),   # whether the first line was read as a header
        "input_bytes": sum(os.path.getsize(s) for s in sources),
        "seconds": seconds,
        "edges_per_second": store.num_edges / seconds if seconds > 0 else None,
        "peak_rss_bytes": peak_rss_bytes(),
    })
    result.update(on_cluster)
    return result


# the id map over its ids' bytes in the input: a string map stores each distinct id once with its length
# (4 bytes, compressed), which the input's separators do not always cover: 20,000 lines of two distinct
# 19-character ids, 0.80 MB, made a 0.81 MB map
ID_MAP_BYTES_PER_INPUT_BYTE = 1.25


def _check_disk(args) -> None:
    """Refuse before writing a store that the free disk cannot hold (estimated from the input's edge count,
    and with --relabel the id map's bound: its ids' bytes in the input)."""
    from ..estimate import check_free_disk, store_bytes
    from ..store import is_url
    from .estimate import input_size
    if is_url(args.out) or not all(os.path.isfile(s) for s in args.source):
        return   # a remote store's space is not ours to measure; a missing input is reported by ingest
    try:
        sizes = [input_size(s, args.fmt) for s in args.source]
    except (OSError, ValueError, EOFError, GraphStreamError):
        return   # unreadable: ingest itself names what is wrong with the input, in its own words
    edges = sum(e for e, _ in sizes)
    need = store_bytes(edges, num_nodes=args.num_nodes or 0, with_time=args.time_column is not None,
                       with_weight=args.weight_column is not None)
    if args.relabel:   # 9.2 MB of string ids beside a 1.2 MB estimate for 200,000 edges
        need += int(ID_MAP_BYTES_PER_INPUT_BYTE * sum(b for _, b in sizes))
    check_free_disk(args.out, need, "ingest")
