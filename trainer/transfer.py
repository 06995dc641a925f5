"""Snapshot sequences onto the device: full snapshots, or a keyframe and deltas.

Transfer host -> device (spec dynamic.md, "graph difference"): the device
keeps snapshot t as sorted int64 keys src*N+dst. ``full`` ships every
snapshot as (src, dst) pairs; ``delta`` ships a full snapshot at the start
of every pass over the sequence, then for each t the removed positions (int32
where they fit, half an edge pair) and the added pairs, and rebuilds t on the
device with torch ops (mask, searchsorted, scatter). A delta that would cost
more bytes than the full snapshot is shipped full instead. Bytes and seconds
are counted for both.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import Tensor

from graphstream.errors import ParameterError

TRANSFERS = ("full", "delta")


@dataclass
class TransferStats:
    """Bytes shipped host -> device and seconds spent (copy + rebuild on the device;
    ``host_seconds``: preparing and pinning the host buffers, counted apart). ``bytes_full`` and
    ``bytes_delta``: what the same snapshots cost shipped whole, and as deltas (the first of a pass whole,
    any delta larger than its snapshot whole), whichever way they went (specs/trainer.md: both reported)."""
    bytes: int = 0
    seconds: float = 0.0
    host_seconds: float = 0.0
    snapshots: int = 0
    full_snapshots: int = 0
    bytes_full: int = 0
    bytes_delta: int = 0

    def add(self, other: TransferStats) -> None:
        """Count ``other``'s figures in too (another pass, another worker)."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rebuild_on_device(prev: Tensor, removed_pos: Tensor, added: Tensor) -> Tensor:
    """Snapshot t+1's sorted keys from t's (``prev``), the removed positions and sorted added keys.

    1. keep = all-true mask over prev; keep[removed_pos] = False;
    2. kept = prev[keep] (still sorted);
    3. added key j lands at slot searchsorted(kept, added[j]) + j;
    4. scatter the added keys there and the kept keys into the other slots.
    """
    keep = torch.ones(prev.numel(), dtype=torch.bool, device=prev.device)
    keep[removed_pos] = False
    kept = prev[keep]
    n = kept.numel() + added.numel()
    slot = torch.searchsorted(kept, added) + torch.arange(added.numel(), device=prev.device)
    out = torch.empty(n, dtype=prev.dtype, device=prev.device)
    free = torch.ones(n, dtype=torch.bool, device=prev.device)
    free[slot] = False
    out[slot] = added
    out[free] = kept
    return out


def _host(array: np.ndarray, device: torch.device) -> Tensor:
    t = torch.from_numpy(np.ascontiguousarray(array))
    return t.pin_memory() if device.type == "cuda" else t


def _ship(t: Tensor, device: torch.device) -> Tensor:
    return t.to(device, non_blocking=True) if device.type == "cuda" else t.clone()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class SnapshotFeeder:
    """Iterate ``(t, keys on device)`` over a snapshot store, shipping full snapshots or deltas.

    ``store`` is a :class:`graphstream.dynamic.SnapshotStore` (or a per-part
    ``DynamicPart``): ``num_snapshots``, ``num_nodes``, ``edge_counts``,
    ``snapshot_keys(t)``, ``key_delta(t)``, ``delta_sizes(t)``. Every pass starts from a full
    snapshot (a sequence always needs a keyframe first).
    """

    def __init__(self, store, device: torch.device, mode: str = "delta"):
        if mode not in TRANSFERS:
            raise ParameterError(f"--transfer {mode}: expected one of {', '.join(TRANSFERS)}")
        self.store, self.device, self.mode = store, device, mode
        self.n = int(store.num_nodes)
        self.id_dtype = np.int32 if self.n < 2**31 else np.int64
        self.stats = TransferStats()

    def _full(self, t: int) -> Tensor:
        h0 = time.perf_counter()
        keys = self.store.snapshot_keys(t)[0]
        src, dst = np.divmod(keys, np.int64(max(self.n, 1)))
        hs, hd = _host(src.astype(self.id_dtype), self.device), _host(dst.astype(self.id_dtype), self.device)
        h1 = time.perf_counter()
        s, d = _ship(hs, self.device), _ship(hd, self.device)
        out = s.long() * self.n + d.long()
        _sync(self.device)
        self.stats.host_seconds += h1 - h0
        self.stats.seconds += time.perf_counter() - h1
        self.stats.bytes += hs.numel() * hs.element_size() * 2
        self.stats.full_snapshots += 1
        return out

    def _full_bytes(self, t: int) -> int:
        return int(self.store.edge_counts[t]) * 2 * np.dtype(self.id_dtype).itemsize

    def _delta_bytes(self, added: int, removed: int, prev_edges: int) -> int:
        pos_dtype = np.int32 if prev_edges < 2**31 else np.int64
        return added * 2 * np.dtype(self.id_dtype).itemsize + removed * np.dtype(pos_dtype).itemsize

    def _delta(self, t: int, prev: Tensor) -> Tensor:
        h0 = time.perf_counter()
        d = self.store.key_delta(t)
        full_bytes = self._full_bytes(t)
        pos_dtype = np.int32 if prev.numel() < 2**31 else np.int64
        delta_bytes = self._delta_bytes(len(d.added_keys), len(d.removed_pos), prev.numel())
        if delta_bytes >= full_bytes:       # fall back: the delta would cost more than the snapshot
            self.stats.host_seconds += time.perf_counter() - h0
            return self._full(t)
        src, dst = np.divmod(d.added_keys, np.int64(max(self.n, 1)))
        hs, hd = _host(src.astype(self.id_dtype), self.device), _host(dst.astype(self.id_dtype), self.device)
        hr = _host(d.removed_pos.astype(pos_dtype), self.device)
        h1 = time.perf_counter()
        s, dd, r = _ship(hs, self.device), _ship(hd, self.device), _ship(hr, self.device)
        out = rebuild_on_device(prev, r.long(), s.long() * self.n + dd.long())
        _sync(self.device)
        self.stats.host_seconds += h1 - h0
        self.stats.seconds += time.perf_counter() - h1
        self.stats.bytes += delta_bytes
        return out

    def __iter__(self):
        keys = None
        for t in range(int(self.store.num_snapshots)):
            full_bytes = self._full_bytes(t)
            self.stats.bytes_full += full_bytes
            if self.mode == "full":   # what the delta would cost, from its sizes (a pass starts whole)
                self.stats.bytes_delta += full_bytes if keys is None else \
                    min(self._delta_bytes(*self.store.delta_sizes(t), keys.numel()), full_bytes)
            before = self.stats.bytes
            keys = self._full(t) if (self.mode == "full" or keys is None) else self._delta(t, keys)
            if self.mode == "delta":
                self.stats.bytes_delta += self.stats.bytes - before
            self.stats.snapshots += 1
            yield t, keys


__all__ = ["TRANSFERS", "SnapshotFeeder", "TransferStats", "rebuild_on_device"]
