"""Safe output: the one place that decides how graphstream replaces what it writes.

* A result is written into a temporary sibling ``.NAME.tmp-XXXXXXXX`` and
  swapped into place only when complete (``renameat2(RENAME_EXCHANGE)`` where
  the file system has it, else two renames through ``.NAME.old-XXXXXXXX``),
  so a run killed at any moment leaves NAME as the old complete output or the
  new complete one (:class:`AtomicOutput`, :func:`atomic_dir`,
  :func:`atomic_file`).
* An output is refused when it is, contains or lies inside one of the
  command's inputs (:func:`check_outputs_apart`), before anything is touched.
* A lock file ``.NAME.lock`` beside the output (``flock``; it holds pid, host
  and command) keeps a second run off the same output (:func:`output_lock`).
  The kernel drops the lock of a dead process, so a stale lock is simply taken.
* Holding the lock, a run first clears what a killed run left beside NAME
  (:func:`recover_leftovers`): ``.NAME.tmp-*`` and ``.NAME.scratch-*`` are
  removed; an ``.NAME.old-*`` while NAME is missing means a crash between the
  two renames of a swap, so it is the old output and is put back.
* Scratch folders carry their owner's pid in their name and its flock on their
  ``.owner.lock`` (:func:`scratch_dir`): the next run removes the ones whose
  lock it can take (their owner ended, in whatever pid namespace or host).
* A launcher that must tell its command's outputs from another run's of the
  same name (the service, cancelling or rerunning a job) sets
  :data:`PUBLISHED_LOG_ENV`: every output swapped into place is noted there
  first, with the inode it will have (:func:`published_here`).
* ENOSPC (and EDQUOT) becomes :class:`DiskFullError`; files written through a
  memory map are allocated first (:func:`allocated_memmap`), so a full disk is
  an OSError at allocation instead of a SIGBUS at the first store.
"""
from __future__ import annotations

import atexit
import ctypes
import errno
import fcntl
import json
import os
import re
import resource
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

from .errors import (
    DiskFullError,
    OutputExistsError,
    OutputLockedError,
    ParameterError,
    ResourceError,
    path_argument,
    yes_or_no,
)

PathLike = str | os.PathLike
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


#: A file to which each output this process swaps into place is noted (its path and the temporary's device and
#: inode, which the rename keeps), just before the swap, under the output's lock.
PUBLISHED_LOG_ENV = "GRAPHSTREAM_PUBLISHED_LOG"


def _is_url(path: PathLike) -> bool:
    return "://" in str(path)


def resolved(path: PathLike) -> Path:
    """``path`` absolute with its symlinks followed; a loop of links is :class:`ParameterError` naming it
    (Python 3.11's ``Path.resolve`` raises RuntimeError there, 3.13's OSError: a traceback either way)."""
    try:
        return Path(path).resolve()
    except RuntimeError as exc:
        raise ParameterError(f"{path}: a loop of symbolic links ({exc})") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ParameterError(f"{path}: a loop of symbolic links ({exc.strerror})") from exc
        raise


def recorded_path(path: PathLike) -> str:
    """How an output records where its input came from (a store's ``source``, a manifest's): a local
    path absolute, symlinks resolved, so that it means the same from any folder and whether the command
    ran in process or on a cluster (whose commands are given absolute paths); a URL as it is."""
    return str(path) if _is_url(path) else str(resolved(path))


def for_workers(path: PathLike | None) -> str | None:
    """A path handed to dask workers: absolute (a worker resolves a relative path against its own
    working folder), symlinks kept as the user named them; a URL as it is; None stays None."""
    return None if path is None else path_argument(path, "path")   # "link/.." kept, as the kernel reads it


# -- refusals -------------------------------------------------------------------------------------

def check_output(path: PathLike, overwrite: bool, *, alternative: str = "",
                 inputs: Mapping[str, PathLike | None] | None = None, file: bool = False) -> Path:
    """Refuse an existing output unless ``overwrite``, an existing folder that is not graphstream's even
    with it (:func:`replaceable`; ``file``: the output is a file, which may replace one), and one that is,
    holds or lies in one of ``inputs`` (named by their keys: :func:`check_outputs_apart`); return the
    path. ``alternative``: another way out the refusal names (``"--resume to continue that run"``)."""
    check_output_name(path)
    if file:
        check_file_output_name(path)
    if inputs:
        check_outputs_apart({"output": path}, inputs)
    path = Path(path)
    overwrite = yes_or_no(overwrite, "overwrite")
    if (path.exists() or path.is_symlink()) and not overwrite:
        other = f", or {alternative}" if alternative else ""
        raise OutputExistsError(f"{path}: output exists (pass --overwrite to replace it{other})")
    if overwrite and not replaceable(path, file=file):
        if file and path.is_dir():
            raise OutputExistsError(f"{path}: is a folder, and this output is a file; --overwrite does not "
                                    "replace a folder with a file: remove it yourself, or choose another name")
        what = ("is a file, not a graphstream output" if path.is_file() else
                f"folder is not a graphstream output ({_listing(path)})")
        raise OutputExistsError(f"{path}: --overwrite replaces what graphstream wrote, and this {what}; remove "
                                "it yourself, or choose another name")
    _check_parent(path)
    return path


