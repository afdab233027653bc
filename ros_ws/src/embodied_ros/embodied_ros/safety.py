"""The policy node's safety logic as plain functions and small classes (no ROS).

Every joint target the node publishes passes :func:`clamp_targets`: joint limits with a
margin, a largest change per control step, and a torque estimate from the robot's PD
gains. :class:`Watchdog` decides when state is too old, :func:`soft_start_targets`
ramps to the default pose, :class:`LoopStats` keeps the control-loop timing.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from robots import RobotSpec


@dataclass(frozen=True)
class TargetLimits:
    """Per-joint bounds on position targets (robot.yaml order; arm/leg joints only)."""

    lower: np.ndarray
    upper: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    max_torque: np.ndarray
    max_step: float

    @classmethod
    def from_robot(cls, robot: RobotSpec, margin: float, max_step: float,
                   torque_scale: float) -> TargetLimits:
        """Limits of ``robot`` shrunk by ``margin``; torque bound ``torque_scale x effort``."""
        lower, upper = robot.lower + margin, robot.upper - margin
        if np.any(lower >= upper):
            raise ValueError(f"joint_limit_margin {margin} leaves no range for a joint of "
                             f"'{robot.name}'; use a smaller margin")
        if max_step <= 0 or torque_scale <= 0:
            raise ValueError("max_target_step and torque_limit_scale must be > 0")
        return cls(lower, upper, robot.kp, robot.kd, torque_scale * robot.effort, max_step)


def clamp_targets(target: np.ndarray, previous: np.ndarray | None, q: np.ndarray,
                  qd: np.ndarray, limits: TargetLimits) -> np.ndarray:
    """``target`` [nj] made safe: limits, per-step change from ``previous``, torque.

    The torque bound keeps the PD law's estimate ``kp (target - q) - kd qd`` within
    ``limits.max_torque`` at the measured ``q``, ``qd``; the joint limits win over it
    (a target is never outside them).
    """
    out = np.clip(target, limits.lower, limits.upper)
    if previous is not None:
        out = np.clip(out, previous - limits.max_step, previous + limits.max_step)
    low = q + (limits.kd * qd - limits.max_torque) / limits.kp
    high = q + (limits.kd * qd + limits.max_torque) / limits.kp
    out = np.clip(out, low, high)
    return np.clip(out, limits.lower, limits.upper)


def soft_start_targets(start: np.ndarray, default: np.ndarray, elapsed: float,
                       duration: float) -> tuple[np.ndarray, bool]:
    """Cosine ramp from ``start`` to ``default``; returns the targets and whether it ended."""
    if duration <= 0 or elapsed >= duration:
        return default.copy(), True
    s = 0.5 - 0.5 * math.cos(math.pi * elapsed / duration)
    return start + s * (default - start), False


def tilt_from_quat(quat_wxyz: np.ndarray) -> float:
    """Angle (rad) between the body z axis and world up for a (w, x, y, z) quaternion."""
    _, x, y, _ = quat_wxyz / max(float(np.linalg.norm(quat_wxyz)), 1e-12)
    cos_tilt = 1.0 - 2.0 * (x * x + y * y)  # the zz entry of the rotation matrix
    return math.acos(max(-1.0, min(1.0, cos_tilt)))


class Watchdog:
    """State is stale when older than ``periods`` control periods, or when ``periods``
    control ticks passed without a new state message (whichever comes first)."""

    def __init__(self, control_dt: float, periods: float):
        if periods <= 0:
            raise ValueError("watchdog_periods must be > 0")
        self.max_age = periods * control_dt
        self.max_ticks = periods
        self.last_state: float | None = None
        self.ticks_since_state = 0

    def state_received(self, now: float) -> None:
        """A valid state message arrived at ``now`` (monotonic seconds)."""
        self.last_state = now
        self.ticks_since_state = 0

    def tick(self) -> None:
        """One control tick happened."""
        self.ticks_since_state += 1

    def age(self, now: float) -> float:
        """Seconds since the last valid state (inf before the first)."""
        return math.inf if self.last_state is None else now - self.last_state

    def fresh(self, now: float) -> bool:
        """The newest state is recent enough to act on."""
        # (1e-9: on simulation time ages are exact multiples of the period; exactly three
        # periods is not older than three periods)
        return self.age(now) <= self.max_age + 1e-9 and self.ticks_since_state < self.max_ticks


def percentiles(values, qs=(50, 99)) -> list[float]:
    """Percentiles of ``values`` (nan when empty)."""
    arr = np.asarray(list(values), dtype=float)
    return [float(np.percentile(arr, q)) if arr.size else math.nan for q in qs]


class LoopStats:
    """Control-loop timing over the last ``window`` ticks: period, jitter, compute time,
    and the age of the state each command was computed from (state -> command latency)."""

    def __init__(self, control_dt: float, window: int = 1000):
        self.dt = control_dt
        self.periods: deque[float] = deque(maxlen=window)
        self.compute: deque[float] = deque(maxlen=window)
        self.state_age: deque[float] = deque(maxlen=window)
        self.last_tick: float | None = None
        self.ticks = 0

    def tick(self, now: float) -> None:
        """Record a control tick at ``now`` (monotonic seconds)."""
        if self.last_tick is not None:
            self.periods.append(now - self.last_tick)
        self.last_tick = now
        self.ticks += 1

    def command(self, compute_s: float, state_age_s: float) -> None:
        """Record a published command: its compute time and the age of its input state."""
        self.compute.append(compute_s)
        self.state_age.append(state_age_s)

    def summary(self) -> dict[str, float]:
        """p50/p99 of period, |period - dt| (jitter), compute time, state age; in ms."""
        ms = 1000.0
        period = percentiles(self.periods)
        jitter = percentiles(abs(p - self.dt) for p in self.periods)
        compute = percentiles(self.compute)
        age = percentiles(self.state_age)
        return {"ticks": self.ticks, "rate_hz": (1.0 / float(np.mean(self.periods))
                                                 if self.periods else math.nan),
                "period_p50_ms": period[0] * ms, "period_p99_ms": period[1] * ms,
                "jitter_p50_ms": jitter[0] * ms, "jitter_p99_ms": jitter[1] * ms,
                "compute_p50_ms": compute[0] * ms, "compute_p99_ms": compute[1] * ms,
                "state_age_p50_ms": age[0] * ms, "state_age_p99_ms": age[1] * ms}
