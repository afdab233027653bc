"""Turn a RobotSpec into an editable MjSpec: the MJCF plus actuators and cameras.

Actuators and cameras are added here, from robot.yaml, rather than written in
the MJCF, so that PD gains, effort limits and camera mounts have exactly one
source for simulation and hardware.
"""

from __future__ import annotations

import mujoco

from robots.spec import RobotSpec

_CAMERA_MODES = {
    "fixed": mujoco.mjtCamLight.mjCAMLIGHT_FIXED,
    "track": mujoco.mjtCamLight.mjCAMLIGHT_TRACK,
    "trackcom": mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM,
}


def _add_position_actuator(spec: mujoco.MjSpec, name: str, joint: str, kp: float, kd: float,
                           effort: float, lower: float, upper: float) -> None:
    act = spec.add_actuator()
    act.name = name
    act.target = joint
    act.trntype = mujoco.mjtTrn.mjTRN_JOINT
    act.gaintype = mujoco.mjtGain.mjGAIN_FIXED
    act.biastype = mujoco.mjtBias.mjBIAS_AFFINE
    act.gainprm[0] = kp
    act.biasprm[0:3] = [0.0, -kp, -kd]
    act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.ctrlrange = [lower, upper]
    act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.forcerange = [-effort, effort]


def robot_mjspec(robot: RobotSpec) -> mujoco.MjSpec:
    """The robot's MjSpec with one position actuator per joint and the cameras added.

    Actuator order: the arm/leg joints in robot.yaml order, then the gripper joints.
    """
    spec = mujoco.MjSpec.from_file(str(robot.mjcf_path))
    for j in robot.joints:
        _add_position_actuator(spec, j.name, j.name, j.kp, j.kd, j.effort, j.lower, j.upper)
    if robot.gripper is not None:
        g = robot.gripper
        for name in g.joints:
            _add_position_actuator(spec, name, name, g.kp, g.kd, g.effort, g.lower, g.upper)
    for cam in robot.cameras:
        parent = spec.worldbody if cam.mount == "world" else spec.body(cam.mount)
        c = parent.add_camera()
        c.name = cam.name
        c.pos = list(cam.pos)
        c.alt.type = mujoco.mjtOrientation.mjORIENTATION_XYAXES
        c.alt.xyaxes = list(cam.xyaxes)
        c.fovy = cam.fovy
        c.resolution = [cam.width, cam.height]
        c.mode = _CAMERA_MODES[cam.mode]
    return spec
