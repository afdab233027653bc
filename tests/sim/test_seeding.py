"""Seeding as gymnasium's own envs do it: an env made without a seed draws one from
entropy (so unseeded envs differ), an explicit seed reproduces every draw."""

from __future__ import annotations

import gymnasium
import numpy as np
import torch

from sim import make_env
from sim.adapters import gym_id


def rollout(env, steps: int = 5) -> torch.Tensor:
    obs = [env.observe()]
    for _ in range(steps):
        obs.append(env.step(torch.zeros(env.num_envs, env.action_dim))[0])
    return torch.stack(obs)


def test_unseeded_sync_vector_envs_differ():
    envs = gymnasium.make_vec(gym_id("panda_reach"), num_envs=3, vectorization_mode="sync")
    try:
        obs, _ = envs.reset()
        assert len({row.tobytes() for row in obs}) == 3, "sub-envs start identical"
        for _ in range(3):
            obs, *_ = envs.step(np.zeros((3, 8), np.float32))
        assert len({row.tobytes() for row in obs}) == 3, "sub-envs stay identical"
    finally:
        envs.close()


def test_seeded_sync_vector_envs_reproduce():
    def first_obs() -> np.ndarray:
        envs = gymnasium.make_vec(gym_id("panda_reach"), num_envs=2, vectorization_mode="sync")
        try:
            return envs.reset(seed=7)[0]
        finally:
            envs.close()

    np.testing.assert_array_equal(first_obs(), first_obs())


def test_unseeded_batched_envs_differ_and_say_their_seed():
    a = make_env("panda_reach", num_envs=2, nthread=1)
    b = make_env("panda_reach", num_envs=2, nthread=1)
    try:
        assert a.seed != b.seed
        assert not torch.equal(rollout(a), rollout(b))
        # The drawn seed reproduces the run.
        again = make_env("panda_reach", num_envs=2, nthread=1, seed=a.seed)
        try:
            a.reset(seed=a.seed)
            again.reset(seed=a.seed)
            assert torch.equal(rollout(a), rollout(again))
        finally:
            again.close()
    finally:
        a.close()
        b.close()


def test_explicit_seed_reproduces():
    a = make_env("panda_reach", num_envs=2, nthread=1, seed=3)
    b = make_env("panda_reach", num_envs=2, nthread=1, seed=3)
    try:
        assert a.seed == b.seed == 3
        assert torch.equal(rollout(a), rollout(b))
        a.reset(seed=11)
        b.reset(seed=11)
        assert a.seed == 11 and torch.equal(rollout(a), rollout(b))
    finally:
        a.close()
        b.close()


def test_reset_without_seed_continues_the_generator():
    """``reset()`` draws new initial states (it does not rewind to the construction seed)."""
    env = make_env("panda_reach", num_envs=2, nthread=1, seed=5)
    try:
        first = env.observe(noise=False)
        env.reset()
        assert not torch.equal(first, env.observe(noise=False))
    finally:
        env.close()
