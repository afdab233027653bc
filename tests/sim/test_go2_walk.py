"""go2_walk: observation layout, standing, fall detection, commands, contacts, progress."""

from __future__ import annotations

import pytest
import torch

from sim import make_env
from sim.tasks.go2_walk import (
    COMMAND_HIGH,
    COMMAND_LOW,
    OBS_LAYOUT,
    RESAMPLE_S,
    Go2WalkConfig,
    build_observation,
)

N = 8


@pytest.fixture(scope="module")
def env():
    e = make_env("go2_walk", num_envs=N, seed=0, nthread=2)
    yield e
    e.close()


def test_observation_layout_and_size(env):
    obs = env.reset(seed=1)
    assert env.obs_dim == sum(size for _, size in OBS_LAYOUT) == 50
    assert obs.shape == (N, 50) and torch.isfinite(obs).all()
    assert env.action_dim == 12 and env.camera_names == ("head", "chase")
    # The pure function the ROS node reuses builds the env's (noiseless) observation.
    t = env.task
    ref = build_observation(t.lin_vel_b, t.ang_vel_b, t.base_quat, t.commands, t.phase,
                            t.joint_pos, t.joint_vel, t.default_q, t.last_action)
    torch.testing.assert_close(env.observe(noise=False), ref.float())
    # Upright at reset: gravity points down the base z axis.
    assert (obs[:, 8] < -0.95).all()
    # The gait clock is a unit vector.
    torch.testing.assert_close(obs[:, 12:14].norm(dim=1), torch.ones(N))


def test_zero_actions_stand_for_two_seconds(env):
    env.reset(seed=2)
    t, zeros = env.task, torch.zeros(N, 12)
    # Half the envs are told to stand (tracked by standing), half to walk at 1 m/s.
    t.commands[:] = 0.0
    t.commands[N // 2:, 0] = 1.0
    t.command_timer[:] = 100.0
    for _ in range(round(2.0 / env.state.control_dt)):
        obs, reward, terminated, truncated, info = env.step(zeros)
        assert not (terminated | truncated).any()
        assert torch.isfinite(obs).all() and torch.isfinite(reward).all()
        p = info["progress"]
        assert ((p >= 0) & (p <= 1)).all()
    assert (t.base_pos[:, 2] > 0.22).all()
    assert (t.gravity_b[:, 2] < -0.95).all()
    # Every foot's touch sensor carries load; together they hold the robot's weight.
    assert (t.foot_forces > 5.0).all()
    weight = env.model.body_subtreemass[env.model.body("base").id] * 9.81
    assert (t.foot_forces.sum(1) > 0.5 * weight).all()
    assert (env.state.sensordata[:, t.trunk_touch] == 0).all()
    assert set(info["reward_terms"]) == set(Go2WalkConfig().rewards)
    # Success / progress measure the recent velocity tracking.
    stand, walk = slice(0, N // 2), slice(N // 2, N)
    assert info["success"][stand].all() and not info["success"][walk].any()
    assert (info["progress"][stand] > 0.6).all() and (info["progress"][walk] < 0.1).all()


def test_upside_down_is_terminated(env):
    env.reset(seed=3)
    zeros = torch.zeros(N, 12)
    env.step(zeros)
    p0 = env.task.root_qpos.start
    env.state.qpos[0, p0 + 3:p0 + 7] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    _, reward, terminated, truncated, info = env.step(zeros)
    assert terminated[0] and not terminated[1:].any() and not truncated.any()
    assert 0 in info["done_ids"].tolist() and not info["success"][0]
    assert info["progress"][0] == 0.0
    assert reward[0] < reward[1:].min()  # the termination penalty
    assert env.task.gravity_b[0, 2] < -0.95  # auto-reset upright


def test_commands_resampled_within_ranges(env):
    env.reset(seed=4)
    t = env.task
    low = torch.tensor(COMMAND_LOW, dtype=torch.float64)
    high = torch.tensor(COMMAND_HIGH, dtype=torch.float64)
    assert ((t.commands >= low) & (t.commands <= high)).all()
    before = t.commands.clone()
    t.command_timer[:] = 0.0
    env.step(torch.zeros(N, 12))
    assert not torch.equal(before, t.commands)
    assert ((t.commands >= low) & (t.commands <= high)).all()
    assert ((t.command_timer >= RESAMPLE_S[0] - 0.03) & (t.command_timer <= RESAMPLE_S[1])).all()
    # Many draws: they cover the ranges and a share of them are standing commands.
    gen = torch.Generator().manual_seed(0)
    draws = []
    for _ in range(100):
        t._resample_commands(torch.arange(N), gen)
        draws.append(t.commands.clone())
    draws = torch.cat(draws)
    assert ((draws >= low) & (draws <= high)).all()
    standing = (draws == 0).all(1).float().mean()
    assert 0.03 < standing < 0.25
    assert (draws.amin(0) < 0.8 * low).all() and (draws.amax(0) > 0.8 * high).all()


def test_trunk_and_thigh_touch_sensors(env):
    env.reset(seed=5)
    t, s = env.task, env.state
    p0 = t.root_qpos.start
    s.qpos[0, p0 + 2] = 0.055  # upside down, resting on the trunk
    s.qpos[0, p0 + 3:p0 + 7] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    s.qpos[1, p0 + 2] = 0.08  # on its right side: the right thighs touch the floor
    s.qpos[1, p0 + 3:p0 + 7] = torch.tensor([0.7071068, 0.7071068, 0.0, 0.0],
                                            dtype=torch.float64)
    env.batch.forward()
    assert s.sensordata[0, t.trunk_touch] > 0 and s.sensordata[1, t.trunk_touch] == 0
    thighs = s.sensordata[1, t.thigh_touch]
    assert thighs[1] > 0 and thighs[3] > 0 and thighs[0] == 0 and thighs[2] == 0
    env.reset(seed=5)


def test_set_command_holds_until_reset(env):
    env.reset(seed=5)
    t = env.task
    t.set_command(torch.arange(N // 2), (0.5, 0.0, 0.0))
    assert torch.equal(t.commands[: N // 2],
                       torch.tensor([[0.5, 0.0, 0.0]], dtype=torch.float64).expand(N // 2, 3))
    t.command_timer[N // 2:] = 0.0  # the others resample on the next step
    env.step(torch.zeros(N, 12))
    assert (t.commands[: N // 2, 0] == 0.5).all()
    assert torch.isinf(t.command_timer[: N // 2]).all()
    # The command is observed (velocity_command, no noise).
    obs = env.observe()
    torch.testing.assert_close(obs[: N // 2, 9:12], t.commands[: N // 2].float())


def test_rollouts_under_inference_mode_then_resets_outside_it(env):
    """Evaluations step under torch.inference_mode; training resets outside it afterwards."""
    env.reset(seed=4)
    with torch.inference_mode():
        for _ in range(3):
            env.step(torch.zeros(N, 12))
    obs = env.reset(seed=5)  # writes per-env buffers in place outside inference mode
    obs, *_ = env.step(torch.zeros(N, 12))
    assert torch.isfinite(obs).all()