def _check_parent(path: Path) -> None:
    if not path.parent.is_dir():
        raise OutputExistsError(f"{path}: {why_not_a_folder(path.parent)}")


def blocking_file(folder: PathLike) -> Path | None:
    """The nearest of ``folder`` and the folders above it that is a file (not a folder), if any."""
    folder = Path(folder)
    return next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)


def why_not_a_folder(folder: PathLike) -> str:
    """Why ``folder`` (not a folder) is not: the nearest of it and the folders above it that is a file (a
    file two levels up was called a missing folder), else that it does not exist."""
    blocking = blocking_file(folder)
    if blocking is not None:
        return f"{blocking} is a file, not a folder"
    return f"folder {folder} does not exist"


def check_scratch_parent(folder: PathLike, name: str) -> None:
    """A scratch folder is made, its parents are not: a typo must not leave a tree of scratch files."""
    parent = Path(folder).parent
    if not parent.is_dir():
        raise ParameterError(f"{name} {folder}: {why_not_a_folder(parent)} (the scratch folder is created, "
                             "not its parents)")


# A file name's bytes on Linux file systems, and an output's name at most: its siblings add ".", a
# suffix and 8 hex digits (".NAME.tmp-discard-XXXXXXXX", 22 bytes); a name without room for them failed
# at the lock with ENAMETOOLONG, after the checks.
NAME_MAX = 255
MAX_OUTPUT_NAME_BYTES = NAME_MAX - 32


def check_output_name(path: PathLike) -> None:
    """An output is named by its own last component: ``.``, ``..``, ``dir/`` of ``.`` or ``/`` name a folder
    that holds other things (the current one, its parent, the root), which an output replaces whole."""
    text = str(path)
    if _is_url(text):
        return
    # the text's last component, not Path's: Path("/w/.").name is "w", and an absolute "." is "/w/."
    name = os.path.basename(text.rstrip("/"))
    if name in ("", ".", ".."):
        raise ParameterError(f"{text!r}: an output is named by a new folder or file of its own (not the "
                             "current folder, its parent or /): e.g. out.zarr")
    if len(os.fsencode(name)) > MAX_OUTPUT_NAME_BYTES:
        raise ParameterError(f"output {name[:24]}...{name[-12:]}: its name is {len(os.fsencode(name))} bytes; "
                             f"at most {MAX_OUTPUT_NAME_BYTES} (its lock and temporary siblings add to it, and a "
                             f"file name holds {NAME_MAX} bytes)")


def check_file_output_name(path: PathLike) -> None:
    """A file output (a checkpoint, an HTML page) named with a trailing "/" names a folder: "newr/" wrote
    a file newr and reported "newr/"."""
    if str(path).endswith("/"):
        raise ParameterError(f"{str(path)!r}: ends with '/', a folder's name; this output is a file: give "
                             "a file's name")


# What each kind of folder graphstream writes holds at its top, by the file that marks it: graph and
# snapshot stores (a Zarr group: zarr.json and array folders), partitioned datasets and dynamic partitions
# (manifest.json and part-NNNNN), PyG exports (META.json ...), DistDGL exports (<graph_name>.json, partN,
# the hidden id maps), node data folders (`dataset`: graph.zarr and .npy files). A folder is graphstream's
# only when *every* entry is one of its kind's (a graph store's zarr.json copied into a folder of the
# user's files does not make them replaceable), and its marker names a graphstream format, or cannot be
# read at all (a damaged output is replaced; another tool's Zarr group or manifest is not).
_LEFTOVER = re.compile(r"\..+\.(lock|tmp-.+|old-.+|scratch-.+)")   # a killed run's, beside an inner output
_PART_DIR = re.compile(r"part-\d+")
_PYG_ENTRY = re.compile(r"META\.json|node_map\.pt|edge_map\.pt|label\.pt|part_\d+|\w+_idx")
_DGL_ENTRY = re.compile(r"part\d+|\.new_id\.npy|\.owner\.npy")
_DGL_CONFIG_KEYS = {"graph_name", "num_parts", "node_map", "edge_map"}


def replaceable(path: PathLike, *, file: bool = False) -> bool:
    """Whether ``--overwrite`` may replace ``path``: it does not exist, is a symlink (replaced as such), a
    file where the output is a file (``file``: a checkpoint, an HTML report; never a folder there), an
    empty folder, or a folder graphstream wrote (every entry one of its kind's, even when its data are
    damaged). A user's folder is never removed whole because an output was named after it (``ingest
    edges.txt ~ --overwrite`` removed the home folder), nor a user's file by an output that is a folder
    (``export ... thesis.txt``)."""
    path = Path(path)
    if path.is_symlink() or not path.exists():
        return True
    if not path.is_dir():
        return file
    if file:   # a file output over a folder, even one of ours: a store named ck.best beside --checkpoint ck
        return False
    try:
        names = _entries(path)
    except OSError:
        return False
    if not names:
        return True
    return any(check(path, names) for check in (_a_store, _a_dataset, _a_pyg_export, _a_dgl_export,
                                                _a_node_data_folder))


