"""The soft start's shape: a cosine ramp, which leaves the measured pose at zero velocity
(a linear ramp agrees with it at 0, 1/2 and 1 of the duration, nowhere else inside)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embodied_ros.safety import soft_start_targets

START, DEFAULT, DURATION = np.array([0.5, -1.0]), np.array([0.0, 0.2]), 2.0


def _share(elapsed: float) -> np.ndarray:
    """How far along the way from START to DEFAULT the target is, per joint."""
    target, _ = soft_start_targets(START, DEFAULT, elapsed, DURATION)
    return (target - START) / (DEFAULT - START)


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.4, 0.6, 0.75, 0.9])
def test_the_ramp_is_a_cosine(fraction):
    expected = 0.5 - 0.5 * math.cos(math.pi * fraction)
    np.testing.assert_allclose(_share(fraction * DURATION), [expected, expected], atol=1e-12)


def test_the_ramp_starts_and_ends_at_rest():
    dt = 1e-4 * DURATION
    start_speed = np.abs(_share(dt) - _share(0.0)) / dt
    end_speed = np.abs(_share(DURATION - dt) - _share(DURATION - 2 * dt)) / dt
    mid_speed = np.abs(_share(0.5 * DURATION + dt) - _share(0.5 * DURATION)) / dt
    assert start_speed.max() < 1e-3 and end_speed.max() < 1e-3
    np.testing.assert_allclose(mid_speed, math.pi / (2 * DURATION), rtol=1e-3)
