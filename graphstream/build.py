"""Deprecated name of :mod:`graphstream.assemble` (renamed: ``build`` is the folder name that
packaging tools and linters treat as generated output). Kept so that
``from graphstream.build import build_partitions`` keeps working."""
import warnings

from .assemble import *  # noqa: F403
from .assemble import __all__  # noqa: F401

warnings.warn("graphstream.build is now graphstream.assemble", DeprecationWarning, stacklevel=2)
