"""Dynamic graphs: temporal link prediction on snapshot sequences, by model averaging.

Every part of a PGC partitions folder (``graphstream partition SNAPSHOTS.zarr
--algo pgc --out DIR``) is a snapshot sequence; the workers train T-GCN or
EvolveGCN-O (:mod:`trainer.temporal_models`) on their parts, one pass over a
sequence per epoch, the snapshots fed to the device as full snapshots or a
keyframe and deltas (:mod:`trainer.transfer`), and average every
``sync_every`` epochs (:mod:`trainer.loop`), each part weighted by its
training positives. The averaged model is then evaluated on every part's
validation and test transitions, pooled on worker 0 (ROC-AUC,
:mod:`trainer.link_prediction`). ``centralized`` trains on the whole store the
parts were cut from instead.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from graphstream.errors import ParameterError, path_argument

from .averaging import WeightedAverager, flat_parameters
from .data import resolve_device
from .link_prediction import Split, edge_scores, roc_auc, sample_negatives
from .loop import (
    LocalSteps,
    Schedule,
    WorkerStats,
    average_rounds,
    dealt,
    gather_part_losses,
    gather_to_first,
    run_losses,
    seed_for,
    worker_device,
)
from .optim import Adam
from .params import MAX_LR, integer, number
from .temporal_models import DYNAMIC_MODELS, TGCN, EvolveGCNO, build_dynamic_model, snapshot_inputs
from .transfer import TRANSFERS, SnapshotFeeder, TransferStats, rebuild_on_device


@dataclass(frozen=True)
class DynamicConfig:
    """Everything that defines a dynamic training run; ``transfer``: ``full`` or ``delta`` snapshots
    to the device; the fractions: the last transitions of every sequence held out for validation and test."""
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
        for name in ("hidden", "epochs", "sync_every"):
            integer(name, getattr(self, name))
        integer("seed", self.seed, 0, 2 ** 63)       # torch.manual_seed takes a 64-bit seed
        number("lr", self.lr, low=0, high=MAX_LR, low_open=True, high_open=False)
        number("val_fraction", self.val_fraction, low=0, high=1, low_open=True)
        number("test_fraction", self.test_fraction, low=0, high=1, low_open=True)
        if self.val_fraction + self.test_fraction >= 1:
            raise ParameterError(f"val_fraction {self.val_fraction} + test_fraction {self.test_fraction}: "
                                 "expected a sum < 1 (the rest trains)")


def run_sequence(model: nn.Module, store, device: torch.device, config: DynamicConfig, *, part: int, epoch: int,
                 train: bool, feeder_stats: TransferStats | None = None) -> dict[str, Any]:
    """One pass over a sequence: training loss on train transitions, scores on the others.

    Returns ``loss`` (mean over train transitions, a tensor with grad when
    ``train``), ``positives`` (train positives, the averaging weight) and
    per split the positive and negative scores; evaluated (not ``train``),
    also ``persisted``: per split, whether each of those pairs was an edge of
    the snapshot before (1 or 0). Evaluated, a part's positives are those it owns (:func:`_owned_pairs`), so that an
    edge between two parts, in both their sequences, counts once when the
    parts' scores are pooled.
    """
    n = int(store.num_nodes)
    split = Split(int(store.num_snapshots), config.val_fraction, config.test_fraction)
    feeder = SnapshotFeeder(store, device, config.transfer)
    state = model.initial_state(n, device)
    h, previous = None, None
    # a part of a partitions folder (not a whole store): its evaluated pairs are the ones it owns
    gids = np.asarray(store.global_ids[:]) if not train and hasattr(store, "owned") else None
    losses, positives = [], 0
    scores: dict[str, tuple[list, list]] = {"train": ([], []), "val": ([], []), "test": ([], [])}
    # the baseline "the pair was an edge of snapshot t - 1", scored on the same pairs (1 or 0)
    persisted: dict[str, tuple[list, list]] = {"train": ([], []), "val": ([], []), "test": ([], [])}
    gen = torch.Generator(device=device)
    with torch.set_grad_enabled(train):
        for t, keys in feeder:
            if h is not None and keys.numel():
                which = split.of(t)
                gen.manual_seed(seed_for(config.seed, part, epoch, t))
                neg = sample_negatives(keys, n, gen, undirected=not store.directed)
                ps, ns = edge_scores(model, h, keys, n), edge_scores(model, h, neg, n)
                if which == "train" and train:
                    logits = torch.cat([ps, ns])
                    labels = torch.cat([torch.ones_like(ps), torch.zeros_like(ns)])
                    losses.append(F.binary_cross_entropy_with_logits(logits, labels))
                    positives += keys.numel()
                # a part evaluates the pairs it owns: its snapshot holds every edge of those (not of the
                # others: a sampled pair between two nodes of other parts may be an edge it does not hold)
                mine = None if train or gids is None else _owned_pairs(store, t, keys, gids)
                mine_neg = None if mine is None else _owned_pairs(store, t, neg, gids)
                pos = keys if mine is None else keys[mine]
                if mine_neg is not None:
                    neg, ns = neg[mine_neg], ns[mine_neg]
                scores[which][0].append((ps if mine is None else ps[mine]).detach().cpu().numpy())
                scores[which][1].append(ns.detach().cpu().numpy())
                if not train:   # evaluation only: a training pass has no use for it
                    for flags, pairs in zip(persisted[which], (pos, neg), strict=True):
                        flags.append(torch.isin(pairs, previous).cpu().numpy().astype(np.float32))
            x, block = snapshot_inputs(keys, n)
            h, state = model.step(x, block, state)
            previous = keys
    if feeder_stats is not None:
        feeder_stats.add(feeder.stats)
    loss = torch.stack(losses).mean() if losses else None

    def joined(lists: dict[str, tuple[list, list]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {k: (np.concatenate(p) if p else np.zeros(0), np.concatenate(q) if q else np.zeros(0))
                for k, (p, q) in lists.items()}

    return {"loss": loss, "positives": positives, "scores": joined(scores), "persisted": joined(persisted)}


def _owned_pairs(store, t: int, keys: torch.Tensor, gids: np.ndarray) -> torch.Tensor:
    """Which of snapshot t's pairs (``src * n + dst``, local ids) this part owns: those whose deciding
    endpoint it owns at t, the source, or for an undirected graph the endpoint of the smaller global id
    (``gids``: local ids order differently in the two parts)."""
    n = int(store.num_nodes)
    local = keys.cpu().numpy()
    src, dst = local // n, local % n
    deciding = src if store.directed else np.where(gids[src] <= gids[dst], src, dst)
    return torch.from_numpy(np.isin(deciding, store.owned(t))).to(keys.device)


def _check_trainable(sequences, config: DynamicConfig, source) -> None:
    """Refuse a run with no training positive: every part would weigh 0, the average would be a model of
    zeros, and its scores (0.5 AUCs) would read as results."""
    if any(train_positives(s, config) for s in sequences):
        return
    num = int(sequences[0].num_snapshots)
    split = Split(num, config.val_fraction, config.test_fraction)
    train = sum(split.of(t) == "train" for t in range(1, num))
    if train == 0:
        raise ParameterError(f"{source}: {num} snapshot(s) leave no transition to train on (the last ones "
                             "validate and test): cut the events into more snapshots (graphstream snapshots "
                             "--num-snapshots or a shorter --window)")
    raise ParameterError(f"{source}: the {train} training transition(s) hold no edge to train on")


def train_positives(store, config: DynamicConfig) -> int:
    """Training positives of a sequence (its weight in the model average), from stored counts."""
    split = Split(int(store.num_snapshots), config.val_fraction, config.test_fraction)
    return int(sum(int(store.edge_counts[t]) for t in range(1, int(store.num_snapshots))
                   if split.of(t) == "train"))


# -- workers ---------------------------------------------------------------------------

@dataclass
class DynamicResult(WorkerStats):
    """A dynamic worker's report: :class:`WorkerStats`, the transfer figures and the pooled scores."""
    transfer: TransferStats = field(default_factory=TransferStats)
    scores: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    persisted: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)   # the same pairs: in t - 1?


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

    from graphstream.dynamic import open_snapshots, partitioning_id
    src = Path(str(manifest.get("source", "")))
    others = []
    for cand in (src, Path(folder).parent / src, Path(folder) / src):
        if str(src) and cand.exists():
            store = open_snapshots(cand)
            # the store now at that path may be another one (written there since, with --overwrite)
            recorded = manifest.get("partitioning")
            same = (recorded is None or partitioning_id(dict(store.attrs), manifest.get("algorithm"),
                                                        manifest.get("params")) == recorded)
            if same and (store.num_snapshots, store.num_nodes) == (manifest.get("num_snapshots"),
                                                                   manifest.get("num_nodes")):
                return store
            others.append(f"{cand} ({store.num_snapshots} snapshots, {store.num_nodes} nodes)")
    if others:
        raise ParameterError(f"{folder}: --centralized needs the snapshot store the parts were cut from; "
                             f"{' and '.join(others)} {'is another one' if len(others) == 1 else 'are others'} "
                             "(written there since?)")
    raise ParameterError(f"{folder}: --centralized needs the source snapshot store {str(src)!r} named in the "
                         "manifest, and it cannot be found")


