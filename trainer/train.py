"""Static node classification: local training on parts, model averaging every E epochs.

The rounds themselves (steps 2 and 3) are :func:`trainer.loop.average_rounds`,
shared with the dynamic trainer; this module is what is static about them.
Per worker ``r`` of ``q`` (spec: ../shared/specs/trainer.md):

1. take parts ``r, r + q, r + 2q, ...`` (dealt cyclically; with p = q one part
   each), load them onto the device, build one model (same seed everywhere,
   so every worker starts from the same W) and one Adam optimizer per part
   (its moments are averaged with the weights at every synchronisation,
   ``average_optimizer_state``, the default; without it they stay per part);
2. for every synchronisation round: (full batch, DRIFT below) every part's
   gradient at the averaged weights W, c_i, and their weighted mean c (one
   all_reduce); then for each own part, start from W, train ``sync_every``
   epochs (full batch with every gradient corrected by c - c_i, or sampled
   mini-batches: parts may have different numbers of batches), the loss
   class-weighted for binary labels (CLASS_WEIGHTS) and carrying the
   proximal term ``proximal / n_i * ||w - W||^2 / 2`` where it is on
   (:func:`proximal_strength`), and add ``n_i W_i`` to the averaging buffer;
3. one all_reduce averages the buffers: W = sum_i (n_i / n) W_i;
4. worker 0 evaluates W on the whole graph (validation and test), keeps the
   best-validation W and writes the checkpoint (W, best W, round, every
   part's optimizer state), from which ``resume`` continues exactly.

Randomness (dropout, batch order, neighbour samples) is reseeded from
(seed, part, epoch), so a resumed run equals an uninterrupted one.
"""
from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from graphstream._atomic import atomic_file
from graphstream._report import log, warn
from graphstream.errors import DiskFullError, GraphStreamError, InputFormatError, ParameterError, path_argument

from .averaging import WeightedAverager, flat_gradients, flat_parameters, load_flat_, unflatten_like
from .data import PartSet, assemble_whole_graph, check_parts, load_part, open_parts, resolve_device
from .evaluate import evaluate, evaluated_on, single_class_sets
from .loop import (
    LocalSteps,
    Schedule,
    TrainingDivergedError,
    WorkerStats,
    average_rounds,
    dealt,
    gather_part_losses,
    gather_to_first,
    run_losses,
    seed_for,
    worker_device,
)
from .metrics import METRICS, resolve_metric
from .models import GAT_HEADS, MODELS, Block, build_model
from .optim import Adam
from .params import MAX_LR, integer, number
from .sampler import SamplerConfig, iter_batches

# Local models drift towards their own part's labels between averages; SPRING's
# parts are communities, so their labels are anything but a sample of the class
# mix. The FedProx term (Li et al., "Federated Optimization in Heterogeneous
# Networks", MLSys 2020) mu/2 ||w - W||^2 pulls them back towards the last
# average W. Added to the *sum* of a part's node losses, it weighs as much in a
# part of 30 training nodes as in one of 30,000, so on the mean loss it is
# (PROXIMAL / n_i) / 2 ||w - W||^2: strong where few labels overfit in a few
# epochs (Citeseer, Cora), negligible where labels are plenty (facebook). It is
# exactly zero for the first local step, so full-batch --sync-every 1 is
# unchanged. The value was chosen on Citeseer; see docs/trainer.md.
PROXIMAL = 3.0

# Binary labels are often rare positives (Twitch partners: 6.3%). With the plain
# mean loss a GCN sits near "all negative" for hundreds of epochs (test ROC-AUC
# 71 after 100 epochs, 78 after 300, centralised), and averaged runs then differ
# by how fast they leave it, not by what they learn. Weighting each class by
# n / (C n_c) (scikit-learn's "balanced") gives both classes the same total
# weight: 97.6 after 100 epochs, centralised and averaged alike. "auto" applies
# it to binary labels, where ROC-AUC (threshold-free) is the metric; multi-class
# accuracy keeps the plain loss. The weights come from the training labels of
# every part, so each part's loss is one piece of the same whole-graph loss.
CLASS_WEIGHTS = ("auto", "balanced", "none")