def _entries(folder: Path) -> set[str]:
    """A folder's entries but the leftovers of killed runs (cleared by the next run on them)."""
    return {n for n in os.listdir(folder) if not _LEFTOVER.fullmatch(n)}


_UNREADABLE = object()


def _ours(marker: Path, keys: tuple[str, ...]) -> bool:
    """The marker file names a graphstream format, or is unreadable (damaged); not another tool's."""
    value = _json_field(marker, keys, unreadable=_UNREADABLE)
    if value is _UNREADABLE:
        return marker.is_file()
    return str(value or "").startswith("graphstream.")


def _a_store(path: Path, names: set[str]) -> bool:
    return ("zarr.json" in names and _ours(path / "zarr.json", ("attributes", "format"))
            and all(n == "zarr.json" or (path / n / "zarr.json").is_file() for n in names))


def _a_dataset(path: Path, names: set[str]) -> bool:
    return ("manifest.json" in names and _ours(path / "manifest.json", ("format",))
            and all(n == "manifest.json" or (_PART_DIR.fullmatch(n) and (path / n).is_dir()) for n in names))


def _a_pyg_export(path: Path, names: set[str]) -> bool:
    return ("META.json" in names and isinstance(_json_field(path / "META.json", ("num_parts",)), int)
            and all(_PYG_ENTRY.fullmatch(n) for n in names))


def _a_dgl_export(path: Path, names: set[str]) -> bool:
    configs = [n for n in names if n.endswith(".json")]
    return (len(configs) == 1 and _DGL_CONFIG_KEYS <= set(_json_field(path / configs[0], ()) or {})
            and all(n == configs[0] or _DGL_ENTRY.fullmatch(n) for n in names))


def _a_node_data_folder(path: Path, names: set[str]) -> bool:
    store = path / "graph.zarr"
    return ("graph.zarr" in names and store.is_dir() and not store.is_symlink()
            and _a_store(store, _entries(store))
            and all(n == "graph.zarr" or _node_data_file(n) and (path / n).is_file() for n in names))


def _node_data_file(name: str) -> bool:
    """A file graphstream dataset writes: a user's own other.npy or extra_mask.npy beside them is not
    (--overwrite removed it)."""
    return name in ("features.npy", "labels.npy", "node_data.json", "train_mask.npy", "val_mask.npy",
                    "test_mask.npy")


def _json_field(file: Path, keys: tuple[str, ...], unreadable=None):
    """``file``'s JSON object, or its field at ``keys``; None when absent, ``unreadable`` when the file
    cannot be read or parsed."""
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return unreadable
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if keys or isinstance(value, dict) else None


def _listing(path: Path, shown: int = 3) -> str:
    """What a folder holds, the entries no graphstream output has first (a user's file beside an export's
    was hidden behind the export's own files)."""
    def ours(name: str) -> bool:   # an entry of some graphstream output's kind
        return (name in ("zarr.json", "manifest.json", "META.json", "graph.zarr") or name.endswith(".npy")
                or any(p.fullmatch(name) for p in (_PART_DIR, _PYG_ENTRY, _DGL_ENTRY)))
    names = sorted(os.listdir(path), key=lambda n: (ours(n), n))
    more = f", ... ({len(names)} entries)" if len(names) > shown else ""
    return "it holds " + ", ".join(names[:shown]) + more


def _relation(out: Path, inp: Path) -> str | None:
    """How output ``out`` overlaps input ``inp`` (both resolved): "is", "contains", "lies inside" or None."""
    if out == inp:
        return "is"
    if out in inp.parents:
        return "contains"
    if inp in out.parents:
        return "lies inside"
    try:  # hard links, bind mounts: one file or folder under two names
        if out.exists() and inp.exists() and os.path.samefile(out, inp):
            return "is"
    except OSError:
        pass
    return None


def prepare_work_dir(folder: PathLike | None, name: str = "work_dir") -> None:
    """Make a scratch folder the caller named (and its parents, as ``mkdir -p``); a file there is a
    :class:`ParameterError` naming ``name`` (FileExistsError, or FileNotFoundError where a builder
    expected the folder to exist). URLs and None are left alone."""
    if folder is None or _is_url(folder):
        return
    _refuse_a_file(folder, name)
    Path(folder).mkdir(parents=True, exist_ok=True)


def _refuse_a_file(folder: PathLike, name: str) -> None:
    if Path(folder).exists() and not Path(folder).is_dir():
        raise ParameterError(f"{name} {folder}: a file, not a folder")


