"""Calibrated success probability: Platt scaling fitted on held-out episodes after training.

The success head's logit ``z`` becomes ``p = sigmoid(scale * z + bias)``: ``1 / scale`` is a
temperature (how sure the network may be) and ``bias`` moves the point where ``p = 0.5``.
Both are fitted by maximum likelihood (L-BFGS on the binary cross-entropy, with Platt's
smoothed targets ``(n+ + 1) / (n+ + 2)`` and ``1 / (n- + 2)``, which keep the fit finite
when the held-out states are perfectly separated) on the states of the dataset's
held-out (``val``) episodes, stored in the checkpoint's info
under ``success_calibration`` and applied by every scoring path (``inference.py``).
A checkpoint without the entry scores with ``scale=1, bias=0`` (the raw head).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from embodied.reward.prm.metrics import expected_calibration_error

#: Probabilities are clamped to [EPS, 1 - EPS] before turning them back into logits.
EPS = 1e-7


@dataclass(frozen=True)
class SuccessCalibration:
    """``p = sigmoid(scale * logit + bias)``; the identity by default."""

    scale: float = 1.0
    bias: float = 0.0

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> SuccessCalibration:
        """The calibration stored in a checkpoint's info (the identity if none)."""
        entry = info.get("success_calibration") or {}
        return cls(float(entry.get("scale", 1.0)), float(entry.get("bias", 0.0)))

    def probability(self, logit: torch.Tensor) -> torch.Tensor:
        """Calibrated success probability of raw success logits."""
        return torch.sigmoid(logit * self.scale + self.bias)


def logits_of(prob: np.ndarray) -> np.ndarray:
    """Logits of probabilities (clamped to [EPS, 1 - EPS])."""
    p = np.clip(np.asarray(prob, np.float64), EPS, 1.0 - EPS)
    return np.log(p) - np.log1p(-p)


def _nll(logit: np.ndarray, labels: np.ndarray, cal: SuccessCalibration) -> float:
    z = torch.as_tensor(logit * cal.scale + cal.bias)
    return float(F.binary_cross_entropy_with_logits(z, torch.as_tensor(labels, dtype=z.dtype)))


def fit_platt(logit: np.ndarray, labels: np.ndarray) -> SuccessCalibration:
    """Maximum-likelihood ``scale`` and ``bias`` for raw logits and boolean labels.

    Both classes must be present (ValueError otherwise: a bias fitted on one class runs
    off to infinity). ``scale`` is kept positive, so the ranking never flips.
    """
    labels = np.asarray(labels, bool)
    if labels.all() or not labels.any():
        raise ValueError("fitting a success calibration needs successful and unsuccessful "
                         "held-out states")
    z = torch.as_tensor(np.asarray(logit, np.float64))
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    y = torch.as_tensor(np.where(labels, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2)))
    log_scale = torch.zeros((), dtype=torch.float64, requires_grad=True)
    bias = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_scale, bias], lr=0.5, max_iter=200,
                            line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(z * log_scale.exp() + bias, y)
        loss.backward()
        return loss

    with torch.inference_mode(False), torch.enable_grad():  # callable from a no-grad scope
        opt.step(closure)
    return SuccessCalibration(float(log_scale.detach().exp()), float(bias.detach()))


def calibration_report(prob_raw: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Fit on raw success probabilities; the fit and its NLL / ECE before and after.

    The dict (``scale``, ``bias``, ``states``, ``nll_before``/``after``,
    ``ece_before``/``after``) is what the checkpoint stores as ``success_calibration``;
    with a single class present it holds the identity and a ``skipped`` reason.
    """
    labels = np.asarray(labels, bool)
    logit = logits_of(prob_raw)
    out: dict[str, Any] = {"states": len(labels), "fitted_on": "val"}
    try:
        cal = fit_platt(logit, labels)
    except ValueError as exc:
        return out | asdict(SuccessCalibration()) | {"skipped": str(exc)}
    prob_cal = cal.probability(torch.as_tensor(logit)).numpy()
    return out | asdict(cal) | {
        "nll_before": _nll(logit, labels, SuccessCalibration()),
        "nll_after": _nll(logit, labels, cal),
        "ece_before": expected_calibration_error(prob_raw, labels),
        "ece_after": expected_calibration_error(prob_cal, labels)}
