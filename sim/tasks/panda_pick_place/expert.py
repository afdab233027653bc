"""panda_pick_place's scripted expert."""

from __future__ import annotations

import math

import torch

from sim.tasks.panda_base import TABLE_TOP
from sim.tasks.panda_base.expert import ScriptedExpert
from sim.tasks.panda_base.ik import nearest_yaw, wrapped_abs
from sim.tasks.panda_pick_place.task import SUCCESS_RADIUS, PandaPickPlace


class PickPlaceExpert(ScriptedExpert):
    """Scripted pick-and-place over 6D differential IK whose phase is a function of the state.

    Every step the phase is chosen afresh from the tcp, hand yaw, gripper opening,
    grasp, the ``lifted`` latch (all observed by a policy) and the cube and target, so a
    behaviour cloner can copy the expert from observations (the first that holds):

    7 retreat upwards (open) when the lifted cube rests near the target, released;
    6 open when it rests there still grasped; 5 lower onto the target when grasped,
    above the table and over the target; 4 carry at ``carry_height`` to above the
    target when grasped and lifted ``carry_lift`` or more; 3 lift when grasped with the
    fingers closed on it; 2 close when the tcp is at grasp height around the cube;
    1 descend (open) when over the cube with the hand square to it; else 0 go above
    the cube (lifting straight up first when low). A dropped cube starts over at 0.
    """

    task: PandaPickPlace

    ABOVE, DESCEND, CLOSE, LIFT, CARRY, LOWER, OPEN, RETREAT = range(8)
    hover = 0.07  # tcp height above the cube top before descending
    carry_height = 0.14  # tcp height while carrying
    carry_lift = 0.05  # cube lift from which it is carried towards the target
    closed = 0.6  # gripper opening below which the fingers hold the cube
    over = 0.01  # planar tcp-to-cube (or cube-to-target) distance that counts as over it
    rest = 0.004  # cube lift below which it rests on the table

    def geometry(self) -> dict[str, torch.Tensor]:
        """Targets and relations every phase decision and target uses, per env."""
        t = self.task
        cube, goal, ee = t.cube_pos, t.goal, t.ee_pos
        grasp_z = (cube[:, 2] - 0.004).clamp_min(TABLE_TOP + 0.012)
        return {
            "grasp_z": grasp_z,
            "yaw": nearest_yaw(t.cube_yaw, t.ee_yaw, math.pi / 2),
            "to_cube": (ee[:, :2] - cube[:, :2]).norm(dim=1),
            "to_goal": (goal[:, :2] - cube[:, :2]).norm(dim=1),
        }

    def observe(self) -> None:
        """The phase of every env from its current state (see the class doc)."""
        t, g = self.task, self.geometry()
        ee = t.ee_pos
        grasped, height = t.grasped(), t.cube_height
        resting_at_target = t.lifted & (height < self.rest) & (g["to_goal"] < SUCCESS_RADIUS / 2)
        square = wrapped_abs(t.ee_yaw - g["yaw"], math.pi / 2) < 0.08
        at_grasp = (g["to_cube"] < 1.2 * self.over) & (ee[:, 2] < g["grasp_z"] + 0.008)
        phase = torch.full_like(self.phase, self.ABOVE)
        phase[(g["to_cube"] < self.over) & square] = self.DESCEND
        phase[at_grasp] = self.CLOSE
        held = grasped & (t.gripper_opening[:, 0] < self.closed)
        phase[held] = self.LIFT
        phase[held & (height > self.carry_lift)] = self.CARRY
        phase[held & (height > self.rest) & (g["to_goal"] < self.over)] = self.LOWER
        phase[grasped & resting_at_target] = self.OPEN
        phase[~grasped & resting_at_target] = self.RETREAT
        self.phase.copy_(phase)

    def act(self) -> torch.Tensor:
        """Actions for the current phase of every env."""
        t, g = self.task, self.geometry()
        cube, goal, ee, h = t.cube_pos, t.goal, t.ee_pos, t.cube_half
        ph, n = self.phase, t.sim.num_envs
        in_hand = ee - cube  # keep the cube's offset in the hand while carrying and placing
        place = goal + in_hand
        place[:, 2] = TABLE_TOP + h + in_hand[:, 2] - 0.003

        target = cube.clone()
        target[:, 2] = TABLE_TOP + 2 * h + self.hover
        low = (ph == self.ABOVE) & (ee[:, 2] < TABLE_TOP + 2 * h + 0.02)
        target[low, :2] = ee[low, :2]  # from beside the cube, first straight up
        m = (ph == self.DESCEND) | (ph == self.CLOSE)
        target[m, 2] = g["grasp_z"][m]
        m = (ph == self.LIFT) | (ph == self.RETREAT) | (ph == self.OPEN)
        target[m] = ee[m]
        m = (ph == self.LIFT) | (ph == self.RETREAT)
        target[m, 2] = TABLE_TOP + self.carry_height
        m = ph == self.CARRY
        target[m, :2] = place[m, :2]
        target[m, 2] = TABLE_TOP + self.carry_height
        m = ph == self.LOWER
        target[m] = place[m]
        gripper = torch.ones(n, dtype=torch.float64, device=t.sim.device)
        gripper[(ph >= self.CLOSE) & (ph <= self.LOWER)] = 0.0
        yaw = torch.where(ph <= self.CLOSE, g["yaw"], t.ee_yaw)
        return self.move(self.waypoint(target), gripper, yaw)
