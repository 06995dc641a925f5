"""Uniform neighbour sampling over a part's CSR (GraphSAGE-style mini-batches).

For a batch of seed nodes and fanouts ``(f_1, ..., f_L)`` (``f_1`` for the
seeds' neighbours, as in the GraphSAGE paper's S1=25, S2=10):

1. the frontier starts as the seeds;
2. for hop l, every frontier node keeps all its neighbours if it has at most
   ``f_l``, else ``f_l`` of them drawn uniformly without replacement (partial
   Fisher-Yates on a scratch copy of its row);
3. new nodes are appended after the nodes already seen, so every hop's nodes
   are a prefix of the next hop's: the blocks' destinations are a prefix of
   their sources, as :class:`trainer.models.Block` expects;
4. the blocks are returned outermost first (the order the layers consume them).

The per-edge loop is a numba kernel seeded per call, so a batch depends only on
(seed, epoch, batch index): runs are reproducible and resumable.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit


@dataclass(frozen=True, slots=True)
class SamplerConfig:
    """Fanouts per hop (seeds first), batch size, base seed."""
    fanouts: tuple[int, ...] = (25, 10)
    batch_size: int = 512
    seed: int = 0

    def __post_init__(self):
        if not self.fanouts or any(int(f) <= 0 for f in self.fanouts):
            raise ValueError(f"fanouts must be positive integers, got {self.fanouts}")
        if self.batch_size <= 0:
            raise ValueError(f"batch size must be positive, got {self.batch_size}")


@dataclass
class SampledHop:
    """One hop in numpy: edges ``col -> row`` over the batch's local numbering."""
    row: np.ndarray          # int64, in [0, num_dst)
    col: np.ndarray          # int64, in [0, num_src)
    num_dst: int
    num_src: int
    dst_sampled: np.ndarray  # float32 edges kept per destination


@dataclass
class MiniBatch:
    """Sampled hops outermost first; ``nodes`` are part-local ids of all sources."""
    nodes: np.ndarray        # int64 part-local ids, seeds first
    num_seeds: int
    hops: list[SampledHop]


@njit(cache=True)
def _sample_hop(indptr, indices, nodes, num_nodes, num_dst, fanout, local_of, scratch, seed):
    """Sample up to ``fanout`` neighbours of ``nodes[:num_dst]``; append new ones to ``nodes``.

    ``local_of[v]`` is v's position in ``nodes`` or -1 (reset by the caller).
    Returns (row, col, new num_nodes, kept per destination).
    """
    np.random.seed(seed)
    cap = 0
    for i in range(num_dst):
        d = indptr[nodes[i] + 1] - indptr[nodes[i]]
        cap += d if d < fanout else fanout
    row = np.empty(cap, np.int64)
    col = np.empty(cap, np.int64)
    kept = np.zeros(num_dst, np.float32)
    e = 0
    n = num_nodes
    for i in range(num_dst):
        v = nodes[i]
        a = indptr[v]
        d = indptr[v + 1] - a
        k = d if d < fanout else fanout
        for j in range(d):
            scratch[j] = indices[a + j]
        if k < d:
            for j in range(k):  # partial Fisher-Yates: first k of a random permutation
                r = j + np.random.randint(0, d - j)
                t = scratch[j]
                scratch[j] = scratch[r]
                scratch[r] = t
        for j in range(k):
            u = scratch[j]
            if local_of[u] < 0:
                local_of[u] = n
                nodes[n] = u
                n += 1
            row[e] = i
            col[e] = local_of[u]
            e += 1
        kept[i] = k
    return row, col, n, kept


def sample_blocks(indptr: np.ndarray, indices: np.ndarray, seeds: np.ndarray, fanouts: Sequence[int],
                  seed: int, local_of: np.ndarray | None = None) -> MiniBatch:
    """Sample the L-hop neighbourhood of ``seeds`` (part-local ids); see the module doc.

    ``local_of`` is an optional int64 scratch of length num_nodes filled with -1;
    it is returned filled with -1 again (saves an O(num_nodes) allocation per batch).
    """
    n_total = len(indptr) - 1
    if local_of is None:
        local_of = np.full(n_total, -1, np.int64)
    max_deg = int(np.max(np.diff(indptr))) if n_total else 0
    scratch = np.empty(max(max_deg, 1), dtype=indices.dtype)
    cap = len(seeds)
    for f in fanouts:
        cap = min(n_total, cap * (f + 1))
    nodes = np.empty(max(cap, len(seeds)), np.int64)
    seeds = np.asarray(seeds, np.int64)
    nodes[:len(seeds)] = seeds
    local_of[seeds] = np.arange(len(seeds))
    num = len(seeds)
    hops = []
    for h, f in enumerate(fanouts):
        num_dst = num
        row, col, num, kept = _sample_hop(indptr, indices, nodes, num, num_dst, int(f), local_of, scratch,
                                          (seed * 1_000_003 + h) % (2**31 - 1))
        hops.append(SampledHop(row, col, num_dst, num, kept))
    out = nodes[:num].copy()
    local_of[out] = -1
    hops.reverse()  # the first layer consumes the outermost hop
    return MiniBatch(out, len(seeds), hops)


def iter_batches(indptr: np.ndarray, indices: np.ndarray, train_nodes: np.ndarray, config: SamplerConfig,
                 epoch: int, stream: int = 0) -> Iterator[MiniBatch]:
    """Shuffle ``train_nodes`` and yield sampled mini-batches of ``config.batch_size`` seeds.

    The order and samples depend only on (config.seed, stream, epoch, batch index);
    ``stream`` separates parts (use the part id).
    """
    rng = np.random.default_rng([config.seed, stream, epoch])
    order = np.asarray(train_nodes, np.int64)[rng.permutation(len(train_nodes))]
    local_of = np.full(len(indptr) - 1, -1, np.int64)
    for b, start in enumerate(range(0, len(order), config.batch_size)):
        batch_seed = int(rng.integers(0, 2**31 - 1)) ^ b
        yield sample_blocks(indptr, indices, order[start:start + config.batch_size], config.fanouts,
                            batch_seed, local_of)


# a node's sampled neighbours at most: more than any degree a part holds (int32 row lengths), and within
# the sampler kernel's int64 (10^20 reached numba as "Int value is too large")
MAX_FANOUT = 2**31 - 1


def parse_fanouts(text: str) -> tuple[int, ...]:
    """``"25,10"`` -> ``(25, 10)``."""
    fields = str(text).split(",")
    try:   # "5,,5" is a typo, not two hops
        out = tuple(int(x) for x in fields)
    except ValueError:
        raise ValueError(f"fanout must be comma-separated integers, got {text!r}") from None
    if not out or any(not 1 <= f <= MAX_FANOUT for f in out):
        raise ValueError(f"fanout must be integers in [1, {MAX_FANOUT}], got {text!r}")
    return out


__all__ = ["MiniBatch", "SampledHop", "SamplerConfig", "iter_batches", "parse_fanouts", "sample_blocks"]
