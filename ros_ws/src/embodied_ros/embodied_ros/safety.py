"""The policy node's safety logic as plain functions and small classes (no ROS).

Policy and soft-start targets pass :func:`clamp_targets` (joint limits with a margin, a
largest change per control step, a torque estimate from the robot's PD gains); then
every published target, safe commands included, passes :class:`CommandLimiter` (the
robot's velocity and acceleration limits), last. The math of both filters lives in
:mod:`robots.command_filter`, which the simulated env applies with ``deploy_limits``
(training sees what deployment enforces). :class:`Watchdog` decides by time when
state is too old, :func:`soft_start_targets` ramps to the default pose,
:class:`LoopStats` keeps the control-loop timing.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from robots import RobotSpec
from robots.command_filter import DeploySettings, TargetBounds, limit_command, stopping_speed
from robots.command_filter import clamp_targets as shared_clamp_targets


@dataclass(frozen=True)
class TargetLimits:
    """Per-joint bounds on position targets (robot.yaml order; arm/leg joints only).

    A numpy view of :class:`robots.command_filter.TargetBounds`, the bounds the
    simulated env applies with ``deploy_limits`` too.
    """

    bounds: TargetBounds

    @classmethod
    def from_robot(cls, robot: RobotSpec, margin: float, max_step: float,
                   torque_scale: float) -> TargetLimits:
        """Limits of ``robot`` shrunk by ``margin``; torque bound ``torque_scale x effort``."""
        return cls(TargetBounds.from_robot(robot, DeploySettings(margin, max_step,
                                                                 torque_scale)))

    @property
    def lower(self) -> np.ndarray:
        """Lowest allowed target [nj] (the position limit plus the margin)."""
        return self.bounds.lower.numpy()

    @property
    def upper(self) -> np.ndarray:
        """Highest allowed target [nj] (the position limit minus the margin)."""
        return self.bounds.upper.numpy()


def clamp_targets(target: np.ndarray, previous: np.ndarray | None, q: np.ndarray,
                  qd: np.ndarray, limits: TargetLimits) -> np.ndarray:
    """``target`` [nj] made safe: limits, per-step change from ``previous``, torque.

    :func:`robots.command_filter.clamp_targets` on one row: the torque bound keeps the
    PD law's estimate ``kp (target - q) - kd qd`` within the scaled effort at the
    measured ``q``, ``qd``; the joint limits win over it.
    """
    row = lambda a: torch.as_tensor(a, dtype=torch.float64)[None]  # noqa: E731
    out = shared_clamp_targets(row(target), None if previous is None else row(previous),
                               row(q), row(qd), limits.bounds)
    return out[0].numpy()


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
    """Whether one state input is fresh enough to act on, judged by time, with hysteresis.

    A state's age is the larger of ``now - receipt time`` and ``now - header stamp`` (the
    stamp only when the sender set one), both on the node's clock. The input trips once
    that age exceeds ``max_age``; after a trip (and before the first state) it is fresh
    again only when states have kept arriving, no gap between them longer than
    ``max_age``, for ``recover_s``. Between control ticks nothing is counted, so a late
    timer under CPU load does not trip it while the stream is on time.
    """

    def __init__(self, max_age: float, recover_s: float):
        if max_age <= 0 or recover_s < 0:
            raise ValueError("the watchdog needs max_age > 0 and recover_s >= 0")
        self.max_age, self.recover_s = max_age, recover_s
        self.last_receipt: float | None = None
        self.last_stamp: float | None = None
        self.fresh_since = math.inf  # receipt time of the first state after the last gap
        self.tripped = True

    def state_received(self, now: float, stamp: float | None = None) -> None:
        """A valid state arrived at ``now``; ``stamp``: its header stamp (None or 0: unset)."""
        if self.last_receipt is None or now - self.last_receipt > self.max_age:
            self.fresh_since = now
        self.last_receipt = now
        self.last_stamp = stamp if stamp else None

    def age(self, now: float) -> float:
        """Seconds since the newest state was received or stamped (inf before the first)."""
        if self.last_receipt is None:
            return math.inf
        age = now - self.last_receipt
        return age if self.last_stamp is None else max(age, now - self.last_stamp)

    def fresh(self, now: float) -> bool:
        """The newest state is recent enough to act on (updates the trip state)."""
        # (1e-9: on simulation time ages are exact multiples of the period; exactly the
        # maximum age is not older than it)
        if not self.age(now) <= self.max_age + 1e-9:
            self.tripped = True
            return False
        if self.tripped and now - self.fresh_since >= self.recover_s - 1e-9:
            self.tripped = False
        return not self.tripped


class CommandLimiter:
    """The last filter of every published joint target: velocity, acceleration, stopping room.

    It applies the robot's velocity and acceleration limits and keeps room to stop
    before the position limits.

    Targets are a position stream at the control period ``dt``: the implied velocity
    ``(target - previous) / dt`` stays within ``velocity`` and changes by at most
    ``acceleration * dt`` per step, and it never exceeds the speed from which the joint
    can still stop (at that deceleration) at the requested target or at ``lower`` /
    ``upper``. A joint whose ``acceleration`` is inf has only the velocity bound.
    """

    def __init__(self, lower: np.ndarray, upper: np.ndarray, velocity: np.ndarray,
                 acceleration: np.ndarray, dt: float):
        if dt <= 0 or np.any(velocity <= 0) or np.any(acceleration <= 0):
            raise ValueError("the command limiter needs dt, velocity and acceleration > 0")
        self.lower, self.upper, self.dt = lower, upper, dt
        self.vmax, self.acc = velocity, acceleration
        self.last: np.ndarray | None = None
        self.velocity = np.zeros_like(velocity)

    @classmethod
    def from_robot(cls, robot: RobotSpec, limits: TargetLimits, dt: float) -> CommandLimiter:
        """The limits of ``robot.yaml`` (positions as in ``limits``, i.e. with the margin)."""
        return cls(limits.lower, limits.upper, robot.velocity, robot.acceleration, dt)

    def reset(self, q: np.ndarray) -> None:
        """Start from the measured pose ``q`` at rest."""
        self.last, self.velocity = q.copy(), np.zeros_like(self.vmax)

    def stopping_point(self) -> np.ndarray:
        """Where the targets come to rest when they brake from now on: the quickest hold.

        They brake at the acceleration limit (each next step ``acceleration * dt``
        slower). RuntimeError before :meth:`reset`.
        """
        if self.last is None:
            raise RuntimeError("CommandLimiter.reset(q) must be called first")
        speed = np.abs(self.velocity)
        dv = np.where(np.isfinite(self.acc), self.acc * self.dt, math.inf)
        n = np.floor(speed / dv)  # steps with speed left: speed - i dv for i = 1..n
        travel = self.dt * (n * speed - dv * n * (n + 1) / 2)
        return np.clip(self.last + np.sign(self.velocity) * travel, self.lower, self.upper)

    def stopping_speed(self, distance: np.ndarray) -> np.ndarray:
        """Largest speed from which the joints stop within ``distance`` (>= 0).

        Each step is ``acceleration * dt`` slower than the one before
        (:func:`robots.command_filter.stopping_speed`).
        """
        return stopping_speed(torch.as_tensor(distance, dtype=torch.float64),
                              torch.as_tensor(self.acc, dtype=torch.float64), self.dt).numpy()

    def __call__(self, target: np.ndarray) -> np.ndarray:
        """``target`` limited; remembered as the previous target of the next call.

        :func:`robots.command_filter.limit_command` on one row.
        """
        if self.last is None:
            raise RuntimeError("CommandLimiter.reset(q) must be called before the first target")
        t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
        out, velocity = limit_command(t(target)[None], t(self.last)[None],
                                      t(self.velocity)[None], t(self.lower), t(self.upper),
                                      t(self.vmax), t(self.acc), self.dt)
        self.last, self.velocity = out[0].numpy(), velocity[0].numpy()
        return self.last


def limit_shares(stamps: np.ndarray, targets: np.ndarray, robot: RobotSpec,
                 dt: float) -> dict[str, float]:
    """How much of ``robot``'s limits a stream of joint targets [n, nj] used.

    ``stamps`` [n] (s) place the targets on the control grid of period ``dt``; a gap of
    several periods (a target lost by a slow reader) counts as that many steps. Returns
    the largest excess beyond a position limit (rad, 0 if none), the largest share of a
    velocity limit (mean over each gap) and of an acceleration limit (between steps one
    period apart), and the share of those steps at an acceleration limit.
    """
    steps = np.maximum(1.0, np.round(np.diff(stamps) / dt))
    velocity = np.diff(targets, axis=0) / (steps[:, None] * dt)
    consecutive = (steps[:-1] == 1) & (steps[1:] == 1)
    accel = np.abs(np.diff(velocity, axis=0)[consecutive]) / dt / robot.acceleration
    excess = np.maximum(robot.lower - targets, targets - robot.upper)
    return {"targets": len(targets),
            "beyond_position_limit_rad": float(max(excess.max(initial=0.0), 0.0)),
            "velocity_share": float((np.abs(velocity) / robot.velocity).max(initial=0.0)),
            "acceleration_share": float(accel.max(initial=0.0)),
            "at_acceleration_limit": float((accel.max(axis=1) > 0.999).mean())
            if len(accel) else 0.0}


def percentiles(values: Iterable[float], qs: Sequence[float] = (50, 99)) -> list[float]:
    """Percentiles of ``values`` (nan when empty)."""
    arr = np.asarray(list(values), dtype=float)
    return [float(np.percentile(arr, q)) if arr.size else math.nan for q in qs]


class LoopStats:
    """Control-loop timing over the last ``window`` ticks.

    Period, jitter, how late the control timer fired (executor and OS scheduling),
    compute time, and the age of the state each command was computed from (state ->
    command latency).
    """

    def __init__(self, control_dt: float, window: int = 1000):
        self.dt = control_dt
        self.periods: deque[float] = deque(maxlen=window)
        self.compute: deque[float] = deque(maxlen=window)
        self.state_age: deque[float] = deque(maxlen=window)
        self.timer_late: deque[float] = deque(maxlen=window)
        self.last_tick: float | None = None
        self.ticks = 0

    def tick(self, now: float) -> None:
        """Record a control tick at ``now`` (monotonic seconds)."""
        if self.last_tick is not None:
            self.periods.append(now - self.last_tick)
        self.last_tick = now
        self.ticks += 1

    def timer_fired(self, late_s: float) -> None:
        """Record how late the control timer's callback ran after its scheduled time."""
        self.timer_late.append(late_s)

    def command(self, compute_s: float, state_age_s: float) -> None:
        """Record a published command: its compute time and the age of its input state."""
        self.compute.append(compute_s)
        self.state_age.append(state_age_s)

    def summary(self) -> dict[str, float]:
        """p50/p99 in ms of period, |period - dt| (jitter), timer lateness, compute, state age."""
        ms = 1000.0
        period = percentiles(self.periods)
        jitter = percentiles(abs(p - self.dt) for p in self.periods)
        compute = percentiles(self.compute)
        age = percentiles(self.state_age)
        late = percentiles(self.timer_late)
        return {"ticks": self.ticks, "rate_hz": (1.0 / float(np.mean(self.periods))
                                                 if self.periods else math.nan),
                "period_p50_ms": period[0] * ms, "period_p99_ms": period[1] * ms,
                "jitter_p50_ms": jitter[0] * ms, "jitter_p99_ms": jitter[1] * ms,
                "timer_late_p50_ms": late[0] * ms, "timer_late_p99_ms": late[1] * ms,
                "compute_p50_ms": compute[0] * ms, "compute_p99_ms": compute[1] * ms,
                "state_age_p50_ms": age[0] * ms, "state_age_p99_ms": age[1] * ms}