# DRIFT: between two averages each part's model follows its own part's gradient
# and drifts towards its own labels (Cora at p = 8 holds 7 to 21 training labels
# a part). SCAFFOLD (Karimireddy et al., "SCAFFOLD: Stochastic Controlled
# Averaging for Federated Learning", ICML 2020; control variates "option I")
# corrects every local gradient by c - c_i, with c_i the part's gradient at the
# round's average W and c their weighted mean (one more all_reduce per round):
# the local model then follows the whole graph's gradient, to first order. The
# first local step of a round is exactly the step on c, so --sync-every 1
# trains like one model on the whole graph (Adam's moments being averaged too);
# it costs nothing there (that step reuses the gradient pass) and one more
# forward and backward per part and round otherwise. Full batch only: a
# mini-batch part's gradient at W would be another pass over the part.
#
# DRIFT_RISE: c - c_i is measured at W and held for the whole round. Where the
# parts hold many labels their models move far in ten Adam epochs, the
# correction goes stale and the average oscillates (facebook, p = 4, sync 10:
# the averaged model's training accuracy swings by 5 points between rounds,
# test accuracy 1.62 points below centralised, against 0.26 without the
# correction). So every round also measures the whole graph's training loss at
# W (eval mode: no dropout noise; it rides the same all_reduce), and a round
# that raised it by more than DRIFT_RISE of the first round's loss halves the
# correction's weight for the rest of the run. The round's first step stays on
# c, so --sync-every 1 is unchanged. Measured (GCN, 5 seeds, bench_fidelity):
# facebook p4 sync 10 -1.62 (3 seeds) -> -0.58; Cora and Citeseer, whose parts
# overfit their few labels and need the correction, keep it (the same gaps,
# Citeseer p8 sync 10 -0.42 -> -0.32): the rises they show near convergence
# (0.4% of the first loss) are why the bar is not zero (halving on any rise
# took Citeseer p8 sync 10 to -1.36).
DRIFT_RISE = 0.01
SEED_LIMIT = 2 ** 63   # torch.manual_seed takes a 64-bit seed


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run (stored in checkpoints)."""
    model: str = "gcn"
    hidden: int = 256
    num_layers: int = 2
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    proximal: float | None = None  # pull of the last average W in local training (FedProx); None: proximal_strength
    epochs: int = 200
    sync_every: int = 1
    mini_batch: bool = False
    fanouts: tuple[int, ...] = (25, 10)
    batch_size: int = 512
    seed: int = 0
    device: str = "cpu"
    checkpoint: str | None = None
    resume: bool = False
    overwrite: bool = False        # a new run over an existing checkpoint (else refused, as every output is)
    record_weights: bool = False   # return every round's local and averaged weights (tests)
    metric: str | None = None      # model selection metric (trainer.metrics.METRICS); None: fits the labels
    average_optimizer_state: bool = True    # average the parts' Adam moments with the weights at every sync
    class_weight: str = "auto"     # "balanced", "none", or "auto": balanced for binary labels (CLASS_WEIGHTS)
    drift_correction: bool = True  # full batch: SCAFFOLD control variates on the local gradients (DRIFT)

    def __post_init__(self):
        if self.model not in MODELS:
            raise ParameterError(f"--model {self.model}: expected one of {', '.join(MODELS)}")
        for name in ("hidden", "epochs", "sync_every", "batch_size", "num_layers"):
            integer(name, getattr(self, name))
        if self.model == "gat" and self.hidden % GAT_HEADS:   # it was rounded to a multiple, reported as given
            raise ParameterError(f"--hidden {self.hidden}: GAT's hidden layers are {GAT_HEADS} attention heads wide; "
                                 f"give a multiple of {GAT_HEADS}")
        integer("seed", self.seed, 0, SEED_LIMIT)
        number("lr", self.lr, low=0, high=MAX_LR, low_open=True, high_open=False)
        number("weight_decay", self.weight_decay, low=0)
        if self.proximal is not None:
            number("proximal", self.proximal, low=0)
        number("dropout", self.dropout, low=0, high=1)   # 1 would zero every activation
        if isinstance(self.fanouts, (str, bytes)) or not hasattr(self.fanouts, "__iter__"):
            raise ParameterError(f"fanouts must be a sequence of whole numbers, such as (25, 10), "
                                 f"got {self.fanouts!r}")
        for f in self.fanouts:
            integer("fanout", f)
        if self.mini_batch and len(self.fanouts) != self.num_layers:
            raise ParameterError(f"--fanout has {len(self.fanouts)} values, the model has {self.num_layers} layers")
        if self.checkpoint is not None:   # absolute, as every path graphstream reports (and a worker's cwd may differ)
            object.__setattr__(self, "checkpoint", path_argument(self.checkpoint, "--checkpoint"))
        if self.resume and not self.checkpoint:
            raise ParameterError("--resume needs --checkpoint PATH")
        if self.resume and self.overwrite:
            raise ParameterError("--resume continues the checkpoint and --overwrite replaces it: give one of them")
        if self.class_weight not in CLASS_WEIGHTS:
            raise ParameterError(f"--class-weight {self.class_weight}: expected one of {', '.join(CLASS_WEIGHTS)}")
        if self.metric is not None and self.metric not in METRICS:
            raise ParameterError(f"--metric {self.metric}: expected one of {', '.join(METRICS)}")


@dataclass
class WorkerResult(WorkerStats):
    """A static worker's report: :class:`WorkerStats`, plus worker 0's evaluation."""
    history: list[dict] = field(default_factory=list)   # rank 0: per round evaluation
    summary: dict[str, Any] | None = None                # rank 0
    recorded: list[dict] = field(default_factory=list)  # record_weights


def proximal_strength(config: TrainConfig) -> float:
    """The proximal term's strength: as configured, else 0 where the drift correction runs (it does the
    proximal term's job, better: Cora p = 8 / Citeseer p = 4 at --sync-every 10, 5 seeds, averaged minus
    centralised: +0.90 / +0.68 without it, +1.32 / +1.92 with PROXIMAL) and PROXIMAL where it does not."""
    return _proximal(config.proximal, config.drift_correction, config.mini_batch)


def _proximal(proximal: float | None, drift_correction: bool, mini_batch: bool) -> float:
    if proximal is not None:
        return proximal
    return 0.0 if drift_correction and not mini_batch else PROXIMAL


def _backward(model, loss: torch.Tensor, anchor) -> None:
    """Gradients of the local loss: ``loss``, plus ``weight * ||w - W||^2 / 2`` when
    ``anchor = (W's tensors, weight)`` is given (the proximal term, see PROXIMAL)."""
    if anchor is not None:
        W, weight = anchor
        loss = loss + 0.5 * weight * sum(((p - a) ** 2).sum() for p, a in zip(model.parameters(), W, strict=True))
    loss.backward()


def weighting(setting: str, num_classes: int) -> str:
    """What ``setting`` trains with: "auto" is "balanced" for binary labels, else "none"."""
    if setting == "auto":
        return "balanced" if num_classes == 2 else "none"
    return setting


def class_weights(parts: PartSet, setting: str) -> torch.Tensor | None:
    """The per-class loss weights ``setting`` asks for (:data:`CLASS_WEIGHTS`), or ``None`` for the plain
    mean: "balanced" is n / (C n_c) over the training labels of every part (0 for an absent class)."""
    if weighting(setting, parts.num_classes) == "none":
        return None
    counts = parts.train_class_counts().astype(np.float64)
    present = counts > 0
    weight = np.zeros_like(counts)
    weight[present] = counts.sum() / (present.sum() * counts[present])
    return torch.from_numpy(weight).to(torch.float32)


def _node_loss(logits: torch.Tensor, y: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Mean over the nodes of their (class-weighted) cross-entropy: a part's piece of the
    whole-graph loss, scaled by 1 / its nodes like the plain mean, so the weighted
    average of the parts' losses (weights = training nodes) is the whole graph's."""
    if weight is None:
        return F.cross_entropy(logits, y)
    return (F.cross_entropy(logits, y, reduction="none") * weight[y]).mean()


def _full_batch_loss(model, g, config: TrainConfig, weight, training: bool = True) -> torch.Tensor:
    """The part's training loss; ``training`` False: without dropout."""
    model.train(training)
    out = model(g.x, [g.block] * config.num_layers)
    return _node_loss(out[g.train_idx], g.y[g.train_idx], weight)


@dataclass
class DriftTrust:
    """The drift correction's weight: halved for good by a round that raised the whole graph's
    training loss by more than DRIFT_RISE of the first round's (see DRIFT_RISE)."""
    weight: float = 1.0
    first_loss: float | None = None
    last_loss: float | None = None

    def observe(self, loss: float) -> None:
        """The whole graph's training loss at this round's W."""
        if self.first_loss is None:
            self.first_loss = loss
        elif loss - self.last_loss > DRIFT_RISE * self.first_loss:
            self.weight *= 0.5
        self.last_loss = loss


def _epoch_full(model, opt, g, config: TrainConfig, anchor=None, weight=None, correction=None) -> float:
    opt.zero_grad()
    loss = _full_batch_loss(model, g, config, weight)
    _backward(model, loss, anchor)
    if correction is not None:   # SCAFFOLD: the part's gradient at W swapped for the mean of them all
        for p, d in zip(model.parameters(), correction, strict=True):
            p.grad.add_(d)
    opt.step()
    return float(loss.detach())


def _epoch_mini(model, opt, g, config: TrainConfig, part_id: int, epoch: int, device, anchor=None,
                weight=None) -> float:
    model.train()
    sampler = SamplerConfig(tuple(config.fanouts), config.batch_size, config.seed)
    total, count = 0.0, 0
    for mb in iter_batches(g.indptr, g.indices, g.train_nodes, sampler, epoch, stream=part_id):
        nodes = torch.from_numpy(mb.nodes)
        blocks = [Block(torch.from_numpy(h.row), torch.from_numpy(h.col), h.num_dst, h.num_src,
                        torch.from_numpy(g.deg[mb.nodes[:h.num_src]]),
                        # sampled of a row, itself partial on halo nodes: scale to the whole degree
                        torch.from_numpy(g.deg[mb.nodes[:h.num_dst]] / np.maximum(h.dst_sampled, 1)),
                        sorted_rows=True)  # the sampler emits each destination's edges in turn
                  .to(device, non_blocking=True) for h in mb.hops]
        nodes = nodes.to(device, non_blocking=True)
        x = g.x.index_select(0, nodes)
        y = g.y.index_select(0, nodes[:mb.num_seeds])
        opt.zero_grad()
        loss = _node_loss(model(x, blocks), y, weight)
        _backward(model, loss, anchor)
        opt.step()
        total += float(loss.detach()) * mb.num_seeds
        count += mb.num_seeds
    return total / max(count, 1)


CHECKPOINT_FORMAT = "graphstream.trainer.checkpoint"
# What a resumed run must share with the run that wrote the checkpoint (the field, its flag), or the rest
# of the run would train another way than its start. Not --epochs (a run may be extended), nor what
# does not change the training (device, metric: checked apart, checkpoint, ...).
# (the proximal strength last: compared as trained with, it follows from the drift correction and batching,
# whose own flags name a change of those better)
SAME_ON_RESUME = {"model": "--model", "hidden": "--hidden", "num_layers": "--num-layers", "dropout": "--dropout",
                  "lr": "--lr", "weight_decay": "--weight-decay",
                  "mini_batch": "--mini-batch", "fanouts": "--fanout", "batch_size": "--batch-size",
                  "seed": "--seed", "drift_correction": "--[no-]drift-correction",
                  "class_weight": "--class-weight", "proximal": "--proximal"}


def _comparable(value: Any) -> Any:
    """A config value as saved and as given alike (a tuple comes back from the checkpoint as a list)."""
    return list(value) if isinstance(value, (list, tuple)) else value


def _save_checkpoint(path: str, state: dict) -> None:
    """Write ``state`` to a hidden temporary sibling, then swap it in for ``path``
    (graphstream._atomic.atomic_file: a run killed or out of space mid-write leaves the previous
    checkpoint whole, and the next save clears what a killed one left). Plain tensors and containers
    only, so :func:`load_checkpoint` reads it with ``weights_only=True``. torch's zip writer reports
    a short write as a RuntimeError without an errno: that is an error of the file system too."""
    try:
        with atomic_file(path) as tmp:
            torch.save(state, tmp)
    except DiskFullError as exc:
        raise DiskFullError(f"{path}: no space left on the device while writing the checkpoint "
                            "(the previous checkpoint, if any, is unchanged)") from exc
    except (OSError, RuntimeError) as exc:
        reason = getattr(exc, "strerror", None) or " ".join(str(exc).split())[:200]
        raise GraphStreamError(f"{path}: cannot write the checkpoint ({reason}); the previous checkpoint, if "
                               "any, is unchanged") from exc


def _refusal(exc: Exception) -> str:
    """The telling line of a torch.load failure (its weights_only messages run to many lines)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    boilerplate = ("Weights only load failed", "Check the documentation", "Please file an issue")
    telling = [ln for ln in lines if not ln.startswith(boilerplate)]
    return (telling or lines or [type(exc).__name__])[0]


def load_checkpoint(path: str) -> dict:
    """A checkpoint read with ``torch.load(weights_only=True)``: tensors and plain containers only;
    a file that would need anything else (code to run) is refused with :class:`InputFormatError`."""
    try:
        with warnings.catch_warnings():   # torch's warnings on a foreign pickle: the refusal below says it in one line
            warnings.simplefilter("ignore", UserWarning)
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot read the checkpoint ({exc.strerror or exc})") from exc
    except Exception as exc:  # noqa: BLE001 - the unpickler raises many kinds on foreign or damaged files
        raise InputFormatError(f"{path}: not a loadable graphstream checkpoint (torch.load with weights_only=True: "
                               f"{_refusal(exc)})") from exc
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise InputFormatError(f"{path}: not a graphstream training checkpoint (no format "
                               f"{CHECKPOINT_FORMAT!r})")
    return ckpt


def _field(ckpt: dict, path: str, key: str, kind, where: str = ""):
    """``ckpt[key]`` of type ``kind``, or one line naming the key."""
    if key not in ckpt:
        raise InputFormatError(f"{path}: checkpoint has no {where}{key!r} (written by another version or run?)")
    value = ckpt[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InputFormatError(f"{path}: checkpoint {where}{key!r} is a {type(value).__name__}, expected "
                               f"{getattr(kind, '__name__', kind)}")
    return value


def _tensor(ckpt: dict, path: str, key: str, shape: tuple[int, ...], where: str = "") -> torch.Tensor:
    t = _field(ckpt, path, key, torch.Tensor, where)
    if tuple(t.shape) != shape:
        raise InputFormatError(f"{path}: checkpoint {where}{key!r} has shape {tuple(t.shape)}, this model needs "
                               f"{shape}")
    return t


def epochs_trained(ckpt: dict, sync_every: int) -> int:
    """The epochs a checkpoint's run had trained: recorded since runs could be extended after a short last
    round; before, its last history entry's epoch (every round ended in one), else whole rounds."""
    if isinstance(ckpt.get("epochs_done"), int):
        return ckpt["epochs_done"]
    history = ckpt.get("history") or []
    if history and isinstance(history[-1], dict) and isinstance(history[-1].get("epoch"), int):
        return history[-1]["epoch"]
    return (ckpt["round"] + 1) * sync_every


def check_checkpoint(ckpt: dict, path: str, model, *, parts: int, world: int, sync_every: int,
                     mine: list[int]) -> None:
    """Refuse a checkpoint that does not fit this run: another number of parts, workers or sync
    interval (ParameterError), or missing keys and wrong shapes for this model (InputFormatError)."""
    shape = {k: _field(ckpt, path, k, int) for k in ("num_parts", "workers", "sync_every")}
    if (shape["num_parts"], shape["workers"], shape["sync_every"]) != (parts, world, sync_every):
        raise ParameterError(f"{path}: checkpoint was written with {shape['num_parts']} parts, "
                             f"{shape['workers']} workers, sync every {shape['sync_every']}; this run has "
                             f"{parts}, {world}, {sync_every}")
    numel = sum(p.numel() for p in model.parameters())
    if _field(ckpt, path, "round", int) < 0:
        raise InputFormatError(f"{path}: checkpoint 'round' is {ckpt['round']}, expected >= 0")
    _tensor(ckpt, path, "weights", (numel,))
    best = _field(ckpt, path, "best", dict)
    _tensor(best, path, "weights", (numel,), "best ")
    _field(best, path, "val_accuracy", (float, int, type(None)), "best ")   # None: no validation nodes
    if "metric" in best:   # absent in checkpoints written before the metric was chosen (accuracy then)
        if _field(best, path, "metric", str, "best ") not in METRICS:
            raise InputFormatError(f"{path}: checkpoint best 'metric' is {best['metric']!r}, expected one of "
                                   f"{', '.join(METRICS)}")
        _field(best, path, "value", (float, int, type(None)), "best ")
    _field(best, path, "round", int, "best ")
    _field(best, path, "epoch", int, "best ")
    _field(ckpt, path, "history", list)
    _field(ckpt, path, "losses", dict)
    if "drift_trust" in ckpt:   # absent in checkpoints written before DRIFT_RISE (weight 1 then)
        trust = _field(ckpt, path, "drift_trust", dict)
        for key in DriftTrust.__dataclass_fields__:
            _field(trust, path, key, (float, int) if key == "weight" else (float, int, type(None)), "drift_trust ")
        if set(trust) - set(DriftTrust.__dataclass_fields__):
            raise InputFormatError(f"{path}: checkpoint 'drift_trust' holds {sorted(trust)}, expected "
                                   f"{sorted(DriftTrust.__dataclass_fields__)}")
    optimizers = _field(ckpt, path, "optimizers", dict)
    shapes = [tuple(p.shape) for p in model.parameters()]
    for i in mine:
        opt = _field(optimizers, path, i, dict, "optimizers ")
        _field(opt, path, "step", int, f"optimizers[{i}] ")
        for key in ("exp_avg", "exp_avg_sq"):
            moments = _field(opt, path, key, list, f"optimizers[{i}] ")
            got = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in moments]
            if got != shapes:
                raise InputFormatError(f"{path}: checkpoint optimizers[{i}] {key!r} holds shapes {got}, this "
                                       f"model's parameters have {shapes}")


def train_worker(rank: int, world: int, source, config: TrainConfig) -> WorkerResult:
    """One worker's whole run (see the module doc); ``source`` is a parts folder or a PartSet."""
    wall = time.perf_counter()
    device = worker_device(config.device, rank)
    parts: PartSet = source if isinstance(source, PartSet) else open_parts(source)
    p = len(parts)
    mine = dealt(rank, world, p)                                         # step 1: dealt cyclically
    metric = resolve_metric(config.metric, parts.num_classes)            # what the best model is chosen by
    n_train = [parts.num_train(i) for i in range(p)]
    total_train = sum(n_train)
    graphs = {i: load_part(parts.parts[i], device) for i in mine}
    model = build_model(config.model, parts.num_features, config.hidden, parts.num_classes,
                        num_layers=config.num_layers, dropout=config.dropout, seed=config.seed).to(device)
    opts = {i: Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay) for i in mine}
    averager = WeightedAverager(total_train, distributed=world > 1)
    result = WorkerResult(rank, mine)
    whole = load_part(assemble_whole_graph(parts), device) if rank == 0 else None
    W = flat_parameters(model)
    trust = DriftTrust()   # the drift correction's weight (DRIFT_RISE)
    start_round, start_epoch, best = 0, 0, {"val_accuracy": -1.0, "metric": metric, "value": -1.0, "round": -1,
                            "weights": W.clone(), "epoch": 0}

    if config.resume and Path(config.checkpoint).exists():
        ckpt = load_checkpoint(config.checkpoint)
        check_checkpoint(ckpt, config.checkpoint, model, parts=p, world=world, sync_every=config.sync_every,
                         mine=mine)
        # the option changes what the saved moments are; a checkpoint from before it existed kept them per part
        saved = bool(ckpt.get("config", {}).get("average_optimizer_state", False))
        if saved != config.average_optimizer_state:
            raise ParameterError(f"{config.checkpoint}: checkpoint written {'with' if saved else 'without'} the "
                                 f"optimizer state averaged (pass --{'' if saved else 'no-'}average-optimizer-state "
                                 "to resume it)")
        # the rest of the run would train another way than its start: refused, not mixed (a checkpoint
        # from before an option existed trained without it)
        saved_config = ckpt.get("config", {})
        for key, flag in SAME_ON_RESUME.items():
            before = {"drift_correction": False, "class_weight": "none"}.get(key, saved_config.get(key))
            was, now = saved_config.get(key, before), getattr(config, key)
            if key == "proximal":   # the strength trained with: --proximal 0 is what a default run used
                was = _proximal(was, saved_config.get("drift_correction", False), saved_config.get("mini_batch", False))
                now = proximal_strength(config)
            if key == "class_weight":   # "auto" and "balanced" train alike on binary labels
                effect = {v: weighting(v, parts.num_classes) for v in (was, now)}
                if effect[was] != effect[now]:
                    raise ParameterError(
                        f"{config.checkpoint}: checkpoint written with class_weight {was!r} ({effect[was]} on "
                        f"{parts.num_classes} classes), this run has {now!r} ({effect[now]}) (pass the same "
                        f"{flag} to resume it)")
                continue
            if _comparable(was) != _comparable(now):
                raise ParameterError(f"{config.checkpoint}: checkpoint written with {key} {was!r}, this run has "
                                     f"{now!r} (pass the same {flag} to resume it)")
        was_on, now_on = ckpt.get("parts_identity"), parts.identity
        if was_on is not None and now_on is not None and was_on != now_on:
            raise ParameterError(f"{config.checkpoint}: checkpoint was trained on other parts than {parts.path} "
                                 f"(their files' checksums differ: {was_on} against {now_on}); resume it on the "
                                 "same parts, or start a new run")
        W = ckpt["weights"]
        start_round = ckpt["round"] + 1
        start_epoch = epochs_trained(ckpt, config.sync_every)
        if config.epochs < start_epoch:
            raise ParameterError(f"{config.checkpoint}: checkpoint has trained {start_epoch} epochs, this run asks "
                                 f"for {config.epochs} (--epochs may grow on resume, not shrink)")
        best = ckpt["best"]
        if "metric" not in best:   # written before metrics were chosen: selected by validation accuracy
            best = dict(best, metric="accuracy", value=best["val_accuracy"])
        if best["metric"] != metric:
            raise ParameterError(f"{config.checkpoint}: checkpoint keeps the best model by val_{best['metric']}, "
                                 f"this run selects by val_{metric} (pass --metric {best['metric']})")
        result.history = ckpt.get("history", [])
        trust = DriftTrust(**ckpt.get("drift_trust", {}))   # older checkpoints: before the trust existed
        for i in mine:
            opts[i].load_state_dict(ckpt["optimizers"][i])
        result.losses = ckpt.get("losses", {}).get(rank, [])
        saved_parts = ckpt.get("part_losses")
        # (a checkpoint from before the parts' own losses were kept: each part gets its worker's mean)
        result.part_losses = {i: list(saved_parts[i]) if isinstance(saved_parts, dict) and i in saved_parts
                              else list(result.losses) for i in mine}
    load_flat_(model, W)
    schedule = Schedule(config.epochs, config.sync_every, config.seed, start_round, start_epoch)

    anchor, local = None, []      # this part's proximal anchor; this round's recorded local weights
    weight = class_weights(parts, config.class_weight)
    weight = None if weight is None else weight.to(device)
    drift = config.drift_correction and not config.mini_batch
    proximal = proximal_strength(config)
    gradients = WeightedAverager(total_train, distributed=world > 1)
    round_start = -1                                 # this round's first epoch, stepped on c (DRIFT)
    loss_at_W: dict[int, float | None] = {}          # part -> its loss at W, this round
    mean_gradient: list[torch.Tensor] = []           # c, shaped like the parameters (DRIFT)
    correction: dict[int, list[torch.Tensor]] = {}   # part -> c - c_i (DRIFT), this round

    watch_loss = drift and config.sync_every > 1   # only rounds of several steps use c - c_i (DRIFT_RISE)

    def correct_drift(r: int, first_epoch: int, W: torch.Tensor) -> None:   # DRIFT: every c_i at W, then c
        nonlocal round_start
        if not drift:
            return
        own = {}
        for i in mine:
            load_flat_(model, W)
            torch.manual_seed(seed_for(config.seed, i, first_epoch))   # the dropout mask of its first epoch
            model.zero_grad(set_to_none=True)
            loss, clean = None, 0.0
            if n_train[i]:
                loss = _full_batch_loss(model, graphs[i], config, weight)
                loss.backward()
                if watch_loss:
                    with torch.no_grad():
                        clean = float(_full_batch_loss(model, graphs[i], config, weight, training=False))
            own[i] = flat_gradients(model)
            loss_at_W[i] = None if loss is None else float(loss.detach())
            gradients.add_flat(torch.cat([own[i], own[i].new_tensor([clean])]), n_train[i])
        reduced = gradients.reduce(model, extra=1)
        c, whole_loss = reduced[:-1], float(reduced[-1])
        if watch_loss:
            trust.observe(whole_loss)
        round_start = first_epoch
        mean_gradient[:] = unflatten_like(model, c)
        for i in mine:
            correction[i] = unflatten_like(model, (c - own[i]) * trust.weight)

    def step_on_mean_gradient(i: int) -> float | None:
        """A round's first step of part i: its gradient at W plus c - c_i is c (same W, same mask)."""
        opts[i].zero_grad()
        for p_, c in zip(model.parameters(), mean_gradient, strict=True):
            p_.grad = c.clone()   # the proximal term's gradient is 0 at W
        opts[i].step()
        return loss_at_W[i]

    def start_part(i: int) -> None:                                      # step 2: from W, pulled back to it
        nonlocal anchor
        anchor = None
        if proximal > 0 and n_train[i] > 0:
            anchor = ([t.detach().clone() for t in model.parameters()], proximal / n_train[i])

    def epoch(i: int, e: int) -> float | None:
        if n_train[i] == 0:   # nothing to train on: it stays at W, weighs 0 in the average, adds no loss
            return None
        if config.mini_batch:
            loss = _epoch_mini(model, opts[i], graphs[i], config, i, e, device, anchor, weight)
        elif drift and e == round_start:
            loss = step_on_mean_gradient(i)
        else:
            loss = _epoch_full(model, opts[i], graphs[i], config, anchor, weight, correction.get(i))
        return loss

    def end_part(i: int) -> None:
        if config.record_weights:
            local.append((i, flat_parameters(model, torch.float32), n_train[i]))

    def end_round(r: int, epochs_done: int, W: torch.Tensor) -> None:
        nonlocal best, local
        if config.record_weights:
            result.recorded.append({"round": r, "local": local, "averaged": flat_parameters(model, torch.float32)})
            local = []
        if config.checkpoint:   # collectives: every worker takes part
            ckpt_opts = gather_to_first({i: opts[i].state_dict() for i in mine}, rank, world)
            all_losses = gather_to_first(result.losses, rank, world)
            all_part_losses = gather_to_first(result.part_losses, rank, world)
        if rank != 0:
            return
        scores = evaluate(model, whole)                                  # step 4: evaluate, keep the best
        scores.update(round=r, epoch=epochs_done)
        result.history.append(scores)
        # without validation nodes (or, for ROC-AUC, with one class among them) there is nothing to
        # choose by: the last round's model is kept
        value = scores[f"val_{metric}"]
        if value is None or value > best["value"]:
            best = {"val_accuracy": scores["val_accuracy"], "metric": metric, "value": value, "round": r,
                    "weights": W.clone(), "epoch": epochs_done}
            if config.checkpoint:   # before PATH: a run stopped between the two redoes this round
                _save_checkpoint(f"{config.checkpoint}.best", {"weights": best["weights"], "config": asdict(config)})
        if config.checkpoint:
            optimizers = {k: v for d in ckpt_opts for k, v in d.items()}
            _save_checkpoint(config.checkpoint, {
                "format": CHECKPOINT_FORMAT, "config": asdict(config), "round": r,
                "epochs_done": epochs_done, "parts_identity": parts.identity,
                "weights": W, "best": best, "optimizers": optimizers, "history": result.history,
                "losses": dict(enumerate(all_losses)), "num_parts": p, "workers": world,
                "part_losses": {i: v for d in all_part_losses for i, v in d.items()},
                "drift_trust": asdict(trust),
                "sync_every": config.sync_every})

    saved = f"; {config.checkpoint} holds the last round before it" if config.checkpoint else ""
    steps = LocalSteps(epoch, start_part, end_part, end_round, correct_drift,
                       lr_advice=f"try a lower --lr than {config.lr:g}", diverged_note=saved)
    average_rounds(model, W, steps, result, weights=n_train,
                   averager=averager, schedule=schedule, device=device, start_round=start_round,
                   optimizers=opts if config.average_optimizer_state else None)
    gather_part_losses(result, rank, world)
    if rank == 0:
        load_flat_(model, best["weights"])
        final = result.history[-1] if result.history else {}
        best_scores = evaluate(model, whole)
        result.summary = {
            "test_accuracy": best_scores["test_accuracy"], "val_accuracy": best_scores["val_accuracy"],
            "train_accuracy": best_scores["train_accuracy"], "metric": metric, "best_epoch": best["epoch"],
            **{k: v for k, v in best_scores.items() if not k.endswith("_accuracy")},
            "final_test_accuracy": final.get("test_accuracy"), "final_val_accuracy": final.get("val_accuracy"),
            **{f"final_{k}": final.get(k) for k in best_scores if k.startswith(("val_", "test_"))
               and not k.endswith("_accuracy")},
            "epochs": config.epochs, "rounds": schedule.rounds, "seconds": time.perf_counter() - wall,
            "train_seconds": result.train_seconds, "sync_seconds": averager.seconds,
            "epoch_seconds": result.train_seconds / max(1, config.epochs - start_epoch),
            "num_parts": p, "workers": world, "parts_per_worker": len(mine),
            "class_weight": "none" if weight is None else "balanced", "drift_correction": drift,
            "drift_correction_weight": trust.weight if drift else None}
        result.summary.update(_evaluation_notes(evaluated_on(whole), metric,
                                                single_class_sets(whole) if "val_roc_auc" in best_scores else []))
        if config.checkpoint:
            _save_checkpoint(f"{config.checkpoint}.best", {"weights": best["weights"], "config": asdict(config)})
    return result


