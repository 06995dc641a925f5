"""The graph store: a Zarr v3 group holding an edge stream in compressed chunks.

Layout (the contract, see DESIGN.md): 1-D arrays ``src``, ``dst`` (int32 when
num_nodes < 2**31, else int64), optional ``time`` (int64) and ``weight``
(float32), chunked along edges, Blosc zstd + shuffle; optional ``id_map``
(local id -> original id) after ``--relabel``. Group attributes ``format``,
``version``, ``num_nodes``, ``num_edges``, ``directed``, ``id_dtype``,
``source`` and ``complete``, which is set only after the last write, so an
interrupted write is refused when opened.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import google_crc32c
import numpy as np
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec

from .._atomic import AtomicOutput, disk_full, for_workers
from ..errors import (
    CorruptDataError,
    DiskFullError,
    IncompleteStoreError,
    InvalidIdError,
    OutputExistsError,
    ParameterError,
    StoreError,
    path_argument,
    whole_number,
    yes_or_no,
)
from .integrity import (
    CHUNK_ARRAY_CONFIG,
    CHUNKS_KEY,
    SEAL_KEY,
    CheckedArray,
    FolderIdentity,
    check_seal_when_due,
    chunk_codecs,
    chunks_digests,
    folder_identity,
    open_arrays,
    recorded_crcs,
    seal,
)
from .stream import EdgeBatch, stream_edges

FORMAT = "graphstream.graph"
# Version 2: every chunk carries a CRC-32C and is always written. Version 1 stores
# (no checksums) stay readable; `info` and `verify` say that they carry none.
VERSION = 2
READABLE_VERSIONS = (1, 2)
CHECKSUM_VERSION = 2
DEFAULT_CHUNK = 1 << 20
# Edges per chunk at most: a chunk is held whole per column while it is written and read (int64: 128 MiB
# at this bound), and Blosc takes at most 2 GiB a buffer; 2^40 asked for 4 TiB at once (a traceback).
MAX_CHUNK = 1 << 24
# Weights are float32: a number rounds to a finite one below this (the midpoint between float32's largest,
# 3.4028234663852886e38, and 2^128), so "3.4028235e38", float32's largest as numpy prints it, is one.
FLOAT32_LIMIT = 3.4028235677973366e38
ID32_LIMIT = 2**31
COLUMNS = ("src", "dst", "time", "weight")


def default_compressor(clevel: int = 3) -> BloscCodec:
    """Blosc zstd with byte shuffle: ids and timestamps compress well and decode fast.

    Measured (bytes per id, zstd level 3): web-NotreDame dst 0.52 with byte
    shuffle against 0.82 with bit shuffle (src 0.13 / 0.15); permuted R-MAT
    ids at scale 20, 2.8 against 2.5. Real graphs weigh more: byte shuffle.
    """
    return BloscCodec(cname="zstd", clevel=clevel, shuffle="shuffle")


def id_dtype_for(num_nodes: int) -> np.dtype:
    return np.dtype(np.int32) if num_nodes < ID32_LIMIT else np.dtype(np.int64)


def is_url(path: str | os.PathLike) -> bool:
    """An fsspec URL (``s3://...``, ``memory://...``), not a local path."""
    return "://" in str(path)


_ATTR_KEYS = ("format", "version", "complete", "num_nodes", "num_edges", "directed", "id_dtype", "source",
              "chunk_size", "arrays", CHUNKS_KEY, SEAL_KEY)


def check_group_header(attrs: dict[str, Any], fmt: str, versions: tuple[int, ...], noun: str, where: str) -> None:
    """The checks every Zarr-group format starts with: its format name, ``complete`` set by a
    finished write, and a version this graphstream reads; ``noun`` names the kind in messages."""
    if attrs.get("format") != fmt:
        raise StoreError(f"{where}: not a graphstream {noun} (format={attrs.get('format')!r}, expected {fmt!r})")
    if attrs.get("complete") is not True:
        raise IncompleteStoreError(f"{where}: {noun} is incomplete (an interrupted or failed write); rebuild it")
    if attrs.get("version") not in versions or isinstance(attrs.get("version"), bool):
        expected = " or ".join(map(str, versions))
        raise StoreError(f"{where}: {noun} version {attrs.get('version')!r} is not supported (expected {expected})")


@dataclass(frozen=True, slots=True)
class GraphManifest:
    """The group attributes of a graph store, typed: read by :func:`open_store`, written by :class:`GraphWriter`.

    ``extra``: the attributes a writer added (``dataset``, ``generator``,
    ``ingest``, ...), kept in their order after the documented ones.
    ``chunk_size`` is None for stores written before it was recorded.
    """
    num_nodes: int
    num_edges: int
    directed: bool
    id_dtype: str
    source: Any = ""   # a string for every store graphstream writes
    chunk_size: int | None = None
    complete: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    version: int = VERSION
    arrays: tuple[str, ...] | None = None   # every array of the store (version 2 on), so a lost one is seen
    chunks_crc32c: dict[str, str] | None = None   # per array, its chunks' digest (CHUNKS_KEY; local stores)

    @property
    def checksums(self) -> bool:
        """Whether every chunk carries a CRC-32C (stores of format version 2 on)."""
        return self.version >= CHECKSUM_VERSION

    @staticmethod
    def header() -> dict[str, Any]:
        """What a new store holds first: an incomplete store of this format and version."""
        return {"format": FORMAT, "version": VERSION, "complete": False}

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any], where: str) -> GraphManifest:
        """Validate the attributes of a complete store once; raise :class:`StoreError` naming ``where``."""
        check_group_header(attrs, FORMAT, READABLE_VERSIONS, "graph store", where)
        check_seal_when_due(attrs, attrs["version"], CHECKSUM_VERSION, f"{where}/zarr.json")
        missing = [k for k in ("num_nodes", "num_edges", "directed", "id_dtype") if k not in attrs]
        if missing:
            raise StoreError(f"{where}: store attributes lack {missing}")
        bad = [k for k in ("num_nodes", "num_edges")
               if not isinstance(attrs[k], int) or isinstance(attrs[k], bool) or attrs[k] < 0]
        if not isinstance(attrs["directed"], bool):
            bad.append("directed")
        if attrs["id_dtype"] not in ("int32", "int64"):
            bad.append("id_dtype")
        chunk = attrs.get("chunk_size")
        if chunk is not None and (not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1):
            bad.append("chunk_size")
        digests = attrs.get(CHUNKS_KEY)
        if digests is not None and (not isinstance(digests, dict) or not all(
                isinstance(v, str) and len(v) == 8 for v in digests.values())):
            bad.append(CHUNKS_KEY)
        if bad:
            raise StoreError(f"{where}: store attributes {bad} are malformed "
                             f"({ {k: attrs[k] for k in bad} })")
        return cls(num_nodes=attrs["num_nodes"], num_edges=attrs["num_edges"], directed=attrs["directed"],
                   id_dtype=attrs["id_dtype"], source=attrs.get("source", ""), chunk_size=chunk,
                   extra={k: v for k, v in attrs.items() if k not in _ATTR_KEYS}, version=attrs["version"],
                   arrays=tuple(attrs["arrays"]) if isinstance(attrs.get("arrays"), list) else None,
                   chunks_crc32c=digests)

    def to_attrs(self) -> dict[str, Any]:
        """The attributes in the order a writer records them (so the group's ``zarr.json`` is stable)."""
        out: dict[str, Any] = {"format": FORMAT, "version": self.version, "complete": self.complete,
                               "num_nodes": self.num_nodes, "num_edges": self.num_edges, "directed": self.directed,
                               "id_dtype": self.id_dtype, "source": self.source}
        if self.chunk_size is not None:
            out["chunk_size"] = self.chunk_size
        if self.arrays is not None:
            out["arrays"] = list(self.arrays)
        if self.chunks_crc32c is not None:
            out[CHUNKS_KEY] = dict(self.chunks_crc32c)
        out.update(self.extra)
        return seal(out) if self.version >= CHECKSUM_VERSION else out


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """What a store holds, read from its attributes."""
    path: str
    num_nodes: int
    num_edges: int
    directed: bool
    id_dtype: str
    chunk_size: int
    has_time: bool
    has_weight: bool
    has_id_map: bool
    source: str
    checksums: bool

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


