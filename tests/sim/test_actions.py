"""Action spaces: absolute joint targets and joint deltas, in the env and for the experts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch

from robots import load_robot
from robots.actions import JointDeltaAction, JointPositionAction, make_action_map
from sim import make_env
from sim.experts import make_expert


@contextlib.contextmanager
def delta_push_env(num_envs: int) -> Iterator:
    """A panda_push env with joint-delta actions, closed afterwards."""
    env = make_env("panda_push", num_envs=num_envs, seed=0, action="joint_delta")
    try:
        yield env
    finally:
        env.close()


def test_joint_delta_integrates_actions_within_velocity_and_position_limits():
    robot = load_robot("panda")
    amap = JointDeltaAction(robot, num_envs=3, speed=0.5)
    start = torch.tensor(robot.default_pose).expand(3, -1).clone()
    start[1, 0] = robot.upper[0] - 0.01
    ctrl = amap.reset(torch.arange(3), start)
    torch.testing.assert_close(ctrl[:, :7], start)
    velocity = torch.tensor([j.velocity for j in robot.joints], dtype=torch.float64)
    torch.testing.assert_close(amap.step, 0.5 * velocity * robot.control_dt)
    actions = torch.zeros(3, robot.action_dim)
    actions[:, 0] = 1.0
    actions[2] = 0.0
    ctrl = amap(actions)
    assert ctrl[0, 0] == pytest.approx(start[0, 0] + amap.step[0])
    assert ctrl[1, 0] == pytest.approx(robot.upper[0])  # clamped to the joint limit
    torch.testing.assert_close(ctrl[2, :7], start[2])  # action 0 holds the target
    # inverse() is the action that commands a target (at most one step away).
    want = amap.target + 0.5 * amap.step
    torch.testing.assert_close(amap.inverse(want)[:, :7], torch.full((3, 7), 0.5,
                                                                      dtype=torch.float64))


def test_unknown_action_type_and_bad_speed_are_refused():
    robot = load_robot("panda")
    with pytest.raises(ValueError, match="joint_position"):
        make_action_map("torque", robot, 2)
    with pytest.raises(ValueError, match="speed"):
        JointDeltaAction(robot, 2, speed=3.0)
    assert isinstance(make_action_map("joint_position", robot, 2), JointPositionAction)


def test_env_resets_delta_targets_to_the_reset_pose():
    with delta_push_env(4) as env:
        env.reset(seed=1)
        torch.testing.assert_close(env.state.ctrl[:, :7], env.task.joint_pos)
        for _ in range(5):
            env.step(torch.ones(4, env.action_dim))
        moved = env.action_map.target.clone()
        assert (moved - env.task.joint_pos).abs().max() > 0.01
        env.reset(seed=2)
        torch.testing.assert_close(env.action_map.target, env.task.joint_pos)


def test_expert_pushes_through_joint_delta_actions():
    with delta_push_env(8) as env:
        expert = make_expert(env, noise=0.0, seed=0)
        env.reset(seed=0)
        success = torch.zeros(8, dtype=torch.bool)
        for _ in range(round(env.task.episode_length_s / env.control_dt)):
            _, _, terminated, truncated, info = env.step(expert())
            if "final_success" in info:
                success |= (terminated | truncated) & info["final_success"]
        assert success.float().mean() >= 0.75, success


def test_joint_delta_env_steps_under_inference_mode_then_resets_outside_it():
    with delta_push_env(2) as env:
        expert = make_expert(env, noise=0.3, seed=0)
        env.reset(seed=0)
        with torch.inference_mode():
            for _ in range(3):
                env.step(expert())
        env.reset(seed=1)
        expert.reset_envs(torch.arange(2))
        env.step(expert())


def test_ee_delta_moves_the_tcp_by_the_commanded_step_and_holds_the_hand_down():
    from robots.actions import EEDeltaAction
    from robots.kinematics import SiteKinematics

    robot = load_robot("panda")
    amap = EEDeltaAction(robot, num_envs=3, control_dt=0.05, max_speed=0.4)
    assert amap.action_dim == 4 and amap.max_step == pytest.approx(0.02)
    start = torch.tensor(robot.default_pose, dtype=torch.float64).expand(3, -1).clone()
    amap.reset(torch.arange(3), start)
    kin = SiteKinematics.from_robot(robot, "ee")
    p0, r0 = kin.pose(amap.target)
    actions = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, -0.5, -1.0, -1.0],
                            [0.0, 0.0, 0.0, 1.0]])
    for _ in range(5):
        ctrl = amap(actions)
    p1, r1 = kin.pose(amap.target)
    torch.testing.assert_close(ctrl[:, :7], amap.target)
    moved = p1 - p0
    expected = 5 * 0.02 * actions[:, :3].to(torch.float64)
    torch.testing.assert_close(moved, expected, atol=5e-3, rtol=0.0)  # 10 cm within 5 mm
    assert (r1[:, :, 2] - r0[:, :, 2]).abs().max() < 0.02  # the hand still points down
    # a joint step never exceeds the velocity clamp; inverse() commands a tcp step
    step = amap.joint_step(amap.target, torch.full((3, 3), 0.5, dtype=torch.float64),
                           amap.hand_yaw)
    assert (step.abs() <= amap.step + 1e-12).all()
    want = amap.target.clone()
    want[:, 0] += 0.01
    a = amap.inverse(want)
    torch.testing.assert_close(kin.position(want) - kin.position(amap.target),
                               a[:, :3] * amap.max_step, atol=1e-9, rtol=0.0)


def test_env_runs_ee_delta_at_the_task_control_rate():
    env = make_env("panda_push", num_envs=2, seed=0, action="ee_delta", decimation=10,
                   episode_length_s=4.0)
    try:
        assert env.control_dt == pytest.approx(0.05) and env.max_episode_steps == 80
        assert env.action_dim == 4 and env.action_map.control_dt == pytest.approx(0.05)
        env.reset(seed=0)
        z0 = env.task.ee_pos[:, 2].clone()
        for _ in range(10):
            env.step(torch.tensor([[0.0, 0.0, -1.0, 1.0]] * 2))
        # 10 steps of 2.5 cm down, less up to 2 steps of action latency and the PD lag
        assert ((z0 - env.task.ee_pos[:, 2]) > 0.12).all()
    finally:
        env.close()


def test_closed_ee_delta_holds_the_fingers_closed_without_a_gripper_action():
    from embodied.policy_io import policy_mismatches
    from robots.actions import action_map_from_metadata

    env = make_env("panda_push", num_envs=2, seed=0, action="ee_delta_closed", decimation=10,
                   episode_length_s=4.0)
    try:
        assert env.action_dim == 3 and env.action_map.gripper_dim == 0
        env.reset(seed=0)
        assert (env.task.last_action == 0).all()  # no gripper value in a [dx, dy, dz] action
        assert (env.task.gripper_opening > 0.9).all()  # reset open, as in every variant
        for _ in range(10):  # a full "up" command: no dimension opens the fingers
            env.step(torch.tensor([[0.0, 0.0, 1.0]] * 2))
        assert (env.task.gripper_opening < 0.05).all()
        meta = {"robot": "panda", "joint_names": env.robot.joint_names,
                "ros_joint_names": env.robot.ros_joint_names, "action_dim": 3,
                "action": {**env.action_map.metadata(), "gripper": {}},
                "control_dt": env.control_dt}
        assert policy_mismatches(meta, env.robot) == []
        robot_side = action_map_from_metadata(meta["action"], env.robot, env.control_dt)
        robot_side.reset(torch.zeros(1, dtype=torch.long), env.task.joint_pos[:1])
        ctrl = robot_side(torch.tensor([[0.0, 0.0, 1.0]]))
        g = env.robot.gripper
        torch.testing.assert_close(ctrl[0, 7:], torch.full((2,), g.lower, dtype=ctrl.dtype))
    finally:
        env.close()
    yaw = make_action_map("ee_delta_yaw_closed", load_robot("panda"), 1)
    assert yaw.action_dim == 4 and yaw.yaw and yaw.closed
