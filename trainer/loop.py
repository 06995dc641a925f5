"""The averaging loop every trainer shares: local epochs per part, one average per round.

Per worker ``rank`` of ``world`` (spec: ../shared/specs/trainer.md):

1. the parts are dealt cyclically (worker r gets r, r + q, r + 2q, ...);
2. every round, after the model's own start of round (the static trainer's
   drift correction computes every part's gradient at W there, one all_reduce),
   each own part starts from the current averaged weights W and
   trains ``sync_every`` epochs (fewer in the last round), the torch random
   state reseeded from (seed, part, epoch) before every epoch, so a run
   resumed at a round boundary equals an uninterrupted one; the part then
   adds ``weight_i * W_i`` to the averager;
3. one all_reduce averages: W = sum_i (weight_i / sum weight) W_i (and, when
   the parts' optimizers are passed, their moments alike, loaded into every
   part's optimizer: ``--average-optimizer-state``);
4. the model's own end of round (evaluate, keep the best, checkpoint).

What a model trains on and how (full batch, mini-batches, snapshot
sequences) stays with the model's trainer, passed in as :class:`LocalSteps`:
:mod:`trainer.train` (static node classification) and :mod:`trainer.dynamic`
(temporal link prediction) both run this loop.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from graphstream._report import progress
from graphstream.errors import GraphStreamError

from .averaging import WeightedAverager, load_flat_
from .data import resolve_device


def seed_for(*xs: int) -> int:
    """A 32-bit seed from a tuple of integers (seed, part, epoch, ...): the streams never overlap."""
    return int(np.random.SeedSequence([int(x) & 0xFFFFFFFF for x in xs]).generate_state(1)[0])


def worker_device(name: str, rank: int) -> torch.device:
    """The device of worker ``rank``: ``cuda`` without an index means one GPU per worker, round robin."""
    device = resolve_device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", rank % torch.cuda.device_count())
    return device


def dealt(rank: int, world: int, num_parts: int) -> list[int]:
    """The parts of worker ``rank``, dealt cyclically: r, r + q, r + 2q, ..."""
    return list(range(rank, num_parts, world))


def gather_to_first(obj, rank: int, world: int) -> list | None:
    """Every worker's ``obj`` on worker 0 (a list by rank), ``None`` on the others; ``[obj]`` alone."""
    if world == 1 or not dist.is_initialized():
        return [obj]
    out = [None] * world if rank == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


@dataclass(frozen=True)
class Schedule:
    """``epochs`` in rounds of ``sync_every`` local epochs (the last round may be shorter).

    A resumed run starts at round ``start_round``, epoch ``start_epoch`` (the epochs its checkpoint
    trained): ``start_round * sync_every`` unless that run's last round was short (``--epochs`` not a
    multiple of ``--sync-every``, then grown), and the rounds after it count from there, so no epoch is
    skipped."""
    epochs: int
    sync_every: int
    seed: int
    start_round: int = 0
    start_epoch: int = 0

    @property
    def rounds(self) -> int:
        return self.start_round + math.ceil(max(0, self.epochs - self.start_epoch) / self.sync_every)

    def span(self, r: int) -> tuple[int, int]:
        """Round ``r``'s first epoch and its number of epochs (``r >= start_round``)."""
        first = self.start_epoch + (r - self.start_round) * self.sync_every
        return first, min(self.sync_every, self.epochs - first)


def _nothing(*_args) -> None:
    return None


@dataclass(frozen=True)
class LocalSteps:
    """A model's side of the loop.

    ``epoch(part, epoch)`` trains one local epoch of ``part`` (the torch random
    state already reseeded) and returns its mean loss, or ``None`` when the
    part had nothing to train on (it then adds nothing to the round's loss).
    ``start_part(part)`` runs once the part's model holds W, before its
    epochs; ``end_part(part)`` after them, before it joins the average;
    ``end_round(round, epochs_done, W)`` after the average (W is float64 and
    loaded in the model). ``start_round(round, first_epoch, W)`` runs before
    any part of the round trains (every worker calls it: it may hold
    collectives).
    """
    epoch: Callable[[int, int], float | None]
    start_part: Callable[[int], None] = _nothing
    end_part: Callable[[int], None] = _nothing
    end_round: Callable[[int, int, torch.Tensor], None] = _nothing
    start_round: Callable[[int, int, torch.Tensor], None] = _nothing
    # what the message of a NaN or infinite loss advises, and what it adds after (where the last good
    # weights are)
    lr_advice: str = "try a lower --lr"
    diverged_note: str = ""


class TrainingDivergedError(GraphStreamError):
    """A training loss that is NaN or infinite: the weights are lost from there on."""


