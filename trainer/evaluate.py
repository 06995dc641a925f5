"""Accuracy (micro-F1 for single-label classification) of a model on a whole graph.

The averaged model is evaluated on the *whole* graph (reassembled from the
parts' inner rows, see :func:`trainer.data.assemble_whole_graph`), full batch,
so that its numbers compare directly with centralised training of the same
model on the same graph.
"""
from __future__ import annotations

import torch

from .data import DeviceGraph


@torch.no_grad()
def logits(model: torch.nn.Module, graph: DeviceGraph) -> torch.Tensor:
    """Full-batch forward pass over every node of ``graph`` (eval mode)."""
    was_training = model.training
    model.eval()
    try:
        return model(graph.x, [graph.block] * len(model.layers))
    finally:
        model.train(was_training)


def accuracy(pred: torch.Tensor, y: torch.Tensor, idx: torch.Tensor) -> float | None:
    """Share of ``idx`` whose argmax prediction equals the label (micro-F1); None if ``idx`` is empty
    (no such nodes: there is nothing to measure, and a NaN would print as a result)."""
    if idx.numel() == 0:
        return None
    return float((pred[idx] == y[idx]).float().mean().item())


def evaluated_on(graph: DeviceGraph) -> list[str]:
    """The node sets of ``graph`` that have nodes to evaluate on: some of "train", "val", "test"."""
    sets = {"train": graph.train_idx, "val": graph.val_idx, "test": graph.test_idx}
    return [name for name, idx in sets.items() if idx.numel() > 0]


@torch.no_grad()
def evaluate(model: torch.nn.Module, graph: DeviceGraph) -> dict[str, float | None]:
    """Train, validation and test accuracy of ``model`` on ``graph``'s masked inner nodes (None: no such nodes)."""
    pred = logits(model, graph).argmax(dim=1)
    return {"train_accuracy": accuracy(pred, graph.y, graph.train_idx),
            "val_accuracy": accuracy(pred, graph.y, graph.val_idx),
            "test_accuracy": accuracy(pred, graph.y, graph.test_idx)}


__all__ = ["accuracy", "evaluate", "evaluated_on", "logits"]