def _evaluation_notes(sets: list[str], metric: str = "accuracy", single_class: list[str] = ()) -> dict[str, Any]:
    """What the metrics were measured on (``evaluated_on``), how the kept model was chosen
    (``selected_by``: ``val_<metric>``) and, when validation or test nodes are missing or (binary
    labels) hold one class only, a ``note`` saying so: the missing metrics are None (null in JSON),
    never NaN. ``single_class``: the sets whose labels are one class (ROC-AUC undefined there)."""
    selected = f"val_{metric}"
    if "val" not in sets:
        selected = "last round (no validation nodes)"
    elif metric == "roc_auc" and "val" in single_class:
        selected = "last round (val_roc_auc undefined: the validation nodes hold one class only)"
    out: dict[str, Any] = {"evaluated_on": sets, "selected_by": selected}
    notes = []
    missing = [name for name, what in (("val", "validation"), ("test", "test")) if name not in sets]
    if missing == ["val", "test"]:
        notes.append("nothing to evaluate: the parts have no validation or test nodes (val_mask/test_mask "
                     "absent or empty); accuracy is on the training nodes only, the last round's model is kept")
    elif missing:
        what = {"val": "validation nodes (val_mask): the last round's model is kept",
                "test": "test nodes (test_mask): test_accuracy is null"}[missing[0]]
        notes.append(f"the parts have no {what}")
    if single_class:
        names = ", ".join(f"{s}_roc_auc" for s in single_class)
        notes.append(f"the {'/'.join(single_class)} nodes hold one class only: {names} "
                     f"{'is' if len(single_class) == 1 else 'are'} null (ROC-AUC needs both classes)")
    if notes:
        out["note"] = "; ".join(notes)
    return out


