"""panda_push: push a cube across the table into a goal region."""

from __future__ import annotations

import math

import torch

from sim.task import ObsTerm, RewardTerm, per_step
from sim.tasks.cube_task import CubeTask
from sim.tasks.panda_base import TABLE_TOP
from sim.tasks.panda_ik import nearest_yaw, wrapped_abs
from sim.tasks.scripted_expert import ScriptedExpert

SUCCESS_RADIUS = 0.05  # planar cube centre to goal centre
REST_HEIGHT = 0.01  # the cube counts as on the table below this lift
CONTACT_DISTANCE = 0.01  # finger pad centre to cube surface
REACHED_DISTANCE = 0.06  # tcp to cube centre: "at the cube"
PUSH_STANDOFF = 0.015  # pushing pose: tcp this far behind the cube face opposite the goal
PUSH_HEIGHT = 0.022  # pushing pose: tcp height above the table (the expert's)
PUSH_LEAD = 0.02  # the reward's target leads the pushing pose by this towards the goal
BACK_FACE_MARGIN = 0.01  # the tcp counts as behind the cube up to this past its back face
APPROACH_SLOPE = 1.5  # approach: target height rises 1.5 cm per cm the tcp is past that
APPROACH_LIFT = 0.12  # ... up to 12 cm above the pushing height (clears the cube)
RELEASE_RADIUS = 0.03  # cube centre this close to the goal centre: the reward lets go of the tcp


def push_target(ee_pos: torch.Tensor, cube_pos: torch.Tensor, goal_xy: torch.Tensor,
                cube_half: float) -> torch.Tensor:
    """[B, 3] where the dense push reward pulls the tcp (world frame).

    The pushing pose (behind the cube on the side away from the goal, at pushing
    height) moved ``PUSH_LEAD`` towards the goal: 5 mm inside the cube's back face,
    so the closed fingers cannot reach it and pressing towards it pushes the cube
    (a target outside the cube is a place to hover). While the tcp is past the
    cube's back face (beside it or on the goal side) the target is raised by
    ``APPROACH_SLOPE`` x that overshoot, up to ``APPROACH_LIFT``: the tcp comes
    round over the cube instead of sweeping through it, and the lift depends on
    the tcp's position along the push direction only, so no point on top of the
    cube scores like the pushing pose (a lift by the planar distance did). Once
    the cube centre is within ``RELEASE_RADIUS`` of the goal the target is the
    tcp itself: the shaping no longer steers the tcp and the policy can let go.
    """
    to_goal = goal_xy - cube_pos[:, :2]
    direction = to_goal / to_goal.norm(dim=1, keepdim=True).clamp_min(1e-6)
    target = torch.empty_like(cube_pos)
    target[:, :2] = cube_pos[:, :2] - (cube_half + PUSH_STANDOFF - PUSH_LEAD) * direction
    along = ((ee_pos[:, :2] - cube_pos[:, :2]) * direction).sum(1)
    past = (along + cube_half + BACK_FACE_MARGIN).clamp_min(0.0)
    target[:, 2] = TABLE_TOP + PUSH_HEIGHT + (APPROACH_SLOPE * past).clamp_max(APPROACH_LIFT)
    # Cube at the goal: no target (the push direction is ill-conditioned there, and a
    # target swinging round the cube would knock it out again).
    return torch.where((to_goal.norm(dim=1) < RELEASE_RADIUS)[:, None], ee_pos, target)


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

    Reward: the dense "oracle" terms ``push_approach`` (linear, a gradient from
    the start pose ~0.5 m away where a tanh kernel is flat) and ``push_pose``
    (tanh kernel) towards :func:`push_target`, ``cube_to_goal``, ``gripper_open``
    (a penalty: the closed fingers are the pusher) and ``action_rate``, plus the
    sparse ``success`` term (weight 10); a sparse reward mode keeps only
    ``success``. Earlier designs and why they failed (PPO, 2.5-5M env steps):
    a ``reach`` term to the cube centre gave no signal (flat kernel far away, no
    side to push from); a tcp-to-pushing-pose kernel plateaued at 5-8 %: the tcp
    hovers near the pose and rarely pushes, since any contact moves the pose
    away and costs more reward than the cube's progress pays; a flat pushing
    region behind the cube, 0 %: the policy parks in it. The design here moves
    the cube in most episodes but still stays below 10 % deterministic success
    within 4.9M env steps (configs/algo/ppo/panda_push.yaml): the policy pushes
    off-centre and the cube turns and slides off the fingers.
    """

    name = "panda_push"
    instruction = "push the red cube into the green goal region"
    episode_length_s = 5.0
    goal_radius = SUCCESS_RADIUS

    def observation_terms(self) -> list[ObsTerm]:
        """Arm and cube terms, then the reward's push target relative to the tcp."""
        return [*super().observation_terms(),
                ObsTerm("push_target_rel", lambda: self.push_target - self.ee_pos, noise=0.005)]

    def reward_terms(self) -> list[RewardTerm]:
        """Dense shaping towards the push target, cube_to_goal, penalties, sparse success."""
        return [
            RewardTerm("push_approach", lambda: -self.ee_push_dist, 1.0),
            RewardTerm("push_pose", lambda: 1.0 - torch.tanh(self.ee_push_dist / 0.05), 2.0),
            RewardTerm("cube_to_goal", lambda: 1.0 - torch.tanh(self.cube_goal_dist / 0.1), 4.0),
            RewardTerm("gripper_open", lambda: self.gripper_opening[:, 0], -1.0),
            RewardTerm("action_rate", self.action_rate, -0.01),
            RewardTerm("success", lambda: self.success().to(torch.float64), 10.0),
        ]

    @property
    @per_step
    def push_target(self) -> torch.Tensor:
        """[B, 3] the dense reward's tcp target (:func:`push_target`)."""
        return push_target(self.ee_pos, self.cube_pos, self.goal[:, :2], self.cube_half)

    @property
    @per_step
    def ee_push_dist(self) -> torch.Tensor:
        """[B] distance of the tcp to :attr:`push_target`."""
        return (self.push_target - self.ee_pos).norm(dim=1)

    @per_step
    def success(self) -> torch.Tensor:
        """Cube centre within 5 cm of the goal centre, resting on the table."""
        return (self.cube_goal_dist < SUCCESS_RADIUS) & (self.cube_height < REST_HEIGHT)

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


class PushExpert(ScriptedExpert):
    """Scripted pusher: a per-env state machine over 6D differential IK.

    Phases: 0 above the pre-push point (behind the cube, opposite the goal),
    1 descend to cube mid-height, 2 push through towards the goal (re-aimed at
    every step; back to 0 if the fingers slip off the cube's back), 3 done:
    back off and hold. The gripper stays closed; the closed fingers are the
    pusher, turned square to the push direction.
    """

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
        f64 = {"dtype": torch.float64, "device": task.sim.device}
        self.dir = torch.zeros(task.sim.num_envs, 2, **f64)
        self.yaw = torch.zeros(task.sim.num_envs, **f64)

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
