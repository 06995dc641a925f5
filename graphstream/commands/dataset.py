"""graphstream dataset cora|citeseer|facebook|twitch-de|twitch-engb OUT_DIR: a graph store plus node data (.npy)."""
from __future__ import annotations

from .._atomic import claim_outputs
from .._resources import peak_rss_bytes
from .flags import add_overwrite


def configure(p) -> None:
    p.add_argument("name", choices=["cora", "citeseer", "facebook", "twitch-de", "twitch-engb"],
                   help="cora, citeseer (Planetoid splits), facebook (MUSAE, seeded 70/15/15 split) or "
                        "twitch-de, twitch-engb (MUSAE Twitch, binary labels, stratified seeded 70/15/15 split)")
    p.add_argument("out_dir", help="output folder: graph.zarr + features.npy, labels.npy, *_mask.npy")
    p.add_argument("--root", default="../shared/datasets",
                   help="folder holding the raw datasets (default ../shared/datasets)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of facebook's and Twitch's train/val/test split (default 0)")
    p.add_argument("--target", default=None, choices=["mature", "partner"],
                   help="Twitch only: the binary label, mature (DE 60%% positive) or partner (DE 6.3%% "
                        "positive: strongly imbalanced, and given away by the features; see "
                        "docs/training.md) (default mature)")
    add_overwrite(p, "an existing output folder")
    p.set_defaults(run=run)


def run(args) -> dict:
    from ..errors import ParameterError, whole_number
    from ..ingest.datasets import load_dataset, source_folder
    if args.target is not None and not args.name.startswith("twitch"):
        raise ParameterError(f"--target {args.target}: the Twitch datasets' label only (not {args.name}'s)")
    if args.seed is not None and args.name in ("cora", "citeseer"):   # was accepted and set aside
        raise ParameterError(f"--seed {args.seed}: {args.name} keeps its Planetoid split; --seed draws "
                             "facebook's and Twitch's")
    seed = 0 if args.seed is None else whole_number(args.seed, "--seed", 0, 2**63 - 1)   # -1: a numpy traceback
    with claim_outputs({"OUT_DIR": args.out_dir}, {"dataset folder": source_folder(args.name, args.root)},
                       args.overwrite):
        result = load_dataset(args.name, args.out_dir, root=args.root, seed=seed, overwrite=args.overwrite,
                              target=args.target or "mature")
    result["peak_rss_bytes"] = peak_rss_bytes()
    return result
