"""Ingest on a dask cluster: the same store as :func:`graphstream.ingest.ingest` in-process, bit for bit.

1. Cut the input into pieces: byte ranges of plain text files (cut at line
   ends), row ranges of ``.npy`` files, row-group ranges of parquet files; a
   compressed text file is one piece (a gzip stream cannot be entered midway).

Plain text files with numeric ids (not relabelled) then take one pass of
parsing, as in-process:

2. Count: one task per byte range counts its edge lines (a branch-free scan,
   ~0.3 s a GB a core, against ~3 s a GB to parse), so the client knows where
   each range's edges start in the store.
3. Parse and write: the chunks of the store are dealt out by range (those
   that begin in it); a task parses the lines of its chunks (from its range,
   and past its end up to its last chunk's end) and writes them whole into
   the store the client created (:meth:`GraphWriter.preallocate`); the client
   applies the in-process checks, seals the store and swaps it into place.

Every other input takes two:

2. Parse: one task per piece parses it with the in-process readers and saves
   its columns as shards in a scratch folder beside the output; it returns
   its edge count and largest id (and, with ``--relabel``, saves its
   distinct ids in order of first appearance).
3. The client adds up the counts (each piece's offset in the store), applies
   the in-process checks (no edges, sparse ids), and with ``--relabel``
   merges the pieces' distinct ids in piece order: the first appearances in
   file order, so the id map is the in-process one.
4. Write: tasks over chunk-aligned edge ranges gather their edges from the
   shards (relabelled through the id map), and write whole chunks into the
   store the client created; the client seals it and swaps it into place.

String ids with ``--relabel`` are read by one task on one worker (the
in-process reader; their spans point into parse buffers, so there is no
cheap per-piece id list to merge); the client still holds the output's
temporary sibling and swaps it in.

Errors name what in-process ingest names (``file:line`` of a bad line: a
piece counts the lines before it when it fails). When several pieces hold
bad lines, the first piece to fail is reported, not necessarily the
earliest line.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._atomic import scratch_dir
from ..cluster import (
    check_visible,
    output_for_tasks,
    run_task,
    run_tasks,
    save_shard,
    shared_scratch_parent,
    split_range,
    task_count,
)
from ..errors import StoreError
from ..store import GraphWriter, id_dtype_for, is_url
from ..store.graph import EdgeRangeWriter
from . import sources, text
from ._text_kernels import after_edge_lines, count_edge_lines
from .config import IngestConfig
from .pipeline import (
    IngestPlan,
    blocks,
    check_id_range,
    relabelled_nodes,
    source_name,
    store_attrs,
    text_pieces,
    write,
    writer_columns,
)
from .relabel import IntRelabeler

if TYPE_CHECKING:
    from distributed import Client

# A piece is parsed whole into memory before it is saved: at most ~64 MB of text (~5M SNAP edges, ~80 MB
# of int64 columns) or 8M rows; at least 4 MB of text or one read block (config.block_bytes) if smaller,
# so small files are not cut at all, and never less than the sniffed head, which holds the header line
# (only the first byte range may have one).
PIECE_MAX_BYTES = 64 << 20
PIECE_MIN_BYTES = 4 << 20
PIECE_MAX_ROWS = 8 << 20
COLUMNS = ("src", "dst", "time", "weight")


@dataclass(frozen=True, slots=True)
class Piece:
    """One parse task's share: ``span`` is a byte range (text), a row range (npy), a row-group range
    (parquet), or None for a whole file."""
    file: int
    span: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class Parsed:
    """What a parse task returns: its edges, largest id (-1 with none or with relabel), the columns
    it saved and, with relabel, how many distinct ids it saw."""
    count: int
    max_id: int
    columns: tuple[str, ...]
    distinct: int = 0


def ingest_on_cluster(client: Client, paths: list[str], target: str, plans: list[IngestPlan],
                      config: IngestConfig, work_dir: str | os.PathLike | None = None) -> None:
    """Write the store ``target`` from ``paths`` with the tasks of ``client``'s cluster (module docstring).

    ``work_dir``: where the scratch folder of shards goes (default: beside the output; for a URL
    output, beside the first input). Every path must be visible to every worker.
    """
    if config.relabel and plans[0].string_ids:
        return _ingest_as_one_task(client, paths, target, plans, config)
    check_visible(client, *paths)
    pieces = _pieces(client, paths, plans, config)
    if _counted_text(plans, pieces, config):
        return _ingest_counted(client, paths, target, plans, config, pieces)
    parent = work_dir if work_dir is not None else shared_scratch_parent(paths[0] if is_url(target) else target)
    # not ".NAME.scratch-": the writer created below clears those as leftovers of killed runs when it
    # takes the output (scratch_dir itself clears the folders of dead runs of this prefix)
    with scratch_dir(f".{Path(target).name}.shards-", dir=parent) as work:
        check_visible(client, work)
        # 2. parse
        parsed = run_tasks(client, "ingest: parse", _parse_task,
                           [(i, paths[p.file], p.span, str(work)) for i, p in enumerate(pieces)],
                           plans=plans, files=[p.file for p in pieces], config=config)
        # 3. counts, checks, id map
        name = source_name(paths)
        counts = np.array([p.count for p in parsed], dtype=np.int64)
        total = int(counts.sum())
        if total == 0:
            raise text.no_edges_error(name, [str(p) for p in paths])
        id_map = lookup = None
        if config.relabel:
            id_map = _merge_ids(work, parsed)
            num_nodes = relabelled_nodes(name, len(id_map), config)
            lookup = _save_lookup(work, id_map)
        else:
            max_id = max(p.max_id for p in parsed)
            if config.num_nodes is None:
                check_id_range(paths, plans, config, max_id, total)
            num_nodes = config.num_nodes if config.num_nodes is not None else max_id + 1
        with_time, with_weight = writer_columns(plans, config)
        # the dtype the in-process writer ends with (int32, widened to int64 only for 2**31 nodes or more)
        writer = GraphWriter(target, num_nodes=None if config.relabel else config.num_nodes,
                             id_dtype=id_dtype_for(num_nodes), directed=not config.undirected,
                             with_time=with_time, with_weight=with_weight, chunk_size=config.chunk_size,
                             source=name, overwrite=config.overwrite, attrs=store_attrs(plans, config))
        with writer:
            # 4. write whole chunks from the shards
            writer.preallocate(total)
            check_visible(client, writer.staging_path)
            offsets = np.concatenate([[0], np.cumsum(counts)]).tolist()
            shards = [(offsets[i], p.count, str(work / f"piece-{i:05d}"), p.columns) for i, p in enumerate(parsed)
                      if p.count]
            ranges = split_range(total, task_count(client), align=config.chunk_size)
            run_tasks(client, "ingest: write", _write_task, ranges, unit="edge", size=lambda r: r[1] - r[0],
                      path=writer.staging_path, shards=shards, chunk_size=config.chunk_size, lookup=lookup)
            if id_map is not None:
                writer.write_array("id_map", id_map)
            writer.close(num_nodes=num_nodes)
    return None


def _ingest_as_one_task(client: Client, paths: list[str], target: str, plans: list[IngestPlan],
                        config: IngestConfig) -> None:
    """The in-process ingest run by one task, into the temporary sibling that the client holds and swaps in."""
    if is_url(target):
        check_visible(client, *paths)
        run_task(client, "ingest", write, paths, target, plans, config, overwrite=config.overwrite)
        return
    with output_for_tasks(client, target, config.overwrite, inputs=paths, mkdir=False) as tmp:
        run_task(client, "ingest", write, paths, str(tmp), plans, config, overwrite=False, atomic=False)


# -- 1. pieces --------------------------------------------------------------------------------------

def _pieces(client: Client, paths: list[str], plans: list[IngestPlan], config: IngestConfig) -> list[Piece]:
    """Every file cut into pieces: a few per worker thread over all the input, none too big to parse in memory."""
    parts = task_count(client)
    sizes = [os.path.getsize(p) for p in paths]
    pieces = []
    for i, (path, plan) in enumerate(zip(paths, plans, strict=True)):
        share = max(1, round(parts * sizes[i] / max(1, sum(sizes))))
        if plan.fmt == "npy":
            rows = sources.npy_rows(path)
            spans = split_range(rows, max(share, -(-rows // PIECE_MAX_ROWS)))
        elif plan.fmt == "parquet":
            groups = sources.parquet_row_groups(path)
            spans = split_range(len(groups), max(share, -(-sum(groups) // PIECE_MAX_ROWS)))
        else:   # None: a compressed file, one piece
            spans = text_pieces(path, max(share, -(-sizes[i] // PIECE_MAX_BYTES)),
                                min(PIECE_MIN_BYTES, config.block_bytes))
        pieces += [Piece(i, span) for span in spans or [None]]
    return pieces


# -- plain text: count, then parse and write ---------------------------------------------------------

class _WideIds(Exception):
    """A task met an id past 2**31 while the store's ids were int32 (no node count was given)."""


