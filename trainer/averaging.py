"""Model averaging weighted by training nodes: one all_reduce over one flat buffer.

After every ``sync_every`` epochs each local model i (one per part) holds
weights :math:`W_i`; the new global model is

.. math::  W = \\sum_i \\frac{n_i}{n} W_i, \\qquad n = \\sum_i n_i

with :math:`n_i` the part's training nodes. A worker that trains several parts
adds their :math:`n_i W_i` into one float64 buffer; a single ``all_reduce``
(SUM) adds the workers' buffers; every worker divides by ``n`` and copies the
result into its parameters *in place*, so optimizers keep pointing at the
same tensors. Accumulating in float64 makes the products :math:`n_i W_i`
exact and the result independent of the order of the few additions once
rounded back to float32.

By default each part's optimizer state (Adam's moments) stays local, never
averaged. When the parts' optimizers are passed to :meth:`WeightedAverager.add`
and :meth:`WeightedAverager.average_into` (``--average-optimizer-state``),
their first and second moments :math:`m_i, v_i` ride in the same buffer and
the same all_reduce, weighted alike (:math:`m = \\sum_i \\frac{n_i}{n} m_i`,
the same for :math:`v`), and every part's optimizer starts the next round
from them. Step counts (Adam's bias correction) stay per part: they are equal
in full-batch training, where every part steps once per epoch.
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


def optimizer_moments(optimizer) -> list[torch.Tensor]:
    """The tensors of an Adam-like optimizer's state that are averaged: first moments, then second."""
    try:
        return [*optimizer.exp_avg, *optimizer.exp_avg_sq]
    except AttributeError as exc:   # a programming error, not a user's: only trainer.optim.Adam is passed
        raise TypeError(f"{type(optimizer).__name__} keeps no exp_avg/exp_avg_sq moments to average") from exc


def flat_gradients(model: nn.Module, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """All parameters' gradients in one 1-D tensor of ``dtype`` (zeros where a parameter has none)."""
    return torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).detach().reshape(-1).to(dtype)
                      for p in model.parameters()])


def _cut_like(flat: torch.Tensor, tensors: list[torch.Tensor], what: str) -> list[torch.Tensor]:
    """``flat`` cut into views shaped like ``tensors``, in order; ``what`` names them in the error."""
    total = sum(t.numel() for t in tensors)
    if total != flat.numel():
        raise ValueError(f"buffer has {flat.numel()} values, {what} has {total}")
    out, offset = [], 0
    for t in tensors:
        out.append(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()
    return out


def unflatten_like(model: nn.Module, flat: torch.Tensor) -> list[torch.Tensor]:
    """``flat`` cut into tensors shaped, typed and placed like ``model``'s parameters."""
    params = list(model.parameters())
    return [piece.to(dtype=p.dtype, device=p.device) for p, piece in zip(params, _cut_like(flat, params, "model"),
                                                                          strict=True)]


def flat_moments(optimizer, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """An optimizer's moments (:func:`optimizer_moments`) in one 1-D tensor (a copy) of ``dtype``."""
    return torch.cat([t.detach().reshape(-1).to(dtype) for t in optimizer_moments(optimizer)])


def load_moments_(optimizer, flat: torch.Tensor) -> None:
    """Copy a flat buffer back into an optimizer's moments, in place."""
    moments = optimizer_moments(optimizer)
    with torch.no_grad():
        for t, piece in zip(moments, _cut_like(flat, moments, "the optimizer"), strict=True):
            t.copy_(piece.to(t.dtype))


def load_flat_(model: nn.Module, flat: torch.Tensor) -> None:
    """Copy a flat buffer back into ``model``'s parameters, in place."""
    params = list(model.parameters())
    with torch.no_grad():
        for p, piece in zip(params, _cut_like(flat, params, "model"), strict=True):
            p.copy_(piece.to(p.dtype))


@dataclass
class WeightedAverager:
    """Accumulate :math:`n_i W_i` of local models, then average across workers.

    Usage per synchronisation round: ``add(model, n_i)`` for every part this
    worker trained, then ``average_into(model)``. To average the optimizers'
    moments too, pass every part's optimizer: ``add(model, n_i, opt_i)``, then
    ``average_into(model, [opt_i, ...])`` with all of this worker's optimizers
    (every worker must do the same: the buffers' lengths must agree).
    """
    total_weight: int
    distributed: bool = True
    seconds: float = 0.0
    rounds: int = 0
    _sum: torch.Tensor | None = field(default=None, repr=False)

    def add(self, model: nn.Module, weight: int, optimizer=None) -> None:
        flat = flat_parameters(model)
        if optimizer is not None:   # the moments follow the weights in the one buffer
            flat = torch.cat([flat, flat_moments(optimizer)])
        self.add_flat(flat, weight)

    def add_flat(self, flat: torch.Tensor, weight: int) -> None:
        """Add ``weight * flat`` for any flat tensor the size of the model's parameters (a gradient), or
        of the parameters and moments (:meth:`add`), with any values appended (``reduce``'s ``extra``)."""
        contrib = flat.to(torch.float64) * float(weight)
        self._sum = contrib if self._sum is None else self._sum + contrib

    def reduce(self, like: nn.Module, optimizer=None, extra: int = 0) -> torch.Tensor:
        """The averaged flat buffer (float64), after one all_reduce: the weights, then
        ``optimizer``'s moments when one is given (its values are not used, only their number),
        then ``extra`` more values that rode along (``add_flat``)."""
        if self._sum is not None:
            buf = self._sum
        else:   # a worker without parts still joins the all_reduce, with zeros
            size = flat_parameters(like).numel() + extra
            if optimizer is not None:
                size += flat_moments(optimizer).numel()
            buf = torch.zeros(size, dtype=torch.float64)
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

    def average_into(self, model: nn.Module, optimizers=()) -> torch.Tensor:
        """Average across workers and load the result into ``model``; return it (float64).

        With ``optimizers`` (this worker's, each of whose parts was added with
        its optimizer) the averaged moments are loaded into every one of them."""
        optimizers = list(optimizers)
        if not optimizers:
            avg = self.reduce(model)
            load_flat_(model, avg)
            return avg
        buf = self.reduce(model, optimizers[0])
        n = sum(p.numel() for p in model.parameters())
        avg = buf[:n].clone()
        load_flat_(model, avg)
        for opt in optimizers:
            load_moments_(opt, buf[n:])
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


__all__ = ["WeightedAverager", "flat_gradients", "flat_moments", "flat_parameters", "load_flat_", "load_moments_",
           "optimizer_moments", "unflatten_like", "weighted_mean_reference"]
