"""numba kernels shared by several packages; they see only arrays and scalars.

One file per mechanism: ``hashing`` (splitmix64 and the seeded node hash),
``bitsets`` (per-node replica sets of up to MAX_PARTS parts), ``packing``
(least-loaded packing), ``pairs`` (pair keys and the symmetric CSR built from
them), ``merge`` (sorted runs of keys with counts). Import the submodule you
need: importing this package compiles nothing.
"""
