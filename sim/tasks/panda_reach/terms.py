"""panda_reach's observation and reward terms: pure batched functions of the task
(a :class:`sim.tasks.panda_reach.task.PandaReach`)."""

from __future__ import annotations

import torch

from sim.tasks.panda_base import PandaTask, build_arm_observation


def target_rel(target: torch.Tensor, ee_pos: torch.Tensor) -> torch.Tensor:
    """[B, 3] target minus tcp position (the last observation term)."""
    return target - ee_pos


def build_reach_observation(joint_pos: torch.Tensor, joint_vel: torch.Tensor,
                            default_pos: torch.Tensor, opening: torch.Tensor,
                            ee_pos: torch.Tensor, last_action: torch.Tensor,
                            target: torch.Tensor) -> torch.Tensor:
    """The noiseless 29-d panda_reach observation [B, 29] from plain tensors (the task's
    term order); the ROS deployment node calls this with joint states and kinematics."""
    return torch.cat([build_arm_observation(joint_pos, joint_vel, default_pos, opening, ee_pos,
                                            last_action), target_rel(target, ee_pos)], dim=1)


def obs_target_rel(task: PandaTask) -> torch.Tensor:
    """[B, 3] target relative to the tcp."""
    return target_rel(task.target, task.ee_pos)


def distance(task: PandaTask) -> torch.Tensor:
    """[B] negated tcp-to-target distance (a gradient from anywhere)."""
    return -task.dist


def near(task: PandaTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the tcp-to-target distance: ``1 - tanh(d / std)``."""
    return 1.0 - torch.tanh(task.dist / std)


def joint_vel_l2(task: PandaTask) -> torch.Tensor:
    """[B] squared joint velocities."""
    return task.joint_vel.square().sum(1)
