"""graphstream export PARTS_DIR --to dgl|pyg OUT [--overwrite] [--graph-name NAME] [--json]."""
from __future__ import annotations

from .flags import add_cluster, add_overwrite, cluster_config


def configure(p) -> None:
    p.description = ("Write a partitioned dataset (graphstream partition --out) in the partition "
                     "format of DistDGL (dgl.distributed.load_partition, DistGraph) or PyG "
                     "(torch_geometric.distributed.LocalGraphStore/LocalFeatureStore.from_partition). "
                     "--to dgl needs the dgl package: run it with .venv-dgl/bin/graphstream "
                     "(made by tools/dgl-env.sh).")
    p.add_argument("parts", help="partitioned dataset folder (with manifest.json)")
    # No argparse choices: an unknown target is a GraphStreamError (exit 2, one line) like any bad input.
    p.add_argument("--to", dest="target", required=True, metavar="{dgl,pyg}",
                   help="target format: dgl (DistDGL) or pyg (torch_geometric.distributed)")
    p.add_argument("out", help="output folder (written into a temporary sibling, renamed into place at the end)")
    p.add_argument("--graph-name", default=None,
                   help="DGL: graph name in the config and for DistGraph (default: OUT's folder name)")
    add_overwrite(p, "an existing output")
    add_cluster(p)
    p.set_defaults(run=run)


def preflight(args, pending: dict[str, str] | None = None) -> None:
    """What is refused before anything is opened (the service checks a job's arguments with it too;
    ``pending``, the kinds of inputs a service pipeline has yet to write, is not needed here)."""
    from ..errors import ParameterError
    from ..export import TARGETS
    if args.target not in TARGETS:
        raise ParameterError(f"unknown export target {args.target!r}: expected one of {', '.join(TARGETS)}")
    if args.graph_name is not None and args.target != "dgl":   # it was ignored without a word
        raise ParameterError(f"--graph-name is DistDGL's (--to dgl); a {args.target} export has no graph name")


def run(args) -> dict:
    from .._atomic import claim_outputs
    from ..cluster import cluster_report, open_client
    from ..export import export

    preflight(args)
    cluster = cluster_config(args, "parts", "out")
    with claim_outputs({"OUT": args.out}, {"partitioned dataset": args.parts}, args.overwrite), \
            open_client(cluster) as client:
        result = export(args.parts, args.out, args.target, overwrite=args.overwrite,
                        graph_name=args.graph_name, client=client).to_dict()
        result.update(cluster_report(cluster, client))
    return result
