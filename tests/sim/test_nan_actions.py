"""NaN actions are replaced by 0 before they reach the simulation, and counted: per env
in the step info (and in every adapter's infos), in total on the env."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sim import make_env
from sim.adapters import GymnasiumEnv, GymnasiumVectorEnv, SB3VecEnv

N = 3


@pytest.fixture
def env():
    env = make_env("panda_reach", num_envs=N, seed=0, nthread=1)
    yield env
    env.close()


def nan_actions(action_dim: int) -> np.ndarray:
    """Env 0 clean, env 1 with two NaN entries, env 2 all NaN."""
    a = np.zeros((N, action_dim), np.float32)
    a[1, [0, 3]] = np.nan
    a[2] = np.nan
    return a


def test_batched_env_counts_nan_actions_per_env(env):
    env.reset(seed=0)
    *_, info = env.step(torch.zeros(N, env.action_dim))
    assert info["nan_actions"].tolist() == [0, 0, 0] and env.nan_action_total == 0
    obs, *_, info = env.step(torch.as_tensor(nan_actions(env.action_dim)))
    assert info["nan_actions"].tolist() == [0, 2, env.action_dim]
    assert env.nan_action_total == 2
    assert torch.isfinite(obs).all()
    # The NaNs reached the simulation as 0 (and the observation's last action says so).
    assert env.task.last_action[2].eq(0).all() and env.task.last_action[1, [0, 3]].eq(0).all()


def test_adapters_report_nan_actions(env):
    vector = GymnasiumVectorEnv(env)
    vector.reset(seed=0)
    *_, infos = vector.step(nan_actions(env.action_dim))
    assert infos["nan_actions"].tolist() == [0, 2, env.action_dim]
    assert infos["_nan_actions"].all()

    sb3 = SB3VecEnv(env)
    sb3.reset()
    sb3.step_async(nan_actions(env.action_dim))
    *_, infos = sb3.step_wait()
    assert [i.get("nan_actions", 0) for i in infos] == [0, 2, env.action_dim]


def test_single_env_reports_nan_actions():
    env = GymnasiumEnv("panda_reach", seed=0)
    try:
        env.reset(seed=0)
        action = np.zeros(8, np.float32)
        action[5] = math.nan
        obs, *_, info = env.step(action)
        assert info["nan_actions"] == 1 and np.isfinite(obs).all()
        assert env.step(np.zeros(8, np.float32))[-1]["nan_actions"] == 0
    finally:
        env.close()