def check_outputs_apart(outputs: Mapping[str, PathLike | None], inputs: Mapping[str, PathLike | None],
                        scratch: Mapping[str, PathLike | None] | None = None) -> None:
    """Refuse (:class:`ParameterError`) an output that is, contains or lies inside an input, and a
    scratch folder (written into, never replaced: ``--work-dir``) that is or lies inside an input
    (one that holds inputs is fine: its files have their own names) or overlaps an output at all
    (an output replaced with ``--overwrite`` would take the scratch files with it, and an output
    inside it could take a scratch file's name).

    Keys name the values in the message (``{"--out": "d"}``, ``{"input store": "d/graph.zarr"}``);
    None values are skipped. Paths are compared resolved (symlinks followed); URLs only as
    written. Touches nothing.
    """
    def overlap(out_name: str, out: PathLike, in_name: str, inp: PathLike, allowed: tuple[str, ...],
                choose: str) -> None:
        if _is_url(out) or _is_url(inp):
            relation = "is" if str(out).rstrip("/") == str(inp).rstrip("/") else None
        else:
            relation = _relation(resolved(out), resolved(inp))
        if relation is not None and relation not in allowed:
            raise ParameterError(f"{out_name} {out} {relation} the {in_name} {inp}: choose {choose}")

    for out_name, out in outputs.items():
        for in_name, inp in inputs.items():
            if out is not None and inp is not None:
                overlap(out_name, out, in_name, inp, (), "an output outside every input")
    apart = "a scratch folder apart from every output and outside every input"
    for name, folder in (scratch or {}).items():
        if folder is None:
            continue
        for in_name, inp in inputs.items():
            if inp is not None:
                overlap(name, folder, in_name, inp, ("contains",), apart)
        for out_name, out in outputs.items():
            if out is not None:
                overlap(name, folder, f"output {out_name}", out, (), apart)


# -- lock ------------------------------------------------------------------------------------------

def lock_path(final: PathLike) -> Path:
    final = Path(final)
    return final.with_name(f".{final.name}.lock")


# resolved output -> [fd, depth, thread]: re-entrant within the thread that holds it (a command and the
# writer it calls), refused to the process's other threads (two threads on one work folder each wrote the
# other's vertex stream: a wrong plan, or a SIGBUS on a file truncated under its memory map)
_HELD: dict[str, list] = {}
_HELD_GUARD = threading.Lock()


