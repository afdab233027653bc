"""panda_push's own observation and reward terms: pure batched functions of the task.

The task is a :class:`sim.tasks.panda_push.task.PandaPush`; the arm and cube terms
are shared, in :mod:`sim.tasks.panda_base`.
"""

from __future__ import annotations

from typing import Protocol

import torch


class PushingTask(Protocol):
    """What the terms read from the task (:class:`sim.tasks.panda_push.task.PandaPush`)."""

    @property
    def ee_pos(self) -> torch.Tensor:
        """[B, 3] world position of the tcp (m)."""
        ...

    @property
    def push_target(self) -> torch.Tensor:
        """[B, 3] the dense reward's tcp target, world frame (m)."""
        ...

    @property
    def ee_push_dist(self) -> torch.Tensor:
        """[B] tcp-to-push-target distance (m)."""
        ...

    @property
    def ee_low_dist(self) -> torch.Tensor:
        """[B] tcp-to-push-target distance, the target at pushing height (m)."""
        ...

    @property
    def pushing(self) -> torch.Tensor:
        """[B] bool: the tcp is at the push target at pushing height."""
        ...

    @property
    def ee_push_frame(self) -> torch.Tensor:
        """[B, 3] the tcp's offset from the cube centre in the push frame (m).

        Along the cube-to-goal direction, lateral to it (to the left of it, seen from
        above) and up.
        """
        ...

    @property
    def cube_on_table(self) -> torch.Tensor:
        """[B] bool: the cube rests on the table."""
        ...

    @property
    def cube_goal_speed(self) -> torch.Tensor:
        """[B] planar speed of the cube centre towards the goal (m/s; < 0: away)."""
        ...

    @property
    def cube_speed(self) -> torch.Tensor:
        """[B] planar speed of the cube centre (m/s)."""
        ...

    @property
    def ee_speed(self) -> torch.Tensor:
        """[B] planar speed of the tcp (m/s)."""
        ...

    @property
    def cube_goal_dist(self) -> torch.Tensor:
        """[B] planar cube-to-goal distance (m)."""
        ...

    @property
    def gripper_opening(self) -> torch.Tensor:
        """[B, 1] gripper opening in [0, 1]."""
        ...

    def success(self) -> torch.Tensor:
        """[B] bool: the episode's goal is reached."""
        ...


def obs_push_target_rel(task: PushingTask) -> torch.Tensor:
    """[B, 3] the reward's push target relative to the tcp."""
    return task.push_target - task.ee_pos


def push_approach(task: PushingTask) -> torch.Tensor:
    """[B] negated tcp-to-push-target distance (a gradient from anywhere)."""
    return -task.ee_push_dist


def push_pose(task: PushingTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the tcp-to-push-target distance, ``1 - tanh(d / std)``.

    0 after success (the success term takes over).
    """
    return (1.0 - torch.tanh(task.ee_push_dist / std)) * ~task.success()


def push_low(task: PushingTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the distance to the low pushing pose, ``1 - tanh(d / std)``.

    The pushing target at pushing height, never raised by the approach lift, so a tcp
    resting on top of the cube's back edge (where the raised target of
    :func:`push_pose` follows it) scores far less than one low behind the cube. 0
    after success and while the cube is off the table (the target lets go of the tcp
    over the goal, which must not pay for a cube held there).
    """
    return (1.0 - torch.tanh(task.ee_low_dist / std)) * (task.cube_on_table & ~task.success())


def push_cube(task: PushingTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the planar cube-to-goal distance, ``1 - tanh(d / std)``, gated.

    Non-zero only while the tcp is at the push target (:attr:`pushing`) and the cube
    rests on the table, and until success. A cube carried or lifted towards the goal
    scores 0.
    """
    gate = task.pushing & task.cube_on_table & ~task.success()
    return (1.0 - torch.tanh(task.cube_goal_dist / std)) * gate


def push_progress(task: PushingTask, speed: float, taper: float = 0.0) -> torch.Tensor:
    """[B] the cube's speed towards the goal over ``speed``, clipped to [0, 1], gated.

    Gated like :func:`push_cube`: non-zero only while the tcp is at the push target and
    the cube rests on the table, until success. Waiting at the pushing pose earns 0,
    pushing the cube towards the goal earns at once. With ``taper`` > 0 (m) the payment
    falls linearly to 0 over the last ``taper`` of the cube-to-goal distance, so speed
    on arrival (which carries the cube through the goal) is not paid.
    """
    gate = task.pushing & task.cube_on_table & ~task.success()
    paid = (task.cube_goal_speed / speed).clamp(0.0, 1.0) * gate
    if taper > 0.0:
        paid = paid * (task.cube_goal_dist / taper).clamp(max=1.0)
    return paid


def push_lateral(task: PushingTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the tcp's lateral offset from the push line, gated.

    ``1 - tanh(|l| / std)``, ``l`` the tcp's planar offset across the line through the
    cube centre along the cube-to-goal direction (:attr:`ee_push_frame`'s lateral
    component). Gated like :func:`push_cube`: non-zero only while the tcp is at the
    push target and the cube rests on the table, until success; it pays a tcp that
    pushes through the cube's centre over one that slips along its back face.
    """
    gate = task.pushing & task.cube_on_table & ~task.success()
    return (1.0 - torch.tanh(task.ee_push_frame[:, 1].abs() / std)) * gate


def goal_rest(task: PushingTask, speed: float) -> torch.Tensor:
    """[B] ``1 - tanh(v / speed)`` of the cube's planar speed ``v``, only on success.

    Pays for the cube at rest in the goal: a cube pushed through the success disc at
    speed earns little of it on its way through, one stopped inside earns 1 per step.
    0 while the episode's goal is not reached.
    """
    return (1.0 - torch.tanh(task.cube_speed / speed)) * task.success()


def goal_hold(task: PushingTask, speed: float) -> torch.Tensor:
    """[B] ``1 - tanh(v / speed)`` of the tcp's planar speed ``v``, only on success.

    Pays the hand for stopping once the cube is in the goal: a tcp that keeps moving
    at pushing speed (and pushes the cube back out of the goal) earns little of it, a
    still one 1 per step. 0 while the episode's goal is not reached.
    """
    return (1.0 - torch.tanh(task.ee_speed / speed)) * task.success()


def gripper_open(task: PushingTask) -> torch.Tensor:
    """[B] the gripper opening in [0, 1] (a penalty with a negative weight)."""
    return task.gripper_opening[:, 0]
