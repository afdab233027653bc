"""ROS messages <-> arrays in robot.yaml joint order (joints are mapped by name)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, Vector3
from numpy.typing import ArrayLike
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint


class StateError(ValueError):
    """A state message that cannot be used (missing joints, non-finite values)."""


class JointIndex:
    """Maps the joint names of incoming messages to robot.yaml order, cached per name list."""

    def __init__(self, names: list[str]):
        self.names = list(names)
        self._cache: dict[tuple[str, ...], np.ndarray] = {}

    def indices(self, msg_names: Sequence[str]) -> np.ndarray:
        """Positions of our joints in a message's ``name`` list (StateError if any is missing)."""
        key = tuple(msg_names)
        idx = self._cache.get(key)
        if idx is None:
            where = {n: i for i, n in enumerate(key)}
            missing = [n for n in self.names if n not in where]
            if missing:
                raise StateError(f"message lacks joints {missing} (it has {list(key)})")
            idx = np.array([where[n] for n in self.names], dtype=int)
            self._cache[key] = idx
        return idx

    def take(self, msg_names: Sequence[str], values: ArrayLike, what: str) -> np.ndarray:
        """``values`` of a message reordered to our joints; finite, or StateError."""
        idx = self.indices(msg_names)
        values = np.asarray(values, dtype=np.float64)
        if values.shape[0] != len(msg_names):
            raise StateError(f"{what} has {values.shape[0]} values for {len(msg_names)} names")
        out = values[idx]
        if not np.all(np.isfinite(out)):
            raise StateError(f"non-finite {what}: {out.tolist()}")
        return out


def joint_state_arrays(msg: JointState, joints: JointIndex, fingers: JointIndex | None
                       ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(q, qd, finger_q) of a JointState, in robot.yaml order; StateError if unusable.

    ``qd`` is None when the message carries no velocities (sensor_msgs allows an
    empty ``velocity``), else required for our joints.
    """
    q = joints.take(msg.name, msg.position, "joint positions")
    qd = joints.take(msg.name, msg.velocity, "joint velocities") if len(msg.velocity) else None
    finger = fingers.take(msg.name, msg.position, "finger positions") if fingers else \
        np.zeros(0)
    return q, qd, finger


class DifferencedVelocity:
    """Joint velocities from successive positions, for drivers that publish none."""

    def __init__(self) -> None:
        self.q: np.ndarray | None = None
        self.t = 0.0
        self.qd: np.ndarray | None = None

    def __call__(self, q: np.ndarray, t: float) -> np.ndarray:
        """Velocity at time ``t`` (s) of positions ``q``: the difference quotient.

        The quotient is to the previous sample; zero at the first sample, the previous
        value if time stood still.
        """
        if self.q is None or self.qd is None:
            self.qd = np.zeros_like(q)
        elif t > self.t:
            self.qd = (q - self.q) / (t - self.t)
        self.q, self.t = q.copy(), t
        return self.qd.copy()


def imu_arrays(msg: Imu) -> tuple[np.ndarray, np.ndarray]:
    """(quaternion w, x, y, z; angular velocity, body frame) of an Imu message, finite."""
    o, w = msg.orientation, msg.angular_velocity
    quat = np.array([o.w, o.x, o.y, o.z], dtype=np.float64)
    ang = np.array([w.x, w.y, w.z], dtype=np.float64)
    norm = float(np.linalg.norm(quat))
    if not (np.all(np.isfinite(quat)) and np.all(np.isfinite(ang))) or norm < 0.5:
        raise StateError(f"invalid IMU: orientation {quat.tolist()}, angular velocity "
                         f"{ang.tolist()}")
    return quat / norm, ang


def vector3(v: Vector3 | Point) -> np.ndarray:
    """A geometry_msgs Vector3/Point as an array [3]."""
    return np.array([v.x, v.y, v.z], dtype=np.float64)


def trajectory_message(names: list[str], positions: np.ndarray, horizon_s: float,
                       stamp: Time | None = None) -> JointTrajectory:
    """A one-point JointTrajectory reaching ``positions`` ``horizon_s`` after ``stamp``.

    ``stamp`` None: a zero stamp, which a joint_trajectory_controller reads as "start
    on receipt".
    """
    msg = JointTrajectory()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.joint_names = list(names)
    point = JointTrajectoryPoint()
    point.positions = [float(v) for v in positions]
    sec = int(horizon_s)
    point.time_from_start = Duration(sec=sec, nanosec=round((horizon_s - sec) * 1e9))
    msg.points = [point]
    return msg


def array_message(names: list[str], positions: np.ndarray) -> Float64MultiArray:
    """Float64MultiArray of ``positions`` (the dimension label lists the joint order)."""
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=",".join(names), size=len(names),
                                          stride=len(names))]
    msg.data = [float(v) for v in positions]
    return msg
