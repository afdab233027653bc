"""Action shapes: the batched env and every adapter take [num_envs, action_dim] only (a flat
[action_dim] for a batch of one). A transposed or flattened batch holds the right number of
values but would hand one env's actions to another, so it is refused, not reshaped."""

from __future__ import annotations

from contextlib import closing

import gymnasium
import numpy as np
import pytest
import torch

from sim import make_env
from sim.adapters import GymnasiumEnv, GymnasiumVectorEnv, SB3VecEnv, gym_id

N = 4


@pytest.fixture(scope="module")
def env():
    with closing(make_env("panda_reach", num_envs=N, seed=0, nthread=1)) as batched:
        yield batched


def scrambled_shapes(n: int, a: int) -> list[tuple[int, ...]]:
    """Shapes with n * a values that are not [n, a]: transposed, flat, regrouped."""
    return [(a, n), (n * a,), (2, n * a // 2), (1, n, a), (n, a, 1)]


def test_batched_env_refuses_scrambled_batches(env):
    for shape in scrambled_shapes(N, env.action_dim):
        with pytest.raises(ValueError, match=r"\[4, 8\]"):
            env.step(torch.zeros(shape))
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(env.action_dim))  # a flat action needs a batch of one


def test_batched_env_keeps_each_envs_action(env):
    """Env i gets row i: a different action per env gives different joint targets per env."""
    env.reset(seed=0)
    actions = torch.zeros(N, env.action_dim, dtype=torch.float64)
    actions[:, 0] = torch.linspace(-1.0, 1.0, N)
    env.step(actions)
    np.testing.assert_allclose(env.task.last_action[:, 0].numpy(), actions[:, 0].numpy())


def test_batch_of_one_takes_a_flat_action():
    env = make_env("panda_reach", num_envs=1, seed=0, nthread=1)
    try:
        env.step(torch.zeros(env.action_dim))
        env.step(np.zeros((1, env.action_dim), np.float32))
        with pytest.raises(ValueError):
            env.step(torch.zeros(1, 1, env.action_dim))
    finally:
        env.close()


def test_adapters_refuse_scrambled_batches(env):
    vector = GymnasiumVectorEnv(env)
    vector.reset(seed=0)
    sb3 = SB3VecEnv(env)
    sb3.reset()
    for shape in scrambled_shapes(N, env.action_dim):
        with pytest.raises(ValueError, match="shape"):
            vector.step(np.zeros(shape, np.float32))
        sb3.step_async(np.zeros(shape, np.float32))
        with pytest.raises(ValueError, match="shape"):
            sb3.step_wait()
    vector.step(np.zeros((N, env.action_dim), np.float32))


def test_gymnasium_make_vec_refuses_a_flat_batch():
    envs = gymnasium.make_vec(gym_id("panda_reach"), num_envs=2, seed=0)
    try:
        envs.reset(seed=0)
        with pytest.raises(ValueError, match="shape"):
            envs.step(np.zeros(2 * 8, np.float32))
        with pytest.raises(ValueError, match="shape"):
            envs.step(np.zeros((8, 2), np.float32))
    finally:
        envs.close()


def test_single_env_takes_its_action_and_nothing_else():
    env = GymnasiumEnv("panda_reach", seed=0)
    try:
        env.reset(seed=0)
        env.step(env.action_space.sample())
        with pytest.raises(ValueError, match="shape"):
            env.step(np.zeros(4, np.float32))  # half an action
        with pytest.raises(ValueError, match="shape"):
            env.step(np.zeros((2, 4), np.float32))  # the right size, the wrong shape
    finally:
        env.close()