class GraphStore:
    """A complete, read-only graph store. Open with :func:`open_store`."""

    def __init__(self, group: zarr.Group, path: str, manifest: GraphManifest | None = None,
                 opened: FolderIdentity | None = None):
        self._group = group
        self.path = path
        # the folder these attributes were read from: a read after another folder is swapped in is refused
        self._opened = opened if opened is not None else folder_identity(path)
        self.attrs = dict(group.attrs)
        self.manifest = manifest if manifest is not None else GraphManifest.from_attrs(self.attrs, path)
        self._arrays = open_arrays(group, path)
        self.num_nodes = self.manifest.num_nodes
        self.num_edges = self.manifest.num_edges
        self.directed = self.manifest.directed
        self.id_dtype = np.dtype(self.manifest.id_dtype)
        self.source = str(self.manifest.source)
        self.columns = tuple(c for c in COLUMNS if c in self._arrays)
        self.chunk_size = int(self._arrays["src"].chunks[0])
        self.checksums = self.manifest.checksums

    # -- description -----------------------------------------------------
    @property
    def info(self) -> StoreInfo:
        return StoreInfo(
            path=self.path, num_nodes=self.num_nodes, num_edges=self.num_edges,
            directed=self.directed, id_dtype=str(self.id_dtype), chunk_size=self.chunk_size,
            has_time="time" in self.columns, has_weight="weight" in self.columns,
            has_id_map="id_map" in self._arrays, source=self.source, checksums=self.checksums)

    @property
    def has_time(self) -> bool:
        return "time" in self.columns

    @property
    def has_weight(self) -> bool:
        return "weight" in self.columns

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        return f"GraphStore({self.path!r}, {self.num_nodes} nodes, {self.num_edges} edges, {kind})"

    # -- data access -----------------------------------------------------
    def array(self, name: str, check_ids: bool = True) -> CheckedArray:
        """One array, read through the integrity checks (a damaged chunk raises CorruptDataError; with
        ``check_ids``, an id of ``src`` or ``dst`` outside [0, num_nodes) raises InvalidIdError)."""
        if name not in self._arrays:
            raise StoreError(f"{self.path}: store has no array {name!r} (has {sorted(self._arrays)})")
        bound = self.num_nodes if check_ids and name in ("src", "dst") else None
        return CheckedArray(self._arrays[name], name, self.path, all_chunks_written=self.checksums, id_bound=bound,
                            opened=self._opened)

    def stream(self, batch_size: int | None = None, columns: Sequence[str] = ("src", "dst"),
               start: int = 0, stop: int | None = None, prefetch: int = 2) -> Iterator[EdgeBatch]:
        """Yield :class:`EdgeBatch` es of ``batch_size`` edges (default: one chunk).

        The next batches are read and decompressed in a background thread while
        the caller works on the current one (one thread per column); at most
        ``prefetch`` + 2 batches are in memory at once.
        """
        if isinstance(columns, str):   # "src" was read as the columns 's', 'r', 'c'
            raise ParameterError(f"columns must be a sequence of column names, e.g. ('src', 'dst'), got {columns!r}")
        columns = tuple(columns)   # a generator once
        if not columns or not all(isinstance(c, str) for c in columns) or len(set(columns)) != len(columns):
            raise ParameterError(f"columns must be distinct column names, e.g. ('src', 'dst'), got {columns!r}")
        missing = [c for c in columns if c not in self.columns]
        if missing:
            raise StoreError(f"{self.path}: store has no column(s) {missing} (has {list(self.columns)})")
        start = whole_number(start, "start", 0)
        stop = None if stop is None else whole_number(stop, "stop", 0)
        prefetch = whole_number(prefetch, "prefetch", 0)
        stop = self.num_edges if stop is None else min(stop, self.num_edges)
        start = min(start, stop)
        # 0 was read as "default" (one chunk): a caller's arithmetic gone to zero said nothing
        batch_size = self.chunk_size if batch_size is None else whole_number(batch_size, "batch_size", minimum=1)
        arrays = {c: self.array(c) for c in columns}
        return stream_edges(arrays, start, stop, batch_size, prefetch)

    def to_dask(self, column: str = "src"):
        """A dask array over one column, one dask chunk per zarr chunk, read with the stream's checks
        (:class:`~graphstream.store.integrity.CheckedArray`): a damaged or missing chunk raises
        :class:`CorruptDataError` when computed, an id outside [0, num_nodes) ``InvalidIdError``.
        ``da.from_zarr`` would read a missing chunk file as zeros."""
        import dask.array as da
        checked = self.array(column)
        return da.from_array(checked, chunks=checked.chunks, asarray=False, fancy=False, lock=False, name=False)

    def fingerprint(self, columns: Sequence[str] = ("src", "dst")) -> str | None:
        """A digest of the store's metadata and of ``columns``' data, for files derived from them (a kept
        vertex stream): the CRC-32C of its sealed attributes' checksum and of every chunk's recorded
        CRC-32C (the last 4 bytes of each chunk file, written by the ``crc32c`` codec), so it changes
        with any byte of them, and costs a few small reads a chunk, not a read of the data. None when
        it cannot be had cheaply: a store without chunk checksums (format version 1) or at a URL."""
        if not self.checksums or is_url(self.path):
            return None
        crc = google_crc32c.Checksum(str(self.attrs.get(SEAL_KEY)).encode())
        for name in columns:
            for recorded in recorded_crcs(self.array(name)):
                crc.update(recorded)
        return crc.hexdigest().decode()

    def id_map(self) -> np.ndarray | None:
        """Original ids by local id, when the store was relabelled."""
        if "id_map" not in self._arrays:
            return None
        return self.array("id_map").read_all()


