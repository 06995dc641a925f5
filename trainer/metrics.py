"""Classification metrics, numpy only: accuracy, macro-F1, ROC-AUC; and which one fits the labels.

Every function returns ``None`` where the metric is undefined (no nodes; for
ROC-AUC, one class only), never NaN: a NaN would print as a result.

- ``accuracy``: share of correct argmax predictions (micro-F1 for single-label
  classification).
- ``macro_f1``: mean over classes of F1 = 2 TP / (2 TP + FP + FN), over the
  classes present in the truth or in the predictions (a class nobody has and
  nobody predicts has no F1).
- ``roc_auc``: probability that a random positive scores above a random
  negative, ties counted half (Mann-Whitney U from average ranks).

The static trainer picks its metric from the number of classes
(:func:`default_metric`: binary labels -> ROC-AUC of the positive class's
probability, otherwise accuracy), overridable with ``--metric``.
"""
from __future__ import annotations

import numpy as np

from graphstream.errors import ParameterError

METRICS = ("accuracy", "macro_f1", "roc_auc")


def accuracy(y_true, y_pred) -> float | None:
    """Share of ``y_pred`` equal to ``y_true``; None when empty."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.size == 0:
        return None
    return float(np.mean(y_true == y_pred))


def macro_f1(y_true, y_pred) -> float | None:
    """Mean per-class F1 over the classes present in ``y_true`` or ``y_pred``; None when empty."""
    y_true = np.asarray(y_true, np.int64).ravel()
    y_pred = np.asarray(y_pred, np.int64).ravel()
    if y_true.size == 0:
        return None
    k = int(max(y_true.max(), y_pred.max())) + 1
    tp = np.bincount(y_true[y_true == y_pred], minlength=k)
    true_count = np.bincount(y_true, minlength=k)
    pred_count = np.bincount(y_pred, minlength=k)
    present = (true_count + pred_count) > 0
    # 2TP + FP + FN = true_count + pred_count, > 0 on the present classes
    f1 = 2.0 * tp[present] / (true_count[present] + pred_count[present])
    return float(f1.mean())


def roc_auc_pos_neg(pos, neg) -> float | None:
    """ROC-AUC of positive scores ``pos`` against negative scores ``neg`` (ties half); None if either is empty."""
    pos = np.asarray(pos, np.float64).ravel()
    neg = np.asarray(neg, np.float64).ravel()
    if pos.size == 0 or neg.size == 0:
        return None
    scores = np.concatenate([pos, neg])
    order = np.argsort(scores, kind="mergesort")
    _, first, counts = np.unique(scores[order], return_index=True, return_counts=True)
    ranks = np.empty(len(scores))
    ranks[order] = np.repeat(first + (counts - 1) / 2.0 + 1.0, counts)   # average rank over ties, 1-based
    u = ranks[:pos.size].sum() - pos.size * (pos.size + 1) / 2.0
    return float(u / (pos.size * neg.size))


def roc_auc(y_true, score) -> float | None:
    """ROC-AUC of ``score`` for binary labels ``y_true`` (1 = positive); None when a class is missing."""
    y_true = np.asarray(y_true).ravel()
    score = np.asarray(score, np.float64).ravel()
    return roc_auc_pos_neg(score[y_true == 1], score[y_true != 1])


def default_metric(num_classes: int) -> str:
    """The metric that fits the labels: ROC-AUC for binary labels, accuracy otherwise."""
    return "roc_auc" if num_classes == 2 else "accuracy"


def resolve_metric(metric: str | None, num_classes: int) -> str:
    """``metric`` (None: :func:`default_metric`), refused (ParameterError) where it does not fit the labels."""
    if metric is None:
        return default_metric(num_classes)
    if metric not in METRICS:
        raise ParameterError(f"--metric {metric}: expected one of {', '.join(METRICS)}")
    if metric == "roc_auc" and num_classes != 2:
        raise ParameterError(f"--metric roc_auc: needs binary labels, these have {num_classes} classes "
                             "(use accuracy or macro_f1)")
    return metric


def scores(y_true, prob, *, binary: bool) -> dict[str, float | None]:
    """Every metric that fits: ``accuracy`` and ``macro_f1`` of the argmax of ``prob`` (n x classes),
    plus ``roc_auc`` of ``prob[:, 1]`` when ``binary``."""
    y_true = np.asarray(y_true)
    prob = np.asarray(prob)
    pred = prob.argmax(axis=1) if len(prob) else np.zeros(0, np.int64)
    out = {"accuracy": accuracy(y_true, pred), "macro_f1": macro_f1(y_true, pred)}
    if binary:
        out["roc_auc"] = roc_auc(y_true, prob[:, 1] if len(prob) else np.zeros(0))
    return out


__all__ = ["METRICS", "accuracy", "default_metric", "macro_f1", "resolve_metric", "roc_auc", "roc_auc_pos_neg",
           "scores"]
