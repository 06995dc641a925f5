"""Loaders for the shared real datasets with node data: Cora, Citeseer, MUSAE facebook.

``load_dataset(name, out_dir)`` writes, atomically (a temporary sibling
renamed into place):

* ``out_dir/graph.zarr``: an undirected graph store; each undirected edge
  once, as (min, max), sorted, duplicates removed;
* ``features.npy`` (N x F float32), ``labels.npy`` (N int64),
  ``train_mask.npy``, ``val_mask.npy``, ``test_mask.npy`` (N bool).

Choices, following the standard loaders:

* Planetoid (Cora, Citeseer), as PyTorch Geometric's ``Planetoid``: the
  graph dict is symmetrised, self-loops and duplicate edges are removed
  (Cora 2,708 nodes / 5,278 edges, Citeseer 3,327 / 4,552). Features are
  ``allx`` then ``tx`` with the test rows put back at their test indices
  (raw 0/1 bag of words, not row-normalised); labels are the argmax of the
  one-hot rows. Split: the first ``len(y)`` nodes train (140 Cora, 120
  Citeseer), the next 500 validation, the 1,000 ids of ``test.index``
  test. Citeseer has 15 ids inside the test range with no test row: they
  get zero features and label 0, and are in no mask (as PyG and DGL do).
* MUSAE facebook: edges as in ``facebook_edges.csv`` (171,002, of which
  179 self-loops are kept: the file has no duplicates); binary features
  from ``facebook.json`` (4,714 dims); labels from ``page_type`` with the
  classes numbered in alphabetical order (company, government, politician,
  tvshow); a seeded split: a permutation from
  ``numpy.random.default_rng(seed)``, its first floor(70 N / 100) nodes train,
  the next floor(15 N / 100) validation, the rest test.

These datasets are small (at most 424 MB of facebook features, written
through a memory map); their edges are handled in memory.
"""
from __future__ import annotations

import csv
import json
import pickle
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._atomic import allocated_memmap, atomic_dir, save_npy
from .._report import phase_logger
from .._resources import Stopwatch
from ..errors import InputFormatError, InputNotFoundError, ParameterError
from ..store import GraphWriter

DATASETS = ("cora", "citeseer", "facebook")
DEFAULT_ROOT = "../shared/datasets"
PLANETOID_VAL = 500
FACEBOOK_FEATURES = 4714
FACEBOOK_SPLIT_PERCENT = (70, 15)


@dataclass(frozen=True, slots=True)
class NodeDataset:
    """A dataset in memory before it is written (edges as an undirected (u < v) list)."""
    name: str
    src: np.ndarray
    dst: np.ndarray
    labels: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    source: str


def source_folder(name: str, root: str | Path) -> Path:
    """The folder under ``root`` that ``load_dataset(name)`` reads (its output must stay outside it)."""
    return Path(root) / ("musae-facebook" if name.lower() == "facebook" else "planetoid")


def _need(path: Path) -> Path:
    if not path.exists():
        raise InputNotFoundError(f"{path}: dataset file not found (is --root right? "
                                 "the shared datasets live in ../shared/datasets)")
    return path


