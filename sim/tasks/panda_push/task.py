"""panda_push: push a cube across the table into a goal region."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import torch

from robots.panda.observation import PushGeometry
from robots.panda.observation import push_target as robot_push_target
from sim.task import TermFunctions, per_step
from sim.tasks.panda_base import ARM_OBSERVATIONS, TABLE_TOP
from sim.tasks.panda_base.cube import CUBE_OBSERVATIONS, CubeTask
from sim.tasks.panda_push.config import PandaPushConfig
from sim.tasks.panda_push.terms import (
    goal_hold,
    goal_rest,
    gripper_open,
    obs_push_target_rel,
    push_approach,
    push_cube,
    push_lateral,
    push_low,
    push_pose,
    push_progress,
)
from sim.terms import action_rate, success

SUCCESS_RADIUS = 0.05  # planar cube centre to goal centre
REST_HEIGHT = 0.01  # the cube counts as on the table below this lift
CONTACT_DISTANCE = 0.01  # finger pad centre to cube surface
REACHED_DISTANCE = 0.06  # tcp to cube centre: "at the cube"
PUSHING_DISTANCE = 0.03  # tcp this close to the push target: "pushing" (gates push_cube)

PUSH_GEOMETRY = PushGeometry(cube_half=CubeTask.cube_half, table_top=TABLE_TOP)
PUSH_HEIGHT = PUSH_GEOMETRY.height  # pushing pose: tcp height above the table (the expert's)


def push_target(ee_pos: torch.Tensor, cube_pos: torch.Tensor, goal_xy: torch.Tensor,
                cube_half: float, lift: bool = True,
                release_radius: float = PUSH_GEOMETRY.release_radius) -> torch.Tensor:
    """[B, 3] where the dense push reward pulls the tcp (world frame).

    The deployment's own function (:func:`robots.panda.observation.push_target`) on this
    task's geometry with a cube of half size ``cube_half`` and the target let go within
    ``release_radius`` of the goal, so the policy's observation on the robot and in
    simulation cannot drift apart.
    """
    geometry = replace(PUSH_GEOMETRY, cube_half=cube_half, release_radius=release_radius)
    return robot_push_target(ee_pos, cube_pos, goal_xy, geometry, lift=lift)


class PandaPush(CubeTask):
    """Push a 5 cm cube (0.1 kg) into a green goal disc 10-20 cm away on the table.

    Success: the cube rests on the table (lifted < 1 cm) with its centre within
    5 cm (planar) of the goal centre. The episode terminates if the cube leaves
    the workspace (x outside [0.1, 0.9] m or |y| > 0.6 m); a cube tipped onto
    another face is still a cube, so tipping does not terminate.

    Privileged progress in [0, 1] (1 exactly on success, else at most 0.99)::

        pushed  = clip(1 - d_cube_goal / d_cube_goal_at_reset, 0, 1)
        moved   = pushed > 0.1            # later stages imply the earlier ones
        reach   = 1 if moved else clip((d0 - d_ee_cube) / (d0 - 0.06), 0, 1)
        contact = 1 if moved or a finger pad is within 1 cm of the cube surface else 0
        progress = 0.2 * reach + 0.1 * contact + 0.7 * pushed

    (``d0`` is the tcp-to-cube distance at reset.)

    Observation: the cube terms of :class:`CubeTask` plus ``push_target_rel``,
    the reward's :func:`push_target` relative to the tcp (as panda_reach observes
    its target): the policy need not derive the push direction from the cube and
    goal positions itself.

    Reward (weights and parameters: :class:`PandaPushConfig`), staged and gated: the
    dense "oracle" terms ``push_approach`` (linear, a gradient from the start pose
    ~0.5 m away) and ``push_pose`` (tanh kernel) towards :func:`push_target`;
    ``push_cube`` (a tanh kernel of the cube-to-goal distance) only while the tcp is
    at the push target and the cube rests on the table; ``gripper_open`` (a penalty:
    the closed fingers are the pusher) and ``action_rate``; and ``success``, the
    largest term, which replaces the kernels once it holds. Optional terms (weight 0
    by default): ``push_low`` (a kernel to the pushing pose, never raised by the
    approach lift), ``push_progress`` (the cube's speed towards the goal, gated like
    ``push_cube``, optionally tapered off on arrival), ``push_lateral`` (a kernel of the
    tcp's offset across the push line, gated like ``push_cube``), ``goal_rest`` (the
    cube at rest in the goal, so pushing it through the goal pays less than stopping)
    and ``goal_hold`` (the tcp still while the cube is in the goal, so the hand stops
    instead of pushing the cube back out).
    A cube lifted over the goal or a tcp hovering there scores far less than success.
    A sparse reward mode keeps only ``success``.
    """

    name = "panda_push"
    instruction = "push the red cube into the green goal region"
    episode_length_s = 5.0
    goal_radius = SUCCESS_RADIUS
    config_class = PandaPushConfig
    observation_functions: ClassVar[TermFunctions] = {
        **ARM_OBSERVATIONS, **CUBE_OBSERVATIONS, "push_target_rel": obs_push_target_rel}
    reward_functions: ClassVar[TermFunctions] = {
        "push_approach": push_approach, "push_pose": push_pose, "push_low": push_low,
        "push_cube": push_cube, "push_progress": push_progress,
        "push_lateral": push_lateral, "goal_rest": goal_rest, "goal_hold": goal_hold,
        "gripper_open": gripper_open, "action_rate": action_rate, "success": success}

    @property
    def release_radius(self) -> float:
        """The cube this close to the goal (m): :func:`push_target` is the tcp itself.

        The config's ``settings.release_radius``; an exported policy's metadata carries the
        task's settings, so the deployment builds the same observation.
        """
        return float(self.cfg.settings["release_radius"])

    @property
    @per_step
    def push_target(self) -> torch.Tensor:
        """[B, 3] the dense reward's tcp target (:func:`push_target`)."""
        return push_target(self.ee_pos, self.cube_pos, self.goal[:, :2], self.cube_half,
                           release_radius=self.release_radius)

    @property
    @per_step
    def ee_push_dist(self) -> torch.Tensor:
        """[B] distance of the tcp to :attr:`push_target`."""
        return (self.push_target - self.ee_pos).norm(dim=1)

    @property
    @per_step
    def ee_low_dist(self) -> torch.Tensor:
        """[B] distance of the tcp to the pushing target at pushing height.

        :func:`push_target` without the approach lift: behind the cube, low.
        """
        target = push_target(self.ee_pos, self.cube_pos, self.goal[:, :2], self.cube_half,
                             lift=False, release_radius=self.release_radius)
        return (target - self.ee_pos).norm(dim=1)

    @property
    def pushing(self) -> torch.Tensor:
        """[B] bool: the tcp is within ``PUSHING_DISTANCE`` of the low pushing target."""
        return self.ee_low_dist < PUSHING_DISTANCE

    @property
    @per_step
    def ee_push_frame(self) -> torch.Tensor:
        """[B, 3] the tcp's offset from the cube centre in the push frame (m).

        Along the planar cube-to-goal direction, lateral to it (positive to the left
        of the direction, seen from above) and up; a cube on its goal gives the x axis.
        """
        offset = self.ee_pos - self.cube_pos
        to_goal = self.goal[:, :2] - self.cube_pos[:, :2]
        distance = to_goal.norm(dim=1, keepdim=True)
        x_axis = torch.zeros_like(to_goal)
        x_axis[:, 0] = 1.0
        direction = torch.where(distance > 1e-6, to_goal / distance.clamp_min(1e-6), x_axis)
        along = (offset[:, :2] * direction).sum(1)
        lateral = direction[:, 0] * offset[:, 1] - direction[:, 1] * offset[:, 0]
        return torch.stack([along, lateral, offset[:, 2]], 1)

    @property
    @per_step
    def cube_goal_speed(self) -> torch.Tensor:
        """[B] planar speed of the cube centre towards the goal (m/s; < 0: away)."""
        to_goal = self.goal[:, :2] - self.cube_pos[:, :2]
        direction = to_goal / to_goal.norm(dim=1, keepdim=True).clamp_min(1e-6)
        velocity = self.sim.qvel[:, self.cube_dofs][:, :2]  # free joint: world-frame linear
        return (velocity * direction).sum(1)

    @property
    @per_step
    def cube_speed(self) -> torch.Tensor:
        """[B] planar speed of the cube centre (m/s)."""
        return self.sim.qvel[:, self.cube_dofs][:, :2].norm(dim=1)

    @property
    @per_step
    def ee_speed(self) -> torch.Tensor:
        """[B] planar speed of the tcp (m/s): the site Jacobian times the arm's joint speeds."""
        jac = self.sim.site_jacobian(self.ee)[:, :2, self.dof_ids]
        return (jac @ self.sim.qvel[:, self.dof_ids].unsqueeze(-1)).squeeze(-1).norm(dim=1)

    @property
    def cube_on_table(self) -> torch.Tensor:
        """[B] the cube rests on the table (lifted less than ``REST_HEIGHT``)."""
        return self.cube_height < REST_HEIGHT

    @per_step
    def success(self) -> torch.Tensor:
        """Cube centre within 5 cm of the goal centre, resting on the table."""
        return (self.cube_goal_dist < SUCCESS_RADIUS) & self.cube_on_table

    def touching(self) -> torch.Tensor:
        """[B] a finger pad is within 1 cm of the cube surface."""
        return (self.pad_cube_distance() < CONTACT_DISTANCE).any(1)

    def progress(self) -> torch.Tensor:
        """Staged progress (see the class docstring)."""
        pushed = (1.0 - self.cube_goal_dist / self.start_cube_goal).clamp(0.0, 1.0)
        moved = pushed > 0.1
        d0 = self.start_ee_cube
        reach = ((d0 - self.ee_cube_dist) / (d0 - REACHED_DISTANCE).clamp_min(1e-3)).clamp(0, 1)
        reach = torch.where(moved, 1.0, reach)
        contact = (moved | self.touching()).to(torch.float64)
        staged = 0.2 * reach + 0.1 * contact + 0.7 * pushed
        return torch.where(self.success(), 1.0, staged.clamp(0.0, 0.99))