@dataclass(frozen=True, slots=True)
class TextRange:
    """A byte range of a plain text file, with its edges' place in the store: ``edges`` from ``first``."""
    path: str
    start: int
    stop: int
    skip_line: int   # the header's line number in the file if the range starts the file, else 0
    first: int
    edges: int


def _counted_text(plans: list[IngestPlan], pieces: list[Piece], config: IngestConfig) -> bool:
    """Whether every piece is a byte range of plain text with numeric ids kept as they are (one pass)."""
    return not config.relabel and all(
        p.span is not None and plans[p.file].fmt not in ("npy", "parquet") and not plans[p.file].string_ids
        for p in pieces)


def _ingest_counted(client: Client, paths: list[str], target: str, plans: list[IngestPlan], config: IngestConfig,
                    pieces: list[Piece]) -> None:
    """Plain text in one parse: the ranges' edge lines counted, then the store's chunks parsed and written
    by the task of the range each begins in (module docstring)."""
    skips = [plans[p.file].layout.header_line if p.span[0] == 0 else 0 for p in pieces]
    counts = run_tasks(client, "ingest: count", _count_task,
                       [(paths[p.file], *p.span, skip) for p, skip in zip(pieces, skips, strict=True)],
                       unit="byte", size=lambda t: t[2] - t[1])
    total = int(sum(counts))
    if total == 0:
        raise text.no_edges_error(source_name(paths), [str(p) for p in paths])
    firsts = np.concatenate([[0], np.cumsum(counts)]).tolist()
    ranges = [TextRange(paths[p.file], *p.span, skip, firsts[i], counts[i])
              for i, (p, skip) in enumerate(zip(pieces, skips, strict=True))]
    range_plans = [plans[p.file] for p in pieces]
    try:
        _write_counted(client, paths, target, plans, config, ranges, range_plans,
                       id_dtype_for(config.num_nodes) if config.num_nodes is not None else np.dtype(np.int32))
    except _WideIds:   # an id past 2**31 with no node count given: written again, as int64 (as in-process)
        _write_counted(client, paths, target, plans, config, ranges, range_plans, np.dtype(np.int64))


