"""Dynamic GNNs: one graph convolution per snapshot, then a recurrence.

- T-GCN style (Zhao et al., "T-GCN: A Temporal Graph Convolutional Network
  for Traffic Prediction", 2019): Z_t = ReLU(GCN(X_t, A_t)),
  H_t = GRU(Z_t, H_{t-1}) per node.
- EvolveGCN-O (Pareja et al., "EvolveGCN", AAAI 2020): the GCN weights
  evolve through an LSTM whose input and hidden state are the weights,
  W_t = LSTM(W_{t-1}); H_t = ReLU(GCN(X_t, A_t; W_t)).

Node inputs X_t are structural, so that parts need no global tables:
[1, log(1 + in-degree_t), log(1 + out-degree_t)]. Edges are read undirected
for the convolution. Scores: a linear layer (``score``) on h_u * h_v.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from graphstream.errors import ParameterError

from .models import Block, GCNConv, add_self_loops, degree, gcn_norm, propagate

DYNAMIC_MODELS = ("tgcn", "evolvegcn")
NUM_INPUTS = 3


def snapshot_inputs(keys: Tensor, num_nodes: int) -> tuple[Tensor, Block]:
    """Structural node inputs X_t and the undirected message block of one snapshot."""
    src, dst = keys // num_nodes, keys % num_nodes
    row, col = torch.cat([dst, src]), torch.cat([src, dst])
    deg = degree(row, num_nodes)
    x = torch.stack([torch.ones_like(deg), torch.log1p(degree(dst, num_nodes)),
                     torch.log1p(degree(src, num_nodes))], dim=1)
    return x, Block(row, col, num_nodes, num_nodes, deg)


class SnapshotModel(nn.Module):
    """A model run over a snapshot sequence: ``state = initial_state(N)``, then per snapshot
    ``h, state = step(x, block, state)``; ``score`` (a linear layer on h_u * h_v) rates edges.

    Args:
        in_channels (int): node input size.
        hidden (int): embedding size.

    Shapes:
        ``step``: inputs ``(N, in_channels)``, a :class:`Block`, the state -> ``(N, hidden)``, the next state.
    """
    hidden: int
    score: nn.Linear

    def initial_state(self, num_nodes: int, device) -> Any:
        raise NotImplementedError

    def step(self, x: Tensor, block: Block, state) -> tuple[Tensor, Any]:
        raise NotImplementedError


class TGCN(SnapshotModel):
    r"""GCN per snapshot, GRU per node (T-GCN, Zhao et al. 2019); the state is H ``(N, hidden)``.

    .. math::
        Z_t = \mathrm{ReLU}(\hat A_t X_t W), \qquad H_t = \mathrm{GRU}(Z_t, H_{t-1})
    """

    def __init__(self, in_channels: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        # created in this order: the seeded initialisation depends on it
        self.conv = GCNConv(in_channels, hidden)
        self.gru = nn.GRUCell(hidden, hidden)
        self.score = nn.Linear(hidden, 1)

    def initial_state(self, num_nodes: int, device) -> Tensor:
        return torch.zeros(num_nodes, self.hidden, device=device)

    def step(self, x: Tensor, block: Block, state: Tensor) -> tuple[Tensor, Tensor]:
        h = self.gru(F.relu(self.conv(x, block)), state)
        return h, h


class EvolveGCNO(SnapshotModel):
    r"""EvolveGCN-O (Pareja et al., AAAI 2020): the GCN weight matrix evolves through an LSTM.

    .. math::
        W_t = \mathrm{LSTM}(W_{t-1}), \qquad H_t = \mathrm{ReLU}(\hat A_t X_t W_t)

    The rows of W are the LSTM's batch; the state is (W, C), the LSTM's hidden
    state being the weight matrix ``(in_channels, hidden)``.
    """

    def __init__(self, in_channels: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.weight0 = nn.Parameter(torch.empty(in_channels, hidden))
        self.lstm = nn.LSTMCell(hidden, hidden)
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.score = nn.Linear(hidden, 1)
        nn.init.xavier_uniform_(self.weight0)   # last, after the LSTM's and the score's seeded draws

    def initial_state(self, num_nodes: int, device) -> tuple[Tensor, Tensor]:
        return self.weight0, torch.zeros_like(self.weight0)

    def step(self, x: Tensor, block: Block, state) -> tuple[Tensor, Any]:
        w, c = self.lstm(state[0], state)
        row, col = add_self_loops(block)
        h = propagate(x @ w, row, col, block.num_dst, gcn_norm(block)) + self.bias
        return F.relu(h), (w, c)


def build_dynamic_model(kind: str, hidden: int, seed: int) -> SnapshotModel:
    """A ``tgcn`` or ``evolvegcn`` model, initialised from ``seed`` (the global torch RNG is left as it was)."""
    if kind not in DYNAMIC_MODELS:
        raise ParameterError(f"--model {kind}: expected one of {', '.join(DYNAMIC_MODELS)}")
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return TGCN(NUM_INPUTS, hidden) if kind == "tgcn" else EvolveGCNO(NUM_INPUTS, hidden)
    finally:
        torch.random.set_rng_state(state)


__all__ = ["DYNAMIC_MODELS", "NUM_INPUTS", "TGCN", "EvolveGCNO", "SnapshotModel", "build_dynamic_model",
           "snapshot_inputs"]
