"""evaluate_velocity_tracking: a fixed command, distance walked, tracking error, falls."""

from __future__ import annotations

import pytest
import torch

from embodied.locomotion_eval import evaluate_velocity_tracking
from sim import make_env


@pytest.fixture(scope="module")
def env():
    e = make_env("go2_walk", num_envs=4, seed=0, nthread=1)
    yield e
    e.close()


def zeros(obs: torch.Tensor) -> torch.Tensor:
    """A policy that holds the default pose (stands)."""
    return torch.zeros(obs.shape[0], 12)


def test_standing_policy_under_a_walk_command(env):
    result = evaluate_velocity_tracking(zeros, env, command=(0.5, 0.0, 0.0), seconds=2.0)
    assert result["episodes"] == 4 and result["seconds"] == pytest.approx(2.0)
    assert result["falls"] == 0 and result["fall_rate"] == 0.0
    assert abs(result["forward_distance_m"]) < 0.2  # standing does not walk
    assert result["lin_vel_error_mps"] == pytest.approx(0.5, abs=0.1)  # misses 0.5 m/s
    assert (env.task.commands[:, 0] == 0.5).all()
    assert len(result["per_env"]["fell"]) == 4


def test_rejects_longer_than_an_episode(env):
    with pytest.raises(ValueError, match="longer than"):
        evaluate_velocity_tracking(zeros, env, seconds=60.0)
