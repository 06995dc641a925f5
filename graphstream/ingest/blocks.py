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
from contextlib import ExitStack
from typing import IO

import numpy as np

from ..errors import InputFormatError, ParameterError

DEFAULT_BLOCK_BYTES = 16 << 20
# No edge line comes near it (two ids, a time and a weight take < 100 bytes; long string ids < 1 KB);
# the reader holds at most a block plus this much of an unfinished line.
MAX_LINE_BYTES = 1 << 20

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))
# Containers and compressors that are not read, and how to unpack them: their bytes were parsed as text
# (a zstd file: "non-numeric source id '(\ufffd/\ufffd...'").
_UNREAD = ((b"\x28\xb5\x2f\xfd", "zstd", "zstd -d FILE"), (b"\x04\x22\x4d\x18", "lz4", "lz4 -d FILE"),
           (b"PK\x03\x04", "zip", "unzip FILE"), (b"7z\xbc\xaf\x27\x1c", "7z", "7z x FILE"))


def compression_of(path: str | os.PathLike) -> str | None:
    """'gzip', 'bz2', 'xz' from the file's magic bytes (not its name), or None; a compressor that is not
    read (zstd, lz4, zip, 7z) is :class:`InputFormatError`."""
    with open(path, "rb") as f:
        head = f.read(6)
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    for magic, name, unpack in _UNREAD:
        if head.startswith(magic):
            raise InputFormatError(f"{path}: a {name} file; text is read plain or compressed with gzip, bzip2 or "
                                   f"xz: unpack it first ({unpack})")
    return None


class LineTooLongError(InputFormatError):
    """A line ran past ``MAX_LINE_BYTES`` without a newline; ``offset`` is where it starts (decompressed bytes)."""

    def __init__(self, path: str, offset: int):
        self.path = path
        self.offset = offset
        self.message = (f"line starting at byte {offset} has no newline within {MAX_LINE_BYTES} bytes "
                        f"(lines are limited to {MAX_LINE_BYTES >> 20} MiB; is this an edge list?)")
        super().__init__(f"{path}: {self.message}")

    def __reduce__(self):   # picklable as itself (a task of a cluster raises it to its client)
        return type(self), (self.path, self.offset)


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
    # a gzip file padded with zero bytes (tape blocks, some archivers) is valid to gzip and to the standard
    # library, not to pyarrow ("unknown compression method"). A member ends in its CRC-32 and length, 8
    # bytes that are all 0 only for an empty member (after its final block's 0x03 0x00): 16 zeros at the end
    # are padding (a member under 16 MiB ends in one zero byte, which is no sign of it)
    padded = kind == "gzip" and _tail(path, PADDING_SIGN) == bytes(PADDING_SIGN)
    if kind in ("gzip", "bz2") and pa is not None and pa.Codec.is_available(kind) and not padded:
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


PADDING_SIGN = 16


def _tail(path: str | os.PathLike, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - n))
        return f.read(n)


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


class _Range:
    """Bytes [start, stop) of a plain file, read like a file."""

    def __init__(self, f: IO[bytes], start: int, stop: int):
        f.seek(start)
        self._f, self._left = f, stop - start

    def read(self, n: int) -> bytes:
        data = self._f.read(min(n, self._left))
        self._left -= len(data)
        return data

    def position(self) -> int:
        return self._f.tell()

    def __enter__(self) -> _Range:
        return self

    def __exit__(self, *exc) -> None:
        self._f.close()


def iter_blocks(path: str | os.PathLike, block_bytes: int = DEFAULT_BLOCK_BYTES, *, start: int = 0,
                stop: int | None = None) -> Iterator[tuple[np.ndarray, int]]:
    """Yield (block, raw bytes read so far); every block but the last ends with a newline.

    The next block is read (and decompressed, which releases the GIL) in a
    background thread while the caller parses the current one. Raises
    :class:`LineTooLongError` when an unfinished line exceeds ``MAX_LINE_BYTES``
    (its ``offset`` counted from ``start``). ``start``/``stop``: only bytes
    [start, stop) of a plain (uncompressed) file, cut at line ends by
    :func:`line_cuts` (a task of a cluster reads one such range).
    """
    if block_bytes < 1:
        raise ParameterError(f"block_bytes must be >= 1, got {block_bytes}")
    name = str(path)
    if start or stop is not None:
        if compression_of(path) is not None:
            raise ParameterError(f"{name}: a compressed file is read whole, not by byte ranges")
        f = _Range(open(path, "rb"), start, os.path.getsize(path) if stop is None else stop)
        closing, position = (f,), f.position
    else:
        f, raw = open_text(path)
        closing, position = (f, raw.raw), raw.position
    with ExitStack() as stack, ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphstream-read") as pool:
        for handle in closing:
            stack.enter_context(handle)
        carry = b""
        offset = 0  # decompressed bytes yielded so far: where ``carry`` starts
        fut = pool.submit(read_block, f, name, block_bytes)
        while True:
            data = fut.result()
            if not data:
                if carry:
                    yield np.frombuffer(carry, dtype=np.uint8), position()
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
            yield np.frombuffer(data, dtype=np.uint8, count=cut + 1), position()
            if len(carry) > MAX_LINE_BYTES:  # after the yield: the caller has counted the lines before it
                raise LineTooLongError(name, offset)



def line_cuts(path: str | os.PathLike, parts: int, *, min_bytes: int) -> list[tuple[int, int]]:
    """Bytes of a plain file cut into at most ``parts`` ranges of about equal size (at least
    ``min_bytes`` each), every cut just after a newline, so each range holds whole lines.

    A nominal cut with no newline within ``MAX_LINE_BYTES`` after it is dropped (its line is
    too long anyway: the reader of the range before says so).
    """
    size = os.path.getsize(path)
    parts = max(1, min(parts, size // max(1, min_bytes)))
    cuts = [0]
    with open(path, "rb") as f:
        for i in range(1, parts):
            nominal = size * i // parts
            if nominal <= cuts[-1]:
                continue
            f.seek(nominal - 1)   # a newline just before the nominal cut makes it a line start already
            window = f.read(MAX_LINE_BYTES + 1)
            nl = window.find(b"\n")
            if nl >= 0 and nominal + nl < size:
                cuts.append(nominal + nl)
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def count_lines(path: str | os.PathLike, stop: int, block_bytes: int = DEFAULT_BLOCK_BYTES) -> int:
    """Newlines in bytes [0, stop) of a plain file: the line number a byte range starts after
    (counted only when a range reports an error, to name its line as a whole-file read would)."""
    lines = 0
    with open(path, "rb") as f:
        left = stop
        while left > 0:
            data = f.read(min(block_bytes, left))
            if not data:
                break
            lines += data.count(b"\n")
            left -= len(data)
    return lines
