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


def test_tcp_kinematics_equal_mujoco():
    robot = load_robot("panda")
    model = robot_mjspec(robot).compile()
    data = mujoco.MjData(model)
    site = model.site(robot.sites["ee"]).id
    qadr = [model.jnt_qposadr[model.joint(n).id] for n in robot.joint_names]
    gen = torch.Generator().manual_seed(0)
    lower, upper = torch.tensor(robot.lower), torch.tensor(robot.upper)
    q = lower + (upper - lower) * torch.rand(16, len(robot.joints), generator=gen,
                                              dtype=torch.float64)
    tcp = SiteKinematics.from_robot(robot, "ee").position(q)
    for i in range(len(q)):
        data.qpos[qadr] = q[i].numpy()
        mujoco.mj_kinematics(model, data)
        np.testing.assert_allclose(tcp[i].numpy(), data.site_xpos[site], atol=1e-12)


def test_floating_base_chain_is_refused():
    robot = load_robot("go2")
    with pytest.raises(ValueError, match="free"):
        SiteKinematics(read_mjcf(robot.mjcf_path), robot.sites["imu"], robot.joint_names)
