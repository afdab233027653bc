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
    """[B] tanh kernel of the tcp-to-push-target distance, ``1 - tanh(d / std)``, until
    success (then 0: the success term takes over)."""
    return (1.0 - torch.tanh(task.ee_push_dist / std)) * ~task.success()


def push_cube(task: CubeTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the planar cube-to-goal distance, ``1 - tanh(d / std)``, gated:
    only while the tcp is at the push target (:attr:`pushing`) and the cube rests on
    the table, and until success. A cube carried or lifted towards the goal scores 0."""
    gate = task.pushing & task.cube_on_table & ~task.success()
    return (1.0 - torch.tanh(task.cube_goal_dist / std)) * gate


def gripper_open(task: CubeTask) -> torch.Tensor:
    """[B] the gripper opening in [0, 1] (a penalty with a negative weight)."""
    return task.gripper_opening[:, 0]
