"""Training with ``deploy_limits`` sends the arm the targets the policy node would send."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
import yaml
from omegaconf import OmegaConf

from embodied.envs import env_kwargs
from embodied_ros.description import config_file
from embodied_ros.params import PARAMETERS
from embodied_ros.safety import CommandLimiter, TargetLimits, clamp_targets
from robots import load_robot
from robots.command_filter import DeployFilter, DeploySettings
from sim import DomainRandomization, make_env


def test_env_targets_equal_the_policy_nodes_on_the_same_states():
    """Each env step's arm targets are the node's filters (clamp, then limiter) applied
    to the action map's targets at the state the step started from, env by env."""
    num_envs, steps = 6, 30  # within one 80-step episode: no reset in between
    env = make_env("panda_push", num_envs=num_envs, seed=4, action="ee_delta", decimation=10,
                   obs_noise=False, randomization=DomainRandomization(enabled=False),
                   deploy_limits=True)
    robot = load_robot("panda")
    s = DeploySettings()
    limits = TargetLimits.from_robot(robot, s.joint_limit_margin, s.max_target_step,
                                     s.torque_limit_scale)
    node = [CommandLimiter.from_robot(robot, limits, env.control_dt) for _ in range(num_envs)]
    for i, limiter in enumerate(node):  # the node's limiter starts from the measured pose
        limiter.reset(env.task.joint_pos[i].numpy())
    gen = torch.Generator().manual_seed(0)
    changed = 0
    for _ in range(steps):
        q, qd = env.task.joint_pos.numpy().copy(), env.task.joint_vel.numpy().copy()
        env.step(2 * torch.rand(num_envs, env.action_dim, generator=gen) - 1)
        wanted = env.action_map.target.numpy()  # the policy's targets, before any filter
        sent = env.state.ctrl[:, :7].numpy()
        for i, limiter in enumerate(node):
            expected = limiter(clamp_targets(wanted[i], limiter.last, q[i], qd[i], limits))
            np.testing.assert_array_equal(sent[i], expected)
        changed += int((np.abs(sent - wanted) > 1e-6).any(axis=1).sum())
    assert changed > steps  # the filters did bind: the comparison tested them


def test_batched_filter_equals_the_nodes_on_random_states():
    """Far targets at random states (every bound binds somewhere): row by row equal."""
    robot, s = load_robot("panda"), DeploySettings()
    limits = TargetLimits.from_robot(robot, s.joint_limit_margin, s.max_target_step,
                                     s.torque_limit_scale)
    rng = np.random.default_rng(1)
    num, dt = 256, 0.05
    start = rng.uniform(robot.lower, robot.upper, (num, 7))
    batched = DeployFilter(robot, num, dt)
    batched.reset(torch.arange(num), torch.as_tensor(start))
    node = [CommandLimiter.from_robot(robot, limits, dt) for _ in range(num)]
    for limiter, q0 in zip(node, start, strict=True):
        limiter.reset(q0)
    for _ in range(10):
        q = rng.uniform(robot.lower, robot.upper, (num, 7))
        qd = rng.uniform(-3 * robot.velocity, 3 * robot.velocity, (num, 7))
        target = q + rng.uniform(-1.5, 1.5, (num, 7))
        sent = batched(torch.as_tensor(target), torch.as_tensor(q), torch.as_tensor(qd))
        for i, limiter in enumerate(node):
            expected = limiter(clamp_targets(target[i], limiter.last, q[i], qd[i], limits))
            np.testing.assert_array_equal(sent[i].numpy(), expected)


def test_env_filters_only_with_deploy_limits():
    """Without the option the arm gets the action map's targets unchanged."""
    env = make_env("panda_push", num_envs=2, seed=4, action="ee_delta", decimation=10,
                   obs_noise=False, randomization=DomainRandomization(enabled=False))
    for _ in range(5):
        env.step(torch.ones(2, env.action_dim))
    np.testing.assert_array_equal(env.state.ctrl[:, :7].numpy(), env.action_map.target.numpy())


def test_training_settings_are_the_panda_nodes_parameters():
    """The filter the env applies uses the parameters the Panda's policy node ships."""
    node = yaml.safe_load(config_file("panda").read_text())["/**/embodied_policy"][
        "ros__parameters"]
    for name, value in dataclasses.asdict(DeploySettings()).items():
        assert node[name] == value, name
        assert PARAMETERS[name] == value, name


def test_task_config_turns_the_option_on():
    cfg = OmegaConf.create({"obs_noise": True, "randomization": {"enabled": True},
                            "episode_length_s": None})
    assert "deploy_limits" not in env_kwargs(cfg)
    cfg.deploy_limits = True
    assert env_kwargs(cfg)["deploy_limits"] is True