def _holder_text(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 65536).decode("utf-8", "replace") or "{}")
        return (f"pid {info.get('pid')} on {info.get('host')} ({info.get('command')}, "
                f"since {info.get('started')})")
    except (OSError, ValueError, AttributeError):
        return "another process"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_without_flock(path: Path, final: Path) -> int:
    """File systems without flock: the pid in the file decides (a dead pid on this host is stale)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            info = json.loads(os.read(fd, 65536) or b"{}")
        except ValueError:
            info = {}
        holder = _holder_text(fd)
        os.close(fd)
        if info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int) \
                and not _pid_alive(info["pid"]):
            path.unlink(missing_ok=True)     # stale: its process is gone
            return _lock_without_flock(path, final)
        raise OutputLockedError(f"{final}: output is in use by {holder} (lock file {path}); "
                                "wait for that run to end or choose another output", holder) from None
    return fd


def _acquire(final: Path) -> int:
    path = lock_path(final)
    for _ in range(20):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_text(fd)
            os.close(fd)
            raise OutputLockedError(f"{final}: output is in use by {holder} (lock file {path}); "
                                    "wait for that run to end or choose another output", holder) from None
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                fd = _lock_without_flock(path, final)
                break
            raise
        try:  # the holder before us may have unlinked the file we opened: lock the current one
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    else:
        raise OutputLockedError(f"{final}: could not take the lock file {path} (it keeps changing)")
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(["graphstream", *sys.argv[1:]]),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
    except OSError:   # a full disk before anything was written: no empty lock file left behind
        path.unlink(missing_ok=True)
        os.close(fd)
        raise
    return fd


@contextmanager
def output_lock(final: PathLike) -> Iterator[None]:
    """Hold ``.NAME.lock`` beside ``final``; a second holder gets :class:`OutputLockedError`
    naming the first. Re-entrant within the holding thread (a command and the writer it calls); another
    thread of the process is a second holder."""
    final = Path(final)
    key = str(resolved(final))
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None and held[2] != threading.get_ident():
            raise OutputLockedError(f"{final}: output is in use by another thread of this process; wait for "
                                    "that run to end or choose another output")
        if held is not None:
            held[1] += 1
        else:
            try:
                _HELD[key] = [_acquire(final), 1, threading.get_ident()]
            except OSError as exc:
                if exc.errno in DISK_FULL_ERRNOS:   # named here: the lock is the first thing an output writes
                    raise DiskFullError(f"{final}: disk full before anything was written (taking the lock "
                                        f"{lock_path(final).name}); free space and run again") from exc
                raise
    try:
        yield
    finally:
        with _HELD_GUARD:
            held = _HELD[key]
            held[1] -= 1
            if held[1] == 0:
                del _HELD[key]
                # Unlink while still holding it: whoever opened the old file re-checks the inode.
                lock_path(final).unlink(missing_ok=True)
                os.close(held[0])


# -- leftovers of killed runs ----------------------------------------------------------------------

def _siblings(final: Path, kind: str) -> list[Path]:
    prefix = f".{final.name}.{kind}-"
    try:
        return sorted((p for p in final.parent.iterdir() if p.name.startswith(prefix)),
                      key=lambda p: p.lstat().st_mtime)
    except FileNotFoundError:
        return []


def recover_leftovers(final: PathLike, *, warn_kept: bool = True) -> list[str]:
    """Clear what killed runs left beside ``final``; call it holding :func:`output_lock`.

    An ``.NAME.old-*`` while NAME is missing is the old output of a swap cut between its
    two renames: it is moved back. Every other ``.NAME.tmp-*``, ``.NAME.old-*`` and
    ``.NAME.scratch-*`` is removed. Returns what was done, one line per path.
    """
    final = Path(final)
    done = []

    def note(line: str) -> None:
        done.append(line)
        _say(line)
    olds = _siblings(final, "old")
    if olds and not (final.exists() or final.is_symlink()):
        os.replace(olds[-1], final)
        note(f"restored {final} from {olds[-1].name} (a swap was interrupted)")
        olds = olds[:-1]
    for p in olds + _siblings(final, "tmp") + _siblings(final, "scratch"):
        try:
            remove_path(p)
            note(f"removed {p} (left by an interrupted run)")
        except OSError as exc:   # read-only contents, say: reported, never a reason to refuse this run
            kept = f"could not remove {p} (left by an earlier run): {exc.strerror or exc}; remove it by hand"
            if warn_kept:   # space held for good: said whatever GRAPHSTREAM_PROGRESS says
                _warn(kept)
            done.append(kept)
    return done


def _say(line: str) -> None:
    """One line on stderr (not _report.log: _atomic and _report are independent layers)."""
    if os.environ.get("GRAPHSTREAM_PROGRESS", "1") not in ("0", "false", "no"):
        print(f"graphstream: {line}", file=sys.stderr, flush=True)


def _warn(line: str) -> None:
    """A warning line, as _report.warn writes one: printed whatever GRAPHSTREAM_PROGRESS says."""
    print(f"graphstream: warning: {line}", file=sys.stderr, flush=True)


def _remove_replaced(old: Path, final: Path) -> None:
    """Remove the output that ``final`` replaced, now at ``old``; the new output is in place whatever
    happens here, so a failure (read-only contents) is said, and left for the user, not raised."""
    try:
        remove_path(old)
    except OSError as exc:
        _warn(f"{final}: replaced; the previous output, now {old.name} beside it, could not be removed "
              f"({exc.strerror or exc}): remove it by hand")


def clear_after_writers(final: PathLike) -> list[str]:
    """Tidy ``final`` once the other processes that wrote it have ended (a launcher's workers,
    which may have been killed mid-write): take its lock, clear their leftovers (see
    :func:`recover_leftovers`) and release it, which also removes a lock file a killed writer left.
    Nothing is done while another run holds the lock, or where the folder is gone."""
    final = Path(final)
    if not final.parent.is_dir():
        return []
    try:
        with output_lock(final):
            return recover_leftovers(final)
    except (OutputLockedError, OSError):   # held by another run; or no lock can be made there (a name too long)
        return []


# -- atomic replacement ----------------------------------------------------------------------------

def remove_path(path: PathLike) -> None:
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():       # a writer thread added a file while we removed: once more, loudly
            shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def discard_output(final: PathLike) -> bool:
    """Remove a complete output whole (whether it was there): under its lock, renamed to a ``.NAME.tmp-``
    sibling first, so that a crash leaves a leftover the next run on NAME clears, never a half-removed
    output that looks whole."""
    final = Path(final)
    with output_lock(final):
        if not (final.exists() or final.is_symlink()):
            return False
        doomed = final.with_name(f".{final.name}.tmp-discard-{uuid.uuid4().hex[:8]}")
        os.replace(final, doomed)
        remove_path(doomed)
        return True


def disk_full(exc: BaseException, where: PathLike | None = None) -> bool:
    """Whether ``exc`` means the disk is full: ENOSPC/EDQUOT, or, for writers that lose the errno
    (numpy's ``tofile`` short write, torch's zip writer), an OSError/RuntimeError raised while the
    file system holding ``where`` has less than 1 MiB left (call it before removing anything)."""
    if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
        return True
    if where is None or not isinstance(exc, (OSError, RuntimeError)):
        return False
    try:
        st = os.statvfs(where)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < (1 << 20)


class _PlainWrites:
    """A file seen by numpy as a stream: numpy writes a real file with ``tofile``, whose short
    write on a full disk raises an OSError without errno; ``write`` raises ENOSPC."""

    def __init__(self, f):
        self.write = f.write


def save_npy(path: PathLike, array: np.ndarray | list[np.ndarray]) -> None:
    """``np.save``'s file, written from the array's own buffer, a full disk reported as ENOSPC (see
    :class:`_PlainWrites`). A list of 1-D arrays of one dtype is saved as their concatenation, written
    one after another (no copy of the whole made first).

    Not ``np.save`` on the file: numpy writes a stream through 16 MiB copies of the array (``tobytes``),
    and a task's shard paid for them (R-MAT s22's degree shard, 33.5 MB: 0.04-0.27 s against
    0.03-0.04 s written from the buffer). The bytes are ``np.save``'s; arrays that are not C-contiguous,
    or hold objects, still go through it."""
    if not isinstance(array, list):
        array = np.asarray(array)
        if array.dtype.hasobject or not array.flags.c_contiguous:
            with open(path, "wb") as f:
                np.save(_PlainWrites(f), array)
            return
        dtype, shape, blocks = array.dtype, array.shape, [array]
    else:
        dtypes = {a.dtype for a in array}
        if len(dtypes) != 1 or any(a.ndim != 1 for a in array):
            raise ValueError(f"{path}: blocks of one dtype and one dimension expected, got "
                             f"{sorted(map(str, dtypes))} of {sorted({a.ndim for a in array})} dimensions")
        dtype, shape, blocks = dtypes.pop(), (sum(len(a) for a in array),), array
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    with open(path, "wb") as f:
        try:
            np.lib.format.write_array_header_1_0(f, header)
        except ValueError:   # a header past 64 KiB (a record of many fields): format 2.0, as np.save
            f.seek(0)
            f.truncate()
            np.lib.format.write_array_header_2_0(f, header)
        for a in blocks:
            # bytes, whatever the dtype (a record type's buffer is not always one Python can write)
            f.write(np.ascontiguousarray(a).reshape(-1).view(np.uint8).data)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap_into_place(tmp: Path, final: Path) -> None:
    """Put the complete ``tmp`` at ``final``; at every instant ``final`` is the old or the new output
    (with RENAME_EXCHANGE), or else recoverable by :func:`recover_leftovers`."""
    if not (final.exists() or final.is_symlink()):
        os.replace(tmp, final)
    elif _exchange(tmp, final):
        _remove_replaced(tmp, final)        # now the old output
    else:
        # Old output aside first: a crash between the renames leaves it as .old-*, restored next run.
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
        os.replace(tmp, final)
        _remove_replaced(old, final)


class AtomicOutput:
    """One output written into a temporary sibling and swapped in at :meth:`commit`.

    :meth:`begin` takes the lock, clears leftovers of killed runs, refuses an
    existing output without ``overwrite`` and names the temporary sibling
    (created as a folder with ``mkdir``); :meth:`rollback` removes it. Until
    the commit the old output is untouched.
    """

    def __init__(self, path: PathLike, overwrite: bool = False, *, mkdir: bool = True, lock: bool = True,
                 file: bool = False):
        check_output_name(path)   # the name as given: Path("/w/.") is "/w", the folder that holds it
        self.final = Path(path)
        self.overwrite = yes_or_no(overwrite, "overwrite")
        self.mkdir = mkdir
        self.file = file   # the output is a file (it may replace one), not a folder
        self.lock = lock
        self.tmp: Path | None = None
        self._stack = ExitStack()

    def begin(self) -> Path:
        _check_parent(self.final)
        try:
            if self.lock:
                self._stack.enter_context(output_lock(self.final))
                recover_leftovers(self.final)   # only under the lock: nobody else is writing them
            check_output(self.final, self.overwrite, file=self.file)
            self.tmp = self.final.with_name(f".{self.final.name}.tmp-{uuid.uuid4().hex[:8]}")
            if self.mkdir:
                self.tmp.mkdir()
        except BaseException as exc:
            self._stack.close()
            if disk_full(exc):
                raise self.disk_full_error(exc) from exc
            raise
        return self.tmp

    def disk_full_error(self, exc: BaseException) -> DiskFullError:
        return DiskFullError(f"{self.final}: disk full while writing ({getattr(exc, 'strerror', None) or exc}); "
                             "nothing was written, free space and run again")

    def commit(self) -> None:
        try:
            _note_published(self.tmp, self.final)
            swap_into_place(self.tmp, self.final)
        except BaseException as exc:
            self.rollback()
            if disk_full(exc):
                raise self.disk_full_error(exc) from exc
            raise
        self.tmp = None
        self._stack.close()

    def rollback(self) -> None:
        try:
            if self.tmp is not None:
                remove_path(self.tmp)
                self.tmp = None
        finally:
            self._stack.close()


def _note_published(tmp: Path, final: Path) -> None:
    """Note ``final`` and ``tmp``'s device, inode and mtime in the file named by :data:`PUBLISHED_LOG_ENV`,
    if set. The rename keeps all three (a folder's mtime changes with its entries, not with its own
    rename); the mtime, to the nanosecond, tells this output from a later one that reuses a freed inode.
    Before the swap: a run killed between the two leaves a note of an inode that never reached ``final``,
    never a published output without its note."""
    log = os.environ.get(PUBLISHED_LOG_ENV)
    if not log:
        return
    st = os.lstat(tmp)
    line = json.dumps({"path": _published_path(final), "dev": st.st_dev, "ino": st.st_ino,
                       "mtime_ns": st.st_mtime_ns}) + "\n"
    with open(log, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _published_path(path: PathLike) -> str:
    """``path`` with its folder resolved but not itself: an output at a symlink replaces the symlink."""
    path = os.path.abspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def published_here(log: PathLike, path: PathLike) -> bool:
    """Whether the output now at ``path`` is one that a process noted in ``log`` put there (the same path,
    device, inode and mtime; see :data:`PUBLISHED_LOG_ENV`); False when either is missing."""
    try:
        st = os.lstat(path)
        lines = Path(log).read_text(encoding="utf-8").splitlines()
    except OSError:   # missing, or a path that cannot be one (a file as its folder, a name too long)
        return False
    where = _published_path(path)
    for line in lines:
        try:
            note = json.loads(line)
        except ValueError:   # a line cut by a crash mid-write
            continue
        if isinstance(note, dict) and note.get("path") == where and note.get("dev") == st.st_dev \
                and note.get("ino") == st.st_ino and note.get("mtime_ns") == st.st_mtime_ns:
            return True
    return False


def remove_scratch_of(pid: int, parent: PathLike) -> list[Path]:
    """Remove the scratch folders ``graphstream-*<pid>-XXXX`` (:func:`new_scratch_folder`) that the ended
    process ``pid`` left in ``parent``; those removed. Only folders with the owner's lock file: a folder
    of the user's that merely looks like one (``graphstream-2024-11``) is never a scratch folder."""
    removed = []
    for folder in Path(parent).glob(f"graphstream-*{pid}-*"):
        prefix = folder.name[:folder.name.rfind(f"{pid}-")]
        if folder.is_dir() and folder.name.rsplit("-", 2)[-2] == str(pid) \
                and (folder / SCRATCH_OWNER).is_file() and _owner_ended(folder, prefix):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@contextmanager
