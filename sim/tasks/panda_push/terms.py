"""panda_push's own observation and reward terms: pure batched functions of the task
(a :class:`sim.tasks.panda_push.task.PandaPush`; the arm and cube terms are shared,
in :mod:`sim.tasks.panda_base`)."""

from __future__ import annotations

import torch

from sim.tasks.panda_base.cube import CubeTask


def obs_push_target_rel(task: CubeTask) -> torch.Tensor:
    """[B, 3] the reward's push target relative to the tcp."""
    return task.push_target - task.ee_pos


def push_approach(task: CubeTask) -> torch.Tensor:
    """[B] negated tcp-to-push-target distance (a gradient from anywhere)."""
    return -task.ee_push_dist


def push_pose(task: CubeTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the tcp-to-push-target distance: ``1 - tanh(d / std)``."""
    return 1.0 - torch.tanh(task.ee_push_dist / std)


def gripper_open(task: CubeTask) -> torch.Tensor:
    """[B] the gripper opening in [0, 1] (a penalty with a negative weight)."""
    return task.gripper_opening[:, 0]
