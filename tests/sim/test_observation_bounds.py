"""Observation bounds: the spaces the adapters declare are the task's real bounds (joint
limits, unit vectors, normalised terms, actions), infinite only for unbounded terms, and
every observation of a hard rollout lies inside them."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from sim import make_env, task_names
from sim.adapters import GymnasiumEnv, GymnasiumVectorEnv, SB3VecEnv, gym_id


def term_slices(env) -> dict[str, slice]:
    out, start = {}, 0
    for term in env.task.observation_terms():
        dim = term.fn().reshape(env.num_envs, -1).shape[1]
        out[term.name] = slice(start, start + dim)
        start += dim
    return out


@pytest.mark.parametrize("task", task_names())
def test_observations_stay_inside_the_declared_bounds(task):
    """Bang-bang and random actions from random starts: nothing leaves the space."""
    env = make_env(task, num_envs=16, seed=1, nthread=1)
    low, high = (b.numpy() for b in env.obs_bounds)
    try:
        space = GymnasiumVectorEnv(env).single_observation_space
        np.testing.assert_array_equal(space.low, low)
        np.testing.assert_array_equal(space.high, high)
        assert np.isfinite(low).any() and (low < high).all()
        gen = torch.Generator().manual_seed(2)
        obs = env.reset(seed=1)
        for step in range(300):
            actions = 2 * torch.rand(16, env.action_dim, generator=gen) - 1
            if step % 40 < 20:
                actions = actions.sign()
            assert ((obs.numpy() >= low) & (obs.numpy() <= high)).all(), f"step {step}"
            obs, *_, info = env.step(actions)
            if "final_obs" in info:
                final = info["final_obs"][info["done_ids"]].numpy()
                diverged = info["diverged"][info["done_ids"]].numpy()
                inside = ((final >= low) & (final <= high)).all(1)
                assert (inside | diverged).all()
    finally:
        env.close()


def test_bounded_terms_are_the_expected_ones():
    env = make_env("panda_pick_place", num_envs=1, seed=0)
    try:
        low, high = (b.numpy() for b in env.obs_bounds)
        terms = term_slices(env)
        for name in ("joint_pos", "gripper", "last_action", "cube_rot6d"):
            assert np.isfinite(low[terms[name]]).all() and np.isfinite(high[terms[name]]).all()
        for name in ("joint_vel", "ee_pos", "cube_pos", "cube_to_goal", "ee_to_cube"):
            assert np.isinf(low[terms[name]]).all() and np.isinf(high[terms[name]]).all()
        # Actions are clamped to [-1, 1]; 6D rotations are unit columns (noise widens them).
        noise = env.task.cfg.observations["cube_rot6d"].noise
        np.testing.assert_allclose(high[terms["last_action"]], 1.0)
        np.testing.assert_allclose(high[terms["cube_rot6d"]], 1.0 + noise, rtol=1e-6)
        # Joint positions: the joint limits (relative to the default pose) and a margin.
        rel_upper = env.robot.upper - np.asarray(env.robot.default_pose)
        assert (high[terms["joint_pos"]] > rel_upper).all()
    finally:
        env.close()


def test_noiseless_env_declares_tighter_bounds():
    noisy = make_env("go2_walk", num_envs=1, seed=0)
    clean = make_env("go2_walk", num_envs=1, seed=0, obs_noise=False)
    try:
        assert (clean.obs_bounds[1] <= noisy.obs_bounds[1]).all()
        gravity = term_slices(clean)["projected_gravity"]
        np.testing.assert_array_equal(clean.obs_bounds[1][gravity].numpy(), 1.0)
    finally:
        noisy.close()
        clean.close()


@pytest.mark.parametrize("task", task_names())
def test_owners_checkers_accept_the_spaces(task):
    env = gymnasium.make(gym_id(task))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning (obs outside its space, dtype) fails
        # Velocities and positions are unbounded; gymnasium warns about any infinite bound.
        warnings.filterwarnings("ignore", message=".*infinity.*")
        check_env(env.unwrapped, skip_render_check=True)
    env.close()
    venv = SB3VecEnv(make_env(task, num_envs=2, seed=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(GymnasiumEnv(task, seed=0), warn=True, skip_render_check=True)
    obs = venv.reset()
    assert all(venv.observation_space.contains(o) for o in obs)
    venv.close()
