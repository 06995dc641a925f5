"""One error hierarchy for graphstream.

Every error a user can cause (bad input, missing files, existing outputs,
invalid parameters) derives from :class:`GraphStreamError`; the CLI turns it
into one line on stderr and exit code 2. Anything else is a bug and keeps
its traceback. Messages say what was expected, what was received, and where.
"""
from __future__ import annotations


class GraphStreamError(Exception):
    """Base class of every error caused by input, parameters or environment."""


class StoreError(GraphStreamError):
    """A graph or snapshot store is missing, malformed or not graphstream's."""


class IncompleteStoreError(StoreError):
    """The store was never finished (interrupted write): it is not trusted."""


class InputFormatError(GraphStreamError):
    """An input file cannot be parsed (names file and line where known)."""


class InvalidIdError(InputFormatError):
    """Node ids that are negative, non-numeric or beyond the node count."""


class OutputExistsError(GraphStreamError):
    """The output path exists and overwriting was not asked for."""


class OutputLockedError(GraphStreamError):
    """Another run (another process, or another thread of this one) is writing the same output or work
    folder: its lock file is held (``holder``: who holds it, as its lock file says, where known)."""

    def __init__(self, message: str, holder: str | None = None):
        super().__init__(message)
        self.holder = holder


class ParameterError(GraphStreamError, ValueError):
    """A parameter is out of range or inconsistent with the input."""


class NodeDataError(GraphStreamError):
    """Node features, labels or masks do not match the graph."""


class DiskFullError(GraphStreamError):
    """Writing output failed for lack of space; nothing valid was left behind."""


class InputNotFoundError(GraphStreamError, FileNotFoundError):
    """An input file or dataset folder does not exist."""


class CorruptDataError(StoreError):
    """Stored bytes fail their checksum, are truncated or missing: the data cannot be trusted."""


class PartitionsError(StoreError):
    """A partitioned dataset is missing, malformed or inconsistent (raised by the loader)."""


class ClusterError(GraphStreamError):
    """The cluster failed (scheduler unreachable or lost, a worker cannot see a path): exit 2."""


class StoreReplacedError(StoreError):
    """A store was replaced (or removed) at its path while an open handle was reading it."""


class ResourceError(GraphStreamError):
    """The machine cannot hold what the input implies (e.g. node state for a sparse id range)."""


# -- parameter checks at the Python API's boundary -----------------------------------------------------
# The CLI's argparse types give ints and floats; Python callers may pass anything, and int() would
# silently truncate 2.5 (and numba would fail on it with a TypingError far from the call).

def yes_or_no(value, name: str) -> bool:
    """``value`` as a bool when it is one (Python's or numpy's); else a :class:`ParameterError` naming
    ``name``. A string is refused: "false" and "no" are true values, and a setting read from YAML or
    the environment as ``overwrite="no"`` replaced an existing output."""
    import numpy as np

    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def whole_number(value, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int when it is a Python or numpy integer (not a bool) within [minimum, maximum];
    else a :class:`ParameterError` naming ``name``."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(f"{name} must be a whole number, got {value!r}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ParameterError(f"{name} must be {bounds}, got {value}")
    return value


def finite_number(value, name: str, minimum: float | None = None) -> float:
    """``value`` as a float when it is a finite real number (not a bool) >= minimum; else a
    :class:`ParameterError` naming ``name``."""
    import math
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ParameterError(f"{name} must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ParameterError(f"{name} must be >= {minimum}, got {value!r}")
    return float(value)


def path_argument(value, name: str) -> str:
    """``value`` (a str or os.PathLike) as an absolute local path, or as it is when it is a URL
    (``s3://...``); else a :class:`ParameterError` naming ``name``. Absolute because a handle outlives
    the caller's working folder: a notebook's ``os.chdir`` made an open store's reads fail as "replaced"
    and an open dataset's parts "missing". The paths graphstream reports are these."""
    import os

    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise ParameterError(f"{name}: expected a path (str or os.PathLike), got {value!r}")
    text = os.fspath(value)
    if not isinstance(text, str) or not text:
        raise ParameterError(f"{name}: expected a non-empty path, got {value!r}")
    if text.startswith("file://"):
        # a local file URL is a local path: written atomically and checked like one (fsspec's file://
        # wrote in place, and a missing parent folder was a raw FileNotFoundError)
        local = text[len("file://"):]
        if local.startswith("localhost/"):
            local = local[len("localhost"):]
        if not local.startswith("/"):
            raise ParameterError(f"{name}: {text!r} is not a local file URL (file:///absolute/path)")
        return local
    if "://" in text or os.path.isabs(text):
        return text
    # joined, not normalised: "link/../x" is where the link's parent holds x, as the kernel reads it
    # (os.path.abspath drops "link/.." as text: a store read and written one folder off)
    return os.path.join(os.getcwd(), text)