def atomic_dir(path: PathLike, overwrite: bool = False, *, mkdir: bool = True) -> Iterator[Path]:
    """Yield a temporary sibling folder (created unless ``mkdir`` is False: for a writer that creates
    it); on success it replaces ``path``.

    On any exception (signals included) the temporary folder is removed and
    ``path`` is left as it was. ENOSPC is reported as :class:`DiskFullError`.
    """
    with _written_atomically(AtomicOutput(path, overwrite, mkdir=mkdir)) as tmp:
        yield tmp


@contextmanager
def atomic_file(path: PathLike, overwrite: bool = True, *, lock: bool = True) -> Iterator[Path]:
    """Yield a temporary sibling file name; on success the file replaces ``path`` (e.g. a checkpoint).

    ``lock=False`` where another process (a launcher) holds the output's lock for the whole run."""
    with _written_atomically(AtomicOutput(path, overwrite, mkdir=False, lock=lock, file=True)) as tmp:
        yield tmp


@contextmanager
def _written_atomically(output: AtomicOutput) -> Iterator[Path]:
    """The temporary sibling of ``output``: committed on success; on any exception (signals
    included) rolled back, a full disk reported as :class:`DiskFullError`."""
    tmp = output.begin()
    try:
        yield tmp
    except BaseException as exc:
        full = disk_full(exc, output.final.parent)   # before the rollback frees the space
        output.rollback()
        if full:
            raise output.disk_full_error(exc) from exc
        if past_file_size_limit(exc):
            raise ResourceError(f"{output.final}: {file_size_limit_reason()} while writing it; nothing was "
                                "written: raise the limit") from exc
        raise
    output.commit()


