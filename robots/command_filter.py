"""The deployment's joint-target filters as batched torch math, shared by sim and robot.

The ROS policy node passes every policy target through two filters before a robot
receives it (``embodied_ros.safety``): :func:`clamp_targets` (the joint limits shrunk
by a margin, a largest change per control step, and a PD-torque bound at the measured
state) and then :func:`limit_command` (the robot's velocity and acceleration limits,
with room to stop before the position limits). Both are here once, on tensors
[B, nj] (float64), so that the simulated env can apply exactly what deployment
enforces (:class:`DeployFilter`, ``EnvConfig.deploy_limits``) and the node keeps its
numpy interface by calling the same functions on one row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from robots.spec import RobotSpec


@dataclass(frozen=True)
class DeploySettings:
    """The policy node's target-filter parameters (its defaults; config/<robot>.yaml)."""

    joint_limit_margin: float = 0.02  # rad kept away from every position limit
    max_target_step: float = 0.25  # rad; largest change of a joint target per control step
    torque_limit_scale: float = 1.0  # PD-torque estimate kept within scale x effort


def _tensor(values: np.ndarray | torch.Tensor, device: torch.device | str) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values, dtype=np.float64) if not isinstance(
        values, torch.Tensor) else values, dtype=torch.float64, device=device)


@dataclass(frozen=True)
class TargetBounds:
    """Per-joint bounds of :func:`clamp_targets` and :func:`limit_command` ([nj] float64)."""

    lower: torch.Tensor  # position limits with the margin
    upper: torch.Tensor
    kp: torch.Tensor
    kd: torch.Tensor
    max_torque: torch.Tensor  # torque_limit_scale x effort
    max_step: float
    velocity: torch.Tensor  # |target velocity| limit
    acceleration: torch.Tensor  # |target acceleration| limit (inf: none)

    @classmethod
    def from_robot(cls, robot: RobotSpec, settings: DeploySettings,
                   device: torch.device | str = "cpu") -> TargetBounds:
        """The bounds of ``robot`` under ``settings``.

        Raises:
            ValueError: A margin that leaves a joint no range, or a step or torque
                scale that is not > 0.
        """
        margin = settings.joint_limit_margin
        lower, upper = robot.lower + margin, robot.upper - margin
        if np.any(lower >= upper):
            raise ValueError(f"joint_limit_margin {margin} leaves no range for a joint of "
                             f"'{robot.name}'; use a smaller margin")
        if settings.max_target_step <= 0 or settings.torque_limit_scale <= 0:
            raise ValueError("max_target_step and torque_limit_scale must be > 0")
        t = lambda v: _tensor(v, device)  # noqa: E731
        return cls(t(lower), t(upper), t(robot.kp), t(robot.kd),
                   t(settings.torque_limit_scale * robot.effort),
                   float(settings.max_target_step), t(robot.velocity), t(robot.acceleration))


def clamp_targets(target: torch.Tensor, previous: torch.Tensor | None, q: torch.Tensor,
                  qd: torch.Tensor, bounds: TargetBounds) -> torch.Tensor:
    """``target`` [B, nj] made safe: limits, change from ``previous``, PD torque.

    The torque bound keeps the PD law's estimate ``kp (target - q) - kd qd`` within
    ``bounds.max_torque`` at the measured ``q``, ``qd``; the joint limits win over it
    (a target is never outside them). ``previous`` None: no step bound.
    """
    out = torch.clamp(target, bounds.lower, bounds.upper)
    if previous is not None:
        out = torch.clamp(out, previous - bounds.max_step, previous + bounds.max_step)
    low = q + (bounds.kd * qd - bounds.max_torque) / bounds.kp
    high = q + (bounds.kd * qd + bounds.max_torque) / bounds.kp
    out = torch.clamp(out, low, high)
    return torch.clamp(out, bounds.lower, bounds.upper)


