"""panda_push's scripted expert."""

from __future__ import annotations

import math

import torch

from sim.tasks.panda_base import TABLE_TOP
from sim.tasks.panda_base.expert import ScriptedExpert
from sim.tasks.panda_base.ik import nearest_yaw, wrapped_abs
from sim.tasks.panda_push.task import PandaPush


class PushExpert(ScriptedExpert):
    """Scripted pusher: a per-env state machine over 6D differential IK.

    Phases: 0 above the pre-push point (behind the cube, opposite the goal),
    1 descend to cube mid-height, 2 push through towards the goal (re-aimed at
    every step; back to 0 if the fingers slip off the cube's back), 3 done:
    back off and hold. The gripper stays closed; the closed fingers are the
    pusher, turned square to the push direction.
    """

    task: PandaPush

    ABOVE, DESCEND, PUSH, DONE = range(4)
    hover = 0.10  # tcp height for moving around the cube
    push_height = 0.022  # tcp height while pushing
    standoff = 0.065  # pre-push tcp distance behind the cube centre
    finger_half = 0.0105  # half thickness of the closed fingers along the push direction
    lead = 0.02  # how far ahead of contact the pushing target runs
    stop = 0.01  # distance left to the goal (along the push) at which pushing stops
    aim_until = 0.04  # the push direction is frozen below this cube-to-goal distance

    def __init__(self, task: PandaPush, noise: float = 0.0, gen: torch.Generator | None = None):
        super().__init__(task, noise, gen)
        n, device = task.sim.num_envs, task.sim.device
        self.dir = torch.zeros(n, 2, dtype=torch.float64, device=device)
        self.yaw = torch.zeros(n, dtype=torch.float64, device=device)

    def act(self) -> torch.Tensor:
        """Actions for the current phase of every env (closed gripper)."""
        t, n = self.task, self.task.sim.num_envs
        cube, goal, ee = t.cube_pos[:, :2], t.goal[:, :2], t.ee_pos
        to_goal = goal - cube
        c2g = to_goal.norm(dim=1)
        ph = self.phase.clone()  # the phase at the start of this step
        # Re-aim while the goal is far; close to it the direction is ill-conditioned.
        aim = ((ph != self.DONE) & (c2g > self.aim_until)) | (ph == self.ABOVE)
        self.dir = torch.where(aim[:, None], to_goal / c2g.clamp_min(1e-6)[:, None], self.dir)
        d = self.dir
        rel = ee[:, :2] - cube
        along = (rel * d).sum(1)
        lateral = (rel[:, 0] * d[:, 1] - rel[:, 1] * d[:, 0]).abs()
        pre = cube - self.standoff * d
        contact = cube - (t.cube_half + self.finger_half) * d
        remaining = (to_goal * d).sum(1)  # still to go along the push direction
        push_to = contact + remaining.clamp(0.0, self.lead)[:, None] * d

        target = torch.empty(n, 3, dtype=torch.float64, device=pre.device)
        target[:, :2] = pre
        target[:, 2] = TABLE_TOP + self.hover
        desc = ph == self.DESCEND
        target[desc, 2] = TABLE_TOP + self.push_height
        push = ph == self.PUSH
        target[push, :2] = push_to[push]
        target[push, 2] = TABLE_TOP + self.push_height
        done = ph == self.DONE
        target[done, :2] = (cube - 0.08 * d)[done]
        target[done, 2] = TABLE_TOP + self.hover
        target = self.waypoint(target)

        # Hand yaw square to the push direction (period pi/2): nearest the arm's natural yaw
        # while approaching, then continuous (no quarter-turn flips while in contact).
        ref = torch.where(ph == self.ABOVE, torch.atan2(pre[:, 1], pre[:, 0]), self.yaw)
        self.yaw = nearest_yaw(torch.atan2(d[:, 1], d[:, 0]), ref, math.pi / 2)
        yaw = self.yaw
        err = (target - ee).norm(dim=1)
        yaw_err = wrapped_abs(t.ee_yaw - yaw, math.pi / 2)

        # Transitions (evaluated on the state before this step's action).
        self.set_phase((ph == self.ABOVE) & self.arrived(err, 0.015) & (yaw_err < 0.15),
                       self.DESCEND)
        self.set_phase(desc & self.arrived(err, 0.012), self.PUSH)
        slipped = push & ((lateral > 0.03) | (along > -t.cube_half) | (along < -0.1))
        self.set_phase(slipped, self.ABOVE)
        self.set_phase(push & (remaining < self.stop), self.DONE)
        self.set_phase(done & (c2g > 0.03), self.ABOVE)
        # A re-approach from a pushing pose first lifts straight up.
        low = (self.phase == self.ABOVE) & (ee[:, 2] < TABLE_TOP + 0.07) & (err > 0.03)
        target[low, :2] = ee[low, :2]

        return self.ik(target, torch.zeros(n, device=target.device), yaw)
