"""The go2_walk policy observation as pure torch functions (no simulator needed).

The 50-d observation is, in the order of :data:`OBS_LAYOUT` (unscaled, as in Isaac
Lab): base linear and angular velocity in the base frame, projected gravity, the
(vx, vy, yaw rate) command, the (sin, cos) gait clock, joint positions minus the
default pose, joint velocities and the previous action.

The simulated task (``sim.tasks.go2_walk``) and the ROS deployment node build the
vector with the same functions; a deployment advances the gait clock with
:func:`advance_phase` every control period, as the task does.
"""

from __future__ import annotations

import math

import torch

from robots.math import projected_gravity, quat_rotate_inverse

GAIT_PERIOD_S = 0.5  # s; a 2 Hz trot

# name, size (in observation order)
OBS_LAYOUT: tuple[tuple[str, int], ...] = (
    ("base_lin_vel", 3),
    ("base_ang_vel", 3),
    ("projected_gravity", 3),
    ("velocity_command", 3),
    ("gait_phase", 2),
    ("joint_pos", 12),
    ("joint_vel", 12),
    ("last_action", 12),
)


def base_lin_vel_b(quat: torch.Tensor, lin_vel_w: torch.Tensor) -> torch.Tensor:
    """Base linear velocity [B, 3] in the base frame, from the world-frame velocity.

    ``quat`` [B, 4] is the base orientation (w, x, y, z). MuJoCo's freejoint
    ``qvel[0:3]`` is world frame; its ``qvel[3:6]`` is already the body-frame
    angular velocity (as an IMU's ``angular_velocity``) and needs no rotation.
    """
    return quat_rotate_inverse(quat, lin_vel_w)


def joint_pos_rel(joint_pos: torch.Tensor, default_pos: torch.Tensor) -> torch.Tensor:
    """Joint positions [B, nj] relative to the default pose (robot.yaml order)."""
    return joint_pos - default_pos


def gait_clock(phase: torch.Tensor) -> torch.Tensor:
    """(sin, cos) [B, 2] of the gait phase [B] in [0, 1)."""
    angle = 2.0 * math.pi * phase
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=1)


def advance_phase(phase: torch.Tensor, dt: float) -> torch.Tensor:
    """The gait phase [B] one control period ``dt`` later (wraps at 1)."""
    return torch.remainder(phase + dt / GAIT_PERIOD_S, 1.0)


def build_observation(lin_vel_b: torch.Tensor, ang_vel_b: torch.Tensor, quat: torch.Tensor,
                      command: torch.Tensor, phase: torch.Tensor, joint_pos: torch.Tensor,
                      joint_vel: torch.Tensor, default_pos: torch.Tensor,
                      last_action: torch.Tensor) -> torch.Tensor:
    """The noiseless 50-d policy observation [B, 50] (layout :data:`OBS_LAYOUT`).

    Inputs are batched [B, ...]: base-frame linear and angular velocity, base
    orientation quaternion (w, x, y, z), command (vx, vy, yaw rate), gait phase
    [B] in [0, 1) (advanced by :func:`advance_phase` every control period), joint
    positions and velocities in robot.yaml order, default pose, previous action.
    """
    return torch.cat([lin_vel_b, ang_vel_b, projected_gravity(quat), command,
                      gait_clock(phase), joint_pos_rel(joint_pos, default_pos), joint_vel,
                      last_action], dim=1)
