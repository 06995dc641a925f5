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
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from .._atomic import check_output, check_outputs_apart
from .._report import progress
from .._resources import INFO_BYTES_PER_NODE, node_state_shortfall
from ..errors import InputFormatError, InputNotFoundError, InvalidIdError
from ..store import GraphStore, GraphWriter, is_url, open_store
from . import sources, text
from .config import FORMATS, IngestConfig
from .relabel import IntRelabeler, StrRelabeler
from .sniff import TextLayout, detect_format, resolve_layout
from .text import IdBeyondError

__all__ = ["FORMATS", "IngestConfig", "IngestPlan", "detect_format", "ingest"]

# Without --relabel the node count is the largest id + 1. Ids "justify" it when it is at most this many
# times the edge count: E edges touch at most 2E nodes, so 16 allows 8x more isolated nodes than touched
# ones (no real edge list comes near; R-MAT has n <= E). Beyond that *and* beyond memory (node_state_shortfall
# with info's lower bound, the lightest later command) the ids are sparse (3e9 with a handful of edges) and
# the store would only crash info/partition later: refused with a hint to --relabel. A dense graph too big
# for this machine is still ingested (ingest needs no per-node memory; the store may be read elsewhere).
SPARSE_ID_FACTOR = 16


@dataclass(frozen=True, slots=True)
class IngestPlan:
    """What one ingest will do, after sniffing (recorded in the store's attributes)."""
    fmt: str
    string_ids: bool
    layout: TextLayout | None

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


def ingest(source: str | os.PathLike, out: str | os.PathLike, config: IngestConfig | None = None,
           **options) -> GraphStore:
    """Read an edge file into a new graph store at ``out`` and return it opened.

    Args:
        source: SNAP/CSV/TSV text (optionally .gz/.bz2/.xz), ``.npy`` (E x k
            integers) or parquet.
        out: the graph store to write (a local folder, or a URL).
        config: an :class:`IngestConfig`; or give its fields as keywords
            (``fmt``, ``undirected``, ``one_based``, ``relabel``,
            ``src_column``, ``dst_column``, ``time_column``,
            ``weight_column``, ``delimiter``, ``header``, ``num_nodes``,
            ``chunk_size``, ``overwrite``, ``block_bytes``,
            ``rows_per_block``), not both.

    Notes:
        Memory: a few text blocks (``block_bytes``) and edge chunks, plus
        24-40 bytes per distinct id with ``relabel`` (see relabel.py).
    """
    if config is None:
        config = IngestConfig(**options)
    elif options:
        raise TypeError(f"ingest() takes a config or keyword options, not both (got {sorted(options)})")
    path = str(source)
    # 1. check input and output
    if not os.path.exists(path):
        raise InputNotFoundError(f"{path}: no such file")
    if os.path.isdir(path):
        raise InputFormatError(f"{path}: is a directory, expected an edge file")
    remote = is_url(out)
    if not remote:
        check_outputs_apart({"output": out}, {"input file": path})   # --overwrite must not delete the input
        check_output(out, config.overwrite)
    if config.fmt == "auto":
        config = replace(config, fmt=detect_format(path))
    # 2. sniff
    plan = _plan(path, config)
    try:
        return _ingest_plan(path, out, plan, config, remote=remote)
    except text.NonNumericIdError:
        if not config.relabel or plan.string_ids or plan.fmt not in ("snap", "csv", "tsv"):
            raise
    # A non-numeric id after numeric ones: start again with string ids.
    plan = IngestPlan(plan.fmt, True, plan.layout)
    return _ingest_plan(path, out, plan, config, remote=remote)


def _plan(path: str, config: IngestConfig) -> IngestPlan:
    fmt = config.fmt
    if fmt == "npy":
        return IngestPlan(fmt, False, None)
    if fmt == "parquet":
        return IngestPlan(fmt, sources.parquet_string_ids(path, config.src_column, config.dst_column), None)
    sniffed = resolve_layout(path, delimiter=_text_delimiter(fmt, config.delimiter), header=config.header,
                             src_column=config.src_column, dst_column=config.dst_column,
                             time_column=config.time_column, weight_column=config.weight_column,
                             relabel=config.relabel)
    return IngestPlan(fmt, sniffed.string_ids and config.relabel, sniffed.layout)


