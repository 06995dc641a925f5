"""graphstream snapshots STORE OUT.zarr --window SECONDS | --num-snapshots T: build a snapshot store."""
from __future__ import annotations

from .flags import add_cluster, add_overwrite, cluster_config


def configure(p) -> None:
    p.add_argument("store", help="graph store (.zarr) with a time column")
    p.add_argument("out", help="snapshot store to write (.zarr)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--window", type=float, metavar="SECONDS", help="window width in the store's time unit")
    g.add_argument("--num-snapshots", type=int, metavar="T", help="cut the time span into T equal windows")
    p.add_argument("--edge-life", type=int, default=1, metavar="L",
                   help="an event stays present for L consecutive snapshots (default 1)")
    p.add_argument("--keyframe-every", type=int, default=8, metavar="K",
                   help="store a full keyframe every K snapshots (default 8)")
    order = p.add_mutually_exclusive_group()
    order.add_argument("--sorted", dest="assume_sorted", action="store_const", const=True, default=None,
                       help="declare the events sorted by time (checked while reading; one pass). Default: trust the "
                            "store's sorted_by_time attribute, else check with one extra pass")
    order.add_argument("--unsorted", dest="assume_sorted", action="store_const", const=False,
                       help="bucket the events by window on disk, whatever their order (the pass that finds "
                            "the time range still runs; the order found is not relied on)")
    p.add_argument("--buffer-events", type=int, default=1 << 22, metavar="N",
                   help="events held in memory before a sorted run is written (bounds memory; default 4194304)")
    add_overwrite(p, "OUT if it exists")
    add_cluster(p)
    p.set_defaults(run=run)


def run(args) -> dict:
    from .._atomic import claim_outputs
    from ..cluster import cluster_report, open_client
    from ..dynamic.snapshots import build_snapshots
    cluster = cluster_config(args, "store", "out")
    with claim_outputs({"OUT": args.out}, {"input store": args.store}, args.overwrite), \
            open_client(cluster) as client:
        result = build_snapshots(args.store, args.out, window=args.window, num_snapshots=args.num_snapshots,
                                 edge_life=args.edge_life, keyframe_every=args.keyframe_every,
                                 overwrite=args.overwrite, assume_sorted=args.assume_sorted,
                                 buffer_events=args.buffer_events, client=client)
        on_cluster = cluster_report(cluster, client)
    out = result.to_dict()
    out.update(on_cluster)   # on a cluster the build ran on a worker: its seconds and peak RSS are the worker's
    return out
