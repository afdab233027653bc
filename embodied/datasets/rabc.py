"""Reward-aligned BC weights (RA-BC, as with LeRobot's SARM): each frame's progress gain.

Frame t's weight is ``clip((p[t + window] - p[t]) / kappa, 0, 1)`` with ``p`` the reward
model's progress of the episode's frames (``p`` holds its last value past the end): a
frame from which the episode gains at least ``kappa`` progress within ``window`` frames
weighs 1, one that makes no progress or loses some weighs 0. ``embodied label`` stores
it as the ``rabc.weight`` column; ``embodied offline algo=rabc`` multiplies each frame's
behaviour-cloning loss by it.
"""

from __future__ import annotations

import numpy as np

RABC_WEIGHT = "rabc.weight"


def rabc_weights(progress: np.ndarray, window: int, kappa: float) -> np.ndarray:
    """Per-frame weights [T] in [0, 1] of an episode's progress [T] (see the module doc)."""
    if window < 1 or kappa <= 0:
        raise ValueError(f"RA-BC needs window >= 1 frames and kappa > 0, got {window}, {kappa}")
    p = np.asarray(progress, np.float64).reshape(-1)
    ahead = p[np.minimum(np.arange(len(p)) + window, len(p) - 1)]
    return np.clip((ahead - p) / kappa, 0.0, 1.0).astype(np.float32)
