"""Atomic output: a result is written into a temporary sibling and renamed into
place only when complete, so an interrupted or failed run never leaves
something that looks valid. Also the one place that refuses existing outputs.
"""
from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import DiskFullError, OutputExistsError


def check_output(path: str | os.PathLike, overwrite: bool) -> Path:
    """Refuse an existing output unless ``overwrite``; return the path."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise OutputExistsError(f"{path}: output exists (pass --overwrite to replace it)")
    if not path.parent.exists():
        raise OutputExistsError(f"{path}: parent folder {path.parent} does not exist")
    return path


def remove_path(path: str | os.PathLike) -> None:
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextmanager
def atomic_dir(path: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces ``path``.

    On any exception the temporary folder is removed and ``path`` is left as
    it was. ENOSPC is reported as :class:`DiskFullError`.
    """
    final = check_output(path, overwrite)
    tmp = final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        yield tmp
    except OSError as exc:
        remove_path(tmp)
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(f"{final}: disk full while writing ({exc})") from exc
        raise
    except BaseException:
        remove_path(tmp)
        raise
    if final.exists():
        # Move the old output aside first so a crash here still leaves one valid copy.
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
        os.replace(tmp, final)
        remove_path(old)
    else:
        os.replace(tmp, final)
