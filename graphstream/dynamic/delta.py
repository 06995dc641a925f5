"""Moved to :mod:`graphstream.store.delta` (the delta encoding is part of the snapshot store's
format); this module keeps ``graphstream.dynamic.delta`` importable, as the docs named it."""
from ..store.delta import (
                           KEY_LIMIT,
                           Delta,
                           KeyDelta,
                           apply_delta,
                           apply_delta_vectorized,
                           check_key_space,
                           decode_keys,
                           delta_transfer_bytes,
                           diff_sorted,
                           encode_keys,
                           merge_counts,
                           sort_unique,
)

__all__ = ["KEY_LIMIT", "Delta", "KeyDelta", "apply_delta", "apply_delta_vectorized", "check_key_space",
           "decode_keys", "delta_transfer_bytes", "diff_sorted", "encode_keys", "merge_counts", "sort_unique"]
