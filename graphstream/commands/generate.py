"""graphstream generate rmat OUT.zarr --scale S --edge-factor F [--seed N]: synthetic graphs."""
from __future__ import annotations

from .._atomic import claim_outputs
from .._resources import Stopwatch, peak_rss_bytes
from ..cluster import cluster_report, open_client
from ..store import DEFAULT_CHUNK
from .flags import add_cluster, add_overwrite, cluster_config, json_flag, verbose_flag

# What the human summary shows (graphstream.cli; --verbose and --json show every key).
SUMMARY = ("path", "num_nodes", "num_edges", "directed", "source", "seconds", "edges_per_second", "peak_rss_bytes")


def configure(p) -> None:
    kinds = p.add_subparsers(dest="generator", required=True, metavar="GENERATOR")
    # --json given after `rmat` is parsed by this sub-subparser, so it takes the shared flag too
    r = kinds.add_parser("rmat", parents=[json_flag(), verbose_flag()],
                         help="Graph500 Kronecker/R-MAT graph (a=0.57, b=c=0.19), seeded, "
                              "2**S nodes and F*2**S edges, vertex ids randomly permuted")
    r.add_argument("out", help="output graph store (.zarr)")
    r.add_argument("--scale", type=int, required=True, help="S: the graph has 2**S nodes")
    r.add_argument("--edge-factor", type=int, default=16, help="F: the graph has F*2**S edges (default 16)")
    r.add_argument("--seed", type=int, default=0,
                   help="random seed (default 0); same seed, same graph, whatever the chunk size or threads")
    r.add_argument("--undirected", action="store_true",
                   help="record the graph as undirected (each edge once, both directions), as Graph500 does")
    r.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK,
                   help=f"edges per store chunk (default {DEFAULT_CHUNK}); does not change the edges")
    add_overwrite(r, "OUT if it exists")
    add_cluster(r)
    r.set_defaults(run=run)


def preflight(args, pending: dict[str, str] | None = None) -> None:
    """What is refused before anything is opened (the service checks a job's arguments with it too): the
    generator's parameters, then the chunk size (before the disk check, which a scale of 64 failed first)."""
    from ..errors import whole_number
    from ..ingest.rmat import GRAPH500_A, GRAPH500_B, GRAPH500_C, RmatParams
    from ..store.graph import MAX_CHUNK
    RmatParams(scale=args.scale, edge_factor=args.edge_factor, seed=args.seed, a=GRAPH500_A, b=GRAPH500_B,
               c=GRAPH500_C)
    whole_number(args.chunk_size, "--chunk-size", 1, MAX_CHUNK)


def run(args) -> dict:
    from ..estimate import check_free_disk, store_bytes
    from ..ingest.rmat import generate_rmat  # numba compiles on first use: keep `--help` fast
    preflight(args)
    cluster = cluster_config(args, "out")   # the path absolute from here on, in every message
    # refuse before writing what the disk cannot hold (scale 40: ~140 TB)
    check_free_disk(args.out, store_bytes(args.edge_factor * 2**args.scale, num_nodes=2**args.scale),
                    f"generate rmat --scale {args.scale}")
    watch = Stopwatch()
    with claim_outputs({"OUT": args.out}, {}, args.overwrite), open_client(cluster) as client:
        store = generate_rmat(args.out, scale=args.scale, edge_factor=args.edge_factor, seed=args.seed,
                              chunk_size=args.chunk_size, undirected=args.undirected, overwrite=args.overwrite,
                              client=client)
        on_cluster = cluster_report(cluster, client)
    seconds = watch.seconds
    result = store.info.to_dict()
    result.update({
        "scale": args.scale, "edge_factor": args.edge_factor, "seed": args.seed,
        "seconds": seconds,
        "edges_per_second": store.num_edges / seconds if seconds > 0 else None,
        "peak_rss_bytes": peak_rss_bytes(),
    })
    result.update(on_cluster)
    return result
