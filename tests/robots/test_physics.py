"""Physics sanity of the Panda under its own PD gains (the Go2's is in test_go2.py)."""

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
