"""panda_pick_place's own reward terms: pure batched functions of the task.

The task is a :class:`sim.tasks.panda_pick_place.task.PandaPickPlace`; the arm and
cube terms are shared, in :mod:`sim.tasks.panda_base`.
"""

from __future__ import annotations

from typing import Protocol

import torch


class PickingTask(Protocol):
    """What the terms read from a :class:`sim.tasks.panda_pick_place.task.PandaPickPlace`."""

    @property
    def ee_cube_dist(self) -> torch.Tensor:
        """[B] distance of the tcp to the cube centre (m)."""
        ...

    @property
    def cube_height(self) -> torch.Tensor:
        """[B] height of the cube centre above its resting height (m)."""
        ...

    def grasped(self) -> torch.Tensor:
        """[B] bool: both pads touch the cube and the cube centre lies between them."""
        ...


def reach(task: PickingTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the tcp-to-cube distance: ``1 - tanh(d / std)``."""
    return 1.0 - torch.tanh(task.ee_cube_dist / std)


def grasp(task: PickingTask) -> torch.Tensor:
    """[B] 1.0 while the cube is grasped."""
    return task.grasped().to(torch.float64)


def lift(task: PickingTask, height: float) -> torch.Tensor:
    """[B] the grasped cube's lift as a share of ``height`` (0 when not grasped)."""
    return task.grasped() * (task.cube_height / height).clamp(0.0, 1.0)
