"""Photometric augmentation of PRM training frames."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied.reward.prm.augment import photometric


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