def past_file_size_limit(exc: BaseException) -> bool:
    """Whether ``exc`` is a write stopped by this process's file size limit (``ulimit -f``): EFBIG, or torch's
    zip writer's short write ("unexpected pos", no errno) under a finite limit (export and checkpoints
    were tracebacks)."""
    if isinstance(exc, OSError):
        return exc.errno == errno.EFBIG
    return (isinstance(exc, RuntimeError) and "unexpected pos" in str(exc)
            and resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY)


def file_size_limit_reason() -> str:
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    shown = "unlimited" if limit == resource.RLIM_INFINITY else f"{limit:,} bytes"
    return f"a file reached this process's file size limit ({shown}; ulimit -f)"


@contextmanager
def claim_outputs(outputs: Mapping[str, PathLike | None], inputs: Mapping[str, PathLike | None],
                  overwrite: bool, scratch: Mapping[str, PathLike | None] | None = None,
                  files: Collection[str] = ()) -> Iterator[None]:
    """What a command does first: refuse outputs that overlap inputs (and scratch folders that would
    write into one: :func:`check_outputs_apart`), take each output's lock for the whole run (a second
    run fails at once, not after the long part), clear the leftovers of killed runs and refuse
    existing outputs without ``overwrite``. ``files``: the keys of the outputs that are files."""
    check_outputs_apart(outputs, inputs, scratch)
    for name, folder in (scratch or {}).items():
        if folder is None or _is_url(folder):
            continue
        check_scratch_parent(folder, name)
        _refuse_a_file(folder, name)
    with ExitStack() as stack:
        for key, out in outputs.items():
            if out is None or _is_url(out):
                continue
            check_output_name(out)
            if key in files:
                check_file_output_name(out)
            final = Path(out)
            _check_parent(final)
            stack.enter_context(output_lock(final))
            recover_leftovers(final, warn_kept=False)   # the writer's own AtomicOutput says what it cannot remove
            check_output(final, overwrite, file=key in files)
        yield


