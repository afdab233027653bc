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
