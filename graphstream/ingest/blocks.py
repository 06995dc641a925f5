"""Opening edge files (plain or compressed) and reading them in blocks of whole lines.

Compression is recognised by magic bytes, not the file name. ``iter_blocks``
reads bounded blocks of decompressed bytes (``block_bytes``, default 16 MB),
each cut after its last newline; a background thread reads and decompresses
the next block while the caller parses the current one, so memory is a few
blocks whatever the file size. A line may span blocks, but an unfinished
line longer than ``MAX_LINE_BYTES`` is refused (``/dev/zero``, a file with no
newline): without the cap it would grow until memory runs out.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import IO

import numpy as np

from ..errors import InputFormatError, ParameterError

DEFAULT_BLOCK_BYTES = 16 << 20
# No edge line comes near it (two ids, a time and a weight take < 100 bytes; long string ids < 1 KB);
# the reader holds at most a block plus this much of an unfinished line.
MAX_LINE_BYTES = 1 << 20

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))


def compression_of(path: str | os.PathLike) -> str | None:
    """'gzip', 'bz2', 'xz' from the file's magic bytes (not its name), or None."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


class LineTooLongError(InputFormatError):
    """A line ran past ``MAX_LINE_BYTES`` without a newline; ``offset`` is where it starts (decompressed bytes)."""

    def __init__(self, path: str, offset: int):
        self.offset = offset
        self.message = (f"line starting at byte {offset} has no newline within {MAX_LINE_BYTES} bytes "
                        f"(lines are limited to {MAX_LINE_BYTES >> 20} MiB; is this an edge list?)")
        super().__init__(f"{path}: {self.message}")


class _Counted:
    """The raw file, remembering how many bytes were read (for progress)."""

    def __init__(self, path: str | os.PathLike, arrow):
        self.raw = arrow.OSFile(str(path), "rb") if arrow is not None else open(path, "rb")

    def position(self) -> int:
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0


def open_text(path: str | os.PathLike) -> tuple[IO[bytes], _Counted]:
    """Open a possibly compressed file as decompressed bytes, plus its raw handle.

    gzip and bz2 are decompressed by pyarrow (faster than the standard
    library, and it releases the GIL); xz by :mod:`lzma`.
    """
    pa = _pyarrow()
    kind = compression_of(path)
    if kind in ("gzip", "bz2") and pa is not None and pa.Codec.is_available(kind):
        raw = _Counted(path, arrow=pa)
        return pa.CompressedInputStream(raw.raw, kind), raw
    raw = _Counted(path, arrow=None)
    if kind == "gzip":
        return gzip.GzipFile(fileobj=raw.raw, mode="rb"), raw
    if kind == "bz2":
        return bz2.BZ2File(raw.raw, mode="rb"), raw
    if kind == "xz":
        return lzma.LZMAFile(raw.raw, mode="rb"), raw
    return raw.raw, raw


def _pyarrow():
    """pyarrow if it imports (it decompresses faster), else None: the standard library is used."""
    try:
        import pyarrow
    except ImportError:
        return None
    return pyarrow


def read_block(f: IO[bytes], path: str, block_bytes: int) -> bytes:
    pa = _pyarrow()
    arrow_errors = (pa.ArrowException,) if pa is not None else ()
    try:
        return f.read(block_bytes)
    except EOFError as exc:
        raise InputFormatError(f"{path}: compressed data is truncated ({exc})") from exc
    except (OSError, zlib.error, lzma.LZMAError, *arrow_errors) as exc:
        what = "truncated" if "runcated" in str(exc) else "corrupt"
        raise InputFormatError(f"{path}: compressed data is {what} ({exc})") from exc


def iter_blocks(path: str | os.PathLike, block_bytes: int = DEFAULT_BLOCK_BYTES
                ) -> Iterator[tuple[np.ndarray, int]]:
    """Yield (block, raw bytes read so far); every block but the last ends with a newline.

    The next block is read (and decompressed, which releases the GIL) in a
    background thread while the caller parses the current one. Raises
    :class:`LineTooLongError` when an unfinished line exceeds ``MAX_LINE_BYTES``.
    """
    if block_bytes < 1:
        raise ParameterError(f"block_bytes must be >= 1, got {block_bytes}")
    name = str(path)
    f, raw = open_text(path)
    with f, raw.raw, ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstream-read") as pool:
        carry = b""
        offset = 0  # decompressed bytes yielded so far: where ``carry`` starts
        fut = pool.submit(read_block, f, name, block_bytes)
        while True:
            data = fut.result()
            if not data:
                if carry:
                    yield np.frombuffer(carry, dtype=np.uint8), raw.position()
                return
            fut = pool.submit(read_block, f, name, block_bytes)
            if carry:
                data = carry + data
            cut = data.rfind(b"\n")
            if cut < 0:  # a line longer than a block: keep reading, up to the cap
                if len(data) > MAX_LINE_BYTES:
                    raise LineTooLongError(name, offset)
                carry = data
                continue
            carry = data[cut + 1:]
            offset += cut + 1
            yield np.frombuffer(data, dtype=np.uint8, count=cut + 1), raw.position()
            if len(carry) > MAX_LINE_BYTES:  # after the yield: the caller has counted the lines before it
                raise LineTooLongError(name, offset)