def _write_counted(client: Client, paths: list[str], target: str, plans: list[IngestPlan], config: IngestConfig,
                   ranges: list[TextRange], range_plans: list[IngestPlan], ids: np.dtype) -> None:
    """The store of the counted ``ranges`` with ``ids`` (raises _WideIds, nothing left, when int32 ids do
    not fit)."""
    total = ranges[-1].first + ranges[-1].edges
    with_time, with_weight = writer_columns(plans, config)
    writer = GraphWriter(target, num_nodes=config.num_nodes, id_dtype=ids, directed=not config.undirected,
                         with_time=with_time, with_weight=with_weight, chunk_size=config.chunk_size,
                         source=source_name(paths), overwrite=config.overwrite, attrs=store_attrs(plans, config))
    with writer:
        writer.preallocate(total)
        check_visible(client, writer.staging_path)
        found = run_tasks(client, "ingest: parse", _parse_chunks_task, _chunk_tasks(ranges, total, config.chunk_size),
                          unit="edge", size=lambda t: t[1] - t[0], path=writer.staging_path, plans=range_plans,
                          config=config, int32_ids=ids == np.int32)
        if any(f is None for f in found):
            raise _WideIds
        max_id = max(found)
        if config.num_nodes is None:
            check_id_range(paths, plans, config, max_id, total)
        writer.close(num_nodes=config.num_nodes if config.num_nodes is not None else max_id + 1)


