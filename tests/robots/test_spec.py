"""robot.yaml validation: each mistake names the file, the field and the fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from robots import RobotSpecError, load_robot
from robots.build import robot_mjspec


@pytest.mark.parametrize("name, n_joints, n_actions", [("panda", 7, 8), ("go2", 12, 12)])
def test_robots_load_and_compile(name, n_joints, n_actions):
    robot = load_robot(name)
    assert len(robot.joints) == n_joints and robot.action_dim == n_actions
    assert np.all(robot.lower <= robot.default_pose) and np.all(robot.default_pose <= robot.upper)
    model = robot_mjspec(robot).compile()
    n_ctrl = n_joints + (len(robot.gripper.joints) if robot.gripper else 0)
    assert model.nu == n_ctrl
    # Actuators carry the spec's gains and effort limits, in spec order.
    np.testing.assert_allclose(model.actuator_gainprm[:n_joints, 0], robot.kp)
    np.testing.assert_allclose(model.actuator_biasprm[:n_joints, 2], -robot.kd)
    np.testing.assert_allclose(model.actuator_forcerange[:n_joints, 1], robot.effort)
    assert [model.camera(i).name for i in range(model.ncam)] == robot.camera_names
    assert robot.control_dt == pytest.approx(0.02)


def test_ros_names_are_unique():
    for name in ("panda", "go2"):
        names = load_robot(name).ros_joint_names
        assert len(set(names)) == len(names)


@pytest.fixture
def panda_copy(tmp_path: Path):
    src = Path(load_robot("panda").yaml_path).parent
    dst = tmp_path / "panda"
    shutil.copytree(src, dst)
    return dst / "robot.yaml"


def _edit(path: Path, fn) -> None:
    data = yaml.safe_load(path.read_text())
    fn(data)
    path.write_text(yaml.safe_dump(data))


def _expect(path: Path, *fragments: str) -> None:
    with pytest.raises(RobotSpecError) as err:
        load_robot(path)
    message = str(err.value)
    assert str(path) in message and "Fix:" in message
    for fragment in fragments:
        assert fragment in message, message


def test_missing_joint(panda_copy):
    _edit(panda_copy, lambda d: d["joints"][2].update(name="joint_typo"))
    _expect(panda_copy, "joints[2]", "joint_typo", "not in panda.xml")


def test_unknown_camera_mount(panda_copy):
    _edit(panda_copy, lambda d: d["cameras"][2].update(mount="no_such_body"))
    _expect(panda_copy, "cameras[2]", "mount", "no_such_body")


def test_default_outside_limits(panda_copy):
    _edit(panda_copy, lambda d: d["joints"][3].update(default=1.0))
    _expect(panda_copy, "joints[3] (joint4).default", "outside the position limits")


def test_missing_field(panda_copy):
    _edit(panda_copy, lambda d: d["joints"][0].pop("kp"))
    _expect(panda_copy, "joints[0] (joint1).kp", "is missing")


def test_inverted_limits(panda_copy):
    _edit(panda_copy, lambda d: d["joints"][0].update(position=[1.0, -1.0]))
    _expect(panda_copy, "position", "not below")


def test_acceleration_limit_is_optional_and_positive(panda_copy):
    np.testing.assert_array_equal(load_robot("panda").acceleration,
                                  [15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0])
    assert np.all(np.isinf(load_robot("go2").acceleration))  # robot.yaml gives none
    _edit(panda_copy, lambda d: d["joints"][1].update(acceleration=-7.5))
    _expect(panda_copy, "joints[1] (joint2).acceleration", "is not > 0")


def test_unknown_site(panda_copy):
    _edit(panda_copy, lambda d: d["sites"].update(ee="nowhere"))
    _expect(panda_copy, "sites.ee", "nowhere")


def test_missing_mjcf(panda_copy):
    _edit(panda_copy, lambda d: d.update(mjcf="gone.xml"))
    _expect(panda_copy, "mjcf", "does not exist")


def test_bad_yaml(panda_copy):
    panda_copy.write_text("joints: [unclosed\n")
    _expect(panda_copy, "not valid YAML")


def test_unknown_robot_name():
    with pytest.raises(FileNotFoundError, match="known robots"):
        load_robot("r2d2")


@pytest.mark.parametrize("key, value, field", [
    ("kp", -400.0, "joints[1] (joint2).kp"), ("kd", -5.0, "joints[1] (joint2).kd"),
    ("velocity", -2.0, "joints[1] (joint2).velocity"), ("effort", 0.0, "joints[1] (joint2).effort"),
    ("action_scale", -1.0, "joints[1] (joint2).action_scale")])
def test_negative_gains_and_limits(panda_copy, key, value, field):
    _edit(panda_copy, lambda d: d["joints"][1].update({key: value}))
    _expect(panda_copy, f"field '{field}'", "is not")


@pytest.mark.parametrize("key", ["velocity", "effort"])
def test_limit_errors_name_their_key(panda_copy, key):
    _edit(panda_copy, lambda d: d["gripper"].update({key: "fast"}))
    _expect(panda_copy, f"field 'gripper.{key}'", "expected a number")


def test_negative_gripper_gain(panda_copy):
    _edit(panda_copy, lambda d: d["gripper"].update(kp=-1000.0))
    _expect(panda_copy, "field 'gripper.kp'", "is not > 0")
