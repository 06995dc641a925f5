"""The builder's buffer sizes: the knobs that bound its RAM."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class BuildConfig:
    """Buffer sizes of the builder (bytes unless said); they bound its RAM.

    ``batch_size``: edges per streamed batch (default: the store's chunk).
    ``read_bytes``: spill file read chunk. ``sort_bytes``: the CSR fill
    buffer (a part with more column entries is filled in several row blocks).
    ``gather_bytes``: node data window mapped at once (and largest block copied).
    ``workers``: parts built at once (threads); each adds its own O(num_nodes)
    scratch (about 16 bytes per node) and buffers.
    """
    batch_size: int | None = None
    read_bytes: int = 64 * MiB
    sort_bytes: int = 256 * MiB
    gather_bytes: int = 128 * MiB
    workers: int = 2

    def read_pairs(self, id_dtype: np.dtype) -> int:
        """(src, dst) pairs of ``id_dtype`` per spill file read."""
        return max(1, self.read_bytes // (2 * np.dtype(id_dtype).itemsize))

    def __post_init__(self) -> None:
        for name in ("read_bytes", "sort_bytes", "gather_bytes"):
            if getattr(self, name) < 16:
                raise ParameterError(f"BuildConfig.{name} must be >= 16 bytes, got {getattr(self, name)}")
        if self.workers < 1:
            raise ParameterError(f"BuildConfig.workers must be >= 1, got {self.workers}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ParameterError(f"BuildConfig.batch_size must be >= 1, got {self.batch_size}")
