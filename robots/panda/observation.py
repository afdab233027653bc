"""The Panda arm's policy observation terms as pure torch functions (no simulator needed).

The simulated Panda tasks (``sim.tasks.panda_base``, ``sim.tasks.panda_reach``) and
the ROS deployment node build their vectors with these functions, the node from
joint states and :class:`robots.kinematics.SiteKinematics` for the tcp position.
The panda_push terms (the cube's, and the push target of :func:`push_target`) are
reproduced here from an object pose and a goal, for the node; a parity test holds
them equal to the simulated task's own observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from robots.math import quat_to_matrix

JOINT_VEL_OBS_SCALE = 0.1  # joint velocities enter the observation scaled by this


def gripper_opening(finger_pos: torch.Tensor, lower: float, upper: float) -> torch.Tensor:
    """[B, 1] in [0, 1] (0 closed, 1 open) from the finger joint positions [B, nf]."""
    return (finger_pos.mean(1, keepdim=True) - lower) / (upper - lower)


def build_arm_observation(joint_pos: torch.Tensor, joint_vel: torch.Tensor,
                          default_pos: torch.Tensor, opening: torch.Tensor, ee_pos: torch.Tensor,
                          last_action: torch.Tensor) -> torch.Tensor:
    """The noiseless arm terms [B, 2 nj + 1 + 3 + na], in the Panda tasks' order.

    Joint positions minus default, scaled joint velocities, gripper opening, tcp position (arm base
    frame = world), last action.
    """
    return torch.cat([joint_pos - default_pos, JOINT_VEL_OBS_SCALE * joint_vel, opening,
                      ee_pos, last_action], dim=1)


def target_rel(target: torch.Tensor, ee_pos: torch.Tensor) -> torch.Tensor:
    """[B, 3] target minus tcp position (the last panda_reach observation term)."""
    return target - ee_pos


def build_reach_observation(joint_pos: torch.Tensor, joint_vel: torch.Tensor,
                            default_pos: torch.Tensor, opening: torch.Tensor,
                            ee_pos: torch.Tensor, last_action: torch.Tensor,
                            target: torch.Tensor) -> torch.Tensor:
    """The noiseless 29-d panda_reach observation [B, 29] from plain tensors.

    Terms are in the task's order; the ROS deployment node calls this with joint states and
    kinematics.
    """
    return torch.cat([build_arm_observation(joint_pos, joint_vel, default_pos, opening, ee_pos,
                                            last_action), target_rel(target, ee_pos)], dim=1)


# ------------------------------------------------------------------ panda_push
@dataclass(frozen=True)
class PushGeometry:
    """The cube and the push target of panda_push, in metres (arm base frame).

    The values are the task's (``sim.tasks.panda_push``): the cube's half size, the
    table top's height, and the dense reward's push target (see :func:`push_target`).
    """

    cube_half: float = 0.025
    table_top: float = 0.0
    standoff: float = 0.015  # pushing pose: tcp this far behind the cube's back face
    height: float = 0.022  # pushing pose: tcp height above the table
    lead: float = 0.02  # the target leads the pushing pose by this towards the goal
    back_face_margin: float = 0.011  # the tcp counts as behind the cube up to this past it
    approach_slope: float = 5.0  # target lift per metre the tcp is past the back face
    approach_lift: float = 0.12  # ... up to this
    release_radius: float = 0.03  # cube this close to the goal: the target is the tcp


PUSH_GEOMETRY = PushGeometry()


def push_target(ee_pos: torch.Tensor, cube_pos: torch.Tensor, goal_xy: torch.Tensor,
                geometry: PushGeometry = PUSH_GEOMETRY, lift: bool = True) -> torch.Tensor:
    """[B, 3] the point panda_push's dense reward pulls the tcp [B, 3] to.

    Behind the cube [B, 3] on the side away from the goal [B, 2], at pushing height,
    led ``lead`` towards the goal: inside the cube's back face, so the closed fingers
    cannot reach it and pressing towards it pushes the cube. While the tcp is past the
    back face the target is raised by ``approach_slope`` x that overshoot (up to
    ``approach_lift``; never without ``lift``), so the tcp comes round over the cube
    instead of sweeping through it. Once the cube is within ``release_radius`` of the
    goal the target is the tcp itself, so the shaping lets go.
    """
    g = geometry
    to_goal = goal_xy - cube_pos[:, :2]
    distance = to_goal.norm(dim=1, keepdim=True)
    direction = to_goal / distance.clamp_min(1e-6)
    behind = cube_pos[:, :2] - (g.cube_half + g.standoff - g.lead) * direction
    along = ((ee_pos[:, :2] - cube_pos[:, :2]) * direction).sum(1, keepdim=True)
    past = (along + g.cube_half + g.back_face_margin).clamp_min(0.0)
    height = g.table_top + g.height + (g.approach_slope * past).clamp_max(g.approach_lift) * lift
    return torch.where(distance < g.release_radius, ee_pos, torch.cat([behind, height], 1))


def rot6d(quat_wxyz: torch.Tensor) -> torch.Tensor:
    """[B, 6] the first two columns of the rotation matrix of unit quaternions [B, 4]."""
    return quat_to_matrix(quat_wxyz)[:, :, :2].transpose(1, 2).reshape(-1, 6)


def build_push_observation(joint_pos: torch.Tensor, joint_vel: torch.Tensor,
                           default_pos: torch.Tensor, opening: torch.Tensor,
                           ee_pos: torch.Tensor, last_action: torch.Tensor,
                           cube_pos: torch.Tensor, cube_quat: torch.Tensor,
                           goal_xy: torch.Tensor,
                           geometry: PushGeometry = PUSH_GEOMETRY) -> torch.Tensor:
    """The noiseless panda_push observation [B, 2 nj + 4 + na + 18] from plain tensors.

    The arm terms (:func:`build_arm_observation`), then cube centre [3], cube
    orientation (:func:`rot6d`) [6], goal minus cube [3], cube minus tcp [3] and the
    push target minus tcp [3], in the task's order. ``cube_quat`` is (w, x, y, z) and
    unit; the goal [B, 2] lies on the table (its height is ``geometry.table_top``).
    """
    goal = torch.cat([goal_xy, torch.full_like(goal_xy[:, :1], geometry.table_top)], dim=1)
    target = push_target(ee_pos, cube_pos, goal_xy, geometry)
    return torch.cat([build_arm_observation(joint_pos, joint_vel, default_pos, opening, ee_pos,
                                            last_action),
                      cube_pos, rot6d(cube_quat), goal - cube_pos, cube_pos - ee_pos,
                      target - ee_pos], dim=1)