def dynamic_worker(rank: int, world: int, source, config: DynamicConfig) -> DynamicResult:
    """Train the parts dealt to this worker, averaging every ``sync_every`` epochs."""
    device = worker_device(config.device, rank)
    stores, _ = _open_sequences(source)
    mine = dealt(rank, world, len(stores))
    weights = [train_positives(s, config) for s in stores]
    model = build_dynamic_model(config.model, config.hidden, config.seed).to(device)
    opts = {i: Adam(model.parameters(), lr=config.lr) for i in mine}
    averager = WeightedAverager(max(1, sum(weights)), distributed=world > 1)
    result = DynamicResult(rank, mine)

    def epoch(i: int, e: int) -> float | None:      # one pass over part i's sequence
        opts[i].zero_grad()
        out = run_sequence(model, stores[i], device, config, part=i, epoch=e, train=True,
                           feeder_stats=result.transfer)
        if out["loss"] is None:                     # no train transition with edges
            return None
        out["loss"].backward()
        opts[i].step()
        return float(out["loss"].detach())

    average_rounds(model, flat_parameters(model), LocalSteps(epoch), result, weights=weights, averager=averager,
                   schedule=Schedule(config.epochs, config.sync_every, config.seed), device=device)
    gather_part_losses(result, rank, world)
    # Evaluate the averaged model on this worker's sequences (no grad); worker 0 pools them.
    outs = [run_sequence(model, stores[i], device, config, part=i, epoch=config.epochs, train=False) for i in mine]
    for name in ("scores", "persisted"):
        pooled = _pooled([out[name] for out in outs])
        gathered = gather_to_first(pooled, rank, world)
        setattr(result, name, pooled if gathered is None else _pooled(gathered))   # worker 0 pools them all
    return result


