"""Batched rotation helpers on torch tensors; quaternions are (w, x, y, z) as in MuJoCo."""

from __future__ import annotations

import torch


def quat_rotate_inverse(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate world-frame vectors [B, 3] into the frames given by quaternions [B, 4]."""
    w, xyz = quat[:, :1], quat[:, 1:]
    t = 2.0 * torch.linalg.cross(xyz, vec, dim=-1)
    return vec - w * t + torch.linalg.cross(xyz, t, dim=-1)


def quat_rotate(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate body-frame vectors [B, 3] into the world frame."""
    w, xyz = quat[:, :1], quat[:, 1:]
    t = 2.0 * torch.linalg.cross(xyz, vec, dim=-1)
    return vec + w * t + torch.linalg.cross(xyz, t, dim=-1)


def yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions [B, 4] of rotations by yaw [B] about world z."""
    half = 0.5 * yaw
    zeros = torch.zeros_like(half)
    return torch.stack([torch.cos(half), zeros, zeros, torch.sin(half)], dim=-1)


def projected_gravity(quat: torch.Tensor) -> torch.Tensor:
    """World gravity direction (0, 0, -1) expressed in the body frames [B, 3]."""
    down = torch.zeros(quat.shape[0], 3, dtype=quat.dtype, device=quat.device)
    down[:, 2] = -1.0
    return quat_rotate_inverse(quat, down)


def quat_to_matrix(quat: torch.Tensor) -> torch.Tensor:
    """Rotation matrices [B, 3, 3] of unit quaternions [B, 4] (w, x, y, z)."""
    w, x, y, z = quat.unbind(-1)
    rows = [
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ]
    return torch.stack(rows, dim=-1).reshape(*quat.shape[:-1], 3, 3)


def wrap_angle(angle: torch.Tensor, period: float = 2 * torch.pi) -> torch.Tensor:
    """Angles wrapped into [-period / 2, period / 2)."""
    return torch.remainder(angle + 0.5 * period, period) - 0.5 * period


def down_rotation(yaw: torch.Tensor) -> torch.Tensor:
    """[B, 3, 3] rotation of a hand pointing down (hand z = -world z) with hand yaw ``yaw``.

    ``yaw`` [B] is the angle of the hand x axis about world z.
    """
    c, s = yaw.cos(), yaw.sin()
    zero, one = torch.zeros_like(yaw), torch.ones_like(yaw)
    return torch.stack([c, s, zero, s, -c, zero, zero, zero, -one], dim=-1).reshape(-1, 3, 3)


def clamp_norm(vec: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Rows of ``vec`` [B, d] scaled down to at most ``max_norm``."""
    norm = vec.norm(dim=1, keepdim=True).clamp_min(1e-9)
    return vec * (max_norm / norm).clamp(max=1.0)
