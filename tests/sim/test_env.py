"""The batched env contract: auto-reset, seeding, divergence handling, bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sim import BatchedEnv, make_env


@pytest.fixture(scope="module")
def env():
    e = make_env("panda_reach", num_envs=6, seed=3, episode_length_s=0.2)
    yield e
    e.close()


def test_implements_protocol(env):
    assert isinstance(env, BatchedEnv)
    obs = env.reset(seed=0)
    assert obs.shape == (6, env.obs_dim) and obs.dtype == torch.float32
    assert torch.isfinite(obs).all()


def test_auto_reset_keeps_final_observation(env):
    env.reset(seed=0)
    actions = torch.full((6, env.action_dim), 0.3)
    last_obs = None
    for step in range(env.max_episode_steps):
        obs, _reward, terminated, truncated, info = env.step(actions)
        if step < env.max_episode_steps - 1:
            assert not (terminated | truncated).any()
            last_obs = obs
    assert truncated.all() and not terminated.any()
    final = info["final_obs"]
    # The final observation continues the episode (the joints moved on from the
    # previous step), the returned one starts a new episode near the default pose.
    joint_pos = slice(0, 7)
    assert torch.allclose(final[:, joint_pos], last_obs[:, joint_pos], atol=0.15)
    assert (final[:, joint_pos] - obs[:, joint_pos]).abs().amax() > 0.2
    assert obs[:, joint_pos].abs().amax() < 0.1
    assert torch.equal(info["done_ids"], torch.arange(6))
    assert (env.episode_step == 0).all()


def _rollout(seed: int, steps: int = 12) -> np.ndarray:
    e = make_env("panda_reach", num_envs=4, seed=seed)
    gen = torch.Generator().manual_seed(123)
    out = [e.reset(seed=seed)]
    for _ in range(steps):
        obs, *_ = e.step(torch.rand(4, e.action_dim, generator=gen) * 2 - 1)
        out.append(obs)
    e.close()
    return torch.stack(out).numpy()


def test_same_seed_same_trajectory():
    a, b, c = _rollout(7), _rollout(7), _rollout(8)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_reset_with_seed_is_reproducible(env):
    first = env.reset(seed=11)
    env.step(torch.zeros(6, env.action_dim))
    again = env.reset(seed=11)
    torch.testing.assert_close(first, again)


def test_nan_state_resets_only_that_env_and_is_counted(env):
    env.reset(seed=0)
    for _ in range(3):
        env.step(torch.zeros(6, env.action_dim))
    before = env.diverged_total
    env.state.qvel[2, 0] = math.nan
    obs, reward, terminated, truncated, info = env.step(torch.zeros(6, env.action_dim))
    assert info["diverged"].tolist() == [False, False, True, False, False, False]
    assert env.diverged_total == before + 1
    assert truncated[2] and not terminated[2]
    assert truncated.sum() == 1
    assert torch.isfinite(obs).all() and torch.isfinite(reward).all()
    assert env.episode_step[2] == 0 and (env.episode_step[[0, 1, 3, 4, 5]] == 4).all()
    assert torch.isfinite(env.state.qpos).all()


def test_exploding_velocity_counts_as_divergence(env):
    env.reset(seed=0)
    env.state.qvel[4, :] = 1e6
    _, _, _, truncated, info = env.step(torch.zeros(6, env.action_dim))
    assert info["diverged"][4] and truncated[4]


def test_nan_actions_do_not_reach_the_simulator(env):
    env.reset(seed=0)
    actions = torch.zeros(6, env.action_dim)
    actions[1] = math.nan
    obs, *_ = env.step(actions)
    assert torch.isfinite(obs).all()
    assert torch.isfinite(env.state.ctrl).all()


def test_actions_are_clamped_to_joint_limits(env):
    env.reset(seed=0)
    env.step(torch.full((6, env.action_dim), 50.0))
    upper = torch.tensor(env.robot.upper)
    assert (env.state.ctrl[:, :7] <= upper + 1e-9).all()


def test_randomisation_varies_physics_per_env():
    e = make_env("panda_reach", num_envs=8, seed=0)
    friction = e.batch.expanded("geom_friction")[:, 0, 0]
    gains = e.batch.expanded("actuator_gainprm")[:, 0, 0]
    assert np.ptp(friction) > 0.01 and np.ptp(gains) > 1.0
    assert set(e._latency.tolist()) <= {0, 1, 2}
    e.close()
    off = make_env("panda_reach", num_envs=4, seed=0, randomization=__import__(
        "sim").DomainRandomization(enabled=False))
    assert off.batch.expanded("geom_friction") is None
    off.close()


def test_action_latency_delays_each_env_by_its_own_steps():
    e = make_env("panda_reach", num_envs=3, seed=0)
    e.reset()
    e._latency[:] = torch.tensor([0, 1, 2])
    sent = []
    for k in range(4):
        a = torch.full((3, e.action_dim), 0.1 * (k + 1))
        e.step(a)
        sent.append(0.1 * (k + 1))
        # joint1: default 0, scale 1, so its target equals the applied action.
        applied = e.state.ctrl[:, 0].tolist()
        expected = [sent[-1], sent[-2] if k >= 1 else 0.0, sent[-3] if k >= 2 else 0.0]
        assert applied == pytest.approx(expected, abs=1e-6)
        # The policy observes what it sent, not what the delayed robot received.
        assert e.task.last_action[:, 0].tolist() == pytest.approx([sent[-1]] * 3, abs=1e-6)
    e.close()
