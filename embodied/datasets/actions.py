"""One episode's actions in every action space, from its actions and first joint positions.

A dataset is recorded in one action space (the env's mapping, :mod:`robots.actions`).
Replaying its actions through a fresh mapping of that space, started at the episode's
first measured joint positions, gives the commanded joint targets ``Q_t`` of every step
exactly (the mappings read only their own previous target, never the measured state).
The equivalent action of another space is then what moves that space's command from
``Q_{t-1}`` to ``Q_t`` (``Q_{-1}``: the first joint positions):

- ``joint_position``: ``(Q_t - default) / action_scale``;
- ``joint_delta``: ``(Q_t - Q_{t-1}) / step`` (``step = speed * velocity_limit * dt``);
- ``ee_delta``: ``(fk(Q_t) - fk(Q_{t-1})) / (max_speed * dt)`` of the tcp position;
- ``ee_delta_yaw``: the same plus the hand-yaw change ``/ (max_yaw_rate * dt)``;

each clipped to [-1, 1], with the recorded gripper action appended (-1, closed, for a
space that holds the fingers closed, :data:`robots.actions.CLOSED_KINDS`). A clipped value
(e.g. a joint target jump larger than one joint-delta step) is the nearest action that
space has; the columns' statistics show how often it happens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from robots.actions import (
    ACTION_KINDS,
    CLOSED_KINDS,
    ENV_ACTION_KINDS,
    EEDeltaAction,
    JointDeltaAction,
    JointPositionAction,
    make_action_map,
)
from robots.math import wrap_angle
from robots.spec import RobotSpec

ACTION_COLUMN_PREFIX = "action."  # action.<kind>: the equivalent actions of another space


def action_column(kind: str) -> str:
    """The dataset column of the equivalent actions of space ``kind``."""
    return ACTION_COLUMN_PREFIX + kind


def action_names(kind: str, robot: RobotSpec) -> list[str]:
    """Names of the action dimensions of space ``kind`` (the ``names`` of its feature)."""
    if kind.startswith("ee_delta"):
        names = ["dx", "dy", "dz"] + (["dyaw"] if kind.startswith("ee_delta_yaw") else [])
    else:
        names = list(robot.joint_names)
    has_gripper = robot.gripper is not None and robot.gripper.joints and kind not in CLOSED_KINDS
    return names + (["gripper"] if has_gripper else [])


def action_kind(space: JointPositionAction) -> str:
    """The :data:`~robots.actions.ENV_ACTION_KINDS` name of an action mapping."""
    if not isinstance(space, EEDeltaAction):
        return space.type
    return ("ee_delta_yaw" if space.yaw else "ee_delta") + ("_closed" if space.closed else "")


class ActionSpaces:
    """Converts one space's action sequences into every other space's.

    ``native`` is the space the actions were taken in (one of
    :data:`robots.actions.ENV_ACTION_KINDS`; the others are :data:`ACTION_KINDS`, with
    the fingers closed where ``native`` has no gripper dimension); ``speed`` is the env's
    joint-delta speed, ``control_dt`` its control period, ``ee_bounds`` its tcp box (as
    for the env).
    """

    def __init__(self, native: str, robot: RobotSpec, control_dt: float, speed: float = 0.5,
                 ee_bounds: tuple[Sequence[float], Sequence[float]] | None = None):
        if native not in ENV_ACTION_KINDS:
            raise ValueError(f"unknown action space '{native}'; choose one of {ENV_ACTION_KINDS}")
        self.native, self.robot = native, robot
        self.maps = {k: make_action_map(k, robot, 1, speed, "cpu", control_dt, ee_bounds)
                     for k in ACTION_KINDS}
        self._native_kwargs = (speed, control_dt, ee_bounds)

    def others(self) -> list[str]:
        """The spaces other than the native one, in :data:`ACTION_KINDS` order."""
        return [k for k in ACTION_KINDS if k != self.native]

    def native_map(self, num_envs: int) -> JointPositionAction:
        """A fresh mapping of the native space for ``num_envs`` envs (replays the targets)."""
        speed, dt, bounds = self._native_kwargs
        return make_action_map(self.native, self.robot, num_envs, speed, "cpu", dt, bounds)

    def targets(self, actions: np.ndarray, joint_pos0: np.ndarray) -> np.ndarray:
        """Commanded joint targets [T, nj] of native ``actions`` [T, A] from ``joint_pos0``."""
        space = self.native_map(1)
        q0 = torch.as_tensor(joint_pos0, dtype=torch.float64).reshape(1, -1)
        space.reset(torch.zeros(1, dtype=torch.long), q0)
        a = torch.as_tensor(actions, dtype=torch.float64)
        return torch.stack([space(a[t:t + 1])[0, :space.num_joints]
                            for t in range(len(a))]).numpy()

    def convert(self, actions: np.ndarray, joint_pos0: np.ndarray,
                targets: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Equivalent float32 actions [T, A_kind] of every other space, by kind.

        ``targets`` [T, nj]: the commanded joint targets if known (else :meth:`targets`).
        """
        q = torch.as_tensor(self.targets(actions, joint_pos0) if targets is None else targets,
                            dtype=torch.float64)
        q0 = torch.as_tensor(joint_pos0, dtype=torch.float64).reshape(1, -1)
        prev = torch.cat([q0, q[:-1]])
        a_native = torch.as_tensor(actions, dtype=torch.float64)
        gripper = (torch.full_like(a_native[:, :1], -1.0) if self.native in CLOSED_KINDS
                   else a_native[:, -1:])
        has_gripper = self.robot.gripper is not None and self.robot.gripper.joints
        out = {}
        for kind in self.others():
            a = self._between(self.maps[kind], prev, q)
            if has_gripper:
                a = torch.cat([a, gripper], dim=1)
            out[kind] = a.clamp(-1.0, 1.0).to(torch.float32).numpy()
        return out

    @staticmethod
    def _between(space: JointPositionAction, prev: torch.Tensor,
                 now: torch.Tensor) -> torch.Tensor:
        """Unclipped actions of ``space`` that command ``now`` after ``prev`` ([T, nj] each)."""
        if isinstance(space, EEDeltaAction):
            (p0, r0), (p1, r1) = space.kinematics.pose(prev), space.kinematics.pose(now)
            a = (p1 - p0) / space.max_step
            if space.yaw:
                yaw0 = torch.atan2(r0[:, 1, 0], r0[:, 0, 0])
                yaw1 = torch.atan2(r1[:, 1, 0], r1[:, 0, 0])
                a = torch.cat([a, (wrap_angle(yaw1 - yaw0) / space.max_yaw_step)[:, None]], 1)
            return a
        if isinstance(space, JointDeltaAction):
            return (now - prev) / space.step
        return (now - space.default) / space.scale
