"""KaMinPar (PyPI ``kaminpar``) as an in-memory graph partitioner, beside pymetis.

The Python bindings load graphs from files only, so the graph is written in
ParHiP's binary format (24-byte header VERSION, n, m; then byte addresses of
every node's first neighbour, the neighbour lists, the vertex and edge
weights; all 64-bit: VERSION bit 0 = no edge weights, bit 1 = no vertex
weights) and loaded back. One thread, so the result is the same for a seed on
every machine (KaMinPar's parallel label propagation is not deterministic).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

HEADER_BYTES = 24
# The least imbalance asked of KaMinPar: --balance 1.0 asks for none, which KaMinPar 3.7 refuses
# ("Call KaMinPar::set_uniform_max_block_weights() ... before calling KaMinPar::compute_partition()");
# parts of a millionth above the mean are the balanced ones whenever the mean is below a million.
MIN_IMBALANCE = 1e-6


def available() -> bool:
    """Whether the ``kaminpar`` package can be imported."""
    try:
        import kaminpar  # noqa: F401
    except ImportError:
        return False
    return True


def write_parhip(path: str | os.PathLike, xadj: np.ndarray, adjncy: np.ndarray,
                 vweights: np.ndarray | None = None, eweights: np.ndarray | None = None) -> Path:
    """A symmetric CSR graph (no self-loops, no duplicate entries) as a ParHiP binary file."""
    n, m = len(xadj) - 1, len(adjncy)
    version = (0 if eweights is not None else 1) | (0 if vweights is not None else 2)
    path = Path(path)
    with open(path, "wb") as f:
        np.array([version, n, m], dtype=np.uint64).tofile(f)
        (HEADER_BYTES + 8 * (n + 1) + 8 * np.asarray(xadj, dtype=np.uint64)).astype(np.uint64).tofile(f)
        np.asarray(adjncy, dtype=np.uint64).tofile(f)
        if vweights is not None:
            np.asarray(vweights, dtype=np.int64).tofile(f)
        if eweights is not None:
            np.asarray(eweights, dtype=np.int64).tofile(f)
    return path


def partition(path: str | os.PathLike, k: int, balance: float, seed: int, *, threads: int = 1,
              context: str = "default") -> np.ndarray:
    """KaMinPar's parts (int32) of the ParHiP graph at ``path``, imbalance ``balance - 1`` (at least
    ``MIN_IMBALANCE``: KaMinPar 3.7 reads an imbalance of 0 as "no block weights set" and raises)."""
    import kaminpar

    kaminpar.reseed(int(seed))
    graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
    solver = kaminpar.KaMinPar(threads, kaminpar.context_by_name(context))
    imbalance = max(float(balance) - 1.0, MIN_IMBALANCE)
    return np.asarray(solver.compute_partition(graph, k, imbalance), dtype=np.int32)
