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

Several files (of one format) are read one after the other into one store.
With a ``client``, steps 3 and 4 run as tasks of a dask cluster
(:mod:`.distributed`), writing the same store.
"""
from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .._atomic import check_output, check_outputs_apart, for_workers, recorded_path
from .._report import progress
from .._resources import INFO_BYTES_PER_NODE, node_state_shortfall, usable_cores
from ..errors import InputFormatError, InputNotFoundError, InvalidIdError, ParameterError
from ..store import GraphStore, GraphWriter, is_url, open_store
from . import sources, text
from .blocks import compression_of, line_cuts
from .config import FORMATS, IngestConfig
from .relabel import IntRelabeler, StrRelabeler
from .sniff import SNIFF_BYTES, TextLayout, detect_format, resolve_layout
from .text import IdBeyondError

if TYPE_CHECKING:
    from distributed import Client

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


def ingest(source: str | os.PathLike | Sequence[str | os.PathLike], out: str | os.PathLike,
           config: IngestConfig | None = None, *, client: Client | None = None, **options) -> GraphStore:
    """Read an edge file (or several, one after the other) into a new graph store at ``out`` and return it opened.

    Args:
        source: SNAP/CSV/TSV text (optionally .gz/.bz2/.xz), ``.npy`` (E x k
            integers) or parquet; or a list of such files, all of one format,
            whose edges are stored in the order given.
        out: the graph store to write (a local folder, or a URL).
        config: an :class:`IngestConfig`; or give its fields as keywords
            (``fmt``, ``undirected``, ``one_based``, ``relabel``,
            ``src_column``, ``dst_column``, ``time_column``,
            ``weight_column``, ``delimiter``, ``header``, ``num_nodes``,
            ``chunk_size``, ``overwrite``, ``block_bytes``,
            ``rows_per_block``), not both.
        client: a ``distributed.Client``: files and byte ranges are parsed by
            tasks of its cluster (:mod:`.distributed`); the same store.

    Notes:
        Memory: a few text blocks (``block_bytes``) and edge chunks, plus
        24-40 bytes per distinct id with ``relabel`` (see relabel.py).
    """
    if config is None:
        config = IngestConfig(**options)
    elif options:
        raise TypeError(f"ingest() takes a config or keyword options, not both (got {sorted(options)})")
    paths = [str(source)] if isinstance(source, str | os.PathLike) else [str(p) for p in source]
    if not paths:
        raise ParameterError("ingest() needs at least one input file")
    if client is not None:   # the workers' paths
        paths, out = [for_workers(p) for p in paths], for_workers(out)
    # 1. check input and output
    for path in paths:
        if not os.path.exists(path):
            raise InputNotFoundError(f"{path}: no such file")
        if os.path.isdir(path):
            raise InputFormatError(f"{path}: is a directory, expected an edge file")
        if not os.path.isfile(path):   # a pipe, a FIFO, a device: read more than once (sniffed, then parsed)
            raise InputFormatError(f"{path}: not a regular file (a pipe, FIFO or device); the input is read "
                                   "more than once, so save it to a file first")
    remote = is_url(out)
    if not remote:
        # --overwrite must not delete an input
        check_outputs_apart({"output": out}, {_input_name(i, paths): p for i, p in enumerate(paths)})
        check_output(out, config.overwrite)
    if config.fmt == "auto":
        formats = sorted({detect_format(p) for p in paths})
        if len(formats) > 1:
            raise InputFormatError(f"{', '.join(paths)}: the input files mix formats ({', '.join(formats)}); "
                                   "ingest files of one format together")
        config = replace(config, fmt=formats[0])
    # 2. sniff
    plans = [_plan(p, config) for p in paths]
    if len({p.string_ids for p in plans}) > 1:
        if plans[0].fmt not in TEXT_FORMATS:
            raise InputFormatError(f"{', '.join(paths)}: some files have string ids, others integer ids")
        plans = [replace(p, string_ids=True) for p in plans]   # text files can all be read as strings
    try:
        return _ingest_plans(paths, out, plans, config, client)
    except (text.NonNumericIdError, text.IdOverflowError):
        if not config.relabel or plans[0].string_ids or plans[0].fmt not in TEXT_FORMATS:
            raise
    # A non-numeric id (or one beyond int64) after numeric ones: start again with string ids.
    plans = [replace(p, string_ids=True) for p in plans]
    return _ingest_plans(paths, out, plans, config, client)


TEXT_FORMATS = ("snap", "csv", "tsv")


def _input_name(i: int, paths: list[str]) -> str:
    return "input file" if len(paths) == 1 else f"input file {i + 1}"


def source_name(paths: Sequence[str]) -> str:
    """The store's ``source`` attribute: the input file, or the files in order (recorded absolute, so
    that the store's bytes do not depend on the folder the command ran from, nor on a cluster)."""
    return ", ".join(recorded_path(p) for p in paths)


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