def _chunk_tasks(ranges: list[TextRange], total: int, chunk: int) -> list[tuple[int, int, list[tuple[int, TextRange]]]]:
    """One task per range with a chunk beginning in it: the store's edges [a, b) of those chunks, and the
    ranges (with their index) that hold them: its own, and the next ones up to its last chunk's end."""
    tasks = []
    for r in ranges:
        a = min(total, -(-r.first // chunk) * chunk)
        b = min(total, -(-(r.first + r.edges) // chunk) * chunk)
        if a < b:
            tasks.append((a, b, [(j, q) for j, q in enumerate(ranges)
                                 if q.edges and q.first < b and q.first + q.edges > a]))
    return tasks


def _count_task(path: str, start: int, stop: int, skip_line: int) -> int:
    """A task: the edge lines in bytes [start, stop) of ``path`` (whole lines)."""
    if stop <= start:   # an empty file (which cannot be memory-mapped)
        return 0
    return int(count_edge_lines(np.memmap(path, dtype=np.uint8, mode="r")[start:stop], skip_line))


def _parse_chunks_task(a: int, b: int, ranges: list[tuple[int, TextRange]], *, path: str, plans: list[IngestPlan],
                       config: IngestConfig, int32_ids: bool) -> int | None:
    """A task: edges [a, b) of the store (whole chunks) parsed from ``ranges`` and written; the largest id
    (-1: none), or None when an id does not fit the store's int32 ids (nothing more is written)."""
    max_id = -1
    with EdgeRangeWriter(path, start=a) as out:   # whole chunks written as they fill
        for j, r in ranges:
            lo, hi = max(a, r.first), min(b, r.first + r.edges)
            for block in blocks(r.path, plans[j], config, piece=_line_span(r, lo - r.first, hi - r.first)):
                block_max = max(int(block.src.max()), int(block.dst.max()))
                if int32_ids:   # narrowed as each block comes: half the bytes to gather into chunks
                    if block_max >= 2**31:
                        return None
                    block = replace(block, src=block.src.astype(np.int32), dst=block.dst.astype(np.int32))
                max_id = max(max_id, block_max)
                cols = {c: getattr(block, c) for c in COLUMNS if getattr(block, c) is not None}
                room = b - out.position
                if len(block.src) > room:   # the rows up to b are this task's; never into the next task's chunks
                    parsed_to = out.position + len(block.src)
                    out.append({c: x[:room] for c, x in cols.items()})
                    raise _miscounted(path, a, b, parsed_to)
                out.append(cols)
        out.flush()
    if out.position != b:
        raise _miscounted(path, a, b, out.position)
    return max_id


def _miscounted(path: str, a: int, b: int, parsed_to: int) -> StoreError:
    """The count's rule and the parser's disagree (a bug): an error, never a store with shifted edges."""
    return StoreError(f"{path}: edges [{a}, {b}) of the store: the parse reached edge {parsed_to} where the "
                      f"count of edge lines ended at {b}")


def _line_span(r: TextRange, skip: int, stop: int) -> tuple[int, int]:
    """The bytes of ``r`` that hold its edge lines [skip, stop) (with the lines without edges among them)."""
    if skip == 0 and stop == r.edges:
        return r.start, r.stop
    buf = np.memmap(r.path, dtype=np.uint8, mode="r")[r.start:r.stop]
    begin = after_edge_lines(buf, r.skip_line, skip) if skip else 0
    end = r.stop if stop == r.edges else r.start + begin + after_edge_lines(
        buf[begin:], 0 if begin else r.skip_line, stop - skip)
    return r.start + begin, end


# -- 2. parse ---------------------------------------------------------------------------------------

def _parse_task(index: int, path: str, span: tuple[int, int] | None, work: str, *, plans: list[IngestPlan],
                files: list[int], config: IngestConfig) -> Parsed:
    """A task: parse one piece and save its columns as ``piece-NNNNN.<column>.npy`` shards."""
    plan = plans[files[index]]
    parts: dict[str, list[np.ndarray]] = {c: [] for c in COLUMNS}
    max_id = -1
    for block in blocks(path, plan, config, piece=span):
        if not len(block.src):
            continue
        if not config.relabel:
            # ids are >= 0 here (the readers refuse negative ones): int32 halves the shard's bytes; each
            # block narrowed as it comes, so no int64 copy of the whole piece is ever made
            block_max = max(int(block.src.max()), int(block.dst.max()))
            max_id = max(max_id, block_max)
            if block_max < 2**31:
                block = replace(block, src=block.src.astype(np.int32), dst=block.dst.astype(np.int32))
        for c in COLUMNS:
            a = getattr(block, c)
            if a is not None:
                parts[c].append(a)
    count = sum(len(a) for a in parts["src"])
    if count == 0:
        return Parsed(0, -1, ())
    if max_id >= 2**31:   # a piece with a larger id keeps int64 throughout
        parts["src"], parts["dst"] = ([a.astype(np.int64) for a in parts[c]] for c in ("src", "dst"))
    base = Path(work) / f"piece-{index:05d}"
    distinct = 0
    if config.relabel:
        ids = _first_seen(np.concatenate(parts["src"]), np.concatenate(parts["dst"]))
        save_shard(f"{base}.ids.npy", ids)
        distinct = len(ids)
    columns = tuple(c for c in COLUMNS if parts[c])
    for c in columns:   # the blocks written one after another: no copy of the whole piece
        save_shard(f"{base}.{c}.npy", parts[c])
    return Parsed(count, max_id, columns, distinct)


def _first_seen(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The distinct ids of the edges in order of first appearance (src before dst within an edge),
    as the in-process relabeler numbers them."""
    seq = np.empty(2 * len(src), dtype=np.int64)
    seq[0::2], seq[1::2] = src, dst
    ids, first = np.unique(seq, return_index=True)
    return ids[np.argsort(first, kind="stable")]


# -- 3. the id map ----------------------------------------------------------------------------------

def _merge_ids(work: Path, parsed: list[Parsed]) -> np.ndarray:
    """The pieces' first-seen ids fed in piece order to the in-process relabeler: the id map of a
    whole-file read (an id's first appearance in the file is in the first piece that has it)."""
    relabeler = IntRelabeler()
    for i, p in enumerate(parsed):
        if p.count:
            ids = np.load(work / f"piece-{i:05d}.ids.npy")
            relabeler.map(ids, ids)   # each id as both ends of an edge: inserted once, in order
    return relabeler.id_map()


def _save_lookup(work: Path, id_map: np.ndarray) -> tuple[str, str]:
    """Shards the write tasks relabel through: the original ids sorted, and each one's local id."""
    order = np.argsort(id_map, kind="stable")
    keys, local = work / "ids-sorted.npy", work / "ids-local.npy"
    save_shard(keys, id_map[order])
    save_shard(local, order)
    return str(keys), str(local)


# -- 4. write ---------------------------------------------------------------------------------------

def _write_task(start: int, stop: int, *, path: str, shards: list[tuple[int, int, str, tuple[str, ...]]],
                chunk_size: int, lookup: tuple[str, str] | None) -> int:
    """A task: edges [start, stop) of the store (whole chunks), gathered from the piece shards."""
    firsts = np.array([s[0] for s in shards], dtype=np.int64)
    keys = local = None
    if lookup is not None:
        keys, local = (np.load(p, mmap_mode="r") for p in lookup)
    with EdgeRangeWriter(path) as out:   # chunk i is compressed while chunk i+1 is gathered
        for a in range(start, stop, chunk_size):
            _write_chunk(out, a, min(a + chunk_size, stop), shards, firsts, keys, local)
    return stop - start


def _write_chunk(out: EdgeRangeWriter, a: int, b: int, shards: list[tuple[int, int, str, tuple[str, ...]]],
                 firsts: np.ndarray, keys: np.ndarray | None, local: np.ndarray | None) -> None:
    """Edges [a, b) of the store: the overlapping slices of the piece shards, relabelled with a lookup."""
    cols: dict[str, list[np.ndarray]] = {}
    for j in range(int(np.searchsorted(firsts, a, side="right")) - 1, len(shards)):
        first, count, base, names = shards[j]
        if first >= b:
            break
        lo, hi = max(a, first) - first, min(b, first + count) - first
        for c in names:
            cols.setdefault(c, []).append(np.load(f"{base}.{c}.npy", mmap_mode="r")[lo:hi])
    edges = {c: np.concatenate(parts) for c, parts in cols.items()}
    if keys is not None:
        for c in ("src", "dst"):
            edges[c] = local[np.searchsorted(keys, edges[c])]
    out.write(a, edges)