def _check_checkpoint_path(path: str, parts_dir, resume: bool = False, overwrite: bool = False) -> None:
    """``--checkpoint`` must be a file path in an existing folder, apart from the parts it trains on
    (a checkpoint written into the dataset folder would change the data under the run), and a run's
    checkpoint is not replaced by a new run unless asked (``--overwrite``), as no output is: it can hold
    hours of training."""
    from graphstream._atomic import check_output, check_outputs_apart, why_not_a_folder
    p = Path(path)
    if p.is_dir():
        raise ParameterError(f"--checkpoint {path}: is a folder, expected a file path")
    if not p.parent.is_dir():
        raise ParameterError(f"--checkpoint {path}: {why_not_a_folder(p.parent)}")
    if parts_dir is not None:
        check_outputs_apart({"--checkpoint": path, "--checkpoint (best weights)": f"{path}.best"},
                            {"parts": parts_dir})
    if not resume:   # after the check above: a PATH.best that is the parts is named as such, not as existing
        for output in (path, f"{path}.best"):
            check_output(output, overwrite, alternative="--resume to continue that run", file=True)


def run_training(source, config: TrainConfig, *, workers: int = 1, centralized: bool = False,
                 threads: int | None = None, master_addr: str | None = None) -> dict:
    """Train on a parts folder (or a :class:`PartSet`); return worker 0's summary plus the run's shape.

    ``centralized`` trains the same model on the whole graph reassembled from
    the parts, in this process, for comparison. ``threads`` is the number of
    torch CPU threads per worker (default: cores / workers; on a busy machine
    1 avoids OpenMP threads spinning against each other). ``master_addr``: the
    address the workers' rendezvous listens on (default 127.0.0.1; see
    :func:`trainer.launch.launch`).
    """
    from .launch import check_threads, launch
    if not isinstance(config, TrainConfig):
        raise ParameterError(f"config must be a TrainConfig, got {type(config).__name__}")
    integer("workers", workers)
    check_threads(threads)
    if config.checkpoint:
        _check_checkpoint_path(config.checkpoint, None if isinstance(source, PartSet) else source,
                               config.resume, config.overwrite)
        if config.resume and not Path(config.checkpoint).exists():   # a restartable job passes it every time
            log(f"{config.checkpoint}: no checkpoint there yet; --resume starts a new run")
    device = resolve_device(config.device)
    parts = source if isinstance(source, PartSet) else open_parts(source)
    resolve_metric(config.metric, parts.num_classes)   # refused here, before any worker starts
    if parts.sparse_classes_note:
        warn(parts.sparse_classes_note)
    if sum(parts.num_train(i) for i in range(len(parts))) == 0:
        raise GraphStreamError(f"{parts.path}: no training nodes (train_mask empty in every part)")
    if centralized:
        whole = assemble_whole_graph(parts)
        single = check_parts([whole], path=f"{parts.path}[whole]")
        # the parts' identity (a checkpoint is resumed on the same parts only), marked as their whole graph
        single = replace(single, num_classes=parts.num_classes, manifest=parts.manifest, whole=True)
        # plain training: one model, no average to stay near
        central = replace(config, sync_every=1, proximal=0.0, drift_correction=False)
        with _no_lone_best(config):
            res = launch(train_worker, 1, (single, central), threads_per_worker=threads)[0]
        # the averaged run's keys too (docs/trainer.md: both report the same keys): one model, one sync an epoch
        out = dict(res.summary, mode="centralized", num_parts=len(parts), workers=1, sync_every=1,
                   worker_train_seconds=[res.train_seconds])
        return _finish(out, res, central)
    if workers > len(parts):
        raise ParameterError(f"--workers {workers}: more workers than parts ({len(parts)} in {parts.path})")
    if device.type == "cuda" and workers > torch.cuda.device_count():
        raise ParameterError(f"--workers {workers}: only {torch.cuda.device_count()} CUDA devices")
    backend = "nccl" if device.type == "cuda" else "gloo"
    payload = parts if not isinstance(source, (str, os.PathLike)) else str(source)
    with _no_lone_best(config):
        results = launch(train_worker, workers, (payload, config), backend=backend, threads_per_worker=threads,
                         master_addr=master_addr, result_types=(WorkerResult,),
                         outputs=(config.checkpoint, f"{config.checkpoint}.best") if config.checkpoint else ())
    if results[0] is None:   # a non-zero torchrun rank: worker 0 reports
        return {"rank": next(r.rank for r in results if r is not None), "workers": workers}
    out = dict(results[0].summary, mode="averaged", sync_every=config.sync_every)
    out["worker_train_seconds"] = [r.train_seconds for r in results if r is not None]
    return _finish(out, results[0], config, results)


