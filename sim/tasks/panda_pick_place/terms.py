"""panda_pick_place's own observation and reward terms: pure batched functions of the task.

The task is a :class:`sim.tasks.panda_pick_place.task.PandaPickPlace`; the arm and
cube terms are shared, in :mod:`sim.tasks.panda_base`.

The reward is staged and gated (ManiSkill's PickCube, Isaac Lab's Franka lift):
``reach`` the cube, ``grasp`` it, ``lift`` it (only while grasped), carry it to the
target (``place_coarse``, ``place_fine``: 3D, only while grasped *and* after a
grasped lift), and ``success`` (the cube lifted earlier, now resting on the target,
released), which replaces every dense term while it holds. So a cube pushed or
dragged along the table, a hand hovering over the target and a cube thrown through
the air above it earn none of the carrying terms. Once the cube rests on the target
``release`` pays for opening the hand.
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

    @property
    def cube_place_dist(self) -> torch.Tensor:
        """[B] distance of the cube centre to its resting pose on the target (m)."""
        ...

    @property
    def placed(self) -> torch.Tensor:
        """[B] bool: lifted (the latch), now resting on the table at the target."""
        ...

    @property
    def gripper_opening(self) -> torch.Tensor:
        """[B, 1] gripper opening in [0, 1]."""
        ...

    @property
    def carrying(self) -> torch.Tensor:
        """[B] bool: grasped, and lifted by the gripper since it was last dropped."""
        ...

    @property
    def lifted(self) -> torch.Tensor:
        """[B] bool latch: the grasped cube has been lifted (cleared when it is dropped)."""
        ...

    def grasped(self) -> torch.Tensor:
        """[B] bool: both pads touch the cube and the cube centre lies between them."""
        ...

    def success(self) -> torch.Tensor:
        """[B] bool: the episode's goal is reached."""
        ...


def obs_grasp_state(task: PickingTask) -> torch.Tensor:
    """[B, 2] the stage flags: grasped now, and lifted (the latch that success needs)."""
    return torch.stack([task.grasped(), task.lifted], dim=1).to(torch.float64)


def reach(task: PickingTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the tcp-to-cube distance, ``1 - tanh(d / std)``; 0 on success."""
    return (1.0 - torch.tanh(task.ee_cube_dist / std)) * ~task.success()


def grasp(task: PickingTask) -> torch.Tensor:
    """[B] 1.0 while the cube is grasped."""
    return task.grasped().to(torch.float64)


def lift(task: PickingTask, height: float) -> torch.Tensor:
    """[B] the grasped cube's lift as a share of ``height``, 1 once lifted (the latch).

    0 when not grasped. Holding 1 after the lift lets the cube come down onto the
    target without losing this term.
    """
    share = (task.cube_height / height).clamp(0.0, 1.0)
    return torch.where(task.lifted, 1.0, share) * task.grasped()


def place(task: PickingTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the cube's distance to its resting pose on the target.

    Only while :attr:`carrying`. The distance is 3D, so the kernel also pulls the
    carried cube down onto the target (a planar one left the cube held over it).
    The config uses it twice, coarse and fine (two ``std``), as Isaac Lab's lift does.
    """
    return (1.0 - torch.tanh(task.cube_place_dist / std)) * task.carrying


def release(task: PickingTask) -> torch.Tensor:
    """[B] the gripper opening while the cube is :attr:`placed`, until success.

    The last stage: opening the hand around the placed cube pays step by step up to
    the release, where ``success`` takes over.
    """
    return task.gripper_opening[:, 0] * (task.placed & ~task.success())


def place_coarse(task: PickingTask, std: float) -> torch.Tensor:
    """[B] :func:`place` with a wide kernel (a gradient from anywhere on the table)."""
    return place(task, std)


def place_fine(task: PickingTask, std: float) -> torch.Tensor:
    """[B] :func:`place` with a narrow kernel (precision at the target)."""
    return place(task, std)
