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
* MUSAE Twitch (``twitch-de``, ``twitch-engb``; the binary, class-imbalanced
  case): edges as in ``<C>_edges.csv`` (DE 153,138, ENGB 35,324; no
  self-loops or duplicates); binary features from ``<C>.json`` (3,170 dims,
  repeated ids in a list count once); node id = ``new_id`` of
  ``<C>_target.csv``; labels = the ``--target`` column (``mature``, default:
  DE 60% / ENGB 55% positive; ``partner``: DE 6.3% / ENGB 5.4% positive),
  1 = True. Split: stratified and seeded, so both classes keep their share in
  every set: for each class in turn (0, then 1) a permutation of its nodes
  from one ``numpy.random.default_rng(seed)``, its first floor(70 n_c / 100)
  nodes train, the next floor(15 n_c / 100) validation, the rest test.

These datasets are small (at most 424 MB of facebook features, 120 MB of
Twitch DE features, written through a memory map); their edges are handled in
memory.
"""
from __future__ import annotations

import csv
import json
import pickle
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import allocated_memmap, atomic_dir, save_npy
from .._report import log, phase_logger
from .._resources import Stopwatch
from ..errors import InputFormatError, InputNotFoundError, ParameterError, path_argument
from ..store import GraphWriter
from ..store.nodedata import write_manifest as write_node_data_manifest

DATASETS = ("cora", "citeseer", "facebook", "twitch-de", "twitch-engb")
DEFAULT_ROOT = "../shared/datasets"
PLANETOID_VAL = 500
FACEBOOK_FEATURES = 4714
FACEBOOK_SPLIT_PERCENT = (70, 15)
TWITCH_FEATURES = 3170
TWITCH_TARGETS = ("mature", "partner")
TWITCH_SPLIT_PERCENT = (70, 15)  # per class (stratified)
TWITCH_CODES = {"twitch-de": "DE", "twitch-engb": "ENGB"}


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
    name = name.lower()
    if name.startswith("twitch"):
        return Path(root) / "musae-twitch"
    return Path(root) / ("musae-facebook" if name == "facebook" else "planetoid")


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
    index_path = _need(base / f"ind.{name}.test.index")
    try:
        test_index = np.loadtxt(index_path, dtype=np.int64, ndmin=1)
    except ValueError as exc:   # a line that is no whole number
        raise InputFormatError(f"{index_path}: cannot read the test node ids ({exc})") from exc
    sorted_test = np.sort(test_index)
    repeated = int(np.count_nonzero(sorted_test[1:] == sorted_test[:-1]))
    if len(test_index) == 0 or repeated:
        raise InputFormatError(f"{index_path}: expected distinct test node ids, got {len(test_index)} ids "
                               f"({len(test_index) - repeated} distinct)")
    tx, ty = _dense(objs["tx"]), np.asarray(objs["ty"], dtype=np.float32)
    if len(test_index) != len(tx):   # one id per test row (ind.NAME.tx)
        raise InputFormatError(f"{index_path}: {len(test_index)} test node ids for the {len(tx)} test rows of "
                               f"ind.{name}.tx")
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
    n_allx = len(x) - len(tx)
    if sorted_test[0] < n_allx or sorted_test[-1] >= len(x):
        raise InputFormatError(f"{index_path}: test node ids {sorted_test[0]}..{sorted_test[-1]} do not fit the "
                               f"{len(tx)} test rows after the {n_allx} others (ind.{name}.tx)")
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
    if len(src) and min(src.min(), dst.min()) < 0:
        raise InputFormatError(f"{base}/ind.{name}.graph: negative node id {min(src.min(), dst.min())}")
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
    feats = _read_feature_json(base / "facebook.json")
    src, dst = _undirected(edges[:, 0], edges[:, 1], drop_self_loops=False)
    perm = np.random.default_rng(seed).permutation(n)
    n_train = n * FACEBOOK_SPLIT_PERCENT[0] // 100  # integer arithmetic: 0.7 * n may round down
    n_val = n * FACEBOOK_SPLIT_PERCENT[1] // 100
    ds = NodeDataset(name="facebook", src=src, dst=dst, labels=labels, train=np.sort(perm[:n_train]),
                     val=np.sort(perm[n_train:n_train + n_val]), test=np.sort(perm[n_train + n_val:]),
                     source=str(edges_path))
    return ds, feats


def _write_binary_features(path: Path, feats: dict[int, list[int]], n: int, dim: int, source: Path) -> int:
    """Binary N x dim float32 features, written row block by row block into a memory map
    (allocated first: a full disk is an ENOSPC error, not a SIGBUS)."""
    out = allocated_memmap(path, np.float32, (n, dim))
    block = 4096
    for start in range(0, n, block):
        stop = min(start + block, n)
        rows = np.zeros((stop - start, dim), dtype=np.float32)
        for i in range(start, stop):
            cols = feats.get(i, [])
            if not isinstance(cols, list) or not all(type(c) is int for c in cols):
                raise InputFormatError(f"{source}: node {i}: expected a list of integer feature ids")
            if cols and (min(cols) < 0 or max(cols) >= dim):
                raise InputFormatError(f"{source}: node {i} has feature id outside [0, {dim})")
            rows[i - start, cols] = 1.0
        out[start:stop] = rows
    out.flush()
    del out
    return dim


def _write_facebook_features(path: Path, feats: dict[int, list[int]], n: int, source: Path) -> int:
    return _write_binary_features(path, feats, n, FACEBOOK_FEATURES, source)


def _read_feature_json(path: Path) -> dict[int, list[int]]:
    with open(_need(path), encoding="utf-8") as f:
        try:
            return {int(k): v for k, v in json.load(f).items()}
        except (ValueError, AttributeError) as exc:
            raise InputFormatError(f"{path}: expected a JSON object node id -> feature ids ({exc})") from exc


# ---------------------------------------------------------------------------
# MUSAE Twitch (binary labels, `partner` strongly imbalanced)
# ---------------------------------------------------------------------------
def stratified_split(labels: np.ndarray, seed: int,
                     percent: tuple[int, int] = TWITCH_SPLIT_PERCENT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded split keeping each class's share: per class (in increasing order) a permutation of its nodes
    from one ``default_rng(seed)``, the first floor(percent[0] n_c / 100) train, the next
    floor(percent[1] n_c / 100) validation, the rest test. Returns sorted node ids."""
    rng = np.random.default_rng(seed)
    parts: tuple[list, list, list] = ([], [], [])
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_train = len(idx) * percent[0] // 100
        n_val = len(idx) * percent[1] // 100
        for out, sel in zip(parts, (idx[:n_train], idx[n_train:n_train + n_val], idx[n_train + n_val:]), strict=True):
            out.append(sel)
    return tuple(np.sort(np.concatenate(p)).astype(np.int64) for p in parts)  # type: ignore[return-value]