@contextmanager
def _no_lone_best(config: TrainConfig) -> Iterator[None]:
    """A run that fails leaves no PATH.best of its own without PATH: the next run was refused ("PATH.best:
    output exists ... or --resume"), and --resume then started from scratch, there being no PATH to
    continue (a checkpoint write stopped by a full disk or a file size limit after the best weights')."""
    if not config.checkpoint or config.resume:   # a resumed run's best weights are the same run's
        yield
        return
    path, best = Path(config.checkpoint), Path(f"{config.checkpoint}.best")
    before = (_written(path), _written(best))
    try:
        yield
    except BaseException:
        # this run wrote PATH.best and not PATH: the pair would not be one run's (an --overwrite's new best
        # weights beside the old run's checkpoint, or a lone PATH.best)
        if _written(best) not in (None, before[1]) and _written(path) == before[0]:
            best.unlink(missing_ok=True)
            if before[1] is not None:
                warn(f"{best}: the best weights of the run before were replaced by this run's before it failed; "
                     f"removed, as they do not go with {path}")
        raise


def _written(path: Path) -> tuple[int, int] | None:
    """Which write a file is (its inode and modification time), None when there is none."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _finish(out: dict, res: WorkerResult, config: TrainConfig, results: list | None = None) -> dict:
    out.update(model=config.model, hidden=config.hidden, mini_batch=config.mini_batch, seed=config.seed,
               proximal=proximal_strength(config), average_optimizer_state=config.average_optimizer_state,
               device=config.device, losses=run_losses(res.part_losses), history=res.history)
    # Where the weights went, said either way: without --checkpoint nothing is written (a default file
    # beside the parts could overwrite another run's, and one inside them would change the dataset).
    if config.checkpoint:
        out.update(checkpoint=config.checkpoint, best_checkpoint=f"{config.checkpoint}.best")
    else:
        out.update(checkpoint=None, best_checkpoint=None)
        saved = "no checkpoint saved (pass --checkpoint PATH to keep the weights, the best in PATH.best)"
        out["note"] = f"{out['note']}; {saved}" if out.get("note") else saved
        log(saved)
    if results is not None and config.record_weights:
        out["recorded"] = [r.recorded for r in results if r is not None]
    return out


__all__ = ["PROXIMAL", "TrainConfig", "TrainingDivergedError", "WorkerResult", "run_training", "train_worker"]
