"""Physics sanity of the robot descriptions under their own PD gains."""

from __future__ import annotations

import mujoco
import numpy as np

from robots import load_robot, robot_mjspec
from sim.task import add_floor_and_light


def _compile(name: str):
    robot = load_robot(name)
    spec = robot_mjspec(robot)
    add_floor_and_light(spec)
    model = spec.compile()
    return robot, model, mujoco.MjData(model)


def _qpos_ids(model, names):
    return np.array([model.jnt_qposadr[model.joint(n).id] for n in names])


def test_panda_holds_its_default_pose():
    robot, model, data = _compile("panda")
    ids = _qpos_ids(model, robot.joint_names)
    data.qpos[ids] = robot.default_pose
    data.ctrl[: len(ids)] = robot.default_pose
    data.ctrl[len(ids):] = robot.gripper.upper
    mujoco.mj_forward(model, data)
    tcp_start = data.site("tcp").xpos.copy()
    for _ in range(round(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    assert np.abs(data.qpos[ids] - robot.default_pose).max() < 0.02
    assert np.linalg.norm(data.site("tcp").xpos - tcp_start) < 0.01
    # The tcp in the ready pose hangs in front of the base, above the table.
    assert 0.25 < tcp_start[0] < 0.65 and 0.2 < tcp_start[2] < 0.7


def test_go2_stands_at_its_default_pose_for_two_seconds():
    robot, model, data = _compile("go2")
    ids = _qpos_ids(model, robot.joint_names)
    data.qpos[2] = 0.34
    data.qpos[ids] = robot.default_pose
    data.ctrl[:] = robot.default_pose
    for _ in range(round(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    quat = data.qpos[3:7]
    up = np.zeros(3)
    mujoco.mju_rotVecQuat(up, np.array([0.0, 0.0, 1.0]), quat)
    assert up[2] > 0.95  # roll and pitch under ~18 degrees
    assert 0.2 < data.qpos[2] < 0.36
    assert np.linalg.norm(data.qpos[:2]) < 0.1
    feet = [data.site(f).xpos[2] for f in robot.sites["feet"]]
    assert max(feet) < 0.04
