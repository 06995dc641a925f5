"""Adam, written out.

The arithmetic is that of ``torch.optim.Adam(foreach=False)`` (Kingma & Ba,
"Adam: A Method for Stochastic Optimization", ICLR 2015, with L2 weight decay
added to the gradient); tests compare the two. It exists because the first
use of ``torch.optim`` imports ``torch._dynamo``, which costs 4 to 12 seconds
in every freshly spawned worker process on a busy 2-core machine, for no
benefit here.
"""
from __future__ import annotations

import math
from collections.abc import Iterable

import torch


class Adam:
    r"""Adam with L2 weight decay.

    .. math::
        g_t = \nabla f(\theta_{t-1}) + \lambda \theta_{t-1}, \quad
        m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t, \quad
        v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2, \\
        \theta_t = \theta_{t-1} - \frac{\eta}{1 - \beta_1^t}
                   \frac{m_t}{\sqrt{v_t} / \sqrt{1 - \beta_2^t} + \epsilon}

    Args:
        params: the tensors to optimise (kept by reference).
        lr (float): step size :math:`\eta` (default 0.01).
        weight_decay (float): :math:`\lambda` (default 0).
        betas (tuple): :math:`(\beta_1, \beta_2)` (default (0.9, 0.999)).
        eps (float): :math:`\epsilon` (default 1e-8).
    """

    def __init__(self, params: Iterable[torch.Tensor], *, lr: float = 0.01, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        self.lr, self.weight_decay, self.betas, self.eps = lr, weight_decay, betas, eps
        self.step_count = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.step_count += 1
        b1, b2 = self.betas
        bias1 = 1 - b1 ** self.step_count
        bias2_sqrt = math.sqrt(1 - b2 ** self.step_count)
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            if p.grad is None:
                continue
            g = p.grad if self.weight_decay == 0 else p.grad.add(p, alpha=self.weight_decay)
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g.conj(), value=1 - b2)
            denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / bias1)

    def state_dict(self) -> dict:
        return {"step": self.step_count, "exp_avg": [t.detach().cpu().clone() for t in self.exp_avg],
                "exp_avg_sq": [t.detach().cpu().clone() for t in self.exp_avg_sq]}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = int(state["step"])
        for dst, src in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"], strict=True):
            dst.copy_(src)


__all__ = ["Adam"]
