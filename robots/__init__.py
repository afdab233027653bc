"""Robot descriptions shared by simulation and hardware (MJCF + robot.yaml).

Importing this package needs neither MuJoCo nor the simulator: the spec, the
action mapping (:mod:`robots.actions`), torch kinematics (:mod:`robots.kinematics`)
and the per-robot observation terms (``robots.<robot>.observation``) run on the
robot computer. :func:`robots.build.robot_mjspec` turns a spec into a MuJoCo model.
"""

from robots.spec import CameraSpec, GripperSpec, JointSpec, RobotSpec, RobotSpecError, load_robot

__all__ = [
    "CameraSpec",
    "GripperSpec",
    "JointSpec",
    "RobotSpec",
    "RobotSpecError",
    "load_robot",
]
