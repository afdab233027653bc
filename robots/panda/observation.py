"""The Panda arm's policy observation terms as pure torch functions (no simulator needed).

The simulated Panda tasks (``sim.tasks.panda_base``, ``sim.tasks.panda_reach``) and
the ROS deployment node build their vectors with these functions, the node from
joint states and :class:`robots.kinematics.SiteKinematics` for the tcp position.
"""

from __future__ import annotations

import torch

JOINT_VEL_OBS_SCALE = 0.1  # joint velocities enter the observation scaled by this


def gripper_opening(finger_pos: torch.Tensor, lower: float, upper: float) -> torch.Tensor:
    """[B, 1] in [0, 1] (0 closed, 1 open) from the finger joint positions [B, nf]."""
    return (finger_pos.mean(1, keepdim=True) - lower) / (upper - lower)


def build_arm_observation(joint_pos: torch.Tensor, joint_vel: torch.Tensor,
                          default_pos: torch.Tensor, opening: torch.Tensor, ee_pos: torch.Tensor,
                          last_action: torch.Tensor) -> torch.Tensor:
    """The noiseless arm terms [B, 2 nj + 1 + 3 + na], in the Panda tasks' order.

    Joint positions minus default, scaled joint velocities, gripper opening, tcp position (arm base
    frame = world), last action.
    """
    return torch.cat([joint_pos - default_pos, JOINT_VEL_OBS_SCALE * joint_vel, opening,
                      ee_pos, last_action], dim=1)


def target_rel(target: torch.Tensor, ee_pos: torch.Tensor) -> torch.Tensor:
    """[B, 3] target minus tcp position (the last panda_reach observation term)."""
    return target - ee_pos


def build_reach_observation(joint_pos: torch.Tensor, joint_vel: torch.Tensor,
                            default_pos: torch.Tensor, opening: torch.Tensor,
                            ee_pos: torch.Tensor, last_action: torch.Tensor,
                            target: torch.Tensor) -> torch.Tensor:
    """The noiseless 29-d panda_reach observation [B, 29] from plain tensors.

    Terms are in the task's order; the ROS deployment node calls this with joint states and
    kinematics.
    """
    return torch.cat([build_arm_observation(joint_pos, joint_vel, default_pos, opening, ee_pos,
                                            last_action), target_rel(target, ee_pos)], dim=1)