def stopping_speed(distance: torch.Tensor, acceleration: torch.Tensor,
                   dt: float) -> torch.Tensor:
    """Largest speed from which targets stop within ``distance`` (>= 0) [B, nj].

    Each control step of ``dt`` is ``acceleration * dt`` slower than the one before; a
    joint whose acceleration is inf can stop from any speed.
    """
    # From speed v = (n + f) a dt (0 <= f < 1) the steps travel (n + 1) dt (v - n a dt / 2):
    # n is the largest integer with n (n + 1) a dt^2 / 2 <= distance.
    finite = torch.isfinite(acceleration)
    dv = torch.where(finite, acceleration, 1.0) * dt
    distance = torch.clamp(distance, min=0.0)
    n = torch.floor(0.5 * (torch.sqrt(1.0 + 8.0 * distance / (dv * dt)) - 1.0))
    return torch.where(finite, distance / ((n + 1) * dt) + 0.5 * n * dv, math.inf)


def limit_command(target: torch.Tensor, last: torch.Tensor, velocity: torch.Tensor,
                  lower: torch.Tensor, upper: torch.Tensor, max_velocity: torch.Tensor,
                  acceleration: torch.Tensor, dt: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``target`` [B, nj] after the previous target ``last`` at target ``velocity``.

    The implied velocity ``(target - last) / dt`` stays within ``max_velocity``, changes
    by at most ``acceleration * dt`` from ``velocity``, and never exceeds the speed from
    which the joint can still stop at the requested target or at ``lower`` / ``upper``
    (the result stays within them). A target within every bound is returned bit for
    bit (a held pose stays still). Returns the limited target and its velocity (the
    next call's ``last`` and ``velocity``).
    """
    delta = target - last
    speed = torch.minimum(delta.abs() / dt, stopping_speed(delta.abs(), acceleration, dt))
    v = torch.sign(delta) * speed
    dv = acceleration * dt
    v = torch.clamp(v, velocity - dv, velocity + dv)
    v = torch.clamp(v, -max_velocity, max_velocity)
    v = torch.clamp(v, -stopping_speed(last - lower, acceleration, dt),
                    stopping_speed(upper - last, acceleration, dt))
    out = torch.where(v == delta / dt, target, last + v * dt)
    out = torch.clamp(out, lower, upper)
    return out, (out - last) / dt


class DeployFilter:
    """Both filters over a batch of envs, with each env's previous target and velocity.

    The simulated counterpart of the policy node's command path: every control step
    the joint targets pass :func:`clamp_targets` (step bound from the previous target
    sent) and :func:`limit_command`, as on the robot after the node's hand-over to the
    policy. :meth:`reset` starts envs from their measured pose at rest, as the node's
    limiter does at activation.
    """

    def __init__(self, robot: RobotSpec, num_envs: int, dt: float,
                 settings: DeploySettings | None = None,
                 device: torch.device | str = "cpu"):
        if dt <= 0:
            raise ValueError("the deployment filter needs a control period dt > 0")
        self.bounds = TargetBounds.from_robot(robot, settings or DeploySettings(), device)
        self.dt = dt
        nj = len(robot.joints)
        self.last = torch.zeros(num_envs, nj, dtype=torch.float64, device=device)
        self.velocity = torch.zeros_like(self.last)

    def reset(self, env_ids: torch.Tensor, q: torch.Tensor) -> None:
        """Envs ``env_ids`` start from the measured pose ``q`` [n, nj] at rest."""
        self.last[env_ids] = q.to(self.last.dtype)
        self.velocity[env_ids] = 0.0

    def __call__(self, target: torch.Tensor, q: torch.Tensor, qd: torch.Tensor
                 ) -> torch.Tensor:
        """The joint targets [B, nj] the robot would receive for ``target`` at ``q``, ``qd``."""
        safe = clamp_targets(target.to(self.last.dtype), self.last, q, qd, self.bounds)
        b = self.bounds
        self.last, self.velocity = limit_command(safe, self.last, self.velocity, b.lower,
                                                 b.upper, b.velocity, b.acceleration, self.dt)
        return self.last
