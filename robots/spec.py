"""Typed robot descriptions: robot.yaml + MJCF, validated against each other.

A robot lives in ``robots/<name>/`` as an MJCF file (bodies, joints, geoms,
sites; no actuators and no cameras) and a ``robot.yaml`` that is the single
source of truth for everything a controller needs, in simulation and on
hardware::

    name: panda
    mjcf: panda.xml                 # relative to robot.yaml
    base_body: link0                # the body the robot is rooted at
    floating_base: false            # true: base_body carries a freejoint
    control:
      decimation: 4                 # physics steps per policy step
    joints:                         # actuated joints, in action/observation order
      - name: joint1                # MJCF joint name
        ros_name: panda_joint1      # joint name on the real robot's ROS interface
        position: [-2.8973, 2.8973] # limits, rad (or m)
        velocity: 2.175             # |qdot| limit
        acceleration: 15.0          # optional |qddot| limit (default: none)
        effort: 87.0                # |torque| limit, N m
        default: 0.0                # default pose
        kp: 400.0                   # PD gains of the position actuator
        kd: 40.0
        action_scale: 1.0           # q_target = default + action_scale * action
    gripper:                        # optional; one action dimension
      joints: [finger_joint1, finger_joint2]
      ros_names: [panda_finger_joint1, panda_finger_joint2]
      position: [0.0, 0.04]
      velocity: 0.2
      effort: 70.0
      kp: 800.0
      kd: 40.0
    sites:                          # named frames tasks use; values are MJCF sites
      ee: tcp
    cameras:
      - name: front
        mount: world                # 'world' or an MJCF body name
        pos: [1.4, 0.0, 0.9]        # in the mount frame
        lookat: [0.45, 0.0, 0.15]   # a point in the mount frame (or xyaxes: [6 numbers])
        fovy: 55.0
        resolution: [96, 96]        # width, height
        mode: fixed                 # fixed | track | trackcom

Every mistake raises :class:`RobotSpecError` naming the file, the field and
the fix. Names are checked against the MJCF as read by :mod:`robots.mjcf`, without
MuJoCo, so the robot computer validates the same spec; the simulator compiles the
MJCF with MuJoCo (:func:`robots.build.robot_mjspec`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robots.mjcf import MjcfError, read_mjcf

ROBOTS_DIR = Path(__file__).resolve().parent


class RobotSpecError(ValueError):
    """A robot.yaml that is malformed or disagrees with its MJCF."""

    def __init__(self, path: Path | str, field: str, problem: str, fix: str):
        self.path, self.field = str(path), field
        super().__init__(f"{path}: field '{field}': {problem}. Fix: {fix}")


@dataclass(frozen=True)
class JointSpec:
    """One position-controlled joint."""

    name: str
    ros_name: str
    lower: float
    upper: float
    velocity: float
    effort: float
    default: float
    kp: float
    kd: float
    action_scale: float
    acceleration: float = math.inf  # |qddot| limit; inf when robot.yaml gives none


@dataclass(frozen=True)
class GripperSpec:
    """A parallel gripper driven by one action dimension (0 closed .. 1 open)."""

    joints: tuple[str, ...]
    ros_names: tuple[str, ...]
    lower: float
    upper: float
    velocity: float
    effort: float
    kp: float
    kd: float


@dataclass(frozen=True)
class CameraSpec:
    """A camera mounted on the world or on a body of the robot."""

    name: str
    mount: str
    pos: tuple[float, float, float]
    xyaxes: tuple[float, ...]
    fovy: float
    width: int
    height: int
    mode: str = "fixed"


@dataclass(frozen=True)
class RobotSpec:
    """A validated robot description; read by simulation and by the ROS node alike."""

    name: str
    yaml_path: Path
    mjcf_path: Path
    base_body: str
    floating_base: bool
    decimation: int
    timestep: float
    joints: tuple[JointSpec, ...]
    gripper: GripperSpec | None
    sites: dict[str, Any]
    cameras: tuple[CameraSpec, ...]

    @property
    def joint_names(self) -> list[str]:
        """Joint names (MJCF), in robot.yaml order."""
        return [j.name for j in self.joints]

    @property
    def ros_joint_names(self) -> list[str]:
        """Joint names on the robot's ROS interface, in robot.yaml order."""
        return [j.ros_name for j in self.joints]

    @property
    def default_pose(self) -> np.ndarray:
        """Default joint positions [nj] (rad, m for prismatic joints)."""
        return np.array([j.default for j in self.joints])

    @property
    def lower(self) -> np.ndarray:
        """Lower joint position limits [nj] (rad, m for prismatic joints)."""
        return np.array([j.lower for j in self.joints])

    @property
    def upper(self) -> np.ndarray:
        """Upper joint position limits [nj] (rad, m for prismatic joints)."""
        return np.array([j.upper for j in self.joints])

    @property
    def velocity(self) -> np.ndarray:
        """Joint velocity limits [nj] (rad/s, m/s for prismatic joints)."""
        return np.array([j.velocity for j in self.joints])

    @property
    def acceleration(self) -> np.ndarray:
        """Joint acceleration limits [nj] (rad/s^2); inf where robot.yaml gives none."""
        return np.array([j.acceleration for j in self.joints])

    @property
    def kp(self) -> np.ndarray:
        """PD stiffness per joint [nj]."""
        return np.array([j.kp for j in self.joints])

    @property
    def kd(self) -> np.ndarray:
        """PD damping per joint [nj]."""
        return np.array([j.kd for j in self.joints])

    @property
    def effort(self) -> np.ndarray:
        """Effort limits per joint [nj]."""
        return np.array([j.effort for j in self.joints])

    @property
    def action_scale(self) -> np.ndarray:
        """Action scale per joint [nj]: joint offset per unit of action."""
        return np.array([j.action_scale for j in self.joints])

    @property
    def action_dim(self) -> int:
        """Policy action size: one per joint, plus one for a gripper."""
        return len(self.joints) + (1 if self.gripper else 0)

    @property
    def control_dt(self) -> float:
        """Policy step in seconds: ``timestep * decimation``."""
        return self.timestep * self.decimation

    def camera(self, name: str) -> CameraSpec:
        """The camera ``name``; raises ``KeyError`` naming the robot's cameras if missing."""
        for cam in self.cameras:
            if cam.name == name:
                return cam
        raise KeyError(f"robot '{self.name}' has no camera '{name}'; it has {self.camera_names}")

    @property
    def camera_names(self) -> list[str]:
        """Camera names, in robot.yaml order."""
        return [c.name for c in self.cameras]


