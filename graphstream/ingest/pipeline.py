"""``ingest()``: any edge file -> a graph store, in one streaming pass.

1. Check the input (exists, format) and the output (refused if it exists,
   unless ``overwrite``).
2. Sniff text files: header line, column names, whether ids are strings.
3. Stream blocks of parsed edges (text kernel, npy memory map, parquet row
   batches); relabel them if asked; append them to a :class:`GraphWriter`,
   which compresses whole chunks in a background thread.
4. Save the id map, close the writer (the store becomes ``complete``) and
   rename the temporary store into place. Any failure removes the
   temporary store and leaves an existing output untouched.

With ``relabel`` and numeric-looking ids that turn out to contain a
non-numeric one later in the file, the ingest restarts once with string ids.
"""
from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from .._atomic import atomic_dir, check_output
from .._report import progress
from ..errors import InputFormatError, InputNotFoundError, InvalidIdError, ParameterError
from ..store import DEFAULT_CHUNK, GraphStore, GraphWriter, is_url, open_store
from . import sources, text
from .relabel import IntRelabeler, StrRelabeler

FORMATS = ("auto", "snap", "csv", "tsv", "npy", "parquet")
_COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")


def detect_format(path: str | os.PathLike) -> str:
    """'npy' or 'parquet' from magic bytes, else csv/tsv/snap from the name."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(sources.NPY_MAGIC):
        return "npy"
    if head.startswith(sources.PARQUET_MAGIC):
        return "parquet"
    name = Path(path).name.lower()
    for suffix in _COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".tsv"):
        return "tsv"
    return "snap"


@dataclass(frozen=True, slots=True)
class IngestPlan:
    """What one ingest will do, after sniffing (recorded in the store's attributes)."""
    fmt: str
    string_ids: bool
    layout: text.TextLayout | None

    def attrs(self, relabel: bool, one_based: bool) -> dict:
        d = {"format": self.fmt, "relabel": relabel, "one_based": one_based and not relabel,
             "string_ids": self.string_ids}
        if self.layout is not None:
            d["header"] = bool(self.layout.header_line)
            d["delimiter"] = self.layout.delimiter
        return {"ingest": d}


def _text_delimiter(fmt: str, delimiter: str | None) -> str | None:
    if delimiter is not None:
        return delimiter
    return {"csv": ",", "tsv": "\t"}.get(fmt)


def ingest(source: str | os.PathLike, out: str | os.PathLike, *, fmt: str = "auto", undirected: bool = False,
           one_based: bool = False, relabel: bool = False, src_column: int | str = 0,
           dst_column: int | str = 1, time_column: int | str | None = None,
           weight_column: int | str | None = None, delimiter: str | None = None, header: str = "auto",
           num_nodes: int | None = None, chunk_size: int = DEFAULT_CHUNK, overwrite: bool = False,
           block_bytes: int = text.DEFAULT_BLOCK_BYTES, rows_per_block: int = text.DEFAULT_ROWS_PER_CALL
           ) -> GraphStore:
    """Read an edge file into a new graph store at ``out`` and return it opened.

    Args:
        source: SNAP/CSV/TSV text (optionally .gz/.bz2/.xz), ``.npy`` (E x k
            integers) or parquet.
        fmt: ``auto`` detects npy/parquet by content and csv/tsv by name;
            ``snap`` splits on blanks or commas.
        undirected: record the graph as undirected (each edge stored as given).
        one_based: ids start at 1 (subtracted on read).
        relabel: map arbitrary ids (sparse, 64-bit, negative, strings) to
            0..n-1 in order of first appearance; ``id_map`` is saved.
        src_column, dst_column, time_column, weight_column: 0-based column
            indices (or header names).
        delimiter: one character; default blanks/comma (snap), ``,`` (csv),
            tab (tsv).
        header: ``auto``, ``yes`` or ``no``.
        num_nodes: declared node count; ids must be below it.
        chunk_size: edges per stored chunk.
        block_bytes, rows_per_block: parser block sizes (results do not
            depend on them).

    Notes:
        Memory: a few text blocks (``block_bytes``) and edge chunks, plus
        24-40 bytes per distinct id with ``relabel`` (see relabel.py).
    """
    path = str(source)
    # 1. check input and output
    if fmt not in FORMATS:
        raise ParameterError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if not os.path.exists(path):
        raise InputNotFoundError(f"{path}: no such file")
    if os.path.isdir(path):
        raise InputFormatError(f"{path}: is a directory, expected an edge file")
    if num_nodes is not None and num_nodes < 0:
        raise ParameterError(f"num_nodes must be >= 0, got {num_nodes}")
    if chunk_size < 1:
        raise ParameterError(f"chunk_size must be >= 1, got {chunk_size}")
    remote = is_url(out)
    if not remote:
        check_output(out, overwrite)
    if fmt == "auto":
        fmt = detect_format(path)
    # 2. sniff
    plan = _plan(path, fmt, relabel=relabel, delimiter=delimiter, header=header, src_column=src_column,
                 dst_column=dst_column, time_column=time_column, weight_column=weight_column)
    args = dict(undirected=undirected, one_based=one_based, relabel=relabel, src_column=src_column,
                dst_column=dst_column, time_column=time_column, weight_column=weight_column,
                num_nodes=num_nodes, chunk_size=chunk_size, block_bytes=block_bytes,
                rows_per_block=rows_per_block)
    try:
        return _ingest_plan(path, out, plan, overwrite=overwrite, remote=remote, **args)
    except text.NonNumericIdError:
        if not relabel or plan.string_ids or plan.fmt not in ("snap", "csv", "tsv"):
            raise
    # A non-numeric id after numeric ones: start again with string ids.
    plan = IngestPlan(plan.fmt, True, plan.layout)
    return _ingest_plan(path, out, plan, overwrite=overwrite, remote=remote, **args)


def _plan(path: str, fmt: str, *, relabel: bool, delimiter, header, src_column, dst_column, time_column,
          weight_column) -> IngestPlan:
    if fmt == "npy":
        return IngestPlan(fmt, False, None)
    if fmt == "parquet":
        try:
            string_ids = sources.parquet_string_ids(path, src_column, dst_column)
        except (OSError, ValueError) as exc:
            raise InputFormatError(f"{path}: not a readable parquet file ({exc})") from exc
        return IngestPlan(fmt, string_ids, None)
    sniffed = text.resolve_layout(path, delimiter=_text_delimiter(fmt, delimiter), header=header,
                                  src_column=src_column, dst_column=dst_column, time_column=time_column,
                                  weight_column=weight_column, relabel=relabel)
    return IngestPlan(fmt, sniffed.string_ids and relabel, sniffed.layout)


def _int_col(col, what: str) -> int:
    if col is None:
        return -1
    try:
        i = int(col)
    except (TypeError, ValueError):
        raise ParameterError(f"{what} must be a column index for .npy input, got {col!r}") from None
    if i < 0:
        raise ParameterError(f"{what} must be >= 0, got {i}")
    return i


def _blocks(path: str, plan: IngestPlan, *, one_based, relabel, src_column, dst_column, time_column,
            weight_column, num_nodes, block_bytes, rows_per_block, on_bytes) -> Iterator[text.TextBlock]:
    if plan.fmt == "npy":
        return sources.iter_npy(path, src_column=_int_col(src_column, "src column"),
                                dst_column=_int_col(dst_column, "dst column"),
                                time_column=_int_col(time_column, "time column"),
                                weight_column=_int_col(weight_column, "weight column"),
                                rows=rows_per_block, one_based=one_based, num_nodes=num_nodes,
                                relabel=relabel)
    if plan.fmt == "parquet":
        return sources.iter_parquet(path, src_column=src_column, dst_column=dst_column,
                                    time_column=time_column, weight_column=weight_column,
                                    rows=rows_per_block, one_based=one_based, num_nodes=num_nodes,
                                    relabel=relabel)
    return text.iter_text(path, plan.layout, as_spans=plan.string_ids, one_based=one_based,
                          num_nodes=num_nodes, relabel=relabel, block_bytes=block_bytes,
                          rows_per_call=rows_per_block, on_bytes=on_bytes)


def _ingest_plan(path: str, out, plan: IngestPlan, *, overwrite: bool, remote: bool, undirected, one_based,
                 relabel, src_column, dst_column, time_column, weight_column, num_nodes, chunk_size,
                 block_bytes, rows_per_block) -> GraphStore:
    layout = plan.layout
    with_time = (layout.time_column >= 0) if layout is not None else time_column is not None
    with_weight = (layout.weight_column >= 0) if layout is not None else weight_column is not None
    # Local stores are built in a hidden sibling and renamed into place when complete;
    # URL stores (fsspec) are written in place (GraphWriter removes them on failure).
    target_ctx = nullcontext(out) if remote else atomic_dir(out, overwrite=overwrite)
    with target_ctx as target:
        _write(path, str(target), plan, undirected=undirected, one_based=one_based, relabel=relabel,
               src_column=src_column, dst_column=dst_column, time_column=time_column,
               weight_column=weight_column, num_nodes=num_nodes, chunk_size=chunk_size,
               block_bytes=block_bytes, rows_per_block=rows_per_block, with_time=with_time,
               with_weight=with_weight, overwrite=overwrite or not remote)
    return open_store(out)


def _write(path: str, target: str, plan: IngestPlan, *, undirected, one_based, relabel, src_column,
           dst_column, time_column, weight_column, num_nodes, chunk_size, block_bytes, rows_per_block,
           with_time, with_weight, overwrite) -> None:
    relabeler = (StrRelabeler() if plan.string_ids else IntRelabeler()) if relabel else None
    total = os.path.getsize(path) if plan.fmt not in ("npy", "parquet") else None
    writer = GraphWriter(target, num_nodes=None if relabel else num_nodes, directed=not undirected,
                         with_time=with_time, with_weight=with_weight, chunk_size=chunk_size, source=path,
                         overwrite=overwrite, attrs=plan.attrs(relabel, one_based))
    with writer, progress(total, desc=f"ingest {Path(path).name}", unit="B" if total else "edge") as bar:
        def on_bytes(pos: int) -> None:
            bar.update(pos - bar.n)
        blocks = _blocks(path, plan, one_based=one_based, relabel=relabel, src_column=src_column,
                         dst_column=dst_column, time_column=time_column, weight_column=weight_column,
                         num_nodes=num_nodes, block_bytes=block_bytes, rows_per_block=rows_per_block,
                         on_bytes=on_bytes)
        # 3. stream, relabel, append
        for block in blocks:
            if relabeler is None:
                src, dst = block.src, block.dst
            elif block.spans is not None:
                src, dst = relabeler.map_spans(block.buf, block.spans)
            else:
                src, dst = relabeler.map(block.src, block.dst)
            writer.append(src, dst, time=block.time, weight=block.weight)
            if total is None:
                bar.update(len(src))
        if writer.num_written == 0:
            raise InputFormatError(f"{path}: no edges found (empty file, or only comments/header)")
        # 4. id map and completion
        n = num_nodes
        if relabeler is not None:
            if num_nodes is not None and relabeler.num_ids > num_nodes:
                raise InvalidIdError(f"{path}: {relabeler.num_ids} distinct ids, more than the declared "
                                     f"node count {num_nodes}")
            n = relabeler.num_ids if num_nodes is None else num_nodes
            writer.write_array("id_map", relabeler.id_map())
        writer.close(num_nodes=n)
