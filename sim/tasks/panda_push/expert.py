"""panda_push's scripted expert."""

from __future__ import annotations

import math

import torch

from sim.tasks.panda_base import TABLE_TOP
from sim.tasks.panda_base.expert import ScriptedExpert
from sim.tasks.panda_base.ik import nearest_yaw, wrapped_abs
from sim.tasks.panda_push.task import PandaPush


class PushExpert(ScriptedExpert):
    """Scripted pusher over 6D differential IK whose phase is a function of the state.

    Phases (chosen afresh every step from the tcp, hand yaw, cube and goal, so the
    expert is Markovian in what a policy observes and a behaviour cloner can copy it):
    3 done when the cube centre is within ``stop`` of the goal (back off from the
    cube and hover); else
    2 push when the tcp is low and behind the cube, in line with the goal (the
    target runs ``lead`` ahead of the contact point towards the goal); else 1
    descend when the tcp is over the pre-push point (``standoff`` behind the cube,
    opposite the goal) with the hand square to the push direction, or low and in
    line behind the cube; else 0 go above the pre-push point (lifting straight up
    first when low). The gripper stays closed; the closed fingers are the pusher,
    turned square to the push direction (the nearest such yaw to the hand's).
    """

    task: PandaPush

    ABOVE, DESCEND, PUSH, DONE = range(4)
    hover = 0.10  # tcp height for moving around the cube
    push_height = 0.022  # tcp height while pushing
    standoff = 0.065  # pre-push tcp distance behind the cube centre
    finger_half = 0.0105  # half thickness of the closed fingers along the push direction
    lead = 0.02  # how far ahead of contact the pushing target runs
    stop = 0.03  # cube-centre-to-goal distance at which pushing stops
    in_line = 0.03  # largest lateral tcp offset from the push line that still pushes
    low = 0.012  # above push height: still low enough to push
    over_pre = 0.015  # tcp to pre-push point (planar) at which the descent starts
    retreat = 0.10  # done: the tcp backs off to this planar distance from the cube, hovering

    def geometry(self) -> dict[str, torch.Tensor]:
        """The push direction and the tcp's place relative to the cube, per env."""
        t = self.task
        cube, ee = t.cube_pos[:, :2], t.ee_pos
        to_goal = t.goal[:, :2] - cube
        c2g = to_goal.norm(dim=1)
        d = to_goal / c2g.clamp_min(1e-6)[:, None]
        rel = ee[:, :2] - cube
        yaw = nearest_yaw(torch.atan2(d[:, 1], d[:, 0]), t.ee_yaw, math.pi / 2)
        return {"cube": cube, "c2g": c2g, "dir": d, "pre": cube - self.standoff * d,
                "along": (rel * d).sum(1), "yaw": yaw,
                "lateral": (rel[:, 0] * d[:, 1] - rel[:, 1] * d[:, 0]).abs()}

    def observe(self) -> None:
        """The phase of every env from its current state (see the class doc)."""
        t, g = self.task, self.geometry()
        ee = t.ee_pos
        behind = (g["lateral"] < self.in_line) & (g["along"] < -t.cube_half) & \
            (g["along"] > -self.standoff - 0.025)
        low = ee[:, 2] < TABLE_TOP + self.push_height + self.low
        over_pre = ((ee[:, :2] - g["pre"]).norm(dim=1) < self.over_pre) & \
            (wrapped_abs(t.ee_yaw - g["yaw"], math.pi / 2) < 0.15)
        descending = behind & (ee[:, 2] < TABLE_TOP + self.hover - 0.01)
        phase = torch.full_like(self.phase, self.ABOVE)
        phase[over_pre | descending] = self.DESCEND
        phase[behind & low] = self.PUSH
        phase[g["c2g"] < self.stop] = self.DONE
        self.phase.copy_(phase)

    def act(self) -> torch.Tensor:
        """Actions for the current phase of every env (closed gripper)."""
        t, g = self.task, self.geometry()
        ph, ee, d = self.phase, t.ee_pos, g["dir"]
        target = torch.empty_like(ee)
        target[:, :2] = g["pre"]
        target[:, 2] = TABLE_TOP + self.hover
        lift = (ph == self.ABOVE) & (ee[:, 2] < TABLE_TOP + self.hover - 0.03)
        target[lift, :2] = ee[lift, :2]  # from a low pose, first straight up
        desc = ph == self.DESCEND
        target[desc, 2] = TABLE_TOP + self.push_height
        push = ph == self.PUSH
        contact = g["cube"] - (t.cube_half + self.finger_half) * d
        push_to = contact + g["c2g"].clamp(0.0, self.lead)[:, None] * d
        target[push, :2] = push_to[push]
        target[push, 2] = TABLE_TOP + self.push_height
        done = ph == self.DONE
        away = ee[:, :2] - g["cube"]
        away = g["cube"] + self.retreat * away / away.norm(dim=1, keepdim=True).clamp_min(1e-6)
        target[done, :2] = away[done]
        target[done, 2] = TABLE_TOP + self.hover
        target = self.waypoint(target)
        yaw = torch.where(done, t.ee_yaw, g["yaw"])
        return self.move(target, torch.zeros(t.sim.num_envs, device=target.device), yaw)
