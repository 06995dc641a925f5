"""Dynamic GNNs on snapshot sequences, fed to the device as keyframe + deltas.

Task: temporal link prediction. From snapshots 0..t a model computes node
embeddings H_t; the edges of snapshot t+1 are the positives, as many sampled
non-edges of t+1 the negatives; the metric is ROC-AUC (computed here from
ranks). Transitions are split in time: the first 70% train, the next 15%
validate, the last 15% test.

Models (one graph convolution per snapshot, then a recurrence):

- T-GCN style (Zhao et al., "T-GCN: A Temporal Graph Convolutional Network
  for Traffic Prediction", 2019): Z_t = ReLU(GCN(X_t, A_t)),
  H_t = GRU(Z_t, H_{t-1}) per node.
- EvolveGCN-O (Pareja et al., "EvolveGCN", AAAI 2020): the GCN weights
  evolve through an LSTM whose input and hidden state are the weights,
  W_t = LSTM(W_{t-1}); H_t = ReLU(GCN(X_t, A_t; W_t)).

Node inputs X_t are structural, so that parts need no global tables:
[1, log(1 + in-degree_t), log(1 + out-degree_t)]. Edges are read undirected
for the convolution. Scores: a linear layer on h_u * h_v.

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

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn import functional as F

from graphstream.errors import ParameterError

from .averaging import WeightedAverager, flat_parameters, load_flat_
from .data import resolve_device
from .models import Block, GCNConv, add_self_loops, degree, gcn_norm, propagate
from .optim import Adam

DYNAMIC_MODELS = ("tgcn", "evolvegcn")
TRANSFERS = ("full", "delta")
NUM_INPUTS = 3


# -- transfer -------------------------------------------------------------------

@dataclass
class TransferStats:
    """Bytes shipped host -> device and seconds spent (copy + rebuild on the device;
    ``host_seconds``: preparing and pinning the host buffers, counted apart)."""
    bytes: int = 0
    seconds: float = 0.0
    host_seconds: float = 0.0
    snapshots: int = 0
    full_snapshots: int = 0

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
    ``snapshot_keys(t)``, ``key_delta(t)``. Every pass starts from a full
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

    def _delta(self, t: int, prev: Tensor) -> Tensor:
        h0 = time.perf_counter()
        d = self.store.key_delta(t)
        full_bytes = int(self.store.edge_counts[t]) * 2 * np.dtype(self.id_dtype).itemsize
        pos_dtype = np.int32 if prev.numel() < 2**31 else np.int64
        delta_bytes = (len(d.added_keys) * 2 * np.dtype(self.id_dtype).itemsize
                       + len(d.removed_pos) * np.dtype(pos_dtype).itemsize)
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
            keys = self._full(t) if (self.mode == "full" or keys is None) else self._delta(t, keys)
            self.stats.snapshots += 1
            yield t, keys


# -- models -------------------------------------------------------------------------

def snapshot_inputs(keys: Tensor, num_nodes: int) -> tuple[Tensor, Block]:
    """Structural node inputs X_t and the undirected message block of one snapshot."""
    src, dst = keys // num_nodes, keys % num_nodes
    row, col = torch.cat([dst, src]), torch.cat([src, dst])
    deg = degree(row, num_nodes)
    x = torch.stack([torch.ones_like(deg), torch.log1p(degree(dst, num_nodes)),
                     torch.log1p(degree(src, num_nodes))], dim=1)
    return x, Block(row, col, num_nodes, num_nodes, deg)


class TGCN(nn.Module):
    r"""GCN per snapshot, GRU per node (T-GCN, Zhao et al. 2019).

    .. math::
        Z_t = \mathrm{ReLU}(\hat A_t X_t W), \qquad H_t = \mathrm{GRU}(Z_t, H_{t-1})

    Args:
        in_channels (int): node input size.
        hidden (int): embedding size.

    Shapes:
        ``step``: inputs ``(N, in_channels)``, a :class:`Block`, state ``(N, hidden)`` -> ``(N, hidden)``.
    """

    def __init__(self, in_channels: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.conv = GCNConv(in_channels, hidden)
        self.gru = nn.GRUCell(hidden, hidden)
        self.score = nn.Linear(hidden, 1)

    def initial_state(self, num_nodes: int, device) -> Tensor:
        return torch.zeros(num_nodes, self.hidden, device=device)

    def step(self, x: Tensor, block: Block, state: Tensor) -> tuple[Tensor, Tensor]:
        h = self.gru(F.relu(self.conv(x, block)), state)
        return h, h


class EvolveGCNO(nn.Module):
    r"""EvolveGCN-O (Pareja et al., AAAI 2020): the GCN weight matrix evolves through an LSTM.

    .. math::
        W_t = \mathrm{LSTM}(W_{t-1}), \qquad H_t = \mathrm{ReLU}(\hat A_t X_t W_t)

    (the rows of W are the LSTM's batch; its hidden state is the weight matrix).

    Args:
        in_channels (int): node input size.
        hidden (int): embedding size.

    Shapes:
        ``step``: inputs ``(N, in_channels)``, a :class:`Block`, state ``(W, C)`` -> ``(N, hidden)``.
    """

    def __init__(self, in_channels: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.weight0 = nn.Parameter(torch.empty(in_channels, hidden))
        self.lstm = nn.LSTMCell(hidden, hidden)
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.score = nn.Linear(hidden, 1)
        nn.init.xavier_uniform_(self.weight0)

    def initial_state(self, num_nodes: int, device) -> tuple[Tensor, Tensor]:
        return self.weight0, torch.zeros_like(self.weight0)

    def step(self, x: Tensor, block: Block, state) -> tuple[Tensor, Any]:
        w, c = self.lstm(state[0], state)
        row, col = add_self_loops(block)
        h = propagate(x @ w, row, col, block.num_dst, gcn_norm(block)) + self.bias
        return F.relu(h), (w, c)


def build_dynamic_model(kind: str, hidden: int, seed: int) -> nn.Module:
    if kind not in DYNAMIC_MODELS:
        raise ParameterError(f"--model {kind}: expected one of {', '.join(DYNAMIC_MODELS)}")
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return TGCN(NUM_INPUTS, hidden) if kind == "tgcn" else EvolveGCNO(NUM_INPUTS, hidden)
    finally:
        torch.random.set_rng_state(state)


# -- link prediction ------------------------------------------------------------------

def roc_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """ROC-AUC from ranks (Mann-Whitney U), ties counted half."""
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    scores = np.concatenate([pos, neg])
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, counts)
    u = ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2.0
    return float(u / (len(pos) * len(neg)))


def sample_negatives(keys: Tensor, num_nodes: int, gen: torch.Generator) -> Tensor:
    """As many (u, v) non-edges of the snapshot as it has edges: each edge's source with a
    random destination; pairs that happen to be edges are dropped."""
    src = keys // num_nodes
    dst = torch.randint(0, num_nodes, (keys.numel(),), generator=gen, device=gen.device).to(keys.device)
    cand = src * num_nodes + dst
    pos = torch.searchsorted(keys, cand).clamp(max=max(keys.numel() - 1, 0))
    hit = keys[pos] == cand if keys.numel() else torch.zeros_like(cand, dtype=torch.bool)
    return cand[~hit]


def edge_scores(model: nn.Module, h: Tensor, keys: Tensor, num_nodes: int) -> Tensor:
    u, v = keys // num_nodes, keys % num_nodes
    return model.score(h[u] * h[v]).squeeze(-1)


@dataclass(frozen=True)
class Split:
    """Which transitions t -> t+1 (indexed by t+1) train, validate and test."""
    num_snapshots: int
    val_fraction: float = 0.15
    test_fraction: float = 0.15

    def of(self, target: int) -> str:
        transitions = self.num_snapshots - 1
        n_test = max(1, int(round(transitions * self.test_fraction)))
        n_val = max(1, int(round(transitions * self.val_fraction)))
        first_test = self.num_snapshots - n_test
        first_val = first_test - n_val
        return "test" if target >= first_test else "val" if target >= first_val else "train"


@dataclass(frozen=True)
class DynamicConfig:
    model: str = "tgcn"
    hidden: int = 64
    epochs: int = 50
    lr: float = 0.01
    seed: int = 0
    device: str = "cpu"
    transfer: str = "delta"
    sync_every: int = 1
    val_fraction: float = 0.15
    test_fraction: float = 0.15

    def __post_init__(self):
        if self.model not in DYNAMIC_MODELS:
            raise ParameterError(f"--model {self.model}: expected one of {', '.join(DYNAMIC_MODELS)}")
        if self.transfer not in TRANSFERS:
            raise ParameterError(f"--transfer {self.transfer}: expected one of {', '.join(TRANSFERS)}")
        if self.epochs < 1 or self.sync_every < 1 or self.hidden < 1:
            raise ParameterError("--epochs, --sync-every and --hidden must be >= 1")


def _seed_for(*xs: int) -> int:
    return int(np.random.SeedSequence([int(x) & 0xFFFFFFFF for x in xs]).generate_state(1)[0])


def run_sequence(model: nn.Module, store, device: torch.device, config: DynamicConfig, *, part: int, epoch: int,
                 train: bool, feeder_stats: TransferStats | None = None) -> dict[str, Any]:
    """One pass over a sequence: training loss on train transitions, scores on the others.

    Returns ``loss`` (mean over train transitions, a tensor with grad when
    ``train``), ``positives`` (train positives, the averaging weight) and
    per split the positive and negative scores.
    """
    n = int(store.num_nodes)
    split = Split(int(store.num_snapshots), config.val_fraction, config.test_fraction)
    feeder = SnapshotFeeder(store, device, config.transfer)
    state = model.initial_state(n, device)
    h = None
    losses, positives = [], 0
    scores: dict[str, tuple[list, list]] = {"train": ([], []), "val": ([], []), "test": ([], [])}
    gen = torch.Generator(device=device)
    with torch.set_grad_enabled(train):
        for t, keys in feeder:
            if h is not None and keys.numel():
                which = split.of(t)
                gen.manual_seed(_seed_for(config.seed, part, epoch, t))
                neg = sample_negatives(keys, n, gen)
                ps, ns = edge_scores(model, h, keys, n), edge_scores(model, h, neg, n)
                if which == "train" and train:
                    logits = torch.cat([ps, ns])
                    labels = torch.cat([torch.ones_like(ps), torch.zeros_like(ns)])
                    losses.append(F.binary_cross_entropy_with_logits(logits, labels))
                    positives += keys.numel()
                scores[which][0].append(ps.detach().cpu().numpy())
                scores[which][1].append(ns.detach().cpu().numpy())
            x, block = snapshot_inputs(keys, n)
            h, state = model.step(x, block, state)
    if feeder_stats is not None:
        for f in ("bytes", "seconds", "host_seconds", "snapshots", "full_snapshots"):
            setattr(feeder_stats, f, getattr(feeder_stats, f) + getattr(feeder.stats, f))
    loss = torch.stack(losses).mean() if losses else None
    return {"loss": loss, "positives": positives,
            "scores": {k: (np.concatenate(p) if p else np.zeros(0), np.concatenate(q) if q else np.zeros(0))
                       for k, (p, q) in scores.items()}}


def train_positives(store, config: DynamicConfig) -> int:
    """Training positives of a sequence (its weight in the model average), from stored counts."""
    split = Split(int(store.num_snapshots), config.val_fraction, config.test_fraction)
    return int(sum(int(store.edge_counts[t]) for t in range(1, int(store.num_snapshots))
                   if split.of(t) == "train"))


# -- workers ---------------------------------------------------------------------------

@dataclass
class DynamicResult:
    rank: int
    parts: list[int]
    losses: list[float] = field(default_factory=list)
    transfer: TransferStats = field(default_factory=TransferStats)
    train_seconds: float = 0.0
    sync_seconds: float = 0.0
    scores: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def _open_sequences(source) -> tuple[list, dict | None]:
    """A list of snapshot stores: the parts of a dynamic partitions folder, or one store."""
    from pathlib import Path

    from graphstream.dynamic import open_dynamic_partitions, open_snapshots
    if isinstance(source, list):
        return source, None
    p = Path(source)
    if (p / "manifest.json").is_file():
        parts = open_dynamic_partitions(p)
        return [parts.part(i) for i in range(len(parts))], parts.manifest
    return [open_snapshots(p)], None


def _source_store(folder, manifest: dict):
    """The whole snapshot store a partitions folder was cut from (its manifest's ``source``;
    a relative path is tried from here, then beside the folder)."""
    from pathlib import Path

    from graphstream.dynamic import open_snapshots
    src = Path(str(manifest.get("source", "")))
    for cand in (src, Path(folder).parent / src, Path(folder) / src):
        if str(src) and cand.exists():
            return open_snapshots(cand)
    raise ParameterError(f"{folder}: --centralized needs the source snapshot store {str(src)!r} named in the "
                         "manifest, and it cannot be found")


def dynamic_worker(rank: int, world: int, source, config: DynamicConfig) -> DynamicResult:
    """Train the parts dealt to this worker, averaging every ``sync_every`` epochs."""
    device = resolve_device(config.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", rank % torch.cuda.device_count())
    stores, _ = _open_sequences(source)
    mine = list(range(rank, len(stores), world))
    weights = [train_positives(s, config) for s in stores]
    model = build_dynamic_model(config.model, config.hidden, config.seed).to(device)
    opts = {i: Adam(model.parameters(), lr=config.lr) for i in mine}
    averager = WeightedAverager(max(1, sum(weights)), distributed=world > 1)
    result = DynamicResult(rank, mine)
    W = flat_parameters(model)
    for r in range(math.ceil(config.epochs / config.sync_every)):
        n_epochs = min(config.sync_every, config.epochs - r * config.sync_every)
        t0 = time.perf_counter()
        round_losses = np.zeros(n_epochs)
        for i in mine:
            load_flat_(model, W)
            for e in range(n_epochs):
                epoch = r * config.sync_every + e
                torch.manual_seed(_seed_for(config.seed, i, epoch))
                opts[i].zero_grad()
                out = run_sequence(model, stores[i], device, config, part=i, epoch=epoch, train=True,
                                   feeder_stats=result.transfer)
                if out["loss"] is not None:
                    out["loss"].backward()
                    opts[i].step()
                    round_losses[e] += float(out["loss"].detach()) / len(mine)
            averager.add(model, weights[i])
        result.train_seconds += time.perf_counter() - t0
        result.losses.extend(round_losses.tolist())
        W = averager.average_into(model)
    result.sync_seconds = averager.seconds
    # Evaluate the averaged model on this worker's sequences (no grad); worker 0 pools them.
    pooled: dict[str, tuple[list, list]] = {"val": ([], []), "test": ([], [])}
    for i in mine:
        out = run_sequence(model, stores[i], device, config, part=i, epoch=config.epochs, train=False)
        for k in pooled:
            pooled[k][0].append(out["scores"][k][0])
            pooled[k][1].append(out["scores"][k][1])
    result.scores = {k: (np.concatenate(p), np.concatenate(q)) for k, (p, q) in pooled.items()}
    if world > 1 and dist.is_initialized():
        gathered = [None] * world if rank == 0 else None
        dist.gather_object(result.scores, gathered, dst=0)
        if rank == 0:
            result.scores = {k: (np.concatenate([g[k][0] for g in gathered]),
                                 np.concatenate([g[k][1] for g in gathered])) for k in pooled}
    return result


def run_dynamic_training(source, config: DynamicConfig, *, workers: int = 1, centralized: bool = False,
                         threads: int | None = None) -> dict[str, Any]:
    """Train on per-part snapshot sequences (a PGC folder), or ``centralized`` on its source store.

    Returns worker 0's view: pooled validation/test ROC-AUC of the averaged
    model, losses, transfer bytes and seconds (summed over workers), timings.
    """
    from .launch import launch
    wall = time.perf_counter()
    device = resolve_device(config.device)
    stores, manifest = _open_sequences(source)
    if centralized:
        single = source if manifest is None else [_source_store(source, manifest)]
        results = launch(dynamic_worker, 1, (single, config), threads_per_worker=threads)
        workers = 1
    else:
        if workers < 1 or workers > len(stores):
            raise ParameterError(f"--workers {workers}: more workers than parts ({len(stores)})"
                                 if workers > len(stores) else f"--workers must be >= 1, got {workers}")
        if device.type == "cuda" and workers > torch.cuda.device_count():
            raise ParameterError(f"--workers {workers}: only {torch.cuda.device_count()} CUDA devices")
        backend = "nccl" if device.type == "cuda" else "gloo"
        payload = source if isinstance(source, list) else str(source)
        results = launch(dynamic_worker, workers, (payload, config), backend=backend, threads_per_worker=threads)
    res0 = results[0]
    if res0 is None:   # a non-zero torchrun rank: worker 0 reports
        return {"rank": next(r.rank for r in results if r is not None), "workers": workers}
    transfer = TransferStats()
    for r in results:
        if r is None:
            continue
        for f in ("bytes", "seconds", "host_seconds", "snapshots", "full_snapshots"):
            setattr(transfer, f, getattr(transfer, f) + getattr(r.transfer, f))
    return {
        "test_auc": roc_auc(*res0.scores["test"]), "val_auc": roc_auc(*res0.scores["val"]),
        "test_pairs": int(len(res0.scores["test"][0]) + len(res0.scores["test"][1])),
        "model": config.model, "transfer": config.transfer, "epochs": config.epochs,
        "mode": "centralized" if centralized else "averaged", "sync_every": config.sync_every,
        "num_parts": len(stores), "workers": workers, "seconds": time.perf_counter() - wall,
        "train_seconds": res0.train_seconds, "sync_seconds": res0.sync_seconds,
        # transfer figures: every worker's under gloo spawn, this worker's alone under torchrun
        "transfer_bytes": transfer.bytes, "transfer_seconds": transfer.seconds,
        "transfer_host_seconds": transfer.host_seconds, "snapshots_shipped": transfer.snapshots,
        "full_snapshots_shipped": transfer.full_snapshots, "losses": res0.losses, "device": config.device,
        # test_accuracy / val_accuracy keep the static keys meaningful for scripts: AUC here.
        "test_accuracy": roc_auc(*res0.scores["test"]), "val_accuracy": roc_auc(*res0.scores["val"]),
    }


__all__ = ["DYNAMIC_MODELS", "DynamicConfig", "EvolveGCNO", "SnapshotFeeder", "Split", "TGCN", "TransferStats",
           "build_dynamic_model", "rebuild_on_device", "roc_auc", "run_dynamic_training", "run_sequence",
           "sample_negatives", "snapshot_inputs"]

