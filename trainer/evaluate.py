"""Metrics of a model on a whole graph: accuracy, macro-F1 and, for binary labels, ROC-AUC.

The metric functions live in :mod:`trainer.metrics` (numpy).

The averaged model is evaluated on the *whole* graph (reassembled from the
parts' inner rows, see :func:`trainer.data.assemble_whole_graph`), full batch,
so that its numbers compare directly with centralised training of the same
model on the same graph.
"""
from __future__ import annotations

import torch

from . import metrics
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
    """Every metric that fits the labels (:func:`trainer.metrics.scores`) of ``model`` on ``graph``'s
    masked inner nodes, as ``{set}_{metric}`` for the sets train, val and test: accuracy and macro-F1
    always, ROC-AUC of the positive class's probability when the model has two outputs (binary
    labels). None: no such nodes, or (ROC-AUC) one class only."""
    out = logits(model, graph)
    binary = out.shape[1] == 2
    prob = torch.softmax(out.float(), dim=1).cpu().numpy()
    y = graph.y.cpu().numpy()
    result: dict[str, float | None] = {}
    for name, idx in (("train", graph.train_idx), ("val", graph.val_idx), ("test", graph.test_idx)):
        i = idx.cpu().numpy()
        for metric, value in metrics.scores(y[i], prob[i], binary=binary).items():
            result[f"{name}_{metric}"] = value
    return result


def single_class_sets(graph: DeviceGraph) -> list[str]:
    """The evaluated node sets of ``graph`` whose labels are all one class (ROC-AUC is undefined there)."""
    sets = {"train": graph.train_idx, "val": graph.val_idx, "test": graph.test_idx}
    return [name for name, idx in sets.items() if idx.numel() > 0 and graph.y[idx].unique().numel() == 1]


__all__ = ["accuracy", "evaluate", "evaluated_on", "logits", "single_class_sets"]
