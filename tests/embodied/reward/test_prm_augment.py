"""Photometric augmentation of PRM training frames."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied.reward.prm.augment import photometric, pixel_shift


def frames(value: int = 100) -> torch.Tensor:
    return torch.full((64, 6, 4, 4, 3), value, dtype=torch.uint8)


def test_off_returns_the_frames_untouched():
    x = frames()
    rng = np.random.default_rng(0)
    assert photometric(x, [1.0, 1.0], 0.0, rng) is x
    assert rng.random() == np.random.default_rng(0).random()  # no draws consumed


def test_one_light_per_state_for_all_its_views_within_the_range():
    out = photometric(frames(), [0.5, 2.0], 0.0, np.random.default_rng(1))
    assert out.dtype == torch.uint8 and out.shape == (64, 6, 4, 4, 3)
    per_state = out.flatten(1).float()
    assert (per_state == per_state[:, :1]).all()  # every view and channel of a state alike
    factor = per_state[:, 0] / 100
    assert factor.min() >= 0.5 - 0.01 and factor.max() <= 2.0 + 0.01
    assert factor.min() < 0.8 and factor.max() > 1.5  # the range is used, both ways
    assert (factor < 1).float().mean().item() == pytest.approx(0.5, abs=0.2)  # log-uniform


def test_colour_gains_tint_channels_and_bright_pixels_saturate():
    out = photometric(frames(200), [1.5, 1.5], 0.1, np.random.default_rng(2))
    assert out.max().item() == 255  # over-exposed, not wrapped around
    tinted = photometric(frames(), [1.0, 1.0], 0.1, np.random.default_rng(3))
    channels = tinted[:, 0, 0, 0].float()
    assert (channels.std(dim=1) > 1).float().mean() > 0.8  # channels differ within a state


@pytest.mark.parametrize("bad", [[0.0, 1.0], [1.5, 1.0], [1.0], [1.0, 2.0, 3.0]])
def test_a_bad_range_names_the_fix(bad):
    with pytest.raises(ValueError, match=r"train\.brightness.*e\.g\. \[0\.7, 1\.5\]"):
        photometric(frames(), bad, 0.0, np.random.default_rng(0))


def ramp(states: int = 32, views: int = 6, size: int = 8) -> torch.Tensor:
    """Every pixel holds its own column (channel 0) and row (channel 1)."""
    x = torch.zeros(states, views, size, size, 3, dtype=torch.uint8)
    x[..., 0] = torch.arange(size)[None, None, None, :]
    x[..., 1] = torch.arange(size)[None, None, :, None]
    return x


def test_pixel_shift_moves_each_camera_alike_in_its_current_and_start_views():
    x = ramp()
    assert pixel_shift(x, 0, 3, np.random.default_rng(0)) is x
    out = pixel_shift(x, 2, 3, np.random.default_rng(4))
    assert out.shape == x.shape and out.dtype == torch.uint8
    dx = out[:, :, 4, 4, 0].long() - 4  # the centre pixel's source column - its own column
    dy = out[:, :, 4, 4, 1].long() - 4
    assert dx.abs().max() == 2 and dy.abs().max() == 2  # within the range, which is used
    assert torch.equal(dx[:, :3], dx[:, 3:]) and torch.equal(dy[:, :3], dy[:, 3:])
    assert not torch.equal(dx[:, 0], dx[:, 1])  # cameras move independently
    # a translation, edges repeated: rows stay rows, columns stay columns
    assert (out[..., 0] == out[:, :, :1, :, 0]).all()
    assert (out[..., 1] == out[:, :, :, :1, 1]).all()
    assert out[..., 0].min() == 0 and out[..., 0].max() == 7


def test_pixel_shift_rejects_views_not_matching_the_cameras():
    with pytest.raises(ValueError, match=r"train\.pixel_shift.*0: off"):
        pixel_shift(ramp(views=5), 2, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="pass a shift >= 0"):
        pixel_shift(ramp(), -1, 3, np.random.default_rng(0))
