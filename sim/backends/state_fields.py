"""The tensor fields of :class:`sim.protocol.SimState`, declared once for the backends.

A backend's state class binds them in its ``__init__`` (views of, or mirrors of, the
engine's arrays), often by name in a loop; the declarations give them their type.
"""

from __future__ import annotations

import torch


class StateTensors:
    """Batched state tensors, first dimension the env (MuJoCo's layout and units)."""

    qpos: torch.Tensor  # [B, nq]
    qvel: torch.Tensor  # [B, nv]
    ctrl: torch.Tensor  # [B, nu]
    mocap_pos: torch.Tensor  # [B, nmocap, 3]
    xpos: torch.Tensor  # [B, nbody, 3]
    xquat: torch.Tensor  # [B, nbody, 4] (w, x, y, z)
    site_xpos: torch.Tensor  # [B, nsite, 3]
    site_xmat: torch.Tensor  # [B, nsite, 9]
    sensordata: torch.Tensor  # [B, nsensordata]
    time: torch.Tensor  # [B] (s)
