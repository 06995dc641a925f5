"""Graph500 Kronecker / R-MAT generator, written chunk by chunk into a graph store.

The Graph500 benchmark (graph500.org, specification section "Graph
Generation", and Chakrabarti, Zhan & Faloutsos, "R-MAT: A Recursive Model
for Graph Mining", SDM 2004) draws every edge independently: starting from
the whole 2**S x 2**S adjacency matrix, it picks one of the four quadrants
with probabilities a, b, c, d = 1 - a - b - c, and recurses S times; the
quadrant chosen at level l gives bit S-1-l of the source (lower or upper half)
and of the destination (left or right half). Graph500 uses a = 0.57,
b = c = 0.19, d = 0.05, 2**S vertices and edge factor F (F * 2**S edges),
then relabels the vertices with a random permutation so that a vertex's
degree cannot be guessed from its id.

Determinism. Each edge's random numbers are a pure function of (seed, edge
index, level): a counter-based generator, the splitmix64 finaliser applied to
``key + (edge * words + word) * golden`` (Steele, Lea & Flood, "Fast
splittable pseudorandom number generators", OOPSLA 2014). One 64-bit word
feeds three levels (21 bits each, compared with 21-bit fixed-point
thresholds, so a, b, c are exact to 2**-21).
So any chunk of the edge sequence can be generated on its own, in any order,
by any number of threads: the output is bit-for-bit the same whatever the
chunk size or numba thread count.

Vertex permutation. As in the Graph500 reference code (``scramble`` in
generator/utils.c), the permutation is a seeded bijective hash of the S-bit
ids rather than a table: four rounds of ``x = ((x ^ k) * m) mod 2**S;
x ^= x >> ceil(S/2)`` with seed-derived keys k and odd multipliers m. Each
step is invertible modulo 2**S, so this is a permutation of 0 .. 2**S - 1;
it needs no memory (no O(2**S) table, no sequential shuffle) and is applied
to both endpoints inside the edge kernel.

Directed or undirected. Graph500 edges are undirected; the generator emits
each one once, as (src, dst). By default the store records a *directed*
graph (the R-MAT edge list as drawn, what most R-MAT users expect);
``undirected=True`` records the same edges with ``directed = False``,
meaning each edge stands for both directions (Graph500 semantics). Self
loops and repeated edges are kept, as Graph500 keeps them.

Notes: time O(F * 2**S * S) hash bits, spread over threads; memory a
few chunks of edges (the permutation needs none).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba
import numpy as np
from numba import njit

from .._atomic import for_workers
from .._report import progress
from ..errors import ParameterError, finite_number, whole_number
from ..kernels.hashing import GOLDEN, mix64, py_mix64
from ..store import DEFAULT_CHUNK, MAX_CHUNK, GraphStore, GraphWriter, id_dtype_for
from ..store.graph import EdgeRangeWriter

if TYPE_CHECKING:
    from distributed import Client

GRAPH500_A, GRAPH500_B, GRAPH500_C = 0.57, 0.19, 0.19
MAX_SCALE = 48           # 2**48 nodes: far beyond any disk, still exact in the 64-bit counters
PERMUTE_ROUNDS = 4
RNG_NAME = "splitmix64-counter/v2"   # recorded in the store: changes here must change this name

_MASK64 = (1 << 64) - 1
_G = np.uint64(GOLDEN)
_BLOCK = 512             # edges per vectorised inner block; any value gives the same edges
_LEVEL_BITS = 21         # random bits per level: 3 levels per 64-bit hash word
_LEVELS_PER_WORD = 3




# -- parameters -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RmatParams:
    """A validated R-MAT configuration and the integers the kernel needs."""
    scale: int
    edge_factor: int
    seed: int
    a: float
    b: float
    c: float

    def __post_init__(self) -> None:
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, np.integer)) \
                or not 1 <= self.scale <= MAX_SCALE:
            raise ParameterError(f"scale must be an integer in [1, {MAX_SCALE}], got {self.scale!r}")
        if isinstance(self.edge_factor, bool) or not isinstance(self.edge_factor, (int, np.integer)) \
                or self.edge_factor < 1:
            raise ParameterError(f"edge_factor must be an integer >= 1, got {self.edge_factor!r}")
        # the splitmix64 state takes 64 bits: 2**64 gave seed 0's graph under another name
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) \
                or not 0 <= self.seed <= _MASK64:
            raise ParameterError(f"seed must be an integer in [0, 2**64), got {self.seed!r}")
        for name in ("scale", "edge_factor", "seed"):   # numpy integers as Python ints (frozen: set once, here)
            object.__setattr__(self, name, int(getattr(self, name)))
        for name in ("a", "b", "c"):
            object.__setattr__(self, name, finite_number(getattr(self, name), name, 0.0))
        probs = (self.a, self.b, self.c)
        if min(probs) < 0 or sum(probs) > 1 + 1e-12:
            raise ParameterError(f"a, b, c must be >= 0 with a + b + c <= 1, got {probs}")

    @property
    def num_nodes(self) -> int:
        return 1 << self.scale

    @property
    def num_edges(self) -> int:
        return self.edge_factor << self.scale

    @property
    def d(self) -> float:
        return max(0.0, 1.0 - self.a - self.b - self.c)

    def thresholds(self) -> tuple[int, int, int]:
        """Cumulative a, a+b, a+b+c as 21-bit fixed point: a level picks quadrant
        A if u < ta, B if u < tab, C if u < tabc, else D, for u uniform in
        [0, 2**21) (probabilities exact to 2**-21, about 5e-7)."""
        one = 1 << _LEVEL_BITS

        def fix(p: float) -> int:
            return min(one, max(0, int(round(p * one))))
        return fix(self.a), fix(self.a + self.b), fix(self.a + self.b + self.c)

    def keys(self) -> tuple[int, list[int], list[int]]:
        """Edge-stream key and permutation round keys / odd multipliers, from the seed.

        Derived through a splitmix64 sequence seeded with ``seed`` so nearby
        seeds give unrelated streams."""
        state = self.seed & _MASK64
        out = []
        for _ in range(1 + 2 * PERMUTE_ROUNDS):
            state = (state + GOLDEN) & _MASK64
            out.append(py_mix64(state))
        mask = (1 << self.scale) - 1
        xor_keys = [k & mask for k in out[1:1 + PERMUTE_ROUNDS]]
        mults = [(m | 1) & mask for m in out[1 + PERMUTE_ROUNDS:]]
        return out[0], xor_keys, mults

    def to_dict(self) -> dict:
        return {"generator": "graph500-rmat", "scale": self.scale, "edge_factor": self.edge_factor,
                "seed": self.seed, "a": self.a, "b": self.b, "c": self.c, "rng": RNG_NAME,
                "permuted": True}


# -- the kernels ----------------------------------------------------------------------------

@njit(inline="always")
def _quadrant_bits(u, ta, tab, tabc):
    """(src bit, dst bit) of the quadrant picked by u: A=(0,0) B=(0,1) C=(1,0) D=(1,1)."""
    s = np.uint64(u >= tab)
    d = np.uint64(((u >= ta) & (u < tab)) | (u >= tabc))
    return s, d


@njit(cache=True, nogil=True)
def _rmat_kernel(first_edge, scale, key, ta, tab, tabc, xor_keys, mults, permute, src, dst):
    """Fill src/dst with edges first_edge .. first_edge + len(src) of the stream.

    Edge e, level l uses bits 21 * (l % 3) .. + 21 of hash word e * words + l // 3
    (words = ceil(scale / 3)); levels fill
    the ids from the top bit down. Inside a block of edges every loop runs
    over the block's edges, innermost, so it vectorises. Serial and GIL-free:
    Python threads run it on disjoint ranges (see :func:`rmat_edges`).
    """
    n = src.shape[0]
    words = (scale + _LEVELS_PER_WORD - 1) // _LEVELS_PER_WORD
    drop = np.uint64(_LEVELS_PER_WORD * words - scale)   # spare levels of the last word: dropped
    lo21 = np.uint64((1 << _LEVEL_BITS) - 1)
    stride = np.uint64(words) * _G
    mask = (np.uint64(1) << np.uint64(scale)) - np.uint64(1)
    shift = np.uint64(max(1, (scale + 1) // 2))
    nblocks = (n + _BLOCK - 1) // _BLOCK
    for blk in range(nblocks):
        lo = blk * _BLOCK
        m = min(n, lo + _BLOCK) - lo
        s_acc = np.zeros(_BLOCK, dtype=np.uint64)
        d_acc = np.zeros(_BLOCK, dtype=np.uint64)
        # key + (e * words + w) * G = base(e) + w * G: one multiply per edge, not per word.
        base = np.empty(_BLOCK, dtype=np.uint64)
        for j in range(m):
            base[j] = key + np.uint64(first_edge + lo + j) * stride
        # 1. Descend the levels: three per hash word, 21 bits each.
        for w in range(words):
            wg = np.uint64(w) * _G
            for j in range(m):
                h = mix64(base[j] + wg)
                s0, d0 = _quadrant_bits(h & lo21, ta, tab, tabc)
                s1, d1 = _quadrant_bits((h >> np.uint64(21)) & lo21, ta, tab, tabc)
                s2, d2 = _quadrant_bits((h >> np.uint64(42)) & lo21, ta, tab, tabc)
                s_acc[j] = (s_acc[j] << np.uint64(3)) | (s0 << np.uint64(2)) | (s1 << np.uint64(1)) | s2
                d_acc[j] = (d_acc[j] << np.uint64(3)) | (d0 << np.uint64(2)) | (d1 << np.uint64(1)) | d2
        for j in range(m):
            s_acc[j] >>= drop
            d_acc[j] >>= drop
        # 2. Permute the vertex ids: a seeded bijection of [0, 2**scale), each
        #    round invertible modulo 2**scale (xor, odd multiply, xorshift).
        if permute:
            for r in range(xor_keys.shape[0]):
                k = xor_keys[r]
                mul = mults[r]
                for j in range(m):
                    x = ((s_acc[j] ^ k) * mul) & mask
                    s_acc[j] = x ^ (x >> shift)
                    y = ((d_acc[j] ^ k) * mul) & mask
                    d_acc[j] = y ^ (y >> shift)
        for j in range(m):
            src[lo + j] = s_acc[j]
            dst[lo + j] = d_acc[j]


def rmat_edges(params: RmatParams, first_edge: int, count: int, *, permute: bool = True,
               dtype: np.dtype | None = None, threads: int | None = None,
               pool: ThreadPoolExecutor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Edges ``first_edge .. first_edge + count`` of the seeded R-MAT stream.

    ``permute=False`` gives the raw Kronecker ids (vertex 0 is the hub), for
    tests and analysis; the store always holds the permuted ids. The range is
    split over ``threads`` threads (default: numba's thread count), from
    ``pool`` when given; the edges do not depend on either.

    Python threads rather than a numba ``prange``: numba's OpenMP workers
    spin after each parallel region, taking the CPU that the store's
    compression threads need (measured at scale 22 on 2 cores: 13.5M edges/s
    with prange, 24-30M with the workers passive or absent).
    """
    if first_edge < 0 or count < 0 or first_edge + count > params.num_edges:
        raise ParameterError(f"edges [{first_edge}, {first_edge + count}) outside [0, {params.num_edges})")
    dtype = np.dtype(dtype or id_dtype_for(params.num_nodes))
    key, xor_keys, mults = params.keys()
    ta, tab, tabc = params.thresholds()
    src = np.empty(count, dtype=dtype)
    dst = np.empty(count, dtype=dtype)
    scalars = (np.int64(params.scale), np.uint64(key), np.uint64(ta), np.uint64(tab), np.uint64(tabc),
               np.array(xor_keys, dtype=np.uint64), np.array(mults, dtype=np.uint64), bool(permute))
    threads = max(1, threads or numba.get_num_threads())
    step = -(-count // threads) if count else 1
    step = -(-step // _BLOCK) * _BLOCK                    # whole blocks per thread
    parts = [(a, min(a + step, count)) for a in range(0, count, step)]
    if len(parts) <= 1:
        for a, b in parts:
            _rmat_kernel(np.int64(first_edge + a), *scalars, src[a:b], dst[a:b])
        return src, dst
    own = pool is None
    pool = pool or ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="graphstream-rmat")
    try:
        futures = [pool.submit(_rmat_kernel, np.int64(first_edge + a), *scalars, src[a:b], dst[a:b])
                   for a, b in parts]
        for f in futures:
            f.result()
    finally:
        if own:
            pool.shutdown()
    return src, dst


def permute_ids(params: RmatParams, ids: np.ndarray) -> np.ndarray:
    """The vertex permutation applied to ``ids`` (pure Python; for tests and small inputs)."""
    _, xor_keys, mults = params.keys()
    mask = (1 << params.scale) - 1
    shift = max(1, (params.scale + 1) // 2)
    out = np.empty(len(ids), dtype=np.int64)
    for i, x in enumerate(np.asarray(ids).tolist()):
        for k, m in zip(xor_keys, mults, strict=True):
            x = ((x ^ k) * m) & mask
            x ^= x >> shift
        out[i] = x
    return out


# -- the generator --------------------------------------------------------------------------

def generate_rmat(out: str | os.PathLike, *, scale: int, edge_factor: int = 16, seed: int = 0,
                  a: float = GRAPH500_A, b: float = GRAPH500_B, c: float = GRAPH500_C,
                  chunk_size: int = DEFAULT_CHUNK, undirected: bool = False,
                  overwrite: bool = False, client: Client | None = None) -> GraphStore:
    """Generate a Graph500 R-MAT graph into the graph store ``out``.

    Args:
        out: path of the new store (``*.zarr``); refused if it exists unless ``overwrite``.
        scale: S, the graph has 2**S nodes.
        edge_factor: F, the graph has F * 2**S edges.
        seed: any integer >= 0; the same seed gives bit-for-bit the same store
            whatever ``chunk_size`` and the numba thread count.
        a, b, c: quadrant probabilities (d = 1 - a - b - c).
        chunk_size: edges per store chunk (also the generation batch).
        undirected: record the graph as undirected (each edge once, meaning both
            directions), as Graph500 intends; default directed.
        client: a ``distributed.Client``: the chunks are generated by tasks of its
            cluster, each writing its own chunk range of the store (the same bytes).

    Returns the complete, opened :class:`GraphStore`.
    """
    params = RmatParams(scale=scale, edge_factor=edge_factor, seed=seed, a=a, b=b, c=c)
    chunk_size = whole_number(chunk_size, "chunk_size", 1, MAX_CHUNK)
    n, m = params.num_nodes, params.num_edges
    if client is not None:   # the workers' path
        out = for_workers(out)
    source = f"rmat:scale={params.scale},edge_factor={params.edge_factor},seed={params.seed}"
    writer = GraphWriter(out, num_nodes=n, directed=not undirected, chunk_size=chunk_size,
                         source=source, overwrite=overwrite, attrs={"generator": params.to_dict()})
    if client is not None:
        with writer:
            _generate_on_cluster(client, writer, params)
            return writer.close()
    threads = numba.get_num_threads()
    with writer, progress(m, "rmat") as bar, \
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="graphstream-rmat") as pool:
        # Generate chunk i+1 while the writer compresses chunk i in its own threads;
        # each chunk is a fresh array, handed over without a copy.
        for first in range(0, m, chunk_size):
            count = min(chunk_size, m - first)
            src, dst = rmat_edges(params, first, count, dtype=writer.id_dtype, threads=threads, pool=pool)
            writer.append(src, dst, copy=False)
            bar.update(count)
        return writer.close()


def _generate_on_cluster(client: Client, writer: GraphWriter, params: RmatParams) -> None:
    """Tasks over chunk-aligned edge ranges, each generating its chunks and writing them into the
    store the client created (the edges of a chunk depend on the seed and edge index only)."""
    from ..cluster import check_visible, run_tasks, split_range, task_count

    writer.preallocate(params.num_edges)
    check_visible(client, writer.staging_path)
    ranges = split_range(params.num_edges, task_count(client), align=writer.chunk_size)
    run_tasks(client, "rmat", _generate_range, ranges, unit="edge", size=lambda r: r[1] - r[0],
              path=writer.staging_path, params=params, chunk_size=writer.chunk_size, dtype=str(writer.id_dtype))


def _generate_range(start: int, stop: int, *, path: str, params: RmatParams, chunk_size: int, dtype: str) -> int:
    """A task: edges [start, stop) (whole chunks) generated and written; the count."""
    with EdgeRangeWriter(path) as out:   # chunk i is compressed while chunk i+1 is generated
        for first in range(start, stop, chunk_size):
            src, dst = rmat_edges(params, first, min(chunk_size, stop - first), dtype=np.dtype(dtype))
            out.write(first, {"src": src, "dst": dst})
    return stop - start