def open_group(path: str, noun: str) -> zarr.Group:
    """Open a Zarr group read-only; refuse a missing path or something that is not a group."""
    if not is_url(path) and not Path(path).exists():
        raise StoreError(f"{path}: no such {noun}")
    if not is_url(path) and Path(path).is_dir() and not (Path(path) / "zarr.json").is_file():
        raise StoreError(f"{path}: not a {noun}{_what_folder_holds(Path(path))}")
    if not is_url(path) and not Path(path).is_dir():
        raise StoreError(f"{path}: not a {noun} but a file (a {noun} is a Zarr folder; graphstream ingest makes "
                         "a graph store from an edge file)")
    try:
        return zarr.open_group(path, mode="r")
    except Exception as exc:  # zarr raises several types for "not a group"
        raise StoreError(f"{path}: not a Zarr group ({exc.__class__.__name__}: {exc})") from exc


def _what_folder_holds(folder: Path) -> str:
    """What a folder given in place of a store is, for the message (a dataset's folder, a partitioned
    dataset: the natural slips after ``graphstream dataset``)."""
    if (folder / "manifest.json").is_file():
        return " but a partitioned dataset or dynamic partitions (it holds manifest.json)"
    try:
        stores = sorted(p.name for p in folder.iterdir() if (p / "zarr.json").is_file())[:3]
    except OSError:
        stores = []
    if stores:
        return f" but a folder holding {', '.join(stores)} (did you mean {folder / stores[0]}?)"
    return " (no zarr.json)"


