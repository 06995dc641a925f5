"""graphstream dataset cora|citeseer|facebook OUT_DIR: a graph store plus node data (.npy)."""
from __future__ import annotations

from .._atomic import claim_outputs
from .._resources import peak_rss_bytes
from .flags import add_overwrite


def configure(p) -> None:
    p.add_argument("name", choices=["cora", "citeseer", "facebook"],
                   help="cora, citeseer (Planetoid splits) or facebook (MUSAE, seeded 70/15/15 split)")
    p.add_argument("out_dir", help="output folder: graph.zarr + features.npy, labels.npy, *_mask.npy")
    p.add_argument("--root", default="../shared/datasets",
                   help="folder holding the raw datasets (default ../shared/datasets)")
    p.add_argument("--seed", type=int, default=0, help="seed of facebook's train/val/test split (default 0)")
    add_overwrite(p, "an existing output folder")
    p.set_defaults(run=run)


def run(args) -> dict:
    from ..ingest.datasets import load_dataset, source_folder
    with claim_outputs({"OUT_DIR": args.out_dir}, {"dataset folder": source_folder(args.name, args.root)},
                       args.overwrite):
        result = load_dataset(args.name, args.out_dir, root=args.root, seed=args.seed, overwrite=args.overwrite)
    result["peak_rss_bytes"] = peak_rss_bytes()
    return result
