"""Map policy actions in [-1, 1] to actuator targets, as defined by the robot spec.

Used by every simulation backend and by the ROS deployment node, so that the
meaning of an action is the same in training and on hardware. Three action spaces:

- ``joint_position`` (:class:`JointPositionAction`): absolute joint targets around
  the default pose, ``q_target = default + action_scale * action`` (legged robots,
  reaching);
- ``joint_delta`` (:class:`JointDeltaAction`): the action moves the previous
  target, ``q_target += speed * velocity_limit * control_dt * action``: a joint
  velocity command bounded by the robot's velocity limits (precise manipulation,
  where an absolute action's exploration noise moves the hand by decimetres);
- ``ee_delta`` (:class:`EEDeltaAction`): the action moves the commanded tool
  centre point (``ee`` site) by a bounded Cartesian step (plus, optionally, a hand
  yaw step) with the hand kept pointing down; damped least-squares IK on the
  site Jacobian of :class:`robots.kinematics.SiteKinematics` (torch, no MuJoCo)
  turns it into joint targets.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from robots.kinematics import SiteKinematics
from robots.math import clamp_norm, down_rotation, wrap_angle
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
        self.default = torch.tensor(robot.default_pose, dtype=torch.float64, device=device)
        self.scale = torch.tensor(robot.action_scale, dtype=torch.float64, device=device)
        self.lower = torch.tensor(robot.lower, dtype=torch.float64, device=device)
        self.upper = torch.tensor(robot.upper, dtype=torch.float64, device=device)
        self.num_joints = len(robot.joints)
        self.num_fingers = len(robot.gripper.joints) if robot.gripper else 0
        # 1: the last action dimension drives the fingers; 0: they are held closed
        self.gripper_dim = 1 if self.num_fingers else 0
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

    def inverse(self, q_target: torch.Tensor, gripper_open: torch.Tensor | None = None
                ) -> torch.Tensor:
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
        g = self.robot.gripper
        if g is None or not self.num_fingers:
            return q
        command = a[:, -1:] if self.gripper_dim else torch.full_like(a[:, :1], -1.0)
        opening = g.lower + 0.5 * (command + 1.0) * (g.upper - g.lower)
        return torch.cat([q, opening.expand(-1, self.num_fingers)], dim=1)

    def _gripper_action(self, a: torch.Tensor, gripper_open: torch.Tensor | None) -> torch.Tensor:
        if self.gripper_dim:
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
                 device: torch.device | str = "cpu", control_dt: float | None = None):
        super().__init__(robot, device)
        if not 0.0 < speed <= 1.0:
            raise ValueError(f"joint_delta speed must be in (0, 1] (a share of the velocity "
                             f"limits), got {speed}")
        self.speed = speed
        self.control_dt = control_dt or robot.control_dt
        velocity = torch.tensor([j.velocity for j in robot.joints], dtype=self.default.dtype)
        self.step = speed * velocity * self.control_dt
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

    def inverse(self, q_target: torch.Tensor, gripper_open: torch.Tensor | None = None
                ) -> torch.Tensor:
        """Actions that move the targets towards ``q_target`` [B, nj] (at most one step)."""
        a = (q_target.to(self.default.dtype) - self.target) / self.step
        return self._gripper_action(a.clamp(-1.0, 1.0), gripper_open)

    def metadata(self) -> dict:
        """As :meth:`JointPositionAction.metadata`, plus the per-joint step and speed."""
        return {**super().metadata(), "step": self.step.tolist(), "speed": self.speed,
                "control_dt": self.control_dt}


class EEDeltaAction(JointDeltaAction):
    """The action moves the commanded tcp: ``p_cmd += max_speed * control_dt * action[:3]``.

    Stateful like :class:`JointDeltaAction`: the joint targets restart at the measured
    joint positions on reset. Each step computes, at the current joint targets, the
    site pose and Jacobian (:class:`SiteKinematics`), the translation step (and, with
    ``yaw``, a hand-yaw step of ``max_yaw_rate * control_dt * action[3]``; without it
    the hand yaw of the reset pose is held) and the rotation error to a hand pointing
    down, and solves damped least squares ``dq = J^T (J J^T + damping^2 I)^-1 e`` with
    the null space pulled towards the default posture. The joint step is clamped to
    ``speed`` x the velocity limits x ``control_dt`` (velocity clamp), the new targets
    to the joint limits. ``bounds`` (low [3], high [3], robot base frame), if given,
    box the commanded tcp: a command into a table does not wind the targets up into
    it. Action layout: ``[dx, dy, dz, (dyaw), gripper]`` (the gripper as in
    :class:`JointPositionAction`); with ``closed`` the gripper has no action dimension
    and is commanded closed (a pusher: ``[dx, dy, dz, (dyaw)]``).
    """

    type = "ee_delta"
    mapping = ("p_cmd = fk(q_target) + max_speed * control_dt * clip(action[:3], -1, 1) "
               "(hand down, yaw held or stepped by max_yaw_rate * control_dt * action[3]); "
               "q_target += clamp(dls_ik(p_cmd), velocity step), clamped to [lower, upper]; "
               "q_target = q at start")

    def __init__(self, robot: RobotSpec, num_envs: int, speed: float = 1.0,
                 device: torch.device | str = "cpu", control_dt: float | None = None,
                 max_speed: float = 0.5, yaw: bool = False, max_yaw_rate: float = 1.5,
                 damping: float = 0.05, rot_weight: float = 0.3, posture_gain: float = 0.02,
                 bounds: tuple[Sequence[float], Sequence[float]] | None = None,
                 closed: bool = False):
        super().__init__(robot, num_envs, speed, device, control_dt)
        self.closed = closed
        if closed:
            self.gripper_dim = 0
        self.bounds = None if bounds is None else tuple(
            torch.tensor(b, dtype=self.default.dtype) for b in bounds)
        self.kinematics = SiteKinematics.from_robot(robot, "ee")
        self.max_speed, self.yaw, self.max_yaw_rate = max_speed, yaw, max_yaw_rate
        self.damping, self.rot_weight, self.posture_gain = damping, rot_weight, posture_gain
        self.max_step = max_speed * self.control_dt
        self.max_yaw_step = max_yaw_rate * self.control_dt
        self.command_dim = 4 if yaw else 3
        self.action_dim = self.command_dim + self.gripper_dim
        self.hand_yaw = self._yaw_at(self.target)

    def _yaw_at(self, q: torch.Tensor) -> torch.Tensor:
        rot = self.kinematics.pose(q)[1]
        return torch.atan2(rot[:, 1, 0], rot[:, 0, 0])

    def joint_step(self, q: torch.Tensor, translation: torch.Tensor,
                   yaw: torch.Tensor) -> torch.Tensor:
        """Damped least-squares joint step [B, nj] at joint positions ``q`` [B, nj].

        The step moves the tcp by ``translation`` [B, 3] and turns the hand to point
        down with hand yaw ``yaw`` [B] (rad), each joint bounded by one control step.
        """
        _, rot, jac = self.kinematics.jacobian(q)
        err_rot = 0.5 * torch.linalg.cross(rot, down_rotation(yaw), dim=1).sum(2)
        w = self.rot_weight
        err = torch.cat([translation, w * clamp_norm(err_rot, 0.3)], dim=1)
        jac = torch.cat([jac[:, :3], w * jac[:, 3:]], dim=1)
        eye = torch.eye(6, dtype=jac.dtype)
        pinv = jac.transpose(1, 2) @ torch.linalg.inv(
            jac @ jac.transpose(1, 2) + self.damping**2 * eye)
        rest = self.posture_gain * (self.default - q)
        null = rest - (pinv @ (jac @ rest.unsqueeze(-1))).squeeze(-1)
        dq = (pinv @ err.unsqueeze(-1)).squeeze(-1) + null
        return torch.maximum(torch.minimum(dq, self.step), -self.step)

    def __call__(self, actions: torch.Tensor) -> torch.Tensor:
        """Actuator targets [B, ctrl_dim] after moving each env's commanded tcp by its action.

        ``actions`` [B, action_dim] are clipped to [-1, 1].
        """
        a = actions.to(self.default.dtype).clamp(-1.0, 1.0)
        if self.yaw:
            self.hand_yaw.copy_(wrap_angle(self.hand_yaw + self.max_yaw_step * a[:, 3]))
        step = self.max_step * a[:, :3]
        if self.bounds is not None:
            now = self.kinematics.position(self.target)
            step = torch.maximum(torch.minimum(now + step, self.bounds[1]), self.bounds[0]) - now
        dq = self.joint_step(self.target, step, self.hand_yaw)
        self.target.copy_(self._clamp(self.target + dq))
        return self._with_gripper(self.target, a)

    def reset(self, env_ids: torch.Tensor, joint_pos: torch.Tensor) -> torch.Tensor:
        """Targets (and held hand yaw) of envs ``env_ids`` restart at joint positions [n, nj]."""
        targets = super().reset(env_ids, joint_pos)
        self.hand_yaw[env_ids] = self._yaw_at(self.target[env_ids])
        return targets

    def target_range(self) -> tuple[torch.Tensor, torch.Tensor]:
        """[nj] the joint limits (a Cartesian step has no per-joint range of its own)."""
        return self.lower, self.upper

    def inverse(self, q_target: torch.Tensor, gripper_open: torch.Tensor | None = None
                ) -> torch.Tensor:
        """Actions [B, action_dim] that move the commanded tcp towards that of ``q_target``.

        ``q_target`` [B, nj] are joint targets; the tcp (and hand yaw) moves at most one
        step towards their pose.
        """
        want, rot = self.kinematics.pose(q_target.to(self.default.dtype))
        now = self.kinematics.position(self.target)
        a = ((want - now) / self.max_step).clamp(-1.0, 1.0)
        if self.yaw:
            yaw = torch.atan2(rot[:, 1, 0], rot[:, 0, 0])
            step = wrap_angle(yaw - self.hand_yaw) / self.max_yaw_step
            a = torch.cat([a, step.clamp(-1.0, 1.0)[:, None]], dim=1)
        return self._gripper_action(a, gripper_open)

    def metadata(self) -> dict:
        """As :meth:`JointDeltaAction.metadata`, plus the Cartesian step settings."""
        return {**super().metadata(), "max_speed": self.max_speed, "yaw": self.yaw,
                "max_yaw_rate": self.max_yaw_rate, "damping": self.damping,
                "rot_weight": self.rot_weight, "posture_gain": self.posture_gain,
                "closed": self.closed,
                "bounds": None if self.bounds is None else [b.tolist() for b in self.bounds],
                "site": self.kinematics.site}


ACTION_TYPES = ("joint_position", "joint_delta", "ee_delta")
# The spaces a dataset's actions convert between: the types, plus ``ee_delta_yaw`` (an
# ee_delta mapping with the hand-yaw step, type ``ee_delta`` with ``yaw`` true in its
# metadata).
ACTION_KINDS = (*ACTION_TYPES, "ee_delta_yaw")
# ee_delta mappings whose fingers are held closed (no gripper action dimension; type
# ``ee_delta`` with ``closed`` true in its metadata): pushing, not grasping.
CLOSED_KINDS = ("ee_delta_closed", "ee_delta_yaw_closed")
# What an env's ``action`` setting may name.
ENV_ACTION_KINDS = (*ACTION_KINDS, *CLOSED_KINDS)


def make_action_map(kind: str, robot: RobotSpec, num_envs: int, speed: float = 0.5,
                    device: torch.device | str = "cpu", control_dt: float | None = None,
                    ee_bounds: tuple[Sequence[float], Sequence[float]] | None = None
                    ) -> JointPositionAction:
    """The action mapping ``kind`` (one of :data:`ENV_ACTION_KINDS`) for ``num_envs`` envs.

    It is stepped every ``control_dt`` seconds (None: the robot's own control period);
    ``ee_bounds`` is the (low, high) box [3] of the commanded tcp of ``ee_delta`` (m).
    Raises ValueError for an unknown ``kind``.
    """
    if kind == "joint_position":
        return JointPositionAction(robot, device)
    if kind == "joint_delta":
        return JointDeltaAction(robot, num_envs, speed, device, control_dt)
    if kind in ("ee_delta", "ee_delta_yaw", *CLOSED_KINDS):
        return EEDeltaAction(robot, num_envs, device=device, control_dt=control_dt,
                             bounds=ee_bounds, yaw=kind.startswith("ee_delta_yaw"),
                             closed=kind in CLOSED_KINDS)
    raise ValueError(f"unknown action type '{kind}'; choose one of {ENV_ACTION_KINDS}")


def action_map_from_metadata(action: dict, robot: RobotSpec, control_dt: float,
                             num_envs: int = 1) -> JointPositionAction:
    """The action mapping an exported policy's ``action`` metadata describes.

    ``action`` is ``metadata()`` of the training env's mapping; the mapping is stepped
    every ``control_dt`` seconds.
    """
    kind = str(action.get("type", "joint_position"))
    if kind != "ee_delta":
        return make_action_map(kind, robot, num_envs, float(action.get("speed", 0.5)),
                               control_dt=control_dt)
    settings = {k: action[k] for k in ("max_speed", "max_yaw_rate", "damping", "rot_weight",
                                       "posture_gain", "bounds") if k in action}
    return EEDeltaAction(robot, num_envs, float(action.get("speed", 1.0)), control_dt=control_dt,
                         yaw=bool(action.get("yaw", False)),
                         closed=bool(action.get("closed", False)), **settings)
