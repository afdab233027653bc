"""End-effector delta actions at a task's own control rate, from the simulator to the
robot side: the exported metadata rebuilds the same action map (torch kinematics, no
MuJoCo), the policy checks accept it, and a deployment runs at the policy's period."""

from __future__ import annotations

import pytest
import torch

from embodied.policy_io import PolicyMismatchError, policy_control_dt, policy_mismatches
from robots.actions import EEDeltaAction, action_map_from_metadata
from sim import make_env


@pytest.fixture(scope="module")
def push_env():
    env = make_env("panda_push", num_envs=3, seed=0, action="ee_delta", decimation=10,
                   episode_length_s=4.0)
    yield env
    env.close()


def test_exported_ee_delta_metadata_rebuilds_the_simulators_action_map(push_env):
    env = push_env
    env.reset(seed=3)
    q0 = env.task.joint_pos.clone()
    sim_side = env.action_map
    robot_side = action_map_from_metadata(sim_side.metadata(), env.robot, env.control_dt,
                                          num_envs=3)
    assert isinstance(robot_side, EEDeltaAction) and robot_side.action_dim == env.action_dim
    assert robot_side.max_step == pytest.approx(sim_side.max_step)
    robot_side.reset(torch.arange(3), q0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        actions = torch.rand(3, env.action_dim, generator=gen, dtype=torch.float64) * 2 - 1
        torch.testing.assert_close(robot_side(actions), sim_side(actions), rtol=0, atol=1e-12)


def test_policy_checks_accept_ee_delta_at_20_hz_and_the_node_runs_at_it(push_env):
    env = push_env
    meta = {"robot": "panda", "joint_names": env.robot.joint_names,
            "ros_joint_names": env.robot.ros_joint_names, "action_dim": env.action_dim,
            "action": {**env.action_map.metadata(), "gripper": {}},
            "control_dt": env.control_dt}
    assert policy_mismatches(meta, env.robot) == []
    assert policy_control_dt(meta) == pytest.approx(0.05)
    assert policy_control_dt(meta, 0.05) == pytest.approx(0.05)
    with pytest.raises(PolicyMismatchError, match="control_dt"):
        policy_control_dt(meta, 0.02)
    wrong = {**meta, "action_dim": 8, "control_dt": 0.0123}
    problems = " ".join(policy_mismatches(wrong, env.robot))
    assert "action_dim: policy 8" in problems and "control_dt" in problems