def store_for_workers(store: GraphStore) -> GraphStore:
    """``store`` under the path dask workers are given (:func:`graphstream._atomic.for_workers`: absolute),
    opened again only when that is not already its path."""
    path = for_workers(store.path)
    return store if path == store.path else open_store(path)


def open_store(path: str | os.PathLike | GraphStore) -> GraphStore:
    """Open a complete graph store; refuse missing, foreign or incomplete ones. An open store is returned
    as it is (so that every function taking a store takes its path too)."""
    if isinstance(path, GraphStore):
        return path
    path_s = path_argument(path, "path")
    opened = folder_identity(path_s)   # before the metadata is read: a swap after it is then seen
    group = open_group(path_s, "graph store")
    manifest = GraphManifest.from_attrs(dict(group.attrs), path_s)
    arrays = open_arrays(group, path_s)
    if manifest.arrays is not None and set(manifest.arrays) != arrays.keys():
        missing, unlisted = sorted(set(manifest.arrays) - arrays.keys()), sorted(arrays.keys() - set(manifest.arrays))
        raise CorruptDataError(f"{path_s}: arrays differ from those the store recorded (missing {missing}, "
                               f"unlisted {unlisted})")
    if not {"src", "dst"} <= arrays.keys():
        raise StoreError(f"{path_s}: store lacks src/dst arrays (has {sorted(arrays)})")
    n = manifest.num_edges
    dtypes = {"src": manifest.id_dtype, "dst": manifest.id_dtype, "time": "int64", "weight": "float32"}
    for c in COLUMNS:
        if c in arrays and arrays[c].shape != (n,):
            raise StoreError(f"{path_s}: column {c!r} has shape {arrays[c].shape}, expected ({n},)")
        if c in arrays and arrays[c].dtype != np.dtype(dtypes[c]):
            raise StoreError(f"{path_s}: column {c!r} has dtype {arrays[c].dtype}, the format says {dtypes[c]}")
    if "id_map" in arrays and arrays["id_map"].shape != (manifest.num_nodes,):
        raise StoreError(f"{path_s}: id_map has shape {arrays['id_map'].shape}, expected ({manifest.num_nodes},)")
    return GraphStore(group, path_s, manifest, opened)


def validate_store(path: str | os.PathLike, deep: bool = False) -> GraphStore:
    """Open and check a store; with ``deep``, stream it to check every id is in range."""
    store = open_store(path)
    if deep:
        for batch in store.stream():
            for name, ids in (("src", batch.src), ("dst", batch.dst)):
                if len(ids) and (ids.min() < 0 or ids.max() >= store.num_nodes):
                    bad = int(np.flatnonzero((ids < 0) | (ids >= store.num_nodes))[0])
                    raise InvalidIdError(f"{store.path}: {name}[{batch.start + bad}] = {ids[bad]} "
                                         f"outside [0, {store.num_nodes})")
    return store