# -- scratch space --------------------------------------------------------------------------------

# A scratch folder's owner holds this file's flock for the folder's life: another process (another
# container, another host of a cluster on the shared folder, where the pid in the name means nothing)
# removes the folder only once it can take the lock, which the kernel drops when the owner dies.
SCRATCH_OWNER = ".owner.lock"
# A folder without the owner's lock file (made by an older version, or being made now) is judged by its pid,
# and only once this old: a folder seconds old may be another pid namespace's, its lock not yet taken.
UNLOCKED_SCRATCH_SECONDS = 60.0


def new_scratch_folder(prefix: str, dir: PathLike | None = None, *,  # noqa: A002 - tempfile's word
                       lock: bool = True) -> tuple[Path, int | None]:
    """A new temporary folder ``PREFIX<pid>-XXXX`` and the descriptor of its owner's lock (held until
    closed; the caller's to close, then to remove the folder; None with ``lock=False``: the folder goes by
    its pid alone); first removes the folders of this prefix whose owner has ended (left by killed runs)."""
    parent = Path(dir) if dir is not None else Path(tempfile.gettempdir())
    for p in parent.glob(f"{prefix}*"):
        if p.is_dir() and _owner_ended(p, prefix):
            shutil.rmtree(p, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
    if not lock:
        return folder, None
    fd = os.open(folder / SCRATCH_OWNER, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):   # no flock there: the pid decides
            os.close(fd)
            raise
    return folder, fd


def _owner_ended(folder: Path, prefix: str) -> bool:
    """Whether the process that made a scratch folder has ended: its lock can be taken (the kernel
    dropped it), or, for a folder without the lock file, its pid is not alive here and it is old."""
    try:
        fd = os.open(folder / SCRATCH_OWNER, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return _dead_and_old(folder, prefix)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:   # held (the owner lives), or no flock on this file system: the pid decides
        return exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS) and _dead_and_old(folder, prefix)
    finally:
        os.close(fd)


def _dead_and_old(folder: Path, prefix: str) -> bool:
    """A scratch folder without a lock to ask: its pid is not alive here, and it is old enough not to be
    another pid namespace's folder in the making."""
    pid = folder.name[len(prefix):].split("-", 1)[0]
    try:
        old = time.time() - folder.stat().st_mtime > UNLOCKED_SCRATCH_SECONDS
    except FileNotFoundError:
        return False
    return old and pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid))


def scratch_folder_until_exit(prefix: str) -> Path:
    """A new temporary folder ``PREFIX<pid>-XXXX`` (:func:`new_scratch_folder`) removed when this process
    exits: for a result that outlives the call that made it. Only by the process that made it: a forked
    child that runs the exit handlers it inherits must not remove its parent's folder."""
    # no lock held: one descriptor for the life of the process per call would add up (a loop of direct
    # algorithm runs); such a folder goes by its pid (and age), as before the locks
    folder, _ = new_scratch_folder(prefix, lock=False)
    atexit.register(_remove_if_mine, folder, os.getpid())
    return folder


def _remove_if_mine(folder: Path, pid: int) -> None:
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def scratch_dir(prefix: str, dir: PathLike | None = None) -> Iterator[Path]:  # noqa: A002 - tempfile's word
    """A temporary folder ``PREFIX<pid>-XXXX`` (:func:`new_scratch_folder`), removed on exit (signals
    included)."""
    path, fd = new_scratch_folder(prefix, dir)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)   # after the removal: no other process takes the folder for a dead one's meanwhile


def allocated_memmap(path: PathLike, dtype, shape: tuple[int, ...]) -> np.memmap:
    """A new ``.npy`` file opened as a writable memory map, its blocks allocated first.

    Stores through a memory map into a sparse file on a full disk kill the
    process with SIGBUS; ``posix_fallocate`` makes that an ENOSPC OSError here.
    """
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    size = mm.offset + mm.nbytes
    del mm
    with open(path, "r+b") as f:
        if size:
            try:
                os.posix_fallocate(f.fileno(), 0, size)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
    return np.lib.format.open_memmap(path, mode="r+")