def _require(data: dict, key: str, path: Path, where: str, fix: str) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise RobotSpecError(path, f"{where}{key}", "is missing", fix)
    return data[key]


def _number(value: Any, path: Path, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RobotSpecError(path, field, f"expected a number, got {value!r}", "write a number")
    return float(value)


def _positive(value: Any, path: Path, field: str, zero: bool = False) -> float:
    """A number > 0 (>= 0 with ``zero``): gains, velocity and effort limits."""
    number = _number(value, path, field)
    if number < 0 or (number == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise RobotSpecError(path, field, f"{number:g} is not {bound}",
                             f"write a magnitude {bound} (limits are symmetric: |value|)")
    return number


def _vector(value: Any, n: int, path: Path, field: str) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or len(value) != n:
        raise RobotSpecError(
            path, field, f"expected a list of {n} numbers, got {value!r}", f"write {n} numbers"
        )
    return tuple(_number(v, path, field) for v in value)


def _limits(entry: dict, path: Path, where: str) -> tuple[float, float, float, float]:
    lower, upper = _vector(
        _require(entry, "position", path, where, "give [lower, upper] position limits"),
        2,
        path,
        where + "position",
    )
    if not lower < upper:
        raise RobotSpecError(
            path, where + "position", f"lower {lower} is not below upper {upper}", "swap them"
        )
    velocity = _positive(_require(entry, "velocity", path, where, "give |qdot| limit"), path,
                         where + "velocity")
    effort = _positive(_require(entry, "effort", path, where, "give |torque| limit"), path,
                       where + "effort")
    return lower, upper, velocity, effort


def _acceleration(entry: dict, path: Path, where: str) -> float:
    """The optional ``acceleration`` limit of a joint (inf when absent), > 0."""
    if "acceleration" not in entry:
        return math.inf
    value = _number(entry["acceleration"], path, where + "acceleration")
    if not value > 0:
        raise RobotSpecError(path, where + "acceleration", f"{value} is not > 0",
                             "give the |qddot| limit in rad/s^2 (or leave the key out)")
    return value


def _xyaxes_from_lookat(pos: np.ndarray, target: np.ndarray) -> tuple[float, ...]:
    """Camera x/y axes that look from pos at target with world z up (MuJoCo looks along -z)."""
    forward = target - pos
    forward /= np.linalg.norm(forward)
    up = np.array([0.0, 0.0, 1.0])
    if abs(forward @ up) > 0.999:
        up = np.array([0.0, 1.0, 0.0])
    x = np.cross(forward, up)
    x /= np.linalg.norm(x)
    y = np.cross(x, forward)
    return (*x.tolist(), *y.tolist())


def _parse_camera(entry: dict, index: int, path: Path) -> CameraSpec:
    where = f"cameras[{index}]."
    name = str(_require(entry, "name", path, where, "name the camera"))
    mount = str(_require(entry, "mount", path, where, "use 'world' or a body name of the MJCF"))
    x, y, z = _vector(_require(entry, "pos", path, where, "give the camera position"), 3, path,
                      where + "pos")
    pos = (x, y, z)
    if "lookat" in entry:
        xyaxes = _xyaxes_from_lookat(
            np.array(pos), np.array(_vector(entry["lookat"], 3, path, where + "lookat"))
        )
    elif "xyaxes" in entry:
        xyaxes = _vector(entry["xyaxes"], 6, path, where + "xyaxes")
    else:
        raise RobotSpecError(path, where + "lookat", "is missing",
                             "give 'lookat: [x, y, z]' or 'xyaxes: [6 numbers]'")
    width, height = _vector(_require(entry, "resolution", path, where, "give [width, height]"),
                            2, path, where + "resolution")
    mode = str(entry.get("mode", "fixed"))
    if mode not in ("fixed", "track", "trackcom"):
        raise RobotSpecError(path, where + "mode", f"unknown mode '{mode}'",
                             "use fixed, track or trackcom")
    return CameraSpec(name, mount, pos, xyaxes, _number(entry.get("fovy", 45.0), path,
                      where + "fovy"), int(width), int(height), mode)


def _resolve(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        return path
    if path.is_dir():
        return path / "robot.yaml"
    candidate = ROBOTS_DIR / str(name_or_path) / "robot.yaml"
    if not candidate.exists():
        known = sorted(p.parent.name for p in ROBOTS_DIR.glob("*/robot.yaml"))
        raise FileNotFoundError(f"unknown robot '{name_or_path}'; known robots: {known}")
    return candidate


def load_robot(name_or_path: str | Path) -> RobotSpec:
    """Load and validate a robot by name ('panda', 'go2') or by robot.yaml path."""
    path = _resolve(name_or_path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise RobotSpecError(path, "<file>", f"is not valid YAML ({err})",
                             "fix the syntax") from err
    if not isinstance(data, dict):
        raise RobotSpecError(path, "<file>", "is not a mapping", "write 'key: value' fields")

    mjcf_path = path.parent / str(_require(data, "mjcf", path, "", "name the MJCF file"))
    if not mjcf_path.exists():
        raise RobotSpecError(path, "mjcf", f"file {mjcf_path} does not exist",
                             "point it at the robot's MJCF, relative to robot.yaml")
    try:
        mjcf = read_mjcf(mjcf_path)
    except MjcfError as err:
        raise RobotSpecError(path, "mjcf", str(err), "fix the MJCF file") from err
    joint_names = set(mjcf.joints)

    base_body = str(_require(data, "base_body", path, "", "name the root body"))
    if base_body not in mjcf.bodies:
        raise RobotSpecError(path, "base_body", f"body '{base_body}' is not in {mjcf_path.name}",
                             "use a body name from the MJCF")
    floating = bool(data.get("floating_base", False))
    control = _require(data, "control", path, "", "add 'control: {decimation: N}'")
    decimation = int(_number(_require(control, "decimation", path, "control.",
                                      "physics steps per policy step"), path,
                             "control.decimation"))
    if decimation < 1:
        raise RobotSpecError(path, "control.decimation", f"{decimation} < 1", "use 1 or more")

    joints = []
    entries = _require(data, "joints", path, "", "list the actuated joints in action order")
    if not isinstance(entries, list) or not entries:
        raise RobotSpecError(path, "joints", "is empty or not a list", "list the actuated joints")
    for i, entry in enumerate(entries):
        where = f"joints[{i}]."
        name = str(_require(entry, "name", path, where, "give the MJCF joint name"))
        where = f"joints[{i}] ({name})."
        if name not in joint_names:
            raise RobotSpecError(path, where + "name", f"joint '{name}' is not in "
                                 f"{mjcf_path.name}", "use a joint name from the MJCF")
        lower, upper, velocity, effort = _limits(entry, path, where)
        default = _number(_require(entry, "default", path, where, "give the default pose"),
                          path, where + "default")
        if not lower <= default <= upper:
            raise RobotSpecError(path, where + "default", f"{default} is outside the position "
                                 f"limits [{lower}, {upper}]", "move it inside the limits")
        joints.append(JointSpec(
            name=name,
            ros_name=str(entry.get("ros_name", name)),
            lower=lower, upper=upper, velocity=velocity, effort=effort, default=default,
            kp=_positive(_require(entry, "kp", path, where, "give the P gain"), path, where + "kp"),
            kd=_positive(_require(entry, "kd", path, where, "give the D gain"), path, where + "kd",
                         zero=True),
            action_scale=_positive(entry.get("action_scale", 1.0), path, where + "action_scale"),
            acceleration=_acceleration(entry, path, where),
        ))
    names = [j.name for j in joints]
    if len(set(names)) != len(names):
        raise RobotSpecError(path, "joints", "a joint is listed twice", "list each joint once")

    gripper = None
    if data.get("gripper"):
        g = data["gripper"]
        g_joints = tuple(str(n) for n in _require(g, "joints", path, "gripper.", "list them"))
        for n in g_joints:
            if n not in joint_names:
                raise RobotSpecError(path, "gripper.joints", f"joint '{n}' is not in "
                                     f"{mjcf_path.name}", "use joint names from the MJCF")
        lower, upper, velocity, effort = _limits(g, path, "gripper.")
        gripper = GripperSpec(
            joints=g_joints, ros_names=tuple(str(n) for n in g.get("ros_names", g_joints)),
            lower=lower, upper=upper, velocity=velocity, effort=effort,
            kp=_positive(_require(g, "kp", path, "gripper.", "give the P gain"), path,
                         "gripper.kp"),
            kd=_positive(_require(g, "kd", path, "gripper.", "give the D gain"), path,
                         "gripper.kd", zero=True),
        )

    sites = dict(data.get("sites") or {})
    for key, value in sites.items():
        for site in value if isinstance(value, list) else [value]:
            if str(site) not in mjcf.sites:
                raise RobotSpecError(path, f"sites.{key}", f"site '{site}' is not in "
                                     f"{mjcf_path.name}",
                                     "add the site to the MJCF or fix the name")

    cameras = []
    for i, entry in enumerate(data.get("cameras") or []):
        cam = _parse_camera(entry, i, path)
        if cam.mount != "world" and cam.mount not in mjcf.bodies:
            raise RobotSpecError(path, f"cameras[{i}] ({cam.name}).mount",
                                 f"unknown camera mount '{cam.mount}': no such body in "
                                 f"{mjcf_path.name}", "use 'world' or a body name of the MJCF")
        cameras.append(cam)

    return RobotSpec(
        name=str(data.get("name", path.parent.name)), yaml_path=path, mjcf_path=mjcf_path,
        base_body=base_body, floating_base=floating, decimation=decimation,
        timestep=mjcf.timestep, joints=tuple(joints), gripper=gripper,
        sites=sites, cameras=tuple(cameras),
    )
