"""A dynamic R-MAT graph with controlled churn, for scale tests.

Snapshot 0 is ``edges_per_snapshot`` edges of a seeded Graph500 R-MAT stream
(graphstream.ingest.rmat). At each later step a fraction ``churn`` of the
current edges, chosen at random (seeded), is replaced by the next fresh
edges of the same stream. Every edge of step t is emitted as an event with
time ``t * step_seconds``, so ``graphstream snapshots --window step_seconds``
recovers the steps exactly (edge life 1) and consecutive snapshots differ by
about ``churn`` (a little less: R-MAT repeats some edges).

Events: edges_per_snapshot * num_snapshots, written in time order with the
store attribute ``sorted_by_time`` = true. Memory: one snapshot's edges.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..ingest.rmat import GRAPH500_A, GRAPH500_B, GRAPH500_C, RmatParams, rmat_edges
from ..store import DEFAULT_CHUNK, GraphStore, GraphWriter


@dataclass(frozen=True, slots=True)
class DynamicRmatConfig:
    scale: int
    edges_per_snapshot: int
    num_snapshots: int
    churn: float
    seed: int = 0
    step_seconds: int = 1
    a: float = GRAPH500_A
    b: float = GRAPH500_B
    c: float = GRAPH500_C

    def __post_init__(self) -> None:
        if self.edges_per_snapshot < 1:
            raise ParameterError(f"edges_per_snapshot must be >= 1, got {self.edges_per_snapshot}")
        if self.num_snapshots < 1:
            raise ParameterError(f"num_snapshots must be >= 1, got {self.num_snapshots}")
        if not 0.0 <= self.churn <= 1.0:
            raise ParameterError(f"churn must be in [0, 1], got {self.churn}")
        if self.step_seconds < 1:
            raise ParameterError(f"step_seconds must be >= 1, got {self.step_seconds}")

    @property
    def replaced_per_step(self) -> int:
        return int(round(self.churn * self.edges_per_snapshot))

    @property
    def num_events(self) -> int:
        return self.edges_per_snapshot * self.num_snapshots

    def rmat(self) -> RmatParams:
        needed = self.edges_per_snapshot + (self.num_snapshots - 1) * self.replaced_per_step
        factor = max(1, -(-needed // (1 << self.scale)))
        return RmatParams(self.scale, factor, self.seed, self.a, self.b, self.c)

    def to_dict(self) -> dict:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def dynamic_rmat_steps(config: DynamicRmatConfig) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Yield (t, src, dst): the edge list of each step (arrays reused between steps)."""
    params = config.rmat()
    m = config.edges_per_snapshot
    src, dst = rmat_edges(params, 0, m)
    used = m
    rng = np.random.default_rng(config.seed)
    r = config.replaced_per_step
    for t in range(config.num_snapshots):
        if t > 0 and r:
            where = rng.choice(m, size=r, replace=False)
            s, d = rmat_edges(params, used, r)
            used += r
            src[where] = s
            dst[where] = d
        yield t, src, dst


def generate_dynamic(out: str | os.PathLike, config: DynamicRmatConfig, *, overwrite: bool = False,
                     chunk_size: int = DEFAULT_CHUNK) -> GraphStore:
    """Write the events of :func:`dynamic_rmat_steps` into a graph store with a time column."""
    n = 1 << config.scale
    with GraphWriter(out, num_nodes=n, with_time=True, chunk_size=chunk_size, overwrite=overwrite,
                     source=f"dynamic-rmat scale={config.scale} churn={config.churn} seed={config.seed}",
                     attrs={"sorted_by_time": True, "generator": {"name": "dynamic-rmat", **config.to_dict()}}
                     ) as writer:
        for t, src, dst in dynamic_rmat_steps(config):
            writer.append(src, dst, np.full(len(src), t * config.step_seconds, dtype=np.int64))
        return writer.close()