def _bool_column(value: str, path: Path, column: str, line: int) -> int:
    v = value.strip().lower()
    if v in ("true", "1"):
        return 1
    if v in ("false", "0"):
        return 0
    raise InputFormatError(f"{path}:{line}: column {column} is {value!r}, expected True or False")


def twitch(name: str, root: Path, seed: int, target: str) -> tuple[NodeDataset, dict[int, list[int]]]:
    """Edges, binary labels (``target`` column) and stratified seeded split of MUSAE Twitch DE or ENGB;
    features are returned as the sparse dict."""
    if target not in TWITCH_TARGETS:
        raise ParameterError(f"unknown Twitch target {target!r}; expected one of {', '.join(TWITCH_TARGETS)}")
    code = TWITCH_CODES[name]
    base = root / "musae-twitch"
    edges_path = _need(base / f"{code}_edges.csv")
    try:
        edges = np.loadtxt(edges_path, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    except ValueError as exc:
        raise InputFormatError(f"{edges_path}: cannot parse edges ({exc})") from exc
    if edges.size and edges.shape[1] != 2:
        raise InputFormatError(f"{edges_path}: expected two columns from,to")
    target_path = _need(base / f"{code}_target.csv")
    with open(target_path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "new_id" not in rows[0] or target not in rows[0]:
        raise InputFormatError(f"{target_path}: expected columns new_id and {target}")
    n = len(rows)
    try:
        ids = np.array([int(r["new_id"]) for r in rows], dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise InputFormatError(f"{target_path}: new_id is not an integer ({exc})") from exc
    if not np.array_equal(np.sort(ids), np.arange(n)):
        raise InputFormatError(f"{target_path}: new_id values are not 0..{n - 1}")
    labels = np.empty(n, dtype=np.int64)
    labels[ids] = [_bool_column(r[target] or "", target_path, target, i + 2) for i, r in enumerate(rows)]
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise InputFormatError(f"{edges_path}: node id outside 0..{n - 1} (the labelled nodes)")
    feats = _read_feature_json(base / f"{code}.json")
    src, dst = _undirected(edges[:, 0], edges[:, 1], drop_self_loops=False) if edges.size else (
        np.zeros(0, np.int64), np.zeros(0, np.int64))
    train, val, test = stratified_split(labels, seed)
    ds = NodeDataset(name=name, src=src, dst=dst, labels=labels, train=train, val=val, test=test,
                     source=str(edges_path))
    return ds, feats


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
def _write_graph(path: Path, ds: NodeDataset, n: int) -> None:
    with GraphWriter(path, num_nodes=n, directed=False, source=ds.source, attrs={"dataset": ds.name}) as w:
        w.append(ds.src, ds.dst)
        w.close()


def load_dataset(name: str, out_dir: str | Path, *, root: str | Path = DEFAULT_ROOT, seed: int = 0,
                 overwrite: bool = False, target: str = "mature") -> dict:
    """Write ``name`` (cora, citeseer, facebook, twitch-de, twitch-engb) as a graph store plus node data
    into ``out_dir``.

    Returns a summary: path, graph, num_nodes, num_edges, num_features,
    num_classes, num_train/num_val/num_test, self_loops, seconds; Twitch adds
    target, num_positive and label_in_features (:func:`label_in_features`; with a
    ``note`` when the features give the label away, as they do ``partner``). ``seed`` only affects
    facebook's and Twitch's splits; ``target`` (mature or partner) only Twitch's labels.
    """
    watch = Stopwatch(on_lap=phase_logger("dataset"))  # one progress line per phase
    name = name.lower()
    if name not in DATASETS:
        raise ParameterError(f"unknown dataset {name!r}; expected one of {', '.join(DATASETS)}")
    out_dir = path_argument(out_dir, "out_dir")   # reported absolute, as every path graphstream reports
    root = Path(path_argument(root, "root"))
    if not root.is_dir():
        raise InputNotFoundError(f"{root}: dataset root not found (pass --root DIR, the folder that holds "
                                  f"planetoid/, musae-facebook/ and musae-twitch/)")
    twitch_like = name in TWITCH_CODES
    if twitch_like:
        ds, feats = twitch(name, root, seed, target)
        x = None
    elif name == "facebook":
        ds, feats = facebook(root, seed)
        x = None
    else:
        ds, x = planetoid(name, root)
    watch.lap(f"read {name}")
    n = len(ds.labels)
    with atomic_dir(out_dir, overwrite=overwrite) as tmp:
        _write_graph(tmp / "graph.zarr", ds, n)
        if twitch_like:
            num_features = _write_binary_features(tmp / "features.npy", feats, n, TWITCH_FEATURES,
                                                  root / "musae-twitch" / f"{TWITCH_CODES[name]}.json")
        elif x is None:
            num_features = _write_facebook_features(tmp / "features.npy", feats, n,
                                                    root / "musae-facebook" / "facebook.json")
        else:
            save_npy(tmp / "features.npy", x)
            num_features = x.shape[1]
        save_npy(tmp / "labels.npy", ds.labels)
        for split, idx in (("train", ds.train), ("val", ds.val), ("test", ds.test)):
            save_npy(tmp / f"{split}_mask.npy", _mask(n, idx))
        write_node_data_manifest(tmp)   # the files' checksums (verify, and the builder, check them)
    watch.lap("write")
    out_dir = Path(out_dir)
    result = {
        "name": name, "path": str(out_dir), "graph": str(out_dir / "graph.zarr"),
        "num_nodes": n, "num_edges": len(ds.src), "directed": False,
        "num_features": int(num_features), "num_classes": int(ds.labels.max()) + 1,
        "num_train": len(ds.train), "num_val": len(ds.val), "num_test": len(ds.test),
        "self_loops": int(np.count_nonzero(ds.src == ds.dst)),
        "seed": seed if name == "facebook" or twitch_like else None,
        "seconds": watch.seconds,
    }
    if twitch_like:
        result["target"] = target
        result["num_positive"] = int(ds.labels.sum())
        result["label_in_features"] = leak = label_in_features(feats, ds.labels)
        if leak["indicators"] or leak["positives_covered"] == 1.0:
            result["note"] = note = (
                f"the features give the {target} label away: feature(s) {leak['indicators']} are set exactly on "
                f"one class, and {leak['positives_covered']:.0%} of the positives have one of "
                f"{leak['positive_only']} features no negative has; a model learns the label from them alone, "
                "so use this target to test class-imbalance handling, not what a GNN learns")
            log(f"dataset {name}: {note}")
    return result


def label_in_features(feats: dict[int, list[int]], labels: np.ndarray) -> dict[str, Any]:
    """How much of a binary label its sparse binary features hold: the feature ids set on exactly the
    positives or exactly the negatives (``indicators``), the number of ids set only on positives
    (``positive_only``) and the share of positives with at least one of those (``positives_covered``).
    MUSAE Twitch's ``partner`` has both (DE: 2814 on the partners, 920 on the others; every partner has
    one of 88 partner-only ids); ``mature`` has neither."""
    nodes = np.repeat(np.fromiter(feats, np.int64, len(feats)), [len(set(v)) for v in feats.values()])
    ids = np.concatenate([np.fromiter(set(v), np.int64) for v in feats.values()]) if feats else nodes
    positive = labels[nodes] == 1
    width = int(ids.max()) + 1 if len(ids) else 0
    on_pos = np.bincount(ids[positive], minlength=width)
    on_neg = np.bincount(ids[~positive], minlength=width)
    n_pos, n_neg = int(labels.sum()), int(len(labels) - labels.sum())
    indicators = np.flatnonzero(((on_pos == n_pos) & (on_neg == 0)) | ((on_pos == 0) & (on_neg == n_neg)))
    positive_only = np.flatnonzero((on_pos > 0) & (on_neg == 0))
    covered = np.unique(nodes[positive & np.isin(ids, positive_only)])
    return {"indicators": indicators.tolist(), "positive_only": len(positive_only),
            "positives_covered": round(len(covered) / n_pos, 4) if n_pos else 0.0}
