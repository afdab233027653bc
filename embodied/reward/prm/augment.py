"""Photometric augmentation of PRM training frames: light levels the renderer did not show.

The simulated frames cover the light range of the visual randomisation they were rendered
under (``configs/visual/train.yaml``); a scene lit past that range, brighter or with a
tinted light, moves every pixel of every view the same way. :func:`photometric` draws that
change per state in the minibatch: one brightness factor (log-uniform in ``brightness``)
and one gain per colour channel (``1 + N(0, colour_std)``) for all of its views, the
current and the start views alike, since one light lights the whole scene. Pixels saturate
at 255, as an over-exposed render does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def photometric(frames: torch.Tensor, brightness: Sequence[float], colour_std: float,
                rng: np.random.Generator) -> torch.Tensor:
    """``frames`` uint8 [B, V, H, W, 3] with each state's views relit; the same dtype/shape.

    ``brightness``: [low, high] range of the per-state factor (``[1, 1]`` and
    ``colour_std`` 0: the frames come back unchanged, without a copy). Raises
    ``ValueError`` naming the fix for a range that is not two positive, ordered numbers.
    """
    low, high = _range(brightness)
    if low == high == 1.0 and colour_std == 0.0:
        return frames
    b = frames.shape[0]
    factor = np.exp(rng.uniform(np.log(low), np.log(high), size=(b, 1)))
    gain = factor * (1.0 + colour_std * rng.standard_normal((b, 3)))
    gain_t = torch.from_numpy(np.clip(gain, 0.0, None).astype(np.float32))
    out = frames.float() * gain_t[:, None, None, None, :]
    return out.clamp_(0.0, 255.0).round_().to(torch.uint8)


def _range(brightness: Sequence[float]) -> tuple[float, float]:
    """``brightness`` as (low, high), checked."""
    values = [float(v) for v in brightness]
    if len(values) != 2 or not 0.0 < values[0] <= values[1]:
        raise ValueError(f"train.brightness: {list(brightness)} is not a range of two "
                         "positive factors, low <= high; pass e.g. [0.7, 1.5] ([1, 1]: off)")
    return values[0], values[1]