def _blocks(path: str, plan: IngestPlan, config: IngestConfig, on_bytes) -> Iterator[text.TextBlock]:
    if plan.fmt == "npy":
        return sources.iter_npy(path, config)
    if plan.fmt == "parquet":
        return sources.iter_parquet(path, config)
    return text.iter_text(path, plan.layout, config, as_spans=plan.string_ids, on_bytes=on_bytes)


def _ingest_plan(path: str, out, plan: IngestPlan, config: IngestConfig, *, remote: bool) -> GraphStore:
    # GraphWriter builds a local store in a hidden sibling and swaps it in when complete (graphstream._atomic);
    # URL stores (fsspec) are written in place (GraphWriter removes them on failure).
    _write(path, str(out), plan, config, overwrite=config.overwrite)
    return open_store(out)


def _write(path: str, target: str, plan: IngestPlan, config: IngestConfig, *, overwrite: bool) -> None:
    relabel, num_nodes = config.relabel, config.num_nodes
    layout = plan.layout  # text: the sniffed columns; npy and parquet: the columns asked for
    with_time = layout.time_column >= 0 if layout is not None else config.with_time
    with_weight = layout.weight_column >= 0 if layout is not None else config.with_weight
    relabeler = (StrRelabeler() if plan.string_ids else IntRelabeler()) if relabel else None
    total = os.path.getsize(path) if plan.fmt not in ("npy", "parquet") else None
    writer = GraphWriter(target, num_nodes=None if relabel else num_nodes, directed=not config.undirected,
                         with_time=with_time, with_weight=with_weight, chunk_size=config.chunk_size,
                         source=path, overwrite=overwrite, attrs=plan.attrs(relabel, config.one_based))
    max_id = -1
    with writer, progress(total, desc=f"ingest {Path(path).name}", unit="B" if total else "edge") as bar:
        def on_bytes(pos: int) -> None:
            bar.update(pos - bar.n)
        # 3. stream, relabel, append
        for block in _blocks(path, plan, config, on_bytes):
            if relabeler is None:
                src, dst = block.src, block.dst
                if len(src):
                    max_id = max(max_id, int(src.max()), int(dst.max()))
            elif block.spans is not None:
                src, dst = relabeler.map_spans(block.buf, block.spans)
            else:
                src, dst = relabeler.map(block.src, block.dst)
            writer.append(src, dst, time=block.time, weight=block.weight)
            if total is None:
                bar.update(len(src))
        if writer.num_written == 0:
            raise InputFormatError(f"{path}: no edges found (empty file, or only comments/header)")
        if relabeler is None and num_nodes is None:
            _check_id_range(path, plan, config, max_id, writer.num_written)
        # 4. id map and completion
        n = num_nodes
        if relabeler is not None:
            if num_nodes is not None and relabeler.num_ids > num_nodes:
                raise InvalidIdError(f"{path}: {relabeler.num_ids} distinct ids, more than the declared "
                                     f"node count {num_nodes}")
            n = relabeler.num_ids if num_nodes is None else num_nodes
            writer.write_array("id_map", relabeler.id_map())
        writer.close(num_nodes=n)


def _check_id_range(path: str, plan: IngestPlan, config: IngestConfig, max_id: int, num_edges: int) -> None:
    """Refuse sparse ids whose node count (largest id + 1) no later command could hold (see SPARSE_ID_FACTOR)."""
    n = max_id + 1
    if n <= SPARSE_ID_FACTOR * num_edges:
        return
    short = node_state_shortfall(n, INFO_BYTES_PER_NODE)
    if short is None:
        return
    where, value = _locate_id(path, plan, config, max_id)
    raise InvalidIdError(f"{where}: node id {value} makes {n} nodes (the largest id + 1) for {num_edges} edges, "
                         f"which need {short}: pass --relabel to number the ids 0..n-1 "
                         "(the store keeps the original ids in its id map)")


def _locate_id(path: str, plan: IngestPlan, config: IngestConfig, max_id: int) -> tuple[str, str]:
    """Where ``max_id`` first occurs ("file:line" or "file: row N") and its text: a second pass, on errors only."""
    try:
        for _ in _blocks(path, plan, config.replace(num_nodes=max_id), None):
            pass
    except IdBeyondError as exc:  # the readers stop at the first id >= max_id, which is max_id
        return exc.where, exc.value
    return path, str(max_id + config.id_offset)
