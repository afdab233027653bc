"""What the field reports for progress reward models, computed on held-out episodes.

- VOC (value-order correlation, GVL): Spearman correlation of predicted progress with
  frame order on an expert episode, averaged over episodes. Measured on the part of the
  episode where progress changes (up to the first successful state): after that an
  expert holds still and the true order of equal states is undefined.
- Reversed VOC: the same frames scored in reverse order. A model that scores each
  observation on its own (this PRM) gives exactly ``-VOC``; a model that reads context
  need not, which is why GVL reports it.
- Success detection: F1 at probability 0.5 and AUROC over held-out states; the expected
  calibration error (ECE, 10 bins) says how far the probability is from the frequency.
- Correlation with the simulator's progress: Pearson and Spearman over held-out states.
- Pairwise preference accuracy: for pairs of states of one held-out episode whose true
  progress differs by at least ``margin``, how often the predicted order agrees.
- Counterfactual separation: progress under the true instruction minus progress under
  other instructions, on states with true progress >= 0.5, and the AUROC that tells
  the two apart.
"""

from __future__ import annotations

import numpy as np


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 with ties given their average rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x), dtype=np.float64)
    r[order] = np.arange(len(x))
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=r)
    return (sums / counts)[inverse]


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation; 0 if either input is constant."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    a, b = a - a.mean(), b - b.mean()
    den = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / den) if den > 0 else 0.0


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (Pearson of average ranks)."""
    return pearson(ranks(a), ranks(b))


def voc(progress: np.ndarray) -> float:
    """Value-order correlation of one episode's predicted progress (time order)."""
    return spearman(progress, np.arange(len(progress)))


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney); NaN if only one class is present."""
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = ranks(scores)
    return float((r[labels].sum() - n_pos * (n_pos - 1) / 2) / (n_pos * n_neg))


def f1(pred: np.ndarray, labels: np.ndarray) -> float:
    """F1 of boolean predictions; 1.0 when there are no positives and none predicted."""
    pred, labels = np.asarray(pred, bool), np.asarray(labels, bool)
    tp = int((pred & labels).sum())
    fp, fn = int((pred & ~labels).sum()), int((~pred & labels).sum())
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def expected_calibration_error(prob: np.ndarray, labels: np.ndarray, bins: int = 10) -> float:
    """ECE: mean |accuracy - confidence| over ``bins`` equal-width bins, weighted by count."""
    prob, labels = np.asarray(prob, np.float64), np.asarray(labels, np.float64)
    if len(prob) == 0:
        return float("nan")
    which = np.minimum((prob * bins).astype(int), bins - 1)
    err = 0.0
    for k in range(bins):
        sel = which == k
        if sel.any():
            err += sel.sum() * abs(labels[sel].mean() - prob[sel].mean())
    return float(err / len(prob))


def pairwise_accuracy(pred: np.ndarray, true: np.ndarray, margin: float = 0.1) -> tuple[float, int]:
    """Share of state pairs with ``|true_i - true_j| >= margin`` ordered alike; and #pairs."""
    pred, true = np.asarray(pred, np.float64), np.asarray(true, np.float64)
    dt = true[:, None] - true[None, :]
    dp = pred[:, None] - pred[None, :]
    mask = dt >= margin
    n = int(mask.sum())
    return (float((dp[mask] > 0).mean()) if n else float("nan")), n


def progress_metrics(episodes_pred: list[np.ndarray], episodes_true: list[np.ndarray],
                     episodes_success: list[np.ndarray], expert: list[bool],
                     success_prob: list[np.ndarray]) -> dict[str, float]:
    """All frame-order and success metrics over held-out episodes (lists per episode)."""
    vocs, vocs_rev = [], []
    for pred, ok, is_expert in zip(episodes_pred, episodes_success, expert, strict=True):
        if not is_expert:
            continue
        hit = np.flatnonzero(ok)
        end = int(hit[0]) + 1 if len(hit) else len(pred)
        if end >= 3:
            vocs.append(voc(pred[:end]))
            vocs_rev.append(voc(pred[:end][::-1]))
    pred_all = np.concatenate(episodes_pred)
    true_all = np.concatenate(episodes_true)
    ok_all = np.concatenate(episodes_success)
    prob_all = np.concatenate(success_prob)
    pairs = [pairwise_accuracy(p, t) for p, t in zip(episodes_pred, episodes_true, strict=True)]
    n_pairs = sum(n for _, n in pairs)
    pair_acc = (sum(a * n for a, n in pairs if n) / n_pairs) if n_pairs else float("nan")
    return {
        "voc": float(np.mean(vocs)) if vocs else float("nan"),
        "voc_reversed": float(np.mean(vocs_rev)) if vocs_rev else float("nan"),
        "voc_episodes": len(vocs),
        "success_f1": f1(prob_all >= 0.5, ok_all),
        "success_auroc": auroc(prob_all, ok_all),
        "success_ece": expected_calibration_error(prob_all, ok_all),
        "progress_pearson": pearson(pred_all, true_all),
        "progress_spearman": spearman(pred_all, true_all),
        "progress_mae": float(np.abs(pred_all - true_all).mean()),
        "pairwise_accuracy": pair_acc,
        "pairs": n_pairs,
        "states": len(pred_all),
    }


def counterfactual_metrics(matched: np.ndarray, mismatched: np.ndarray) -> dict[str, float]:
    """Progress under the true vs. other instructions on the same (progressed) states."""
    scores = np.concatenate([matched, mismatched])
    labels = np.concatenate([np.ones(len(matched), bool), np.zeros(len(mismatched), bool)])
    return {
        "counterfactual_matched": float(np.mean(matched)),
        "counterfactual_mismatched": float(np.mean(mismatched)),
        "counterfactual_gap": float(np.mean(matched) - np.mean(mismatched)),
        "counterfactual_auroc": auroc(scores, labels),
    }