def _pooled(per_sequence: list[dict[str, tuple[np.ndarray, np.ndarray]]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The validation and test pairs of several sequences (or workers), concatenated."""
    return {k: (np.concatenate([d[k][0] for d in per_sequence]), np.concatenate([d[k][1] for d in per_sequence]))
            for k in ("val", "test")}


def run_dynamic_training(source, config: DynamicConfig, *, workers: int = 1, centralized: bool = False,
                         threads: int | None = None, master_addr: str | None = None) -> dict[str, Any]:
    """Train on per-part snapshot sequences (a PGC folder), or ``centralized`` on its source store.

    Returns worker 0's view: pooled validation/test ROC-AUC of the averaged
    model, losses, transfer bytes and seconds (summed over workers), timings.
    """
    from .launch import check_threads, launch
    wall = time.perf_counter()
    integer("workers", workers)
    check_threads(threads)
    device = resolve_device(config.device)
    if not isinstance(source, list):   # absolute, as every path reported ("file:///..." its local path)
        source = path_argument(source, "source")
    stores, manifest = _open_sequences(source)
    source_store = [_source_store(source, manifest)] if centralized and manifest is not None else None
    _check_trainable(source_store or stores, config, source)
    if centralized:
        results = launch(dynamic_worker, 1, (source_store or source, config), threads_per_worker=threads)
        workers = 1
    else:
        if workers > len(stores):
            raise ParameterError(f"--workers {workers}: more workers than parts ({len(stores)})")
        if device.type == "cuda" and workers > torch.cuda.device_count():
            raise ParameterError(f"--workers {workers}: only {torch.cuda.device_count()} CUDA devices")
        backend = "nccl" if device.type == "cuda" else "gloo"
        payload = source if isinstance(source, list) else str(source)
        results = launch(dynamic_worker, workers, (payload, config), backend=backend, threads_per_worker=threads,
                         master_addr=master_addr, result_types=(DynamicResult, TransferStats))
    res0 = results[0]
    if res0 is None:   # a non-zero torchrun rank: worker 0 reports
        return {"rank": next(r.rank for r in results if r is not None), "workers": workers}
    transfer = TransferStats()
    for r in results:
        if r is not None:
            transfer.add(r.transfer)
    test_auc, val_auc = roc_auc(*res0.scores["test"]), roc_auc(*res0.scores["val"])   # None: no pairs
    (pos, neg), (pos_was, neg_was) = res0.scores["test"], res0.persisted["test"]
    return {
        "metric": "roc_auc", "test_roc_auc": test_auc, "val_roc_auc": val_auc,
        "test_auc": test_auc, "val_auc": val_auc,
        # what the model adds: a snapshot's edges are mostly those of the one before (--edge-life), which
        # the baseline "was an edge at t - 1" scores alone; and the model on the edges new at t only
        "test_persistence_roc_auc": roc_auc(pos_was, neg_was),
        "test_new_edges_roc_auc": roc_auc(pos[pos_was == 0], neg),
        "test_new_edges": int(np.count_nonzero(pos_was == 0)),
        "test_pairs": int(len(res0.scores["test"][0]) + len(res0.scores["test"][1])),
        "model": config.model, "transfer": config.transfer, "epochs": config.epochs,
        # one whole snapshot store (not a partitions folder) is one model on the whole graph: centralised too
        "mode": "centralized" if centralized or (manifest is None and len(stores) == 1) else "averaged",
        "sync_every": config.sync_every,
        "num_parts": len(stores), "workers": workers, "seconds": time.perf_counter() - wall,
        "train_seconds": res0.train_seconds, "sync_seconds": res0.sync_seconds,
        # transfer figures: every worker's under gloo spawn, this worker's alone under torchrun
        "transfer_bytes": transfer.bytes, "transfer_seconds": transfer.seconds,
        # the same snapshots' bytes shipped whole and as deltas, whichever --transfer moved them
        "transfer_bytes_full": transfer.bytes_full, "transfer_bytes_delta": transfer.bytes_delta,
        "transfer_host_seconds": transfer.host_seconds, "snapshots_shipped": transfer.snapshots,
        "full_snapshots_shipped": transfer.full_snapshots, "device": config.device,
        "losses": run_losses(res0.part_losses),   # every part's, not worker 0's alone
        # Deprecated aliases of test_auc / val_auc (ROC-AUC, not accuracy), kept: --json is a contract.
        "test_accuracy": test_auc, "val_accuracy": val_auc,
    }


# The models, the transfer and the link-prediction pieces live in their own modules; their
# names stay importable from here, where they were first written.
__all__ = ["DYNAMIC_MODELS", "TGCN", "DynamicConfig", "DynamicResult", "EvolveGCNO", "SnapshotFeeder", "Split",
           "TransferStats", "build_dynamic_model", "dynamic_worker", "rebuild_on_device", "roc_auc",
           "run_dynamic_training", "run_sequence", "sample_negatives", "snapshot_inputs"]
