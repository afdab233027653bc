"""Differential IK on the Panda's tcp for the scripted experts, and the hand-yaw helpers.

"Hand yaw" is the angle of the hand x axis about world z when the hand points
down (0 in the default pose); see :mod:`sim.tasks.panda_base` for the frames.
"""

from __future__ import annotations

import torch

from robots.actions import JointPositionAction
from robots.math import clamp_norm, down_rotation, wrap_angle
from sim.tasks.panda_base import PandaTask


def nearest_yaw(yaw: torch.Tensor, reference: torch.Tensor, period: float) -> torch.Tensor:
    """The angle equivalent to ``yaw`` modulo ``period`` that is nearest to ``reference``."""
    return reference + wrap_angle(yaw - reference, period)


def wrapped_abs(angle: torch.Tensor, period: float) -> torch.Tensor:
    """|angle| modulo ``period``: the distance to the nearest multiple of ``period``."""
    r = angle.remainder(period)
    return torch.minimum(r, period - r)


class DiffIK:
    """Damped least-squares IK on the tcp: actions that move the hand towards targets.

    The action space is the env's (``task.action_map``: absolute joint targets
    or joint deltas), so experts and policies are interchangeable. Joint targets
    one action cannot reach (``target_range()`` of the action map: the action
    scale or one step, and the joint limits) are handled as an active set: a
    joint whose step would leave its range is pinned to the bound and the others
    solve for the remaining error. The redundancy (7 joints) is used to pull the
    arm towards its default posture.

    Without ``yaw`` only the tcp position is servoed (3D); with ``yaw`` the hand
    is also turned to point down with that yaw (6D).
    """

    def __init__(self, task: PandaTask, max_step: float = 0.04, max_rot_step: float = 0.3,
                 damping: float = 0.05, rot_weight: float = 0.3, posture_gain: float = 0.05):
        self.task, self.max_step, self.max_rot_step = task, max_step, max_rot_step
        self.damping, self.rot_weight, self.posture_gain = damping, rot_weight, posture_gain
        self.margin = 1e-3

    @property
    def action_map(self) -> JointPositionAction:
        """The env's action mapping (absolute joint targets without an env)."""
        if self.task.action_map is None:
            self.task.action_map = JointPositionAction(self.task.robot)
        return self.task.action_map

    def joint_step(self, ee_target: torch.Tensor, yaw: torch.Tensor | None = None
                   ) -> torch.Tensor:
        """Joint displacement [B, nj] from the current joint positions."""
        task = self.task
        q = task.joint_pos
        jac = task.sim.site_jacobian(task.ee)[:, :, task.dof_ids]  # [B, 3, nj]
        err = clamp_norm(ee_target - task.ee_pos, self.max_step)
        if yaw is not None:
            rot, goal = task.ee_rot, down_rotation(yaw)
            err_rot = 0.5 * torch.linalg.cross(rot, goal, dim=1).sum(2)  # [B, 3]
            err_rot = clamp_norm(err_rot, self.max_rot_step)
            w = self.rot_weight
            jac = torch.cat([jac, w * task.joint_axes], dim=1)
            err = torch.cat([err, w * err_rot], dim=1)
        eye = torch.eye(jac.shape[1], dtype=jac.dtype)
        rest = self.posture_gain * (self.action_map.default - q)
        lower, upper = self.action_map.target_range()
        lower, upper = lower + self.margin, upper - self.margin
        pinned = torch.zeros_like(q, dtype=torch.bool)
        dq = torch.zeros_like(q)
        for _ in range(q.shape[1]):
            free = (~pinned).to(q.dtype)
            jf = jac * free[:, None, :]
            resid = err - (jac @ (dq * (1.0 - free)).unsqueeze(-1)).squeeze(-1)
            jjt = jf @ jf.transpose(1, 2) + self.damping**2 * eye
            pinv = jf.transpose(1, 2) @ torch.linalg.inv(jjt)  # [B, nj, m]
            z = rest * free
            step = (pinv @ resid.unsqueeze(-1)).squeeze(-1)
            step = step + z - (pinv @ (jf @ z.unsqueeze(-1))).squeeze(-1)
            new = torch.where(pinned, dq, step * free)
            target = q + new
            out = ~pinned & ((target > upper) | (target < lower))
            if not out.any():
                return new
            dq = torch.where(out, torch.minimum(torch.maximum(target, lower), upper) - q, new)
            pinned |= out
        return dq

    def __call__(self, ee_target: torch.Tensor, gripper_open: torch.Tensor,
                 yaw: torch.Tensor | None = None) -> torch.Tensor:
        """Actions [B, 8] stepping the tcp towards ``ee_target`` [B, 3] (and hand ``yaw`` [B]).

        ``gripper_open`` [B] in [0, 1]: 0 closed, 1 open.
        """
        dq = self.joint_step(ee_target, yaw)
        return self.action_map.inverse(self.task.joint_pos + dq, gripper_open)
