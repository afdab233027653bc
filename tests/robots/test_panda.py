"""The Panda description: kinematics, holding, grasping, sites and cameras."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robots import load_robot
from robots.build import robot_mjspec
from sim.task import add_floor_and_light

# Hand pointing down with the TCP at (0.5, 0, 0.025) (a 5 cm cube on the floor)
# and at (0.5, 0, 0.2); inverse kinematics solved offline.
Q_GRASP = np.array([0.0, 0.473, 0.0, -2.362, 0.0, 2.835, 0.785])
Q_LIFT = np.array([0.0, 0.046, 0.0, -2.376, 0.0, 2.422, 0.785])


@pytest.fixture(scope="module")
def robot():
    return load_robot("panda")


def _compile(robot, cube_pos=None, cube_mass=0.1):
    spec = robot_mjspec(robot)
    add_floor_and_light(spec)
    if cube_pos is not None:
        body = spec.worldbody.add_body(name="cube", pos=list(cube_pos))
        body.add_freejoint()
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.025] * 3, mass=cube_mass)
    model = spec.compile()
    return model, mujoco.MjData(model)


def _set(robot, model, data, q, fingers):
    data.qpos[:7] = q
    data.qpos[7:9] = fingers
    data.ctrl[:7] = q
    data.ctrl[7:9] = fingers
    mujoco.mj_forward(model, data)


def test_kinematics_follow_franka_dh(robot):
    model, data = _compile(robot)
    _set(robot, model, data, np.zeros(7), 0.0)
    # q = 0: flange at x = a7, z = d1 + d3 + d5 - d_flange; the TCP 0.1034 m further down.
    np.testing.assert_allclose(data.body("hand").xpos, [0.088, 0.0, 0.926], atol=1e-6)
    np.testing.assert_allclose(data.site("tcp").xpos, [0.088, 0.0, 0.8226], atol=1e-6)
    # Franka's ready pose puts the flange at (0.307, 0, 0.590), hand pointing down.
    _set(robot, model, data, [0, -np.pi / 4, 0, -3 * np.pi / 4, 0, np.pi / 2, np.pi / 4], 0.0)
    np.testing.assert_allclose(data.body("hand").xpos, [0.307, 0.0, 0.590], atol=2e-3)
    np.testing.assert_allclose(data.site("tcp").xmat.reshape(3, 3)[:, 2], [0, 0, -1], atol=1e-3)


def test_holds_default_pose_without_contacts(robot):
    model, data = _compile(robot)
    _set(robot, model, data, robot.default_pose, robot.gripper.upper)
    assert data.ncon == 0, "the default pose must be free of (self-)contacts"
    tcp = data.site("tcp").xpos.copy()
    assert 0.25 < tcp[0] < 0.65 and 0.2 < tcp[2] < 0.7
    for _ in range(round(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    assert np.abs(data.qpos[:7] - robot.default_pose).max() < 0.02
    np.testing.assert_allclose(data.qpos[7:9], robot.gripper.upper, atol=1e-3)


def test_tcp_lies_midway_between_the_pads(robot):
    model, data = _compile(robot)
    _set(robot, model, data, robot.default_pose, 0.03)
    left, right, tcp = (data.site(n).xpos for n in ("left_pad", "right_pad", "tcp"))
    np.testing.assert_allclose((left + right) / 2, tcp, atol=1e-9)
    assert np.linalg.norm(left - right) == pytest.approx(0.06)  # each finger moves 0.03


def test_grasps_and_lifts_a_5cm_cube(robot):
    model, data = _compile(robot, cube_pos=(0.5, 0.0, 0.025))
    _set(robot, model, data, Q_GRASP, robot.gripper.upper)
    assert np.linalg.norm(data.site("tcp").xpos - [0.5, 0.0, 0.025]) < 0.005
    data.ctrl[7:9] = robot.gripper.lower  # close
    for _ in range(100):
        mujoco.mj_step(model, data)
    for k in range(200):  # lift 17.5 cm over 0.75 s, then hold
        a = min(1.0, k / 150)
        data.ctrl[:7] = (1 - a) * Q_GRASP + a * Q_LIFT
        mujoco.mj_step(model, data)
    cube = data.body("cube").xpos
    assert cube[2] > 0.17, f"cube dropped: {cube}"
    assert np.linalg.norm(cube - data.site("tcp").xpos) < 0.01


def test_cameras_are_in_the_compiled_model(robot):
    model, _ = _compile(robot)
    names = {model.camera(i).name for i in range(model.ncam)}
    assert {"front", "side", "wrist"} <= names
    assert model.body(model.cam_bodyid[model.camera("wrist").id]).name == "hand"
