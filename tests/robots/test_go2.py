"""Unitree Go2 description: it compiles with its actuators and cameras and stands still."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robots.build import robot_mjspec
from robots.spec import RobotSpec, load_robot

SETTLE_S = 0.5  # let the legs take the load before measuring the settled pose
HOLD_S = 2.0


def _standing_model(robot: RobotSpec) -> mujoco.MjModel:
    spec = robot_mjspec(robot)
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05],
                            contype=1, conaffinity=1, rgba=[0.3, 0.35, 0.4, 1])
    spec.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1])
    return spec.compile()


def _reset_standing(robot: RobotSpec, model: mujoco.MjModel, data: mujoco.MjData) -> None:
    """Default joint pose, base lowered until the lowest foot sphere touches the floor."""
    mujoco.mj_resetData(model, data)
    data.qpos[7:] = robot.default_pose
    data.ctrl[:] = robot.default_pose
    mujoco.mj_kinematics(model, data)
    feet = [model.site(name).id for name in robot.sites["feet"]]
    foot_radius = model.geom("FL_foot").size[0]
    data.qpos[2] -= data.site_xpos[feet, 2].min() - foot_radius
    mujoco.mj_forward(model, data)


def _projected_gravity_z(model: mujoco.MjModel, data: mujoco.MjData, body: str) -> float:
    """z component of the unit gravity vector in the body frame (-1 when upright)."""
    return float(-data.xmat[model.body(body).id][8])


def _lowest_point(model: mujoco.MjModel, data: mujoco.MjData, geom: int) -> float:
    """World z of the lowest point of a sphere, capsule, cylinder or box geom."""
    size, z_axis = model.geom_size[geom], data.geom_xmat[geom].reshape(3, 3)[2]
    centre = data.geom_xpos[geom][2]
    kind = model.geom_type[geom]
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        return centre - size[0]
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return centre - abs(z_axis[2]) * size[1] - size[0]
    if kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
        return centre - abs(z_axis[2]) * size[1] - size[0] * np.hypot(z_axis[0], z_axis[1])
    if kind == mujoco.mjtGeom.mjGEOM_BOX:
        return centre - float(np.abs(z_axis) @ size)
    raise AssertionError(f"unexpected geom type {kind} in the Go2 description")


@pytest.fixture(scope="module")
def robot() -> RobotSpec:
    return load_robot("go2")


@pytest.fixture(scope="module")
def standing(robot):
    """Model and data after settling and then holding the default pose for HOLD_S."""
    model = _standing_model(robot)
    data = mujoco.MjData(model)
    _reset_standing(robot, model, data)
    start_xy = data.qpos[:2].copy()
    for _ in range(round(SETTLE_S / model.opt.timestep)):
        mujoco.mj_step(model, data)
    settled_z = float(data.qpos[2])
    trace = []  # (height, horizontal distance from the start, projected gravity z)
    for _ in range(round(HOLD_S / model.opt.timestep)):
        mujoco.mj_step(model, data)
        trace.append((data.qpos[2], np.linalg.norm(data.qpos[:2] - start_xy),
                      _projected_gravity_z(model, data, robot.base_body)))
    return model, data, settled_z, np.array(trace)


def test_spec_matches_mjcf(robot):
    assert robot.floating_base and robot.base_body == "base"
    assert robot.decimation == 4 and robot.timestep == pytest.approx(0.005)
    assert robot.joint_names == [f"{leg}_{part}_joint" for leg in ("FL", "FR", "RL", "RR")
                                 for part in ("hip", "thigh", "calf")]
    bare = mujoco.MjModel.from_xml_path(str(robot.mjcf_path))
    assert bare.nu == 0 and bare.ncam == 0, "actuators and cameras come from robot.yaml"
    assert bare.body_subtreemass[bare.body("base").id] == pytest.approx(15.0, abs=0.5)
    for joint in robot.joints:  # effort limits agree between MJCF and robot.yaml
        jid = bare.joint(joint.name).id
        assert bare.jnt_actfrcrange[jid] == pytest.approx([-joint.effort, joint.effort])
        assert bare.joint(joint.name).range == pytest.approx([joint.lower, joint.upper])


def test_compiles_with_actuators_and_cameras(robot):
    model = _standing_model(robot)
    assert model.nu == 12
    assert [model.actuator(i).name for i in range(model.nu)] == robot.joint_names
    assert robot.camera_names == ["head", "chase"]
    for name in robot.camera_names:
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name) >= 0
        assert list(model.cam_resolution[model.camera(name).id]) == [96, 96]


def test_holds_default_pose_upright(standing):
    _, _, settled_z, trace = standing
    height, drift, gravity_z = trace.T
    assert gravity_z.max() < -0.95, "base tipped over (roll/pitch > ~18 deg)"
    assert height.min() > 0.2
    assert np.abs(height - settled_z).max() < 0.05
    assert drift.max() < 0.1, "base slid horizontally"


def test_feet_are_lowest_and_touch_floor(robot, standing):
    model, data, _, _ = standing
    feet = [model.site(name).id for name in robot.sites["feet"]]
    assert data.site_xpos[feet, 2].max() < 0.03
    robot_geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] != 0]
    # Foot geoms (collision sphere and its visual twin) are centred on the foot sites.
    at_foot = [g for g in robot_geoms
               if np.linalg.norm(data.site_xpos[feet] - data.geom_xpos[g], axis=1).min() < 1e-6]
    assert len(at_foot) == 8
    lowest_foot = max(_lowest_point(model, data, g) for g in at_foot)
    for g in set(robot_geoms) - set(at_foot):
        assert _lowest_point(model, data, g) > lowest_foot + 0.01, model.geom(g).name
    floor = model.geom("floor").id
    pairs = [tuple(data.contact[i].geom) for i in range(data.ncon)]
    touching = {int(a if b == floor else b) for a, b in pairs if floor in (a, b)}
    assert touching == {model.geom(f"{leg}_foot").id for leg in ("FL", "FR", "RL", "RR")}
