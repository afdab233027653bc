"""Map policy actions in [-1, 1] to actuator targets, as defined by the robot spec.

Used by every simulation backend (through :mod:`sim.actions`) and by the ROS
deployment node, so that the meaning of an action is the same in training and on
hardware. Two action spaces:

- ``joint_position`` (:class:`JointPositionAction`): absolute joint targets around
  the default pose, ``q_target = default + action_scale * action`` (legged robots,
  reaching);
- ``joint_delta`` (:class:`JointDeltaAction`): the action moves the previous
  target, ``q_target += speed * velocity_limit * control_dt * action``: a joint
  velocity command bounded by the robot's velocity limits (precise manipulation,
  where an absolute action's exploration noise moves the hand by decimetres).
"""

from __future__ import annotations

import torch

from robots.spec import RobotSpec


class JointPositionAction:
    """``q_target = default + action_scale * action`` clamped to the joint limits.

    A gripper, if any, takes the last action dimension: -1 closed, +1 open, and
    drives all its finger joints to the same target.
    """

    type = "joint_position"
    mapping = "q_target = default + action_scale * clip(action, -1, 1), clamped to [lower, upper]"

    def __init__(self, robot: RobotSpec, device: torch.device | str = "cpu"):
        self.robot = robot
        f64 = dict(dtype=torch.float64, device=device)
        self.default = torch.tensor(robot.default_pose, **f64)
        self.scale = torch.tensor(robot.action_scale, **f64)
        self.lower = torch.tensor(robot.lower, **f64)
        self.upper = torch.tensor(robot.upper, **f64)
        self.num_joints = len(robot.joints)
        self.num_fingers = len(robot.gripper.joints) if robot.gripper else 0
        self.action_dim = robot.action_dim
        self.ctrl_dim = self.num_joints + self.num_fingers

    def __call__(self, actions: torch.Tensor) -> torch.Tensor:
        """Actuator targets [B, ctrl_dim] for actions [B, action_dim] (clipped to [-1, 1])."""
        a = actions.to(self.default.dtype).clamp(-1.0, 1.0)
        q = self.default + self.scale * a[:, : self.num_joints]
        return self._with_gripper(self._clamp(q), a)

    def reset(self, env_ids: torch.Tensor, joint_pos: torch.Tensor) -> torch.Tensor:
        """Actuator targets [n, ctrl_dim] that hold envs ``env_ids`` after a reset (action 0)."""
        return self(torch.zeros(len(env_ids), self.action_dim, dtype=self.default.dtype))

    def target_range(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Lowest and highest joint targets one action can command now ([nj] or [B, nj])."""
        return (torch.maximum(self.default - self.scale, self.lower),
                torch.minimum(self.default + self.scale, self.upper))

    def inverse(self, q_target: torch.Tensor, gripper_open: torch.Tensor | None = None):
        """Actions that command joint targets [B, nj] (and gripper opening in [0, 1])."""
        a = (q_target.to(self.default.dtype) - self.default) / self.scale
        return self._gripper_action(a.clamp(-1.0, 1.0), gripper_open)

    def metadata(self) -> dict:
        """The mapping's parameters, for an exported policy's metadata."""
        return {"type": self.type, "mapping": self.mapping,
                "default_pose": self.default.tolist(), "action_scale": self.scale.tolist(),
                "lower": self.lower.tolist(), "upper": self.upper.tolist()}

    def _clamp(self, q: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(q, self.upper), self.lower)

    def _with_gripper(self, q: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        if not self.num_fingers:
            return q
        g = self.robot.gripper
        opening = g.lower + 0.5 * (a[:, -1:] + 1.0) * (g.upper - g.lower)
        return torch.cat([q, opening.expand(-1, self.num_fingers)], dim=1)

    def _gripper_action(self, a: torch.Tensor, gripper_open: torch.Tensor | None) -> torch.Tensor:
        if self.num_fingers:
            g = gripper_open if gripper_open is not None else torch.ones(a.shape[0], 1)
            a = torch.cat([a, (2.0 * g.reshape(-1, 1).to(a.dtype) - 1.0)], dim=1)
        return a


class JointDeltaAction(JointPositionAction):
    """``q_target += speed * velocity_limit * control_dt * action``, clamped to the limits.

    Stateful: one target per env (``num_envs`` rows), set to the joint positions
    at reset, so action 0 holds the arm where it is. With ``speed`` 0.5 a full
    action moves a Panda joint at half its velocity limit. The gripper is as in
    :class:`JointPositionAction`.
    """

    type = "joint_delta"
    mapping = ("q_target = clamp(q_target_prev + step * clip(action, -1, 1), lower, upper), "
               "step = speed * velocity_limit * control_dt, q_target = q at start")

    def __init__(self, robot: RobotSpec, num_envs: int, speed: float = 0.5,
                 device: torch.device | str = "cpu"):
        super().__init__(robot, device)
        if not 0.0 < speed <= 1.0:
            raise ValueError(f"joint_delta speed must be in (0, 1] (a share of the velocity "
                             f"limits), got {speed}")
        self.speed = speed
        velocity = torch.tensor([j.velocity for j in robot.joints], dtype=self.default.dtype)
        self.step = speed * velocity * robot.control_dt
        self.target = self.default.expand(num_envs, -1).clone()

    def __call__(self, actions: torch.Tensor) -> torch.Tensor:
        """Advance every env's target by its action [B, action_dim]; targets [B, ctrl_dim]."""
        a = actions.to(self.default.dtype).clamp(-1.0, 1.0)
        # in place: the target stays a normal tensor under torch.inference_mode
        self.target.copy_(self._clamp(self.target + self.step * a[:, : self.num_joints]))
        return self._with_gripper(self.target, a)

    def reset(self, env_ids: torch.Tensor, joint_pos: torch.Tensor) -> torch.Tensor:
        """Targets of envs ``env_ids`` restart at their joint positions [n, nj]."""
        self.target[env_ids] = self._clamp(joint_pos.to(self.default.dtype))
        a = torch.zeros(len(env_ids), self.action_dim, dtype=self.default.dtype)
        return self._with_gripper(self.target[env_ids], a)

    def target_range(self) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, nj] bounds: one step either way from the current targets, within the limits."""
        return (self._clamp(self.target - self.step), self._clamp(self.target + self.step))

    def inverse(self, q_target: torch.Tensor, gripper_open: torch.Tensor | None = None):
        """Actions that move the targets towards ``q_target`` [B, nj] (at most one step)."""
        a = (q_target.to(self.default.dtype) - self.target) / self.step
        return self._gripper_action(a.clamp(-1.0, 1.0), gripper_open)

    def metadata(self) -> dict:
        """As :meth:`JointPositionAction.metadata`, plus the per-joint step and speed."""
        return {**super().metadata(), "step": self.step.tolist(), "speed": self.speed}


ACTION_TYPES = ("joint_position", "joint_delta")


def make_action_map(kind: str, robot: RobotSpec, num_envs: int, speed: float = 0.5,
                    device: torch.device | str = "cpu") -> JointPositionAction:
    """The action mapping ``kind`` (one of :data:`ACTION_TYPES`) for ``num_envs`` envs."""
    if kind == "joint_position":
        return JointPositionAction(robot, device)
    if kind == "joint_delta":
        return JointDeltaAction(robot, num_envs, speed, device)
    raise ValueError(f"unknown action type '{kind}'; choose one of {ACTION_TYPES}")
