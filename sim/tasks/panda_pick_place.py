"""panda_pick_place: pick a cube up and place it on a target on the table."""

from __future__ import annotations

import math

import torch

from sim.task import RewardTerm, per_step
from sim.tasks.cube_task import CubeTask
from sim.tasks.panda_base import TABLE_TOP
from sim.tasks.panda_ik import nearest_yaw, wrapped_abs
from sim.tasks.scripted_expert import ScriptedExpert

SUCCESS_RADIUS = 0.03  # planar cube centre to target centre
REST_HEIGHT = 0.01  # the cube counts as on the table below this lift
LIFT_HEIGHT = 0.04  # "lifted": the cube is this far above the table
PAD_DISTANCE = 0.01  # finger pad to cube surface for a pad to count as touching


class PandaPickPlace(CubeTask):
    """Pick a 4 cm cube (0.1 kg, random yaw) and place it on a green target 15-25 cm away.

    Grasped: both finger pads within 1 cm of the cube surface with the cube
    centre between them. Success: the cube rests on the table (lifted < 1 cm)
    with its centre within 3 cm (planar) of the target centre and is not
    grasped (released). The episode terminates if the cube leaves the
    workspace (x outside [0.1, 0.9] m or |y| > 0.6 m).

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

    Reward: the dense "oracle" terms ``reach``, ``grasp``, ``lift``,
    ``cube_to_goal`` and ``action_rate``, plus the sparse ``success`` term
    (weight 10); a sparse reward mode keeps only ``success``.
    """

    name = "panda_pick_place"
    instruction = "pick up the red cube and place it on the green target"
    episode_length_s = 8.0
    cube_half = 0.02
    goal_distance = (0.15, 0.25)
    goal_radius = SUCCESS_RADIUS

    def setup(self, sim) -> None:
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

    def reward_terms(self) -> list[RewardTerm]:
        """Dense shaping (reach, grasp, lift, cube_to_goal, action_rate) and sparse success."""
        def lift() -> torch.Tensor:
            return self.grasped() * (self.cube_height / LIFT_HEIGHT).clamp(0.0, 1.0)

        return [
            RewardTerm("reach", lambda: 1.0 - torch.tanh(self.ee_cube_dist / 0.1), 1.0),
            RewardTerm("grasp", lambda: self.grasped().to(torch.float64), 0.5),
            RewardTerm("lift", lift, 1.0),
            RewardTerm("cube_to_goal", lambda: 1.0 - torch.tanh(self.cube_goal_dist / 0.1), 2.0),
            RewardTerm("action_rate", self.action_rate, -0.01),
            RewardTerm("success", lambda: self.success().to(torch.float64), 10.0),
        ]

    @per_step
    def success(self) -> torch.Tensor:
        """Cube on the table within 3 cm of the target, released."""
        return ((self.cube_goal_dist < SUCCESS_RADIUS) & (self.cube_height < REST_HEIGHT)
                & ~self.grasped())

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


class PickPlaceExpert(ScriptedExpert):
    """Scripted pick-and-place: a per-env state machine with timers over 6D differential IK.

    Phases: 0 above the cube (hand yaw square to the cube), 1 descend around
    it, 2 close (timer), 3 lift, 4 carry above the target, 5 lower, 6 open
    (timer), 7 retreat upwards. A cube lost while lifting or carrying sends
    the env back to 0.
    """

    ABOVE, DESCEND, CLOSE, LIFT, CARRY, LOWER, OPEN, RETREAT = range(8)
    hover = 0.07  # tcp height above the cube top before descending
    carry_height = 0.14  # tcp height while carrying
    close_steps = 15
    open_steps = 12

    def __init__(self, task: PandaPickPlace, noise: float = 0.0,
                 gen: torch.Generator | None = None):
        super().__init__(task, noise, gen)
        self.yaw = torch.zeros(task.sim.num_envs, dtype=torch.float64, device=task.sim.device)

    def act(self) -> torch.Tensor:
        """Actions for the current phase of every env."""
        t, n = self.task, self.task.sim.num_envs
        cube, goal, ee, h = t.cube_pos, t.goal, t.ee_pos, t.cube_half
        ph = self.phase.clone()  # the phase at the start of this step
        # Hand yaw: square to the cube (period pi/2), nearest the arm's natural yaw there;
        # frozen once the fingers close.
        approach = ph <= self.DESCEND
        square = nearest_yaw(t.cube_yaw, torch.atan2(cube[:, 1], cube[:, 0]), math.pi / 2)
        self.yaw = torch.where(approach, square, self.yaw)
        in_hand = ee - cube  # keep the cube's offset in the hand while carrying and placing
        place = goal + in_hand
        place[:, 2] = TABLE_TOP + h + in_hand[:, 2] - 0.003

        target = ee.clone()
        gripper = torch.ones(n, dtype=torch.float64, device=self.task.sim.device)
        m = ph == self.ABOVE
        target[m] = cube[m]
        target[m, 2] = TABLE_TOP + 2 * h + self.hover
        m = ph == self.DESCEND
        target[m] = cube[m]
        target[m, 2] = (cube[m, 2] - 0.004).clamp_min(TABLE_TOP + 0.012)
        m = ph == self.CLOSE
        target[m] = cube[m]
        target[m, 2] = (cube[m, 2] - 0.004).clamp_min(TABLE_TOP + 0.012)
        m = (ph == self.LIFT) | (ph == self.RETREAT)
        target[m, 2] = TABLE_TOP + self.carry_height
        m = ph == self.CARRY
        target[m, :2] = place[m, :2]
        target[m, 2] = TABLE_TOP + self.carry_height
        m = ph == self.LOWER
        target[m] = place[m]
        gripper[(ph >= self.CLOSE) & (ph <= self.LOWER)] = 0.0
        target = self.waypoint(target)
        err = (target - ee).norm(dim=1)
        yaw_err = wrapped_abs(t.ee_yaw - self.yaw, math.pi / 2)

        grasped = t.grasped()
        lost = (ph >= self.LIFT) & (ph <= self.CARRY) & ~grasped & (self.timer > 10)
        self.set_phase((ph == self.ABOVE) & self.arrived(err, 0.01) & (yaw_err < 0.08),
                       self.DESCEND)
        self.set_phase((ph == self.DESCEND) & self.arrived(err, 0.006), self.CLOSE)
        self.set_phase((ph == self.CLOSE) & (self.timer >= self.close_steps), self.LIFT)
        self.set_phase((ph == self.LIFT) & (t.cube_height > 0.06), self.CARRY)
        planar = (target[:, :2] - ee[:, :2]).norm(dim=1)
        self.set_phase((ph == self.CARRY) & self.arrived(planar, 0.008), self.LOWER)
        self.set_phase((ph == self.LOWER) & ((t.cube_height < 0.004) | (self.timer > 60)),
                       self.OPEN)
        self.set_phase((ph == self.OPEN) & (self.timer >= self.open_steps), self.RETREAT)
        self.set_phase(lost, self.ABOVE)
        return self.ik(target, gripper, self.yaw)

