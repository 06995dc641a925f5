"""``IngestConfig``: every option of one ingest, normalised and checked once.

The CLI builds it from its flags, :func:`graphstream.ingest.ingest` from its
keywords; the pipeline, the text reader and the binary sources read it
instead of passing the same fourteen keywords down every call.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

from ..errors import ParameterError, whole_number, yes_or_no
from ..store import DEFAULT_CHUNK, MAX_CHUNK

FORMATS = ("auto", "snap", "csv", "tsv", "npy", "parquet")
DEFAULT_BLOCK_BYTES = 16 << 20
DEFAULT_ROWS_PER_BLOCK = 1 << 20
HEADER_CHOICES = ("auto", "yes", "no")
# Spellings of a tab that survive a shell: --delimiter '\t' arrives as backslash + t.
_TAB_NAMES = ("\\t", "tab", "TAB")
_FORBIDDEN_DELIMITERS = "\r\n\"#%"

Column = int | str | None   # a 0-based index, a header (or parquet) name, or absent


def _column(col: Column, what: str) -> Column:
    """Digit strings become indices (the CLI passes "2"); indices must be whole numbers >= 0 (2.0 was
    taken as column 2, numpy's integers refused further on)."""
    if col is None:
        return None
    if isinstance(col, bool) or not isinstance(col, (str, numbers.Integral)):
        raise ParameterError(f"{what} must be a column index or a header's name, got {col!r}")
    if isinstance(col, numbers.Integral):
        col = int(col)
    if isinstance(col, str) and col.lstrip("-").isdigit():
        col = int(col)
    if isinstance(col, int) and not isinstance(col, bool) and col < 0:
        raise ParameterError(f"{what} must be >= 0, got {col}")
    return col


def _delimiter(delimiter: str | None) -> str | None:
    if delimiter is None:
        return None
    if delimiter in _TAB_NAMES:
        return "\t"
    if len(delimiter) != 1:
        raise ParameterError(f"delimiter must be one character, got {delimiter!r}")
    if delimiter in _FORBIDDEN_DELIMITERS or ord(delimiter) > 127:
        raise ParameterError(f"delimiter {delimiter!r} is not supported")
    return delimiter


@dataclass(frozen=True, slots=True)
class IngestConfig:
    """What to read and how to store it (see :func:`graphstream.ingest.ingest` for each field).

    ``block_bytes`` and ``rows_per_block`` size the parser's blocks; the
    store does not depend on them.
    """
    fmt: str = "auto"
    undirected: bool = False
    one_based: bool = False
    relabel: bool = False
    src_column: Column = 0
    dst_column: Column = 1
    time_column: Column = None
    weight_column: Column = None
    delimiter: str | None = None
    header: str = "auto"
    num_nodes: int | None = None
    chunk_size: int = DEFAULT_CHUNK
    overwrite: bool = False
    block_bytes: int = DEFAULT_BLOCK_BYTES
    rows_per_block: int = DEFAULT_ROWS_PER_BLOCK

    def __post_init__(self) -> None:
        for name in ("undirected", "one_based", "relabel", "overwrite"):
            yes_or_no(getattr(self, name), name)
        if self.fmt not in FORMATS:
            raise ParameterError(f"format must be one of {', '.join(FORMATS)}, got {self.fmt!r}")
        if self.header not in HEADER_CHOICES:
            raise ParameterError(f"header must be auto, yes or no, got {self.header!r}")
        if self.num_nodes is not None:
            object.__setattr__(self, "num_nodes", whole_number(self.num_nodes, "num_nodes", 0))
        object.__setattr__(self, "chunk_size", whole_number(self.chunk_size, "chunk_size", 1, MAX_CHUNK))
        if self.one_based and self.relabel:
            # relabel numbers the ids it meets from 0 whatever their base, so
            # one_based would be silently ignored: say so instead.
            raise ParameterError("--one-based does not apply with --relabel, which numbers the ids it "
                                 "meets from 0 whatever their base; give one of them")
        for name in ("block_bytes", "rows_per_block"):   # chunk_size: whole_number above
            if getattr(self, name) < 1:
                raise ParameterError(f"{name} must be >= 1, got {getattr(self, name)}")
        # frozen: normalised fields are set through object.__setattr__, once, here.
        object.__setattr__(self, "delimiter", _delimiter(self.delimiter))
        for name in ("src_column", "dst_column", "time_column", "weight_column"):
            object.__setattr__(self, name, _column(getattr(self, name), name.replace("_", " ")))

    def replace(self, **changes) -> IngestConfig:
        return replace(self, **changes)

    def columns(self) -> dict[str, Column]:
        """The selected columns by role: src, dst, time, weight (None = absent)."""
        return {"src": self.src_column, "dst": self.dst_column, "time": self.time_column,
                "weight": self.weight_column}

    @property
    def with_time(self) -> bool:
        return self.time_column is not None

    @property
    def with_weight(self) -> bool:
        return self.weight_column is not None

    @property
    def id_offset(self) -> int:
        """Subtracted from every id: 1 for 1-based ids (relabelled ids are taken as they are)."""
        return 1 if (self.one_based and not self.relabel) else 0

    @property
    def id_limit(self) -> int | None:
        """Ids must be below it (None: no declared bound, or any id is relabelled)."""
        return None if (self.num_nodes is None or self.relabel) else int(self.num_nodes)
