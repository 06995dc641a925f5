"""graphstream verify PATH [--json]: check a store or dataset end to end (every chunk, every file)."""
from __future__ import annotations


def configure(p) -> None:
    p.description = ("Check a graph store, a snapshot store, dynamic partitions, a partitioned dataset or a "
                     "node data folder (graphstream dataset's) end to end: every chunk's and file's CRC-32C, "
                     "counts and shapes, the complete flag, offsets and indptr non-decreasing, ids in range, "
                     "each node owned by one part, every snapshot rebuilt to its recorded edge count. Exit 0 "
                     "when everything holds, 2 listing the problems otherwise.")
    p.add_argument("path", help="graph store (.zarr), snapshot store, a dataset folder with manifest.json, or a "
                                "node data folder (graph.zarr, features.npy, node_data.json)")
    p.set_defaults(run=run)


def run(args) -> dict:
    from ..store.verify import verify

    return verify(args.path).to_dict()