def blocks(path: str, plan: IngestPlan, config: IngestConfig, on_bytes=None, *,
           piece: tuple[int, int] | None = None) -> Iterator[text.TextBlock]:
    """The parsed blocks of one file, or of one piece of it: byte range of plain text, rows of npy,
    row groups of parquet (what a task of a cluster reads; :mod:`.distributed`)."""
    if plan.fmt == "parquet":
        return sources.iter_parquet(path, config, row_groups=piece)
    start, stop = piece if piece is not None else (0, None)
    if plan.fmt == "npy":
        return sources.iter_npy(path, config, start=start, stop=stop)
    return text.iter_text(path, plan.layout, config, as_spans=plan.string_ids, on_bytes=on_bytes,
                          start=start, stop=stop)


def text_pieces(path: str, parts: int, min_bytes: int) -> list[tuple[int, int]] | None:
    """A plain text file cut at line ends into at most ``parts`` byte ranges of at least ``min_bytes``,
    and never less than the sniffed head, so that a header stays in the first range (a later one is
    read without it); None for a compressed file, which is read whole."""
    if compression_of(path) is not None:
        return None
    return line_cuts(path, parts, min_bytes=max(SNIFF_BYTES, min_bytes))


def blocks_in_threads(path: str, plan: IngestPlan, config: IngestConfig, threads: int,
                      on_bytes=None) -> Iterator[text.TextBlock]:
    """The blocks of a plain text file, parsed ``threads`` pieces at a time and yielded in file order:
    the same rows in the same order as :func:`blocks` gives (errors too: the first bad line in file
    order is the one raised, named by its line in the whole file).

    Pieces are cut at line ends (:func:`.blocks.line_cuts`), one block each, and parsed by a thread
    each (the parse kernel releases the GIL) while the caller appends the earlier ones. At most
    2 x ``threads`` pieces are parsed ahead, so memory stays a few blocks per thread. Compressed
    files, string ids (whose spans point into the block) and one thread read as :func:`blocks`.
    """
    spans = None
    if threads > 1 and plan.fmt not in ("npy", "parquet") and not plan.string_ids:
        spans = text_pieces(path, -(-os.path.getsize(path) // config.block_bytes), config.block_bytes // 2)
    if spans is None or len(spans) <= 1:
        yield from blocks(path, plan, config, on_bytes)
        return

    def parse(span: tuple[int, int]) -> list[text.TextBlock]:
        return list(blocks(path, plan, config, piece=span))

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="graphstream-parse") as pool:
        ahead: deque = deque()
        todo = iter(spans)
        try:
            for span in todo:
                ahead.append((span, pool.submit(parse, span)))
                if len(ahead) >= 2 * threads:
                    break
            while ahead:
                span, parsed = ahead.popleft()
                nxt = next(todo, None)
                if nxt is not None:
                    ahead.append((nxt, pool.submit(parse, nxt)))
                yield from parsed.result()
                if on_bytes is not None:
                    on_bytes(span[1])
        finally:   # an error or an early stop: the pieces not started are dropped
            for _, parsed in ahead:
                parsed.cancel()


def _ingest_plans(paths: list[str], out, plans: list[IngestPlan], config: IngestConfig,
                  client: Client | None) -> GraphStore:
    # GraphWriter builds a local store in a hidden sibling and swaps it in when complete (graphstream._atomic);
    # URL stores (fsspec) are written in place (GraphWriter removes them on failure).
    if client is None:
        write(paths, str(out), plans, config, overwrite=config.overwrite, threads=usable_cores())
    else:
        from .distributed import ingest_on_cluster
        ingest_on_cluster(client, paths, str(out), plans, config)
    return open_store(out)


def writer_columns(plans: list[IngestPlan], config: IngestConfig) -> tuple[bool, bool]:
    """Whether the store gets a time and a weight column."""
    layout = plans[0].layout  # text: the sniffed columns; npy and parquet: the columns asked for
    with_time = layout.time_column >= 0 if layout is not None else config.with_time
    with_weight = layout.weight_column >= 0 if layout is not None else config.with_weight
    return with_time, with_weight


def store_attrs(plans: list[IngestPlan], config: IngestConfig) -> dict:
    """The ``ingest`` attribute of the store (the first file's plan; ``header`` if any file had one)."""
    attrs = plans[0].attrs(config.relabel, config.one_based)
    if len(plans) > 1 and "header" in attrs["ingest"]:
        attrs["ingest"]["header"] = any(bool(p.layout.header_line) for p in plans)
    return attrs


def write(paths: list[str], target: str, plans: list[IngestPlan], config: IngestConfig, *, overwrite: bool,
          atomic: bool = True, threads: int = 1) -> None:
    """The in-process ingest: every file streamed, relabelled if asked, into a :class:`GraphWriter`
    (``atomic=False``: into ``target`` in place, a folder the caller swaps in). ``threads``: plain
    text parsed that many pieces at a time (:func:`blocks_in_threads`; 1 in a cluster's task, whose
    worker's threads are the parallelism)."""
    relabel, num_nodes = config.relabel, config.num_nodes
    with_time, with_weight = writer_columns(plans, config)
    string_ids = plans[0].string_ids
    relabeler = (StrRelabeler() if string_ids else IntRelabeler()) if relabel else None
    text_input = plans[0].fmt not in ("npy", "parquet")
    total = sum(os.path.getsize(p) for p in paths) if text_input else None
    name = source_name(paths)
    writer = GraphWriter(target, num_nodes=None if relabel else num_nodes, directed=not config.undirected,
                         with_time=with_time, with_weight=with_weight, chunk_size=config.chunk_size,
                         source=name, overwrite=overwrite, attrs=store_attrs(plans, config), atomic=atomic)
    max_id = -1
    desc = f"ingest {Path(paths[0]).name}" + (f" (+{len(paths) - 1} files)" if len(paths) > 1 else "")
    with writer, progress(total, desc=desc, unit="B" if total else "edge") as bar:
        done = 0   # bytes of the files before this one

        def on_bytes(pos: int) -> None:
            bar.update(done + pos - bar.n)
        # 3. stream, relabel, append
        for path, plan in zip(paths, plans, strict=True):
            for block in blocks_in_threads(path, plan, config, threads, on_bytes):
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
            if text_input:
                done += os.path.getsize(path)
        if writer.num_written == 0:
            raise text.no_edges_error(name, [str(p) for p in paths])
        if relabeler is None and num_nodes is None:
            check_id_range(paths, plans, config, max_id, writer.num_written)
        # 4. id map and completion
        n = num_nodes
        if relabeler is not None:
            n = relabelled_nodes(name, relabeler.num_ids, config)
            writer.write_array("id_map", relabeler.id_map())
        writer.close(num_nodes=n)


def relabelled_nodes(name: str, num_ids: int, config: IngestConfig) -> int:
    """The node count of a relabelled store: the distinct ids, which a declared count must equal (raised
    before the store is published). More nodes than ids would have no original id for ``id_map``, whose
    length is the node count."""
    num_nodes = config.num_nodes
    if num_nodes is not None and num_ids > num_nodes:
        raise InvalidIdError(f"{name}: {num_ids} distinct ids, more than the declared node count {num_nodes}")
    if num_nodes is not None and num_ids < num_nodes:
        raise InvalidIdError(f"{name}: --num-nodes {num_nodes} with --relabel, but the edges hold {num_ids} "
                             f"distinct ids: the nodes past them would have no original id in id_map (leave "
                             "--num-nodes out, or ingest without --relabel)")
    return num_ids


def check_id_range(paths: list[str], plans: list[IngestPlan], config: IngestConfig, max_id: int,
                   num_edges: int) -> None:
    """Refuse sparse ids whose node count (largest id + 1) no later command could hold (see SPARSE_ID_FACTOR)."""
    n = max_id + 1
    if n <= SPARSE_ID_FACTOR * num_edges:
        return
    short = node_state_shortfall(n, INFO_BYTES_PER_NODE)
    if short is None:
        return
    where, value = _locate_id(paths, plans, config, max_id)
    raise InvalidIdError(f"{where}: node id {value} makes {n} nodes (the largest id + 1) for {num_edges} edges, "
                         f"which need {short}: pass --relabel to number the ids 0..n-1 "
                         "(the store keeps the original ids in its id map)")


def _locate_id(paths: list[str], plans: list[IngestPlan], config: IngestConfig, max_id: int) -> tuple[str, str]:
    """Where ``max_id`` first occurs ("file:line" or "file: row N") and its text: a second pass, on errors only."""
    try:
        for path, plan in zip(paths, plans, strict=True):
            for _ in blocks(path, plan, config.replace(num_nodes=max_id), None):
                pass
    except IdBeyondError as exc:  # the readers stop at the first id >= max_id, which is max_id
        return exc.where, exc.value
    return source_name(paths), str(max_id + config.id_offset)
