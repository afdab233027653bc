"""Batched rotation helpers for the simulator: the robot side's :mod:`robots.math`."""

from robots.math import (
    projected_gravity,
    quat_rotate,
    quat_rotate_inverse,
    quat_to_matrix,
    wrap_angle,
    yaw_quat,
)

__all__ = ["projected_gravity", "quat_rotate", "quat_rotate_inverse", "quat_to_matrix",
           "wrap_angle", "yaw_quat"]
