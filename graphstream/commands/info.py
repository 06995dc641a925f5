"""graphstream info STORE.zarr [--json]: attributes and streamed degree statistics."""
from __future__ import annotations

import numpy as np

from .._resources import INFO_BYTES_PER_NODE, Stopwatch, check_node_state_fits, peak_rss_bytes
from ..store import open_store


def configure(p) -> None:
    p.add_argument("store", help="graph store (.zarr)")
    p.set_defaults(run=run)


def store_stats(path: str) -> dict:
    from ..store import degree_pass  # compiles numba kernels: not for `info --help`
    watch = Stopwatch()
    store = open_store(path)
    check_node_state_fits(store.num_nodes, INFO_BYTES_PER_NODE, "info", path)  # before the degree arrays
    deg = degree_pass(store)
    total = deg.total
    n = store.num_nodes
    result = store.info.to_dict()
    result.update({
        "max_degree": int(total.max()) if n else 0,
        "mean_degree": float(total.mean()) if n else 0.0,
        "max_out_degree": int(deg.out_degree.max()) if n else 0,
        "max_in_degree": int(deg.in_degree.max()) if n else 0,
        "isolated_nodes": int(np.count_nonzero(total == 0)),
        "self_loops": deg.self_loops,
        "bytes_on_disk": _disk_bytes(path),
        "seconds": watch.seconds,
        "peak_rss_bytes": peak_rss_bytes(),
    })
    return result


def _disk_bytes(path: str) -> int | None:
    from pathlib import Path
    p = Path(path)
    if not p.is_dir():
        return None
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def run(args) -> dict:
    return store_stats(args.store)
