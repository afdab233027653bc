"""Robot descriptions shared by simulation and hardware (MJCF + robot.yaml)."""

from robots.build import robot_mjspec
from robots.spec import CameraSpec, GripperSpec, JointSpec, RobotSpec, RobotSpecError, load_robot

__all__ = [
    "CameraSpec",
    "GripperSpec",
    "JointSpec",
    "RobotSpec",
    "RobotSpecError",
    "load_robot",
    "robot_mjspec",
]
