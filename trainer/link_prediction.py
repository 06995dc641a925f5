"""Temporal link prediction: negatives, edge scores, the time split and ROC-AUC.

From snapshots 0..t a model computes node embeddings H_t; the edges of
snapshot t+1 are the positives, as many sampled non-edges of t+1 the
negatives; the metric is ROC-AUC (computed here from ranks). Transitions are
split in time: the first 70% train, the next 15% validate, the last 15% test.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from .metrics import roc_auc_pos_neg


def roc_auc(pos: np.ndarray, neg: np.ndarray) -> float | None:
    """ROC-AUC from ranks (Mann-Whitney U), ties counted half; None when ``pos`` or ``neg`` is empty
    (:func:`trainer.metrics.roc_auc_pos_neg`)."""
    return roc_auc_pos_neg(pos, neg)


def sample_negatives(keys: Tensor, num_nodes: int, gen: torch.Generator, *, undirected: bool = False) -> Tensor:
    """As many (u, v) non-edges of the snapshot as it has edges: each edge's source with a
    random destination; pairs that happen to be edges are dropped. ``undirected``: the snapshot holds
    each edge once as (min, max), so a candidate is put in that order before it is looked up (the
    score is symmetric: (v, u) of an edge (u, v) is that edge)."""
    src = keys // num_nodes
    dst = torch.randint(0, num_nodes, (keys.numel(),), generator=gen, device=gen.device).to(keys.device)
    if undirected:
        src, dst = torch.minimum(src, dst), torch.maximum(src, dst)
    cand = src * num_nodes + dst
    pos = torch.searchsorted(keys, cand).clamp(max=max(keys.numel() - 1, 0))
    hit = keys[pos] == cand if keys.numel() else torch.zeros_like(cand, dtype=torch.bool)
    return cand[~hit]


def edge_scores(model: nn.Module, h: Tensor, keys: Tensor, num_nodes: int) -> Tensor:
    """The model's ``score`` of every edge key src*N+dst, from the embeddings ``h``."""
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
        n_test = max(1, round(transitions * self.test_fraction))
        n_val = max(1, round(transitions * self.val_fraction))
        first_test = self.num_snapshots - n_test
        first_val = first_test - n_val
        return "test" if target >= first_test else "val" if target >= first_val else "train"


__all__ = ["Split", "edge_scores", "roc_auc", "sample_negatives"]
