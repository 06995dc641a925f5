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


class ResourceError(GraphStreamError):
    """The machine cannot hold what the input implies (e.g. node state for a sparse id range)."""