def _undirected(src: np.ndarray, dst: np.ndarray, drop_self_loops: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each undirected edge once as (min, max), sorted, duplicates removed."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if drop_self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    pairs = np.unique(np.stack([np.minimum(src, dst), np.maximum(src, dst)], axis=1), axis=0)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


def _mask(n: int, idx: np.ndarray) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    m[idx] = True
    return m


# ---------------------------------------------------------------------------
# Planetoid
# ---------------------------------------------------------------------------
# Everything the Planetoid pickles (Python 2, protocol 2) name: a dict of lists for the graph,
# numpy arrays for the labels, scipy CSR matrices for the features; under the old and new module
# names. A pickle calls what it names, so anything else (os.system, builtins.eval, ...) is refused.
PLANETOID_GLOBALS = frozenset({
    ("__builtin__", "list"), ("builtins", "list"),
    ("collections", "defaultdict"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("scipy.sparse.csr", "csr_matrix"), ("scipy.sparse._csr", "csr_matrix"),
})


class _PlanetoidUnpickler(pickle.Unpickler):
    """An unpickler that builds only :data:`PLANETOID_GLOBALS`: a crafted file cannot run code."""

    def find_class(self, module: str, name: str):
        if (module, name) not in PLANETOID_GLOBALS:
            raise pickle.UnpicklingError(f"refusing {module}.{name}: a Planetoid pickle holds only lists, "
                                         "dicts, numpy arrays and scipy CSR matrices")
        return super().find_class(module, name)


def _load_pickle(path: Path):
    with open(_need(path), "rb") as f, warnings.catch_warnings():
        # Old pickles name scipy.sparse.csr and numpy.core, deprecated in recent scipy and numpy.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return _PlanetoidUnpickler(f, encoding="latin1").load()
        except Exception as exc:  # a damaged pickle can raise almost anything
            raise InputFormatError(f"{path}: cannot read the Planetoid pickle ({exc})") from exc


def _dense(m) -> np.ndarray:
    return np.asarray(m.todense() if hasattr(m, "todense") else m, dtype=np.float32)


def planetoid(name: str, root: Path) -> tuple[NodeDataset, np.ndarray]:
    """Load ``ind.<name>.*`` with the standard Planetoid split; return the dataset and features."""
    base = root / "planetoid"
    objs = {k: _load_pickle(base / f"ind.{name}.{k}") for k in ("x", "y", "tx", "ty", "allx", "ally", "graph")}
    test_index = np.loadtxt(_need(base / f"ind.{name}.test.index"), dtype=np.int64, ndmin=1)
    sorted_test = np.sort(test_index)
    tx, ty = _dense(objs["tx"]), np.asarray(objs["ty"], dtype=np.float32)
    if name == "citeseer":
        # Some test ids have no row (isolated nodes): pad with zero rows, as PyG/DGL do.
        span = sorted_test[-1] - sorted_test[0] + 1
        tx_ext = np.zeros((span, tx.shape[1]), dtype=np.float32)
        tx_ext[sorted_test - sorted_test[0]] = tx
        ty_ext = np.zeros((span, ty.shape[1]), dtype=np.float32)
        ty_ext[sorted_test - sorted_test[0]] = ty
        tx, ty = tx_ext, ty_ext
    x = np.vstack([_dense(objs["allx"]), tx])
    y = np.vstack([np.asarray(objs["ally"], dtype=np.float32), ty])
    # Put the test rows back at their node ids.
    x[test_index] = x[sorted_test]
    y[test_index] = y[sorted_test]
    labels = y.argmax(axis=1).astype(np.int64)
    n = x.shape[0]
    graph = objs["graph"]
    src = np.fromiter((k for k, vs in graph.items() for _ in vs), dtype=np.int64)
    dst = np.fromiter((v for vs in graph.values() for v in vs), dtype=np.int64)
    if len(src) and max(src.max(), dst.max()) >= n:
        raise InputFormatError(f"{base}/ind.{name}.graph: node id {max(src.max(), dst.max())} beyond the "
                               f"{n} feature rows")
    src, dst = _undirected(src, dst, drop_self_loops=True)
    n_train = len(objs["y"])
    ds = NodeDataset(name=name, src=src, dst=dst, labels=labels, train=np.arange(n_train),
                     val=np.arange(n_train, n_train + PLANETOID_VAL), test=test_index,
                     source=str(base / f"ind.{name}"))
    return ds, x


# ---------------------------------------------------------------------------
# MUSAE facebook
# ---------------------------------------------------------------------------
def facebook(root: Path, seed: int) -> tuple[NodeDataset, dict[int, list[int]]]:
    """Edges, labels and seeded split of MUSAE facebook; features are returned as the sparse dict."""
    base = root / "musae-facebook"
    edges_path = _need(base / "facebook_edges.csv")
    try:
        edges = np.loadtxt(edges_path, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    except ValueError as exc:
        raise InputFormatError(f"{edges_path}: cannot parse edges ({exc})") from exc
    target_path = _need(base / "facebook_target.csv")
    with open(target_path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "page_type" not in rows[0] or "id" not in rows[0]:
        raise InputFormatError(f"{target_path}: expected columns id and page_type")
    n = len(rows)
    ids = np.array([int(r["id"]) for r in rows], dtype=np.int64)
    if not np.array_equal(np.sort(ids), np.arange(n)):
        raise InputFormatError(f"{target_path}: ids are not 0..{n - 1}")
    classes = sorted({r["page_type"] for r in rows})
    labels = np.empty(n, dtype=np.int64)
    labels[ids] = [classes.index(r["page_type"]) for r in rows]
    if edges.size and edges.max() >= n:
        raise InputFormatError(f"{edges_path}: node id {edges.max()} beyond the {n} labelled nodes")
    features_path = _need(base / "facebook.json")
    with open(features_path, encoding="utf-8") as f:
        try:
            feats = {int(k): v for k, v in json.load(f).items()}
        except (ValueError, AttributeError) as exc:
            raise InputFormatError(f"{features_path}: expected a JSON object node id -> feature ids "
                                   f"({exc})") from exc
    src, dst = _undirected(edges[:, 0], edges[:, 1], drop_self_loops=False)
    perm = np.random.default_rng(seed).permutation(n)
    n_train = n * FACEBOOK_SPLIT_PERCENT[0] // 100  # integer arithmetic: 0.7 * n may round down
    n_val = n * FACEBOOK_SPLIT_PERCENT[1] // 100
    ds = NodeDataset(name="facebook", src=src, dst=dst, labels=labels, train=np.sort(perm[:n_train]),
                     val=np.sort(perm[n_train:n_train + n_val]), test=np.sort(perm[n_train + n_val:]),
                     source=str(edges_path))
    return ds, feats


def _write_facebook_features(path: Path, feats: dict[int, list[int]], n: int, source: Path) -> int:
    """Binary N x 4714 float32 features, written row block by row block into a memory map
    (allocated first: a full disk is an ENOSPC error, not a SIGBUS)."""
    out = allocated_memmap(path, np.float32, (n, FACEBOOK_FEATURES))
    block = 4096
    for start in range(0, n, block):
        stop = min(start + block, n)
        rows = np.zeros((stop - start, FACEBOOK_FEATURES), dtype=np.float32)
        for i in range(start, stop):
            cols = feats.get(i, [])
            if cols and (min(cols) < 0 or max(cols) >= FACEBOOK_FEATURES):
                raise InputFormatError(f"{source}: node {i} has feature id outside [0, {FACEBOOK_FEATURES})")
            rows[i - start, cols] = 1.0
        out[start:stop] = rows
    out.flush()
    del out
    return FACEBOOK_FEATURES


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
def _write_graph(path: Path, ds: NodeDataset, n: int) -> None:
    with GraphWriter(path, num_nodes=n, directed=False, source=ds.source, attrs={"dataset": ds.name}) as w:
        w.append(ds.src, ds.dst)
        w.close()


def load_dataset(name: str, out_dir: str | Path, *, root: str | Path = DEFAULT_ROOT, seed: int = 0,
                 overwrite: bool = False) -> dict:
    """Write ``name`` (cora, citeseer, facebook) as a graph store plus node data into ``out_dir``.

    Returns a summary: path, graph, num_nodes, num_edges, num_features,
    num_classes, num_train/num_val/num_test, self_loops, seconds.
    ``seed`` only affects facebook's split.
    """
    watch = Stopwatch(on_lap=phase_logger("dataset"))  # one progress line per phase
    name = name.lower()
    if name not in DATASETS:
        raise ParameterError(f"unknown dataset {name!r}; expected one of {', '.join(DATASETS)}")
    root = Path(root)
    if not root.is_dir():
        raise InputNotFoundError(f"{root}: dataset root not found (pass --root, e.g. ../shared/datasets)")
    if name == "facebook":
        ds, feats = facebook(root, seed)
        x = None
    else:
        ds, x = planetoid(name, root)
    watch.lap(f"read {name}")
    n = len(ds.labels)
    with atomic_dir(out_dir, overwrite=overwrite) as tmp:
        _write_graph(tmp / "graph.zarr", ds, n)
        if x is None:
            num_features = _write_facebook_features(tmp / "features.npy", feats, n,
                                                    root / "musae-facebook" / "facebook.json")
        else:
            save_npy(tmp / "features.npy", x)
            num_features = x.shape[1]
        save_npy(tmp / "labels.npy", ds.labels)
        for split, idx in (("train", ds.train), ("val", ds.val), ("test", ds.test)):
            save_npy(tmp / f"{split}_mask.npy", _mask(n, idx))
    watch.lap("write")
    out_dir = Path(out_dir)
    return {
        "name": name, "path": str(out_dir), "graph": str(out_dir / "graph.zarr"),
        "num_nodes": n, "num_edges": len(ds.src), "directed": False,
        "num_features": int(num_features), "num_classes": int(ds.labels.max()) + 1,
        "num_train": len(ds.train), "num_val": len(ds.val), "num_test": len(ds.test),
        "self_loops": int(np.count_nonzero(ds.src == ds.dst)), "seed": seed if name == "facebook" else None,
        "seconds": watch.seconds,
    }
