"""Divergence by a position jump: a joint that moves farther in one control step than
``divergence_jump`` marks that env diverged (truncated, no reward, reset), and only it."""

from __future__ import annotations

import pytest
import torch

from sim import make_env

NUM_ENVS, JUMPING = 4, 2


def _env(**cfg):
    return make_env("panda_reach", num_envs=NUM_ENVS, seed=4, nthread=1, **cfg)


def _step_with_jump(env, jump: float, monkeypatch):
    """One env step during which env JUMPING's first joint moves by ``jump`` rad
    (as when MuJoCo silently resets a simulation whose accelerations blew up)."""
    physics_step = env.physics.step

    def jumping_step(nstep: int) -> None:
        physics_step(nstep)
        env.state.qpos[JUMPING, 0] += jump

    with monkeypatch.context() as patch:
        patch.setattr(env.physics, "step", jumping_step)
        return env.step(torch.zeros(NUM_ENVS, env.action_dim))


def _advance(env, steps: int = 3):
    env.reset(seed=0)
    for _ in range(steps):
        env.step(torch.zeros(NUM_ENVS, env.action_dim))


def test_a_position_jump_is_divergence_of_that_env_only(monkeypatch):
    env, twin = _env(), _env()
    try:
        _advance(env)
        _advance(twin)
        before = env.diverged_total
        obs, reward, terminated, truncated, info = _step_with_jump(env, 1.5, monkeypatch)
        twin_obs, twin_reward, *_ = twin.step(torch.zeros(NUM_ENVS, env.action_dim))

        expected = [i == JUMPING for i in range(NUM_ENVS)]
        assert info["diverged"].tolist() == expected
        assert truncated.tolist() == expected and not terminated.any()
        assert reward[JUMPING] == 0.0 and env.diverged_total == before + 1
        assert info["done_ids"].tolist() == [JUMPING]
        assert env.episode_step.tolist() == [0 if hit else 4 for hit in expected]
        # The others stepped on exactly as without the jump.
        others = [i for i in range(NUM_ENVS) if i != JUMPING]
        assert torch.equal(obs[others], twin_obs[others])
        assert torch.equal(reward[others], twin_reward[others])
        assert torch.equal(env.state.qpos[others], twin.state.qpos[others])
    finally:
        env.close()
        twin.close()


@pytest.mark.parametrize(("jump", "threshold", "diverged"),
                         [(0.5, 1.0, False), (-1.5, 1.0, True), (1.5, 2.0, False)])
def test_the_jump_threshold_is_the_configured_one(jump, threshold, diverged, monkeypatch):
    env = _env(divergence_jump=threshold)
    try:
        _advance(env)
        _, _, _, truncated, info = _step_with_jump(env, jump, monkeypatch)
        assert bool(info["diverged"][JUMPING]) == diverged
        assert bool(truncated[JUMPING]) == diverged
        assert int(info["diverged"].sum()) == int(diverged)
    finally:
        env.close()


def test_nan_written_into_the_state_before_a_step_is_divergence():
    """MuJoCo resets a simulation whose qpos holds a NaN while stepping, so the state after
    the step looks healthy; the env still reports that env diverged (and only it)."""
    env = _env()
    try:
        _advance(env)
        for field in ("qpos", "qvel"):
            before = env.diverged_total
            getattr(env.state, field)[JUMPING, 0] = float("nan")
            obs, reward, terminated, truncated, info = env.step(
                torch.zeros(NUM_ENVS, env.action_dim))
            expected = [i == JUMPING for i in range(NUM_ENVS)]
            assert info["diverged"].tolist() == expected, field
            assert truncated.tolist() == expected and not terminated.any()
            assert reward[JUMPING] == 0.0 and env.diverged_total == before + 1
            assert torch.isfinite(obs).all() and torch.isfinite(env.state.qpos).all()
    finally:
        env.close()
