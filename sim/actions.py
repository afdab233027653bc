"""Map policy actions in [-1, 1] to actuator targets, as defined by the robot spec.

Used by every simulation backend and by the ROS deployment node, so that the
meaning of an action is the same in training and on hardware.
"""

from __future__ import annotations

import torch

from robots import RobotSpec


class JointPositionAction:
    """``q_target = default + action_scale * action`` clamped to the joint limits.

    A gripper, if any, takes the last action dimension: -1 closed, +1 open, and
    drives all its finger joints to the same target.
    """

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
        q = torch.maximum(torch.minimum(q, self.upper), self.lower)
        if not self.num_fingers:
            return q
        g = self.robot.gripper
        opening = g.lower + 0.5 * (a[:, -1:] + 1.0) * (g.upper - g.lower)
        return torch.cat([q, opening.expand(-1, self.num_fingers)], dim=1)

    def inverse(self, q_target: torch.Tensor, gripper_open: torch.Tensor | None = None):
        """Actions that command joint targets [B, nj] (and gripper opening in [0, 1])."""
        a = ((q_target.to(self.default.dtype) - self.default) / self.scale).clamp(-1.0, 1.0)
        if self.num_fingers:
            g = gripper_open if gripper_open is not None else torch.ones(a.shape[0], 1)
            a = torch.cat([a, (2.0 * g.reshape(-1, 1).to(a.dtype) - 1.0)], dim=1)
        return a
