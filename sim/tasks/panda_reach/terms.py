"""panda_reach's observation and reward terms.

Pure batched functions of the task (a :class:`sim.tasks.panda_reach.task.PandaReach`).
"""

from __future__ import annotations

import torch

from robots.panda.observation import target_rel
from sim.tasks.panda_base import PandaTask


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
