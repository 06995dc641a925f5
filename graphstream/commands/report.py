"""graphstream report PARTS_DIR [--html OUT] [--json]: the partition report (graphstream.report).

Part sizes (inner vs halo), edges per part, balance and replication factor
of a partitioned dataset, and RF against k when other partitionings of the
same graph sit beside it; ``--html`` writes them as one self-contained page
with the plots.
"""
from __future__ import annotations

from .flags import add_overwrite

SUMMARY = ("path", "algorithm", "num_parts", "num_nodes", "num_edges", "halo_hops", "replication_factor",
           "node_balance", "edge_balance", "local_balance", "halo_fraction", "html")


def configure(p) -> None:
    p.description = ("Report a partitioned dataset: part sizes (inner vs halo), edges per part, balance, "
                     "replication factor, and RF against k over the partitionings of the same graph beside it.")
    p.add_argument("parts", metavar="PARTS_DIR", help="partitioned dataset (graphstream partition --out)")
    p.add_argument("--html", default=None, metavar="OUT",
                   help="also write the report with its plots as one self-contained HTML page")
    add_overwrite(p, "an existing --html page")
    p.set_defaults(run=run)


def run(args) -> dict:
    from .._atomic import atomic_file, claim_outputs
    from ..errors import path_argument
    from ..report import partition_report, report_html

    report = partition_report(args.parts)
    result = report.to_dict()
    if args.html is not None:
        args.html = path_argument(args.html, "--html")   # reported absolute, as every path
        with claim_outputs({"--html": args.html}, {"PARTS_DIR": args.parts}, args.overwrite, files={"--html"}):
            page = report_html(report)
            with atomic_file(args.html) as tmp:
                tmp.write_text(page, encoding="utf-8")
        result["html"] = str(args.html)
    return result
