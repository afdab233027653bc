"""panda_pick_place's scripted expert."""

from __future__ import annotations

import math

import torch

from sim.tasks.panda_base import TABLE_TOP
from sim.tasks.panda_base.expert import ScriptedExpert
from sim.tasks.panda_base.ik import nearest_yaw, wrapped_abs
from sim.tasks.panda_pick_place.task import PandaPickPlace


class PickPlaceExpert(ScriptedExpert):
    """Scripted pick-and-place: a per-env state machine with timers over 6D differential IK.

    Phases: 0 above the cube (hand yaw square to the cube), 1 descend around
    it, 2 close (timer), 3 lift, 4 carry above the target, 5 lower, 6 open
    (timer), 7 retreat upwards. A cube lost while lifting or carrying sends
    the env back to 0.
    """

    task: PandaPickPlace

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