@dataclass
class WorkerStats:
    """What every worker reports: its parts, its mean local loss per epoch (over its own parts: the run's
    is :func:`run_losses` of every worker's ``part_losses``) and its timings."""
    rank: int
    parts: list[int]
    losses: list[float | None] = field(default_factory=list)    # mean local loss per epoch (this worker)
    train_seconds: float = 0.0
    sync_seconds: float = 0.0
    part_losses: dict[int, list[float | None]] = field(default_factory=dict)   # part -> its loss per epoch


def gather_part_losses(stats: WorkerStats, rank: int, world: int) -> None:
    """Every worker's ``part_losses`` into worker 0's (a collective: every worker calls it)."""
    gathered = gather_to_first(stats.part_losses, rank, world)
    if gathered is not None:
        stats.part_losses = {part: losses for each in gathered for part, losses in each.items()}


def run_losses(part_losses: Mapping[int, Sequence[float | None]]) -> list[float | None]:
    """The run's loss per epoch: the mean over the parts (in part order, so whatever the workers) of each
    part's mean local loss that epoch, None where no part trained."""
    merged = dict(part_losses)
    epochs = max((len(v) for v in merged.values()), default=0)
    out: list[float | None] = []
    for e in range(epochs):
        values = [merged[part][e] for part in sorted(merged) if e < len(merged[part])]
        values = [v for v in values if v is not None]
        out.append(float(sum(values) / len(values)) if values else None)
    return out


def average_rounds(model: nn.Module, W: torch.Tensor, steps: LocalSteps, stats: WorkerStats, *,
                   weights: Sequence[int], averager: WeightedAverager, schedule: Schedule,
                   device: torch.device, start_round: int = 0,
                   optimizers: Mapping[int, object] | None = None) -> torch.Tensor:
    """Rounds ``start_round ..`` of the loop (module doc) over the parts ``stats.parts``; return the last W.

    ``weights[i]`` is part i's share of the average (its training nodes or
    positives). The model's parameters are the tensors every part's optimizer
    holds; they are reloaded from W before each part and hold the average
    after each round. ``stats`` gains the losses and timings. With
    ``optimizers`` (part -> its Adam, for every part of ``stats.parts``) the
    optimizers' moments are averaged with the weights, so every part starts
    each round from the same moments; without, they stay per part.
    """
    mine = stats.parts
    # Rank 0 (or the only process) shows the epochs; the other workers would repeat it.
    first_worker = not dist.is_initialized() or dist.get_rank() == 0
    done_before = min(schedule.span(start_round)[0], schedule.epochs)   # the epochs of a resumed run's start
    with progress(schedule.epochs, "train", unit="epoch", initial=done_before) if first_worker \
            else nullcontext() as bar:
        for r in range(start_round, schedule.rounds):
            first_epoch, n_epochs = schedule.span(r)
            t0 = time.perf_counter()
            round_losses, trained = np.zeros(n_epochs), np.zeros(n_epochs)
            steps.start_round(r, first_epoch, W)
            for i in mine:                                                   # step 2: local epochs
                load_flat_(model, W)
                steps.start_part(i)
                for e in range(n_epochs):
                    epoch = first_epoch + e
                    torch.manual_seed(seed_for(schedule.seed, i, epoch))
                    loss = steps.epoch(i, epoch)
                    if loss is not None and not math.isfinite(loss):   # every later epoch would be NaN too
                        raise TrainingDivergedError(f"part {i}, epoch {epoch}: the training loss is {loss} (the run "
                                                    f"diverged: {steps.lr_advice}){steps.diverged_note}")
                    stats.part_losses.setdefault(i, []).append(loss)
                    if loss is not None:
                        round_losses[e] += loss
                        trained[e] += 1
                steps.end_part(i)
                averager.add(model, weights[i], None if optimizers is None else optimizers[i])
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            stats.train_seconds += time.perf_counter() - t0
            # the mean over the parts that trained (one without training nodes has no loss): None if none did
            stats.losses.extend(None if t == 0 else float(total / t)
                                for total, t in zip(round_losses, trained, strict=True))
            W = averager.average_into(model, () if optimizers is None else [optimizers[i] for i in mine])  # step 3
            steps.end_round(r, first_epoch + n_epochs, W)                    # step 4: the model's own
            if bar is not None:
                bar.update(n_epochs)
    stats.sync_seconds = averager.seconds
    return W


__all__ = ["LocalSteps", "Schedule", "WorkerStats", "average_rounds", "dealt", "gather_part_losses", "gather_to_first",
           "run_losses",
           "seed_for", "worker_device"]
