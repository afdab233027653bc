"""panda_pick_place's own reward terms: pure batched functions of the task (a
:class:`sim.tasks.panda_pick_place.task.PandaPickPlace`; the arm and cube terms are
shared, in :mod:`sim.tasks.panda_base`)."""

from __future__ import annotations

import torch

from sim.tasks.panda_base.cube import CubeTask


def reach(task: CubeTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the tcp-to-cube distance: ``1 - tanh(d / std)``."""
    return 1.0 - torch.tanh(task.ee_cube_dist / std)


def grasp(task: CubeTask) -> torch.Tensor:
    """[B] 1.0 while the cube is grasped."""
    return task.grasped().to(torch.float64)


def lift(task: CubeTask, height: float) -> torch.Tensor:
    """[B] the grasped cube's lift as a share of ``height`` (0 when not grasped)."""
    return task.grasped() * (task.cube_height / height).clamp(0.0, 1.0)
