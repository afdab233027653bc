"""panda_reach's observation and reward terms.

Pure batched functions of the task (a :class:`sim.tasks.panda_reach.task.PandaReach`).
"""

from __future__ import annotations

from typing import Protocol

import torch

from robots.panda.observation import target_rel


class ReachingTask(Protocol):
    """What the terms read from the task (:class:`sim.tasks.panda_reach.task.PandaReach`)."""

    @property
    def target(self) -> torch.Tensor:
        """[B, 3] target position in the world frame (m)."""
        ...

    @property
    def ee_pos(self) -> torch.Tensor:
        """[B, 3] tcp position in the world frame (m)."""
        ...

    @property
    def dist(self) -> torch.Tensor:
        """[B] tcp-to-target distance (m)."""
        ...

    @property
    def joint_vel(self) -> torch.Tensor:
        """[B, nj] joint velocities (rad/s, m/s for the fingers)."""
        ...


def obs_target_rel(task: ReachingTask) -> torch.Tensor:
    """[B, 3] target relative to the tcp."""
    return target_rel(task.target, task.ee_pos)


def distance(task: ReachingTask) -> torch.Tensor:
    """[B] negated tcp-to-target distance (a gradient from anywhere)."""
    return -task.dist


def near(task: ReachingTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the tcp-to-target distance: ``1 - tanh(d / std)``."""
    return 1.0 - torch.tanh(task.dist / std)


def joint_vel_l2(task: ReachingTask) -> torch.Tensor:
    """[B] squared joint velocities."""
    return task.joint_vel.square().sum(1)
