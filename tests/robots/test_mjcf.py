"""The MuJoCo-free MJCF reader and torch kinematics agree with MuJoCo's compiled model."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from robots import load_robot
from robots.build import robot_mjspec
from robots.kinematics import SiteKinematics
from robots.mjcf import MjcfError, read_mjcf


def _names(model: mujoco.MjModel, kind: str, count: int) -> set[str]:
    return {getattr(model, kind)(i).name for i in range(count)} - {""}


@pytest.mark.parametrize("name", ["panda", "go2"])
def test_reader_sees_what_mujoco_compiles(name):
    robot = load_robot(name)
    model = mujoco.MjModel.from_xml_path(str(robot.mjcf_path))
    mjcf = read_mjcf(robot.mjcf_path)
    assert set(mjcf.joints) == _names(model, "joint", model.njnt)
    assert set(mjcf.bodies) == _names(model, "body", model.nbody)
    assert set(mjcf.sites) == _names(model, "site", model.nsite)
    assert mjcf.timestep == model.opt.timestep == robot.timestep
    for joint in mjcf.joints.values():
        jid = model.joint(joint.name).id
        assert joint.type == ("free", "ball", "slide", "hinge")[int(model.jnt_type[jid])]
        if joint.type in ("hinge", "slide"):
            np.testing.assert_allclose(joint.axis, model.jnt_axis[jid], atol=1e-12)


def test_reader_applies_includes_and_default_classes(tmp_path: Path):
    (tmp_path / "arm.xml").write_text(
        '<mujoco><worldbody><body name="a" childclass="slider"><joint name="j"/>'
        '<site name="s" pos="0 0 1"/><frame pos="1 0 0"><body name="b"><site name="t"/>'
        '</body></frame></body></worldbody></mujoco>')
    (tmp_path / "robot.xml").write_text(
        '<mujoco><option timestep="0.01"/><default><default class="slider">'
        '<joint type="slide" axis="1 0 0"/></default></default>'
        '<include file="arm.xml"/></mujoco>')
    mjcf = read_mjcf(tmp_path / "robot.xml")
    assert mjcf.timestep == 0.01 and mjcf.sites["s"].body == "a"
    assert mjcf.joints["j"].type == "slide" and mjcf.joints["j"].axis == (1.0, 0.0, 0.0)
    assert mjcf.bodies["b"].parent == "a" and mjcf.bodies["b"].orientation == "frame"
    with pytest.raises(ValueError, match="frame"):
        SiteKinematics(mjcf, "t", ["j"])
    (tmp_path / "bad.xml").write_text("<mujoco><worldbody>")
    with pytest.raises(MjcfError, match=r"bad\.xml"):
        read_mjcf(tmp_path / "bad.xml")


def _panda_tcp(count: int, seed: int):
    """The Panda's compiled model, its data, the tcp site id, and ``count`` random joint
    positions within the limits."""
    robot = load_robot("panda")
    model = robot_mjspec(robot).compile()
    gen = torch.Generator().manual_seed(seed)
    lower, upper = torch.tensor(robot.lower), torch.tensor(robot.upper)
    q = lower + (upper - lower) * torch.rand(count, len(robot.joints), generator=gen,
                                              dtype=torch.float64)
    return robot, model, mujoco.MjData(model), model.site(robot.sites["ee"]).id, q


def test_tcp_kinematics_equal_mujoco():
    robot, model, data, site, q = _panda_tcp(16, seed=0)
    qadr = [model.jnt_qposadr[model.joint(n).id] for n in robot.joint_names]
    tcp = SiteKinematics.from_robot(robot, "ee").position(q)
    for i in range(len(q)):
        data.qpos[qadr] = q[i].numpy()
        mujoco.mj_kinematics(model, data)
        np.testing.assert_allclose(tcp[i].numpy(), data.site_xpos[site], atol=1e-12)


def test_floating_base_chain_is_refused():
    robot = load_robot("go2")
    with pytest.raises(ValueError, match="free"):
        SiteKinematics(read_mjcf(robot.mjcf_path), robot.sites["imu"], robot.joint_names)


def test_tcp_pose_and_jacobian_equal_mujoco():
    robot, model, data, site, q = _panda_tcp(8, seed=1)
    qadr = [model.jnt_qposadr[model.joint(n).id] for n in robot.joint_names]
    dadr = [model.jnt_dofadr[model.joint(n).id] for n in robot.joint_names]
    pos, rot, jac = SiteKinematics.from_robot(robot, "ee").jacobian(q)
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    for i in range(len(q)):
        data.qpos[qadr] = q[i].numpy()
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_jacSite(model, data, jacp, jacr, site)
        np.testing.assert_allclose(pos[i].numpy(), data.site_xpos[site], atol=1e-12)
        np.testing.assert_allclose(rot[i].numpy().ravel(), data.site_xmat[site], atol=1e-12)
        np.testing.assert_allclose(jac[i, :3].numpy(), jacp[:, dadr], atol=1e-10)
        np.testing.assert_allclose(jac[i, 3:].numpy(), jacr[:, dadr], atol=1e-10)
