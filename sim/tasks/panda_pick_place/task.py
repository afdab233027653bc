"""panda_pick_place: pick a cube up and place it on a target on the table."""

from __future__ import annotations

from typing import ClassVar

import torch

from sim.protocol import SimState
from sim.task import TermBounds, TermFunctions, per_step
from sim.tasks.panda_base import ARM_OBSERVATIONS, TABLE_TOP
from sim.tasks.panda_base.cube import CUBE_OBSERVATIONS, CubeTask
from sim.tasks.panda_pick_place.config import PandaPickPlaceConfig
from sim.tasks.panda_pick_place.terms import (
    grasp,
    lift,
    obs_grasp_state,
    place_coarse,
    place_fine,
    reach,
    release,
)
from sim.terms import action_rate, success

SUCCESS_RADIUS = 0.03  # planar cube centre to target centre
REST_HEIGHT = 0.01  # the cube counts as on the table below this lift
LIFT_HEIGHT = 0.04  # "lifted": the cube is this far above the table
PAD_DISTANCE = 0.01  # finger pad to cube surface for a pad to count as touching


class PandaPickPlace(CubeTask):
    """Pick a 4 cm cube (0.1 kg, random yaw) and place it on a green target 15-25 cm away.

    Grasped: both finger pads within 1 cm of the cube surface with the cube
    centre between them. Success: the cube was picked up (``lifted``, below) and
    now rests on the table (lifted < 1 cm) with its centre within 3 cm (planar)
    of the target centre, released (not grasped); a cube pushed or dragged onto
    the target without being lifted is not a success. The episode terminates if
    the cube leaves the workspace (x outside [0.1, 0.9] m or |y| > 0.6 m).

    Privileged progress in [0, 1] (1 exactly on success, else at most 0.99),
    with ``d`` the tcp-to-cube distance (``d0`` at reset), ``h`` the cube's
    height above the table and ``D`` the planar cube-to-target distance (``D0``
    at reset)::

        reach  = 1 if had_grasp else clip((d0 - d) / (d0 - 0.01), 0, 1)
        grasp  = had_grasp                        # latched
        lift   = 1 if lifted else (clip(h / 0.04, 0, 1) if grasped else 0)
        carry  = clip(1 - D / D0, 0, 1) if lifted else 0
        placed = lifted and D < 0.03 and h < 0.01
        progress = 0.15 reach + 0.15 grasp + 0.2 lift + 0.4 carry + 0.1 placed

    ``had_grasp`` latches on the first grasp and ``lifted`` on the first
    grasped lift above 4 cm; both clear when the cube lies on the table
    ungrasped away from the target (it was dropped), so the stages stay
    earned through lowering and release.

    Observation: the arm and cube terms plus ``grasp_state`` (grasped, lifted).

    Reward (weights and parameters: :class:`PandaPickPlaceConfig`), staged and
    gated (:mod:`sim.tasks.panda_pick_place.terms`): ``reach``, ``grasp``,
    ``lift`` (while grasped), ``place_coarse`` and ``place_fine`` (while
    :attr:`carrying`), ``release`` (the hand's opening while :attr:`placed`),
    ``action_rate``, and ``success``, the largest, which
    replaces the dense terms while it holds. A sparse reward mode keeps only
    ``success``.
    """

    name = "panda_pick_place"
    instruction = "pick up the red cube and place it on the green target"
    episode_length_s = 8.0
    cube_half = 0.02
    goal_distance = (0.15, 0.25)
    goal_radius = SUCCESS_RADIUS
    config_class = PandaPickPlaceConfig
    observation_functions: ClassVar[TermFunctions] = {
        **ARM_OBSERVATIONS, **CUBE_OBSERVATIONS, "grasp_state": obs_grasp_state}
    reward_functions: ClassVar[TermFunctions] = {
        "reach": reach, "grasp": grasp, "lift": lift, "place_coarse": place_coarse,
        "place_fine": place_fine, "release": release, "action_rate": action_rate,
        "success": success}

    def setup(self, sim: SimState) -> None:
        """Per-env stage latches."""
        super().setup(sim)
        self.had_grasp = torch.zeros(sim.num_envs, dtype=torch.bool, device=sim.device)
        self.lifted = torch.zeros(sim.num_envs, dtype=torch.bool, device=sim.device)

    @per_step
    def grasped(self) -> torch.Tensor:
        """[B] both pads touch the cube and the cube centre lies between them."""
        pads = self.pad_pos
        span = pads[:, 1] - pads[:, 0]
        t = ((self.cube_pos - pads[:, 0]) * span).sum(1) / span.square().sum(1).clamp_min(1e-8)
        between = (t > 0.0) & (t < 1.0)
        return (self.pad_cube_distance() < PAD_DISTANCE).all(1) & between

    def post_physics(self) -> None:
        """Update the stage latches."""
        grasped = self.grasped()
        self.had_grasp |= grasped
        self.lifted |= grasped & (self.cube_height > LIFT_HEIGHT)
        dropped = ~grasped & (self.cube_height < REST_HEIGHT) & (
            self.cube_goal_dist > SUCCESS_RADIUS + 0.02)
        self.had_grasp &= ~dropped
        self.lifted &= ~dropped

    def observation_bounds(self) -> TermBounds:
        """The cube task's bounds and the stage flags (0 or 1)."""
        return {**super().observation_bounds(), "grasp_state": (0.0, 1.0)}

    @property
    @per_step
    def carrying(self) -> torch.Tensor:
        """[B] grasped and lifted (the latch): the cube is being carried or placed."""
        return self.grasped() & self.lifted

    @property
    @per_step
    def cube_place_dist(self) -> torch.Tensor:
        """[B] distance of the cube centre to its resting pose on the target centre."""
        rest = self.goal.clone()
        rest[:, 2] = TABLE_TOP + self.cube_half
        return (rest - self.cube_pos).norm(dim=1)

    @property
    @per_step
    def placed(self) -> torch.Tensor:
        """[B] picked up (the ``lifted`` latch), now on the table within 3 cm of the target."""
        return ((self.cube_goal_dist < SUCCESS_RADIUS) & (self.cube_height < REST_HEIGHT)
                & self.lifted)

    @per_step
    def success(self) -> torch.Tensor:
        """Cube picked up, now on the table within 3 cm of the target, released."""
        return self.placed & ~self.grasped()

    def progress(self) -> torch.Tensor:
        """Staged progress (see the class docstring)."""
        d0, h = self.start_ee_cube, self.cube_height
        reach = ((d0 - self.ee_cube_dist) / (d0 - 0.01).clamp_min(1e-3)).clamp(0.0, 1.0)
        reach = torch.where(self.had_grasp, 1.0, reach)
        lift = torch.where(self.grasped(), (h / LIFT_HEIGHT).clamp(0.0, 1.0), 0.0)
        lift = torch.where(self.lifted, 1.0, lift)
        carry = torch.where(
            self.lifted, (1.0 - self.cube_goal_dist / self.start_cube_goal).clamp(0.0, 1.0), 0.0)
        placed = self.lifted & (self.cube_goal_dist < SUCCESS_RADIUS) & (h < REST_HEIGHT)
        staged = (0.15 * reach + 0.15 * self.had_grasp + 0.2 * lift + 0.4 * carry
                  + 0.1 * placed)
        return torch.where(self.success(), 1.0, staged.clamp(0.0, 0.99))

    def reset(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        """Cube, target and cleared stage latches."""
        super().reset(env_ids, gen)
        self.had_grasp[env_ids] = False
        self.lifted[env_ids] = False
