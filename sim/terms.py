"""Term functions any task can use: pure batched functions of a :class:`sim.task.Task`."""

from __future__ import annotations

import torch

from sim.task import Task


def last_action(task: Task) -> torch.Tensor:
    """[B, na] the action of the last step (an observation term)."""
    return task.last_action


def action_rate(task: Task) -> torch.Tensor:
    """[B] squared change of the action since the previous step (a reward term)."""
    return (task.last_action - task.prev_action).square().sum(1)


def success(task: Task) -> torch.Tensor:
    """[B] 1.0 while the task's success condition holds (a reward term)."""
    return task.success().to(torch.float64)
