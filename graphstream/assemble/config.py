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
    ``gather_bytes``: node data held at once per worker while it is split: a mapped window of half
    of it, and the rows copied out of that window.
    ``workers``: the build's threads; each part built at once adds its own O(num_nodes)
    scratch (about 16 bytes per node) and buffers. None: as many as the usable
    cores, and half of the available memory, hold (:meth:`resolve_workers`).
    ``bucket_bytes``, ``bucket_min_blocks``: a part whose columns take at
    least ``bucket_min_blocks`` blocks of ``bucket_bytes`` (at most
    ``sort_bytes``) is first written into one bucket file per block (one more
    scan; its entries once more on disk, released block by block) and each
    block sorted from its own bucket; a smaller part is filled from its spill
    file, one scan per block of ``sort_bytes`` (:mod:`graphstream.assemble.csr`).
    ``cut_parts``: a part with more pairs than a thread's share of the parts pass
    is cut into steps that every thread or worker takes from
    (:func:`graphstream.assemble.csr.parts_to_cut`); False builds every part
    whole, one thread each, as before the cut existed (the same bytes; for
    measuring the cut against it).
    """
    batch_size: int | None = None
    read_bytes: int = 64 * MiB
    sort_bytes: int = 256 * MiB
    gather_bytes: int = 128 * MiB
    workers: int | None = None
    bucket_bytes: int = 32 * MiB
    bucket_min_blocks: int = 3
    cut_parts: bool = True

    def read_pairs(self, id_dtype: np.dtype) -> int:
        """(src, dst) pairs of ``id_dtype`` per spill file read."""
        return max(1, self.read_bytes // (2 * np.dtype(id_dtype).itemsize))

    def worker_bytes(self, num_nodes: int) -> int:
        """Memory one worker may take: its scratch (local map, row counter, halo list) and its buffers."""
        return 16 * int(num_nodes) + self.read_bytes + self.sort_bytes + self.gather_bytes

    def resolve_workers(self, num_nodes: int) -> int:
        """Threads of the build: ``workers`` if set; else one per usable core, and no more than half of
        the available memory holds at :meth:`worker_bytes` each (at least one).

        The kernels of a part are sequential and release the GIL, so threads scale with the cores
        (R-MAT scale 21: 16 single-threaded dask workers built in 1.7-2.1 s what 2 threads built in
        5.8 s); the memory bound keeps a large graph on a small machine from swapping instead. More
        threads than parts are not capped: a part larger than a thread's share is cut into steps
        that every thread takes from (``csr.parts_to_cut``), and the route uses every thread; only
        ``min(threads, k)`` part scratches are made.
        """
        if self.workers is not None:
            return self.workers
        from .._resources import workers_within
        return workers_within(self.worker_bytes(num_nodes))

    def __post_init__(self) -> None:
        for name in ("read_bytes", "sort_bytes", "gather_bytes", "bucket_bytes"):
            if getattr(self, name) < 16:
                raise ParameterError(f"BuildConfig.{name} must be >= 16 bytes, got {getattr(self, name)}")
        if self.bucket_min_blocks < 1:
            raise ParameterError(f"BuildConfig.bucket_min_blocks must be >= 1, got {self.bucket_min_blocks}")
        if self.workers is not None and self.workers < 1:
            raise ParameterError(f"BuildConfig.workers must be >= 1, got {self.workers}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ParameterError(f"BuildConfig.batch_size must be >= 1, got {self.batch_size}")
