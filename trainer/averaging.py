"""Model averaging weighted by training nodes: one all_reduce over one flat buffer.

After every ``sync_every`` epochs each local model i (one per part) holds
weights :math:`W_i`; the new global model is

.. math::  W = \\sum_i \\frac{n_i}{n} W_i, \\qquad n = \\sum_i n_i

with :math:`n_i` the part's training nodes. A worker that trains several parts
adds their :math:`n_i W_i` into one float64 buffer; a single ``all_reduce``
(SUM) adds the workers' buffers; every worker divides by ``n`` and copies the
result into its parameters *in place*, so optimizers (whose state stays local,
never averaged) keep pointing at the same tensors. Accumulating in float64
makes the products :math:`n_i W_i` exact and the result independent of the
order of the few additions once rounded back to float32.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn


def flat_parameters(model: nn.Module, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """All parameters of ``model`` in one 1-D tensor (a copy) of ``dtype``."""
    return torch.cat([p.detach().reshape(-1).to(dtype) for p in model.parameters()])


def load_flat_(model: nn.Module, flat: torch.Tensor) -> None:
    """Copy a flat buffer back into ``model``'s parameters, in place."""
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            p.copy_(flat[offset:offset + n].view_as(p).to(p.dtype))
            offset += n
    if offset != flat.numel():
        raise ValueError(f"buffer has {flat.numel()} values, model has {offset}")


@dataclass
class WeightedAverager:
    """Accumulate :math:`n_i W_i` of local models, then average across workers.

    Usage per synchronisation round: ``add(model, n_i)`` for every part this
    worker trained, then ``average_into(model)``.
    """
    total_weight: int
    distributed: bool = True
    seconds: float = 0.0
    rounds: int = 0
    _sum: torch.Tensor | None = field(default=None, repr=False)

    def add(self, model: nn.Module, weight: int) -> None:
        flat = flat_parameters(model)
        contrib = flat * float(weight)
        self._sum = contrib if self._sum is None else self._sum + contrib

    def reduce(self, like: nn.Module) -> torch.Tensor:
        """The averaged flat buffer (float64), after one all_reduce."""
        buf = self._sum if self._sum is not None else torch.zeros_like(flat_parameters(like))
        self._sum = None
        start = time.perf_counter()
        if self.distributed and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            if dist.get_backend() == "nccl":
                # NCCL float64 sums are fine on GPUs; keep the buffer on the model's device.
                buf = buf.to(next(like.parameters()).device)
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        self.seconds += time.perf_counter() - start
        self.rounds += 1
        return buf / float(self.total_weight)

    def average_into(self, model: nn.Module) -> torch.Tensor:
        """Average across workers and load the result into ``model``; return it (float64)."""
        avg = self.reduce(model)
        load_flat_(model, avg)
        return avg


def weighted_mean_reference(flats_by_worker: list[list[tuple[torch.Tensor, int]]], total: int) -> torch.Tensor:
    """What :class:`WeightedAverager` computes, written out plainly (for tests).

    ``flats_by_worker[w]`` lists (float32 flat weights, n_i) of worker w's parts
    in training order. The float64 sums follow the averager's order.
    """
    sums = []
    for items in flats_by_worker:
        s = None
        for flat, n in items:
            c = flat.to(torch.float64) * float(n)
            s = c if s is None else s + c
        sums.append(s)
    total_sum = sums[0]
    for s in sums[1:]:
        total_sum = total_sum + s
    return (total_sum / float(total)).to(torch.float32)


__all__ = ["WeightedAverager", "flat_parameters", "load_flat_", "weighted_mean_reference"]