def _extra_attrs(attrs: Any, name: str) -> dict[str, Any]:
    """A caller's attributes for the store, checked at the call: a dict with str keys and JSON values."""
    import json

    if attrs is None:
        return {}
    if not isinstance(attrs, dict) or not all(isinstance(key, str) for key in attrs):
        raise ParameterError(f"{name} must be a dict with str keys, got {type(attrs).__name__}")
    try:
        json.dumps(attrs, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{name}: values must be JSON (str, numbers, bools, lists, dicts): {exc}") from None
    return dict(attrs)


class GraphWriter:
    """Write a graph store chunk by chunk; ``close()`` marks it complete.

    Edges may be appended in batches of any size; they are regrouped into
    whole chunks and compressed in a background thread (write-behind), so
    parsing or generating overlaps with compression. Used as a context
    manager, a failure removes the partial store.

    ``num_nodes``: declared node count (ids are checked against it); if
    omitted it is max id + 1 at close. ``attrs`` (here or at ``close``): further attributes, JSON; the
    format's own (``num_nodes``, ``directed``, ``chunk_size``...) are always the writer's, so another
    store's attributes may be copied. ``id_dtype``: forced id dtype; by
    default int32, widened to int64 automatically if an id reaches 2**31.
    ``atomic=False`` writes a local store in place, as URL stores are: for a
    task of a cluster writing into the temporary sibling that its client
    holds (:class:`graphstream._atomic.AtomicOutput`) and swaps in.

    On a cluster the client instead sizes the columns with :meth:`preallocate`
    and tasks write chunk-aligned ranges of :attr:`staging_path` with
    :class:`EdgeRangeWriter`; :meth:`close` then seals the store as usual.
    """

    def __init__(self, path: str | os.PathLike, *, num_nodes: int | None = None, directed: bool = True,
                 id_dtype: str | np.dtype | None = None, with_time: bool = False, with_weight: bool = False,
                 chunk_size: int = DEFAULT_CHUNK, source: str = "", overwrite: bool = False,
                 clevel: int = 3, attrs: dict[str, Any] | None = None, atomic: bool = True):
        chunk_size = whole_number(chunk_size, "chunk_size", 1, MAX_CHUNK)
        num_nodes = None if num_nodes is None else whole_number(num_nodes, "num_nodes", 0)
        directed, with_time, with_weight, overwrite = (yes_or_no(v, n) for v, n in (
            (directed, "directed"), (with_time, "with_time"), (with_weight, "with_weight"), (overwrite, "overwrite")))
        self.path = path_argument(path, "path")
        self.num_nodes = num_nodes
        self.directed = bool(directed)
        self.chunk_size = chunk_size
        self.source = source
        self.extra_attrs = _extra_attrs(attrs, "attrs")
        if id_dtype is not None:
            self.id_dtype = np.dtype(id_dtype)
        else:
            self.id_dtype = id_dtype_for(num_nodes or 0)
        if self.id_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise ParameterError(f"id_dtype must be int32 or int64, got {self.id_dtype}")
        self._auto_dtype = id_dtype is None and num_nodes is None
        self._compressor = default_compressor(whole_number(clevel, "clevel", 0, 9))
        self._output: AtomicOutput | None = None   # local stores: the hidden sibling being written
        self._dtypes = {"src": self.id_dtype, "dst": self.id_dtype}
        if with_time:
            self._dtypes["time"] = np.dtype(np.int64)
        if with_weight:
            self._dtypes["weight"] = np.dtype(np.float32)
        try:
            self._group = self._create_group(overwrite, atomic)
            # Written first and flipped last: a crash anywhere in between leaves an
            # incomplete store that open_store refuses.
            self._group.attrs.update(GraphManifest.header())
            self._arrays = {c: self._create_array(c, dt) for c, dt in self._dtypes.items()}
        except BaseException as exc:   # before __enter__ returns: __exit__ would not clear the sibling
            full = disk_full(exc, None if is_url(self.path) else Path(self.path).parent)
            if self._output is not None:
                self._output.rollback()
            if full:
                raise self._disk_full(exc) from exc
            raise
        self._pending: dict[str, list[np.ndarray]] = {c: [] for c in self._dtypes}
        self._pending_len = 0
        self._written = 0
        self._max_id = -1
        # One thread per column: the columns of a block compress in parallel
        # (Blosc releases the GIL) while the caller produces the next block.
        self._pool = ThreadPoolExecutor(max_workers=len(self._dtypes), thread_name_prefix="graphstream-writer")
        self._inflight: list[Future] = []
        self._closed = False

    # -- setup -----------------------------------------------------------
    def _create_group(self, overwrite: bool, atomic: bool) -> zarr.Group:
        if is_url(self.path) or not atomic:
            mode = "w" if overwrite else "w-"
            try:
                group = zarr.open_group(self.path, mode=mode)
            except FileExistsError as exc:
                raise OutputExistsError(f"{self.path}: output exists (pass --overwrite to replace it)") from exc
            except (OSError, ValueError, ImportError) as exc:   # no such bucket or folder, no permission, a
                # bad URL, the protocol's package missing (s3fs for s3://)
                if disk_full(exc, None):
                    raise
                raise StoreError(f"{self.path}: cannot create the store there "
                                 f"({getattr(exc, 'strerror', None) or exc})") from exc
        else:
            # Local: written into a hidden sibling (locked, leftovers of killed runs cleared) and
            # swapped in by close(), so an existing store stays whole until the new one is.
            p = Path(self.path)
            if not p.parent.exists():
                raise StoreError(f"{self.path}: parent folder {p.parent} does not exist")
            self._output = AtomicOutput(self.path, overwrite, mkdir=False)   # "w/." is refused by its name
            group = zarr.open_group(str(self._output.begin()), mode="w-")   # a failure: __init__ rolls back
        return group

    def _disk_full(self, exc: BaseException) -> DiskFullError:
        return DiskFullError(f"{self.path}: disk full while writing the store "
                             f"({getattr(exc, 'strerror', None) or exc}); nothing was written, free space and "
                             "run again")

    def _create_array(self, name: str, dtype: np.dtype) -> zarr.Array:
        # write_empty_chunks: skip zarr's all-fill-value scan of every chunk (a
        # full extra pass; edge chunks are almost never all zero).
        return self._group.create_array(name, shape=(0,), chunks=(self.chunk_size,), dtype=dtype,
                                        compressors=chunk_codecs(self._compressor), fill_value=0, overwrite=True,
                                        config=CHUNK_ARRAY_CONFIG)

    # -- writing ---------------------------------------------------------
    def _check_values(self, name: str, a: np.ndarray) -> None:
        """Times must be whole numbers that fit int64, weights finite numbers that fit float32: the cast
        would store NaN as -2**63, truncate -1.5 to -1 and turn 1e300 into inf without a word."""
        where = f"{self.path}: column {name!r}"
        if a.dtype.kind not in "iuf":
            raise ParameterError(f"{where} must hold numbers, got dtype {a.dtype}")
        if len(a) == 0 or a.dtype.kind == "i" or (a.dtype.kind == "u" and (name == "weight" or a.dtype.itemsize < 8)):
            return   # integers that always fit: any weight (float32, rounded), any time but a uint64
        if name == "time":
            bad = ~np.isfinite(a) | (np.abs(a) >= 2.0**63) | (a != np.floor(a)) if a.dtype.kind == "f" \
                else a > np.iinfo(np.int64).max
            rule = "a whole number that fits int64"
        else:
            bad = ~(np.abs(a.astype(np.float64)) < FLOAT32_LIMIT)   # nan fails it
            rule = "a finite number that fits float32"
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ParameterError(f"{where}: {a[i]} at edge {self._written + self._pending_len + i} is not {rule}")

    def append(self, src: np.ndarray, dst: np.ndarray, time: np.ndarray | None = None,
               weight: np.ndarray | None = None, *, copy: bool = True) -> None:
        """Append edges; ids are checked (integers, >= 0, < num_nodes if declared).

        The edges are written later, in a background thread, so by default they
        are copied: the caller may reuse its buffers at once. ``copy=False``
        hands the arrays over instead (the caller must not modify them again).
        """
        if self._closed:
            raise StoreError(f"{self.path}: writer is closed")
        src = np.asarray(src)
        dst = np.asarray(dst)
        if src.ndim != 1 or src.shape != dst.shape:
            raise ParameterError(f"src and dst must be 1-D of equal length, got {src.shape} and {dst.shape}")
        for name, a in (("src", src), ("dst", dst)):
            if a.dtype.kind not in "iu":
                raise InvalidIdError(f"{self.path}: {name} ids must be integers, got dtype {a.dtype}")
        cols = {"src": src, "dst": dst}
        for name, a in (("time", time), ("weight", weight)):
            if (a is None) != (name not in self._dtypes):
                want = "expected" if name in self._dtypes else "not expected"
                raise ParameterError(f"{self.path}: column {name!r} {want} by this writer")
            if a is not None:
                a = np.asarray(a)
                if a.shape != src.shape:
                    raise ParameterError(f"{name} has shape {a.shape}, expected {src.shape}")
                self._check_values(name, a)
                cols[name] = a
        if len(src) == 0:
            return
        lo = min(int(src.min()), int(dst.min()))
        hi = max(int(src.max()), int(dst.max()))
        if lo < 0:
            bad = int(np.flatnonzero((src < 0) | (dst < 0))[0])
            raise InvalidIdError(f"{self.path}: negative node id at edge {self._written + self._pending_len + bad}")
        if self.num_nodes is not None and hi >= self.num_nodes:
            bad = int(np.flatnonzero((src >= self.num_nodes) | (dst >= self.num_nodes))[0])
            raise InvalidIdError(f"{self.path}: node id {hi} at edge {self._written + self._pending_len + bad} "
                                 f"is beyond the declared node count {self.num_nodes}")
        if hi > np.iinfo(np.int64).max:
            raise InvalidIdError(f"{self.path}: node id {hi} does not fit in int64")
        if hi >= ID32_LIMIT and self.id_dtype == np.int32:
            if not self._auto_dtype:
                raise InvalidIdError(f"{self.path}: node id {hi} does not fit the int32 ids of this store")
            self._widen_ids()
        self._max_id = max(self._max_id, hi)
        for c, a in cols.items():
            # Never keep a view of the caller's buffer unless told it is ours.
            self._pending[c].append(a.astype(self._dtypes[c], copy=copy))
        self._pending_len += len(src)
        if self._pending_len >= self.chunk_size:
            self._flush(whole_chunks_only=True)

    def _flush(self, whole_chunks_only: bool) -> None:
        n = self._pending_len
        take = (n // self.chunk_size) * self.chunk_size if whole_chunks_only else n
        if take == 0:
            return
        data = take_rows(self._pending, take)
        self._pending_len = n - take
        start = self._written
        self._written += take
        self._wait()
        self._inflight = [self._pool.submit(self._write_column, c, start, a) for c, a in data.items()]

    def _write_column(self, name: str, start: int, data: np.ndarray) -> None:
        end = start + len(data)
        arr = self._arrays[name]
        arr.resize((end,))
        arr[start:end] = data

    def _wait(self) -> None:
        futures, self._inflight = self._inflight, []
        errors = [exc for exc in (f.exception() for f in futures) if exc is not None]
        if errors:
            raise errors[0]

    def _widen_ids(self) -> None:
        """Switch src/dst to int64 (ids reached 2**31); copies what was written once."""
        self._wait()
        self.id_dtype = np.dtype(np.int64)
        for c in ("src", "dst"):
            old = self._arrays[c]
            self._dtypes[c] = self.id_dtype
            self._pending[c] = [a.astype(np.int64) for a in self._pending[c]]
            saved = self._group.create_array(f"_{c}_widen", shape=old.shape, chunks=(self.chunk_size,),
                                             dtype=np.int64, compressors=chunk_codecs(self._compressor),
                                             overwrite=True, config=CHUNK_ARRAY_CONFIG)
            for i in range(0, old.shape[0], self.chunk_size):
                saved[i:i + self.chunk_size] = old[i:i + self.chunk_size]
            new = self._create_array(c, self.id_dtype)
            new.resize(old.shape)
            for i in range(0, old.shape[0], self.chunk_size):
                new[i:i + self.chunk_size] = saved[i:i + self.chunk_size]
            del self._group[f"_{c}_widen"]
            self._arrays[c] = new

    def write_array(self, name: str, data: np.ndarray) -> None:
        """Store an auxiliary array (e.g. ``id_map``) beside the edge columns."""
        data = np.asarray(data)
        if data.dtype.kind == "U" or data.dtype == object:
            data = data.astype(str)
            self._group.create_array(name, shape=data.shape, dtype=str, compressors=(Crc32cCodec(),),
                                     overwrite=True, config=CHUNK_ARRAY_CONFIG)[...] = data
            return
        arr = self._group.create_array(name, shape=data.shape, chunks=(max(1, min(len(data), 1 << 22)),),
                                       dtype=data.dtype, compressors=chunk_codecs(self._compressor),
                                       overwrite=True, config=CHUNK_ARRAY_CONFIG)
        arr[...] = data

    @property
    def num_written(self) -> int:
        return self._written + self._pending_len

    @property
    def staging_path(self) -> str:
        """Where the store is being written: the hidden sibling of a local store, else the path itself."""
        return str(self._output.tmp) if self._output is not None else self.path

    def preallocate(self, num_edges: int) -> None:
        """Size every column to ``num_edges`` edges that others write (the tasks of a cluster, through
        :class:`EdgeRangeWriter` on :attr:`staging_path`); :meth:`close` then records them. Nothing may
        have been appended: the two ways of writing do not mix."""
        if self._closed or self.num_written:
            raise StoreError(f"{self.path}: preallocate() needs a fresh writer (edges were appended)")
        if num_edges < 0:
            raise ParameterError(f"num_edges must be >= 0, got {num_edges}")
        for arr in self._arrays.values():
            arr.resize((num_edges,))
        self._written = int(num_edges)

    def close(self, num_nodes: int | None = None, attrs: dict[str, Any] | None = None) -> GraphStore:
        """Flush, record the attributes and mark the store complete."""
        if self._closed:
            raise StoreError(f"{self.path}: writer already closed")
        num_nodes = None if num_nodes is None else whole_number(num_nodes, "num_nodes", 0)
        self._flush(whole_chunks_only=False)
        self._wait()
        self._pool.shutdown()
        n_nodes = num_nodes if num_nodes is not None else self.num_nodes
        if n_nodes is None:
            n_nodes = self._max_id + 1
        if self._max_id >= n_nodes:
            raise InvalidIdError(f"{self.path}: node id {self._max_id} is beyond num_nodes {n_nodes}")
        if id_dtype_for(n_nodes) == np.int64 and self.id_dtype == np.int32 and self._auto_dtype:
            self._widen_ids()
        # the format's attributes are the writer's, over any of the caller's: {"num_nodes": 1} sealed a
        # store whose ids reach 5 as complete, {"chunk_size": 7} recorded chunks the arrays do not have
        # (and a derived store's attributes copied from its source carry that store's digests)
        meta = {key: value for key, value in {**self.extra_attrs, **_extra_attrs(attrs, "close(attrs=)")}.items()
                if key not in _ATTR_KEYS}
        meta.update({
            "num_nodes": int(n_nodes), "num_edges": int(self._written), "directed": bool(self.directed),
            "id_dtype": str(self.id_dtype), "source": self.source, "chunk_size": self.chunk_size,
            "arrays": sorted(self._group.array_keys()),
        })
        if not is_url(self.staging_path):
            meta[CHUNKS_KEY] = chunks_digests(self._group, self.staging_path)
        # The writer's attributes go through the same validation as a reader's.
        manifest = GraphManifest.from_attrs(seal({**GraphManifest.header(), **meta, "complete": True}), self.path)
        self._group.attrs.update({k: v for k, v in manifest.to_attrs().items() if k != "complete"})
        self._group.attrs.update({"complete": True})
        if self._output is not None:
            self._output.commit()   # the swap: the store appears at self.path complete
        self._closed = True
        return open_store(self.path)

    def abort(self) -> None:
        """Stop writing and remove the partial store (best effort)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._wait()
        except Exception:
            pass
        self._pool.shutdown()
        if self._output is not None:
            self._output.rollback()   # only the hidden sibling: an existing store is untouched

    def __enter__(self) -> GraphWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            full = disk_full(exc, None if is_url(self.path) else Path(self.path).parent)
            self.abort()
            if full:
                raise self._disk_full(exc) from exc
        elif not self._closed:
            self.close()



def take_rows(pending: dict[str, list[np.ndarray]], take: int) -> dict[str, np.ndarray]:
    """The first ``take`` rows of every column's pending parts, one array a column; the rest stays in
    ``pending`` (the writers' buffers of rows not yet written as whole chunks)."""
    data = {}
    for c, parts in pending.items():
        merged = parts[0] if len(parts) == 1 else np.concatenate(parts)
        data[c] = merged[:take]
        rest = merged[take:]
        pending[c] = [rest] if len(rest) else []
    return data


class EdgeRangeWriter:
    """Writes chunk-aligned edge ranges into a store being written at ``path`` (a
    :meth:`GraphWriter.staging_path` whose columns were sized by :meth:`GraphWriter.preallocate`):
    what a task of a cluster writes with.

    Write-behind, as :class:`GraphWriter`: :meth:`write` hands a range to one
    thread per column and returns, so the caller produces the next range while
    this one is compressed (Blosc releases the GIL). A range must cover whole
    chunks (its end may be the last edge): two tasks writing parts of one chunk
    would each rewrite it with the other's part missing. Writing a range again
    writes the same bytes, so a task rerun after its worker died is harmless.

    Or rows come in blocks of any size: :meth:`append` from edge ``start`` on
    writes each chunk as it fills, :meth:`flush` the last, partial one (which
    must then end the store). Rows not flushed are dropped.
    """

    def __init__(self, path: str, start: int = 0):
        self.path = path
        self._group = zarr.open_group(path, mode="r+")
        self._arrays: dict[str, zarr.Array] = {}
        self._pool = ThreadPoolExecutor(max_workers=len(COLUMNS), thread_name_prefix="graphstream-range-writer")
        self._inflight: list[Future] = []
        self._pending: dict[str, list[np.ndarray]] = {}   # appended, not yet written
        self._pending_len = 0
        self._next = start   # where the pending rows go

    @property
    def position(self) -> int:
        """The edge the next appended row will be."""
        return self._next + self._pending_len

    def append(self, columns: dict[str, np.ndarray]) -> None:
        """Rows after those appended before, handed over (not copied); whole chunks written as they fill."""
        for name, data in columns.items():
            self._pending.setdefault(name, []).append(data)
        self._pending_len += len(next(iter(columns.values())))
        chunk = self._array(next(iter(columns))).chunks[0]
        self._write_pending(self._pending_len // chunk * chunk)

    def flush(self) -> None:
        """Write the rows appended and not yet written."""
        self._write_pending(self._pending_len)

    def _write_pending(self, take: int) -> None:
        if take:
            self.write(self._next, take_rows(self._pending, take))
            self._next += take
            self._pending_len -= take

    def _array(self, name: str) -> zarr.Array:
        if name not in self._arrays:   # all-zero chunks written too, as the in-process writer does
            self._arrays[name] = self._group[name].with_config(CHUNK_ARRAY_CONFIG)
        return self._arrays[name]

    def write(self, start: int, columns: dict[str, np.ndarray]) -> None:
        """Write edges ``start .. start + len`` of the given columns (after the previous range is written)."""
        self._wait()
        for name, data in columns.items():
            arr = self._array(name)
            stop, chunk = start + len(data), arr.chunks[0]
            if start % chunk or (stop % chunk and stop != arr.shape[0]) or stop > arr.shape[0]:
                raise ParameterError(f"{self.path}: edges [{start}, {stop}) of {name!r} are not whole chunks of "
                                     f"{chunk} within its {arr.shape[0]} edges")
            self._inflight.append(self._pool.submit(arr.__setitem__, slice(start, stop),
                                                    np.asarray(data, dtype=arr.dtype)))

    def _wait(self) -> None:
        futures, self._inflight = self._inflight, []
        for f in futures:
            f.result()

    def __enter__(self) -> EdgeRangeWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self._wait()
        finally:
            self._pool.shutdown()
