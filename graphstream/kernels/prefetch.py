"""Software prefetch for the per-entry loops of the partitioners' kernels.

A sweep over the vertex stream reads, for each neighbour entry y, a row of
per-node state (``owner[y]``, ``counters[y]``, ``label[y]``) at a random
address. The loop bodies are long enough that the CPU's out-of-order window
holds only a few of those misses at once, so most of a sweep was spent
waiting on memory: on R-MAT scale 21 (67M entries, k = 32) the refinement's
proposal scan took 1.4 s, 0.6 s when each entry first asks for the row of the
entry ``PREFETCH_DISTANCE`` ahead (tools/bench_partition_speed.py measures
the whole partitioner). The hint never changes a result: it loads nothing
into a register and cannot fault.
"""
from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# Entries ahead: far enough to cover a miss (~100 ns) at a few ns an entry, near enough that the
# line is still cached when its turn comes (8, 16 and 32 measured alike on R-MAT s21). Numba's
# cache does not see a change here: clear the __pycache__ *.nbi/*.nbc files after editing it.
PREFETCH_DISTANCE = 16


@intrinsic
def prefetch_row(typingctx, arr, row):
    """Ask for the cache line holding ``arr[row]`` (1-D) or ``arr[row, 0]`` (2-D); returns nothing.

    The caller keeps ``0 <= row < len(arr)``: the address is computed without
    bounds checks (a prefetch of any address is harmless, but a row far out
    of range would only waste the hint).
    """
    if not isinstance(arr, types.Array) or arr.ndim not in (1, 2) or not isinstance(row, types.Integer):
        return None
    sig = types.void(arr, row)

    def codegen(context, builder, signature, args):
        aty, rty = signature.args
        ary = context.make_array(aty)(context, builder, args[0])
        index = [context.cast(builder, args[1], rty, types.intp)]
        if aty.ndim == 2:
            index.append(context.get_constant(types.intp, 0))
        ptr = cgutils.get_item_pointer(context, builder, aty, ary, index, wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8")
        # (address, 0 = read, 3 = keep in every cache level, 1 = data cache)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def prefetch_ends(src, dst, i, rows):
    """Rows of both ends of edge ``i + PREFETCH_DISTANCE`` of a batch, when there is one: for the
    per-edge loops of the streaming partitioners, whose edges come in no order."""
    j = i + PREFETCH_DISTANCE
    if j < src.shape[0]:
        prefetch_row(rows, src[j])
        prefetch_row(rows, dst[j])
