"""Augmentation of PRM training frames: light levels and camera poses the renderer did not show.

The simulated frames cover the light range of the visual randomisation they were rendered
under (``configs/visual/train.yaml``); a scene lit past that range, brighter or with a
tinted light, moves every pixel of every view the same way. :func:`photometric` draws that
change per state in the minibatch: one brightness factor (log-uniform in ``brightness``)
and one gain per colour channel (``1 + N(0, colour_std)``) for all of its views, the
current and the start views alike, since one light lights the whole scene. Pixels saturate
at 255, as an over-exposed render does.

A camera moved by a few centimetres or turned by a few degrees moves the image by a few
pixels. :func:`pixel_shift` translates each camera's image by a whole number of pixels
(uniform in ``[-max_shift, max_shift]`` along each axis, edges repeated, as DrQ's random
shift does), the same for a camera's current and start views, since a camera does not
move within an episode.
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


def check_settings(brightness: Sequence[float], colour_std: float, max_shift: int) -> None:
    """Raises ``ValueError`` naming the fix for augmentation settings that are out of range.

    The checks :func:`photometric` and :func:`pixel_shift` make, done once on the
    configuration, so a bad setting fails before minutes of data simulation.
    """
    _range(brightness)
    if colour_std < 0.0:
        raise ValueError(f"train.colour_std: {colour_std} is negative; pass a std >= 0 "
                         "(0: off)")
    if max_shift < 0:
        raise ValueError(f"train.pixel_shift: {max_shift} px is negative; pass a shift >= 0 "
                         "(0: off)")


def _range(brightness: Sequence[float]) -> tuple[float, float]:
    """``brightness`` as (low, high), checked."""
    values = [float(v) for v in brightness]
    if len(values) != 2 or not 0.0 < values[0] <= values[1]:
        raise ValueError(f"train.brightness: {list(brightness)} is not a range of two "
                         "positive factors, low <= high; pass e.g. [0.7, 1.5] ([1, 1]: off)")
    return values[0], values[1]


def pixel_shift(frames: torch.Tensor, max_shift: int, cameras: int,
                rng: np.random.Generator) -> torch.Tensor:
    """``frames`` uint8 [B, V, H, W, 3] with each camera's views translated; same shape.

    View ``v`` belongs to camera ``v % cameras`` (the current views, then the start views
    in the same camera order); each state draws one shift per camera. ``max_shift`` 0:
    the frames come back unchanged, without a copy. Raises ``ValueError`` naming the fix
    for a negative ``max_shift`` or a view count that is not a multiple of ``cameras``.
    """
    if max_shift < 0 or frames.shape[1] % cameras:
        raise ValueError(f"train.pixel_shift: {max_shift} px over {frames.shape[1]} views of "
                         f"{cameras} cameras; pass a shift >= 0 (0: off)")
    if max_shift == 0:
        return frames
    b, v, h, w, _ = frames.shape
    dy, dx = (torch.from_numpy(np.tile(rng.integers(-max_shift, max_shift + 1,
                                                      size=(b, cameras)), v // cameras))
              for _ in range(2))
    rows = (torch.arange(h)[None, None] + dy[..., None]).clamp_(0, h - 1)  # [B, V, H]
    cols = (torch.arange(w)[None, None] + dx[..., None]).clamp_(0, w - 1)  # [B, V, W]
    bi = torch.arange(b)[:, None, None, None]
    vi = torch.arange(v)[None, :, None, None]
    return frames[bi, vi, rows[..., None], cols[..., None, :]]
