"""What every Panda task shares: the scene's table, the arm's observation terms,
the end-effector frame, a cube-on-the-table task base, and the pieces of the
scripted experts (differential IK with orientation, a noisy per-env phase machine).

Frames: the ``tcp`` site (the grasp centre between the finger pads) shares the
hand's orientation; in the default pose the hand x axis is world x and the
hand z axis (flange -> fingertips) points down, the fingers sliding along hand
y. "Hand yaw" is the angle of the hand x axis about world z when the hand
points down (0 in the default pose).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import mujoco
import torch

from sim.actions import JointPositionAction
from sim.math import quat_rotate, quat_rotate_inverse, quat_to_matrix, wrap_angle, yaw_quat
from sim.task import ObsTerm, Task, add_floor_and_light, per_step, rows

TABLE_TOP = 0.0  # the arm's base stands on the table top; objects rest at z = TABLE_TOP
WORKSPACE_CENTER = (0.5, 0.0)
# Sliding, torsional, rolling friction of the table (MuJoCo takes the max of a contact pair).
TABLE_FRICTION = (0.5, 0.005, 0.0001)


JOINT_VEL_OBS_SCALE = 0.1  # joint velocities enter the observation scaled by this


# ------------------------------------------------ observation pure functions
# The arm terms as functions of plain tensors, so that a deployment (the ROS node)
# builds the same vector from joint states and forward kinematics.
def gripper_opening(finger_pos: torch.Tensor, lower: float, upper: float) -> torch.Tensor:
    """[B, 1] in [0, 1] (0 closed, 1 open) from the finger joint positions [B, nf]."""
    return (finger_pos.mean(1, keepdim=True) - lower) / (upper - lower)


def build_arm_observation(joint_pos: torch.Tensor, joint_vel: torch.Tensor,
                          default_pos: torch.Tensor, opening: torch.Tensor, ee_pos: torch.Tensor,
                          last_action: torch.Tensor) -> torch.Tensor:
    """The noiseless arm terms [B, 2 nj + 1 + 3 + na], in
    :meth:`PandaTask.arm_observation_terms` order: joint positions minus default, scaled
    joint velocities, gripper opening, tcp position (arm base frame = world), last action."""
    return torch.cat([joint_pos - default_pos, JOINT_VEL_OBS_SCALE * joint_vel, opening,
                      ee_pos, last_action], dim=1)


class PandaTask(Task):
    """Base of the Panda tasks: a table in front of the arm, ee site, arm terms."""

    robot_name = "panda"
    cameras = ("front", "side", "wrist")

    def build_scene(self, spec: mujoco.MjSpec) -> None:
        """The table top (the floor plane, friction ``TABLE_FRICTION``) and the light."""
        add_floor_and_light(spec, rgba=(0.55, 0.5, 0.45, 1.0))  # the floor is the table top
        spec.geom("floor").friction = list(TABLE_FRICTION)

    def setup(self, sim) -> None:
        """Resolve the ee, finger pads, finger joints and arm links."""
        super().setup(sim)
        self.ee = sim.site_id(self.robot.sites["ee"])
        self.pads = [sim.site_id(self.robot.sites[s]) for s in ("left_pad", "right_pad")]
        g = self.robot.gripper
        self.finger_qpos_ids = torch.tensor([sim.joint_qpos_slice(n).start for n in g.joints])
        self.finger_dof_ids = torch.tensor([sim.joint_dof_slice(n).start for n in g.joints])
        self.gripper_range = g.upper - g.lower
        # Every Panda joint i is a hinge about the z axis of body link<i> (see panda.xml).
        self.joint_bodies = torch.tensor(
            [sim.body_id(f"link{i + 1}") for i in range(len(self.robot.joints))])
        self.episode_count = torch.zeros(sim.num_envs, dtype=torch.long)

    @property
    def ee_pos(self) -> torch.Tensor:
        """[B, 3] world position of the tcp."""
        return self.sim.site_xpos[:, self.ee]

    @property
    def ee_rot(self) -> torch.Tensor:
        """[B, 3, 3] world orientation of the hand (columns: hand axes in world)."""
        return self.sim.site_xmat[:, self.ee].reshape(-1, 3, 3)

    @property
    def ee_yaw(self) -> torch.Tensor:
        """[B] hand yaw: the angle of the hand x axis about world z."""
        rot = self.ee_rot
        return torch.atan2(rot[:, 1, 0], rot[:, 0, 0])

    @property
    @per_step
    def pad_pos(self) -> torch.Tensor:
        """[B, 2, 3] world positions of the left and right finger pad centres."""
        return self.sim.site_xpos[:, self.pads]

    @property
    def joint_axes(self) -> torch.Tensor:
        """[B, 3, nj] world axes of the arm joints (the rotational Jacobian of the hand)."""
        quat = self.sim.xquat[:, self.joint_bodies].reshape(-1, 4)
        z = torch.zeros_like(quat[:, 1:])
        z[:, 2] = 1.0
        return quat_rotate(quat, z).reshape(self.sim.num_envs, -1, 3).transpose(1, 2)

    @property
    def gripper_opening(self) -> torch.Tensor:
        """[B, 1] in [0, 1]: 0 closed, 1 fully open."""
        g = self.robot.gripper
        return gripper_opening(self.sim.qpos[:, self.finger_qpos_ids], g.lower, g.upper)

    def arm_observation_terms(self) -> list[ObsTerm]:
        """Joint positions relative to default, joint velocities, gripper, ee, last action."""
        return [
            ObsTerm("joint_pos", lambda: self.joint_pos - self.default_q, noise=0.01),
            ObsTerm("joint_vel", lambda: JOINT_VEL_OBS_SCALE * self.joint_vel, noise=0.01),
            ObsTerm("gripper", lambda: self.gripper_opening),
            ObsTerm("ee_pos", lambda: self.ee_pos),
            ObsTerm("last_action", lambda: self.last_action),
        ]

    def action_rate(self) -> torch.Tensor:
        """[B] squared change of the action since the previous step."""
        return (self.last_action - self.prev_action).square().sum(1)

    def reset(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        """Default pose +-0.05 rad per joint, gripper open."""
        super().reset(env_ids, gen)
        sim, n = self.sim, len(env_ids)
        noise = self.rand(n, [-0.05] * len(self.robot.joints), [0.05] * len(self.robot.joints),
                          gen)
        sim.qpos[rows(env_ids, self.qpos_ids)] = self.default_q + noise
        sim.qpos[rows(env_ids, self.finger_qpos_ids)] = self.robot.gripper.upper
        sim.qvel[rows(env_ids, self.finger_dof_ids)] = 0.0
        self.last_action[env_ids, -1] = 1.0  # gripper open
        self.episode_count[env_ids] += 1  # lets experts notice auto-resets


def add_box(spec: mujoco.MjSpec, name: str, size, rgba, pos=(0.0, 0.0, 0.0), mass=None,
            free: bool = False, collide: bool = True, mocap: bool = False,
            friction=None) -> mujoco.MjsBody:
    """A box body (free object, mocap marker or static) with one geom named ``name``."""
    body = spec.worldbody.add_body()
    body.name = name
    body.pos = list(pos)
    body.mocap = mocap
    if free:
        body.add_freejoint().name = f"{name}_joint"
    geom = body.add_geom()
    geom.name = name
    geom.type = mujoco.mjtGeom.mjGEOM_BOX
    geom.size = list(size)
    geom.rgba = list(rgba)
    if mass is not None:
        geom.mass = mass
    if friction is not None:
        geom.friction = list(friction)
    if not collide:
        geom.contype = geom.conaffinity = 0
    return body


def add_marker(spec: mujoco.MjSpec, name: str, radius: float, rgba,
               half_height: float | None = None) -> None:
    """A visual-only mocap marker (targets, goals): seen by cameras, no collisions.

    A sphere by default; a flat disc (cylinder) of ``half_height`` if given.
    """
    body = spec.worldbody.add_body()
    body.name = name
    body.mocap = True
    geom = body.add_geom()
    geom.name = name
    if half_height is None:
        geom.type = mujoco.mjtGeom.mjGEOM_SPHERE
        geom.size = [radius, 0, 0]
    else:
        geom.type = mujoco.mjtGeom.mjGEOM_CYLINDER
        geom.size = [radius, half_height, 0]
    geom.rgba = list(rgba)
    geom.contype = geom.conaffinity = 0


def box_surface_distance(point: torch.Tensor, pos: torch.Tensor, quat: torch.Tensor,
                         half: float) -> torch.Tensor:
    """[B] signed distance of points [B, 3] to cubes (centre ``pos``, ``quat``, half size)."""
    local = quat_rotate_inverse(quat, point - pos).abs() - half
    outside = local.clamp_min(0.0).norm(dim=1)
    return outside + local.amax(1).clamp_max(0.0)


class CubeTask(PandaTask):
    """A free cube on the table and a flat goal disc (mocap, visual only) on the table.

    Resets sample the cube centre uniformly in ``cube_low``..``cube_high`` (xy)
    with a uniform yaw in [-pi/4, pi/4) (the cube's full symmetry), and the goal
    at a uniform direction and a distance in ``goal_distance`` from the cube,
    kept inside ``goal_low``..``goal_high`` by rejection. Subclasses set the
    ranges and write rewards, success and progress.
    """

    cube_half = 0.025
    cube_mass = 0.1
    cube_friction = (0.5, 0.005, 0.0001)
    cube_low = (0.42, -0.15)
    cube_high = (0.58, 0.15)
    goal_distance = (0.10, 0.20)
    goal_low = (0.35, -0.25)
    goal_high = (0.68, 0.25)
    goal_radius = 0.05  # of the drawn disc
    workspace_low = (0.1, -0.6)  # the episode terminates if the cube leaves this box (xy)
    workspace_high = (0.9, 0.6)

    def build_scene(self, spec: mujoco.MjSpec) -> None:
        """Table, the red cube and the green goal disc."""
        super().build_scene(spec)
        h = self.cube_half
        add_box(spec, "cube", [h, h, h], (0.85, 0.15, 0.1, 1.0), pos=(0.5, 0.0, h),
                mass=self.cube_mass, free=True, friction=self.cube_friction)
        add_marker(spec, "goal", self.goal_radius, (0.1, 0.8, 0.2, 0.6), half_height=0.001)

    def setup(self, sim) -> None:
        """Cube indices and per-env goal buffers."""
        super().setup(sim)
        n = sim.num_envs
        self.cube = sim.body_id("cube")
        self.cube_qpos = sim.joint_qpos_slice("cube_joint")
        self.cube_dofs = sim.joint_dof_slice("cube_joint")
        self.goal = torch.zeros(n, 3, dtype=torch.float64)
        self.goal_mocap = 0  # the only mocap body of the scene
        self.start_cube_goal = torch.ones(n, dtype=torch.float64)
        self.start_ee_cube = torch.ones(n, dtype=torch.float64)

    # ------------------------------------------------------------ state
    @property
    def cube_pos(self) -> torch.Tensor:
        """[B, 3] cube centre."""
        return self.sim.xpos[:, self.cube]

    @property
    def cube_quat(self) -> torch.Tensor:
        """[B, 4] cube orientation (w, x, y, z)."""
        return self.sim.xquat[:, self.cube]

    @property
    @per_step
    def cube_rot6d(self) -> torch.Tensor:
        """[B, 6] first two columns of the cube's rotation matrix (continuous, unambiguous)."""
        return quat_to_matrix(self.cube_quat)[:, :, :2].transpose(1, 2).reshape(-1, 6)

    @property
    @per_step
    def cube_yaw(self) -> torch.Tensor:
        """[B] yaw of the cube's x axis about world z."""
        rot = quat_to_matrix(self.cube_quat)
        return torch.atan2(rot[:, 1, 0], rot[:, 0, 0])

    @property
    @per_step
    def cube_goal_dist(self) -> torch.Tensor:
        """[B] planar distance of the cube centre to the goal centre."""
        return (self.goal[:, :2] - self.cube_pos[:, :2]).norm(dim=1)

    @property
    @per_step
    def ee_cube_dist(self) -> torch.Tensor:
        """[B] distance of the tcp to the cube centre."""
        return (self.cube_pos - self.ee_pos).norm(dim=1)

    @property
    def cube_height(self) -> torch.Tensor:
        """[B] height of the cube centre above its resting height."""
        return self.cube_pos[:, 2] - (TABLE_TOP + self.cube_half)

    @per_step
    def pad_cube_distance(self) -> torch.Tensor:
        """[B, 2] distance of each finger pad centre to the cube surface (< 0 inside)."""
        pads = self.pad_pos
        return torch.stack([
            box_surface_distance(pads[:, i], self.cube_pos, self.cube_quat, self.cube_half)
            for i in range(pads.shape[1])], dim=1)

    def cube_observation_terms(self) -> list[ObsTerm]:
        """Cube position, 6D orientation, cube-to-goal and ee-to-cube vectors."""
        return [
            ObsTerm("cube_pos", lambda: self.cube_pos, noise=0.005),
            ObsTerm("cube_rot6d", lambda: self.cube_rot6d, noise=0.02),
            ObsTerm("cube_to_goal", lambda: self.goal - self.cube_pos, noise=0.005),
            ObsTerm("ee_to_cube", lambda: self.cube_pos - self.ee_pos, noise=0.005),
        ]

    def observation_terms(self) -> list[ObsTerm]:
        """Arm terms, then cube terms."""
        return [*self.arm_observation_terms(), *self.cube_observation_terms()]

    def terminated(self) -> torch.Tensor:
        """The cube left the workspace (pushed or thrown off the table area)."""
        xy = self.cube_pos[:, :2]
        low = torch.tensor(self.workspace_low, dtype=xy.dtype)
        high = torch.tensor(self.workspace_high, dtype=xy.dtype)
        return ((xy < low) | (xy > high)).any(1)

    # ------------------------------------------------------------ reset
    def sample_goal(self, cube_xy: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """[n, 2] goals at ``goal_distance`` from ``cube_xy`` inside the goal box."""
        n = cube_xy.shape[0]
        goal = torch.empty_like(cube_xy)
        todo = torch.ones(n, dtype=torch.bool)
        low = torch.tensor(self.goal_low, dtype=goal.dtype)
        high = torch.tensor(self.goal_high, dtype=goal.dtype)
        for _ in range(100):
            m = int(todo.sum())
            angle = self.rand(m, [0.0], [2 * math.pi], gen)[:, 0]
            dist = self.rand(m, [self.goal_distance[0]], [self.goal_distance[1]], gen)[:, 0]
            cand = cube_xy[todo] + dist[:, None] * torch.stack([angle.cos(), angle.sin()], 1)
            ok = ((cand >= low) & (cand <= high)).all(1)
            idx = todo.nonzero().flatten()
            goal[idx[ok]] = cand[ok]
            todo[idx[ok]] = False
            if not todo.any():
                break
        if todo.any():  # practically never: fall back to the nearest point of the goal box
            goal[todo] = torch.maximum(torch.minimum(cube_xy[todo], high), low)
        return goal

    def reset(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        """Arm to default, cube at a random pose, goal at a random place on the table."""
        super().reset(env_ids, gen)
        sim, n, h = self.sim, len(env_ids), self.cube_half
        xy = self.rand(n, self.cube_low, self.cube_high, gen)
        yaw = self.rand(n, [-math.pi / 4], [math.pi / 4], gen)[:, 0]
        qpos = torch.cat([xy, torch.full((n, 1), TABLE_TOP + h, dtype=xy.dtype),
                          yaw_quat(yaw)], dim=1)
        sim.qpos[env_ids, self.cube_qpos] = qpos
        sim.qvel[env_ids, self.cube_dofs] = 0.0
        goal = self.sample_goal(xy, gen)
        self.goal[env_ids] = torch.cat([goal, torch.full((n, 1), TABLE_TOP,
                                                         dtype=goal.dtype)], dim=1)
        sim.mocap_pos[env_ids, self.goal_mocap] = self.goal[env_ids]

    def after_reset(self, env_ids: torch.Tensor) -> None:
        """Remember the initial distances that normalise progress."""
        self.start_cube_goal[env_ids] = self.cube_goal_dist[env_ids].clamp_min(1e-3)
        self.start_ee_cube[env_ids] = self.ee_cube_dist[env_ids]


# ----------------------------------------------------------------- experts
def down_rotation(yaw: torch.Tensor) -> torch.Tensor:
    """[B, 3, 3] hand orientation pointing down (hand z = -world z) with hand yaw ``yaw``."""
    c, s = yaw.cos(), yaw.sin()
    zero, one = torch.zeros_like(yaw), torch.ones_like(yaw)
    return torch.stack([c, s, zero, s, -c, zero, zero, zero, -one], dim=-1).reshape(-1, 3, 3)


def nearest_yaw(yaw: torch.Tensor, reference: torch.Tensor, period: float) -> torch.Tensor:
    """The angle equivalent to ``yaw`` modulo ``period`` that is nearest to ``reference``."""
    return reference + wrap_angle(yaw - reference, period)


def wrapped_abs(angle: torch.Tensor, period: float) -> torch.Tensor:
    """|angle| modulo ``period``: the distance to the nearest multiple of ``period``."""
    r = angle.remainder(period)
    return torch.minimum(r, period - r)


def clamp_norm(vec: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Rows of ``vec`` [B, d] scaled down to at most ``max_norm``."""
    norm = vec.norm(dim=1, keepdim=True).clamp_min(1e-9)
    return vec * (max_norm / norm).clamp(max=1.0)


class DiffIK:
    """Damped least-squares IK on the tcp: actions that move the hand towards targets.

    The action space is the env's (``task.action_map``: absolute joint targets
    or joint deltas), so experts and policies are interchangeable. Joint targets
    one action cannot reach (``target_range()`` of the action map: the action
    scale or one step, and the joint limits) are handled as an active set: a
    joint whose step would leave its range is pinned to the bound and the others
    solve for the remaining error. The redundancy (7 joints) is used to pull the
    arm towards its default posture.

    Without ``yaw`` only the tcp position is servoed (3D); with ``yaw`` the hand
    is also turned to point down with that yaw (6D).
    """

    def __init__(self, task: PandaTask, max_step: float = 0.04, max_rot_step: float = 0.3,
                 damping: float = 0.05, rot_weight: float = 0.3, posture_gain: float = 0.05):
        self.task, self.max_step, self.max_rot_step = task, max_step, max_rot_step
        self.damping, self.rot_weight, self.posture_gain = damping, rot_weight, posture_gain
        self.margin = 1e-3

    @property
    def action_map(self) -> JointPositionAction:
        """The env's action mapping (absolute joint targets without an env)."""
        if self.task.action_map is None:
            self.task.action_map = JointPositionAction(self.task.robot)
        return self.task.action_map

    def joint_step(self, ee_target: torch.Tensor, yaw: torch.Tensor | None = None
                   ) -> torch.Tensor:
        """Joint displacement [B, nj] from the current joint positions."""
        task = self.task
        q = task.joint_pos
        jac = task.sim.site_jacobian(task.ee)[:, :, task.dof_ids]  # [B, 3, nj]
        err = clamp_norm(ee_target - task.ee_pos, self.max_step)
        if yaw is not None:
            rot, goal = task.ee_rot, down_rotation(yaw)
            err_rot = 0.5 * torch.linalg.cross(rot, goal, dim=1).sum(2)  # [B, 3]
            err_rot = clamp_norm(err_rot, self.max_rot_step)
            w = self.rot_weight
            jac = torch.cat([jac, w * task.joint_axes], dim=1)
            err = torch.cat([err, w * err_rot], dim=1)
        eye = torch.eye(jac.shape[1], dtype=jac.dtype)
        rest = self.posture_gain * (self.action_map.default - q)
        lower, upper = self.action_map.target_range()
        lower, upper = lower + self.margin, upper - self.margin
        pinned = torch.zeros_like(q, dtype=torch.bool)
        dq = torch.zeros_like(q)
        for _ in range(q.shape[1]):
            free = (~pinned).to(q.dtype)
            jf = jac * free[:, None, :]
            resid = err - (jac @ (dq * (1.0 - free)).unsqueeze(-1)).squeeze(-1)
            jjt = jf @ jf.transpose(1, 2) + self.damping**2 * eye
            pinv = jf.transpose(1, 2) @ torch.linalg.inv(jjt)  # [B, nj, m]
            z = rest * free
            step = (pinv @ resid.unsqueeze(-1)).squeeze(-1)
            step = step + z - (pinv @ (jf @ z.unsqueeze(-1))).squeeze(-1)
            new = torch.where(pinned, dq, step * free)
            target = q + new
            out = ~pinned & ((target > upper) | (target < lower))
            if not out.any():
                return new
            dq = torch.where(out, torch.minimum(torch.maximum(target, lower), upper) - q, new)
            pinned |= out
        return dq

    def __call__(self, ee_target: torch.Tensor, gripper_open: torch.Tensor,
                 yaw: torch.Tensor | None = None) -> torch.Tensor:
        """Actions [B, 8] stepping the tcp towards ``ee_target`` [B, 3] (and hand ``yaw`` [B]).

        ``gripper_open`` [B] in [0, 1]: 0 closed, 1 open.
        """
        dq = self.joint_step(ee_target, yaw)
        return self.action_map.inverse(self.task.joint_pos + dq, gripper_open)


class ScriptedExpert(ABC):
    """Base of the scripted experts: per-env phase and timer tensors, and the noise knob.

    ``noise`` (0: the clean expert; about 0.1 mildly suboptimal, 0.3 often
    failing, 0.6 mostly failing) does two things:

    * Gaussian noise of std ``action_noise * noise`` (action units) is added to
      every action. Actions are absolute joint targets of up to 2 rad per unit,
      so a std of 0.1 already shakes the tcp by centimetres; hence the 0.25.
    * The expert's waypoints are perturbed: every step each env redraws, with
      probability ``0.03 * noise``, a waypoint offset ~ N(0, (0.06 * noise)^2) m
      per axis (half that vertically), so large noise gives clumsy and failed
      rollouts and not just jitter.

    Subclasses implement :meth:`act`; the per-env ``phase`` and ``timer``
    tensors restart whenever the task resets an env.
    """

    action_noise = 0.25  # action noise std per unit of ``noise``

    def __init__(self, task: PandaTask, noise: float = 0.0, gen: torch.Generator | None = None):
        self.task, self.noise = task, noise
        self.gen = gen if gen is not None else torch.Generator().manual_seed(0)
        self.ik = DiffIK(task)
        n = task.sim.num_envs
        self.phase = torch.zeros(n, dtype=torch.long)
        self.timer = torch.zeros(n, dtype=torch.long)  # steps spent in the current phase
        self.offset = torch.zeros(n, 3, dtype=torch.float64)  # waypoint perturbation
        self._seen = task.episode_count.clone()

    def reset_envs(self, ids: torch.Tensor) -> None:
        """Start the script of envs ``ids`` over (called for envs that were reset)."""
        self.phase[ids] = 0
        self.timer[ids] = 0
        self.offset[ids] = 0.0

    def set_phase(self, mask: torch.Tensor, phase: int) -> None:
        """Move the envs in ``mask`` to ``phase`` and restart their timers."""
        self.phase[mask] = phase
        self.timer[mask] = 0

    def arrived(self, err: torch.Tensor, tol: float, patience: int = 25) -> torch.Tensor:
        """[B] the waypoint error is within ``tol``, or within ``2.5 tol`` after ``patience``
        steps in the phase (so jittery, noisy arms still move on)."""
        return (err < tol) | ((self.timer >= patience) & (err < 2.5 * tol))

    def waypoint(self, target: torch.Tensor) -> torch.Tensor:
        """``target`` [B, 3] plus the current waypoint perturbation."""
        return target + self.offset

    @abstractmethod
    def act(self) -> torch.Tensor:
        """Noise-free actions [B, action_dim] for the current state."""

    def __call__(self) -> torch.Tensor:
        """Actions [B, action_dim] in [-1, 1] for the current state of the task."""
        reset = self.task.episode_count != self._seen
        if reset.any():
            self.reset_envs(reset.nonzero().flatten())
            self._seen.copy_(self.task.episode_count)
        if self.noise > 0:
            n = self.offset.shape[0]
            redraw = torch.rand(n, generator=self.gen, dtype=torch.float64) < 0.03 * self.noise
            std = torch.tensor([1.0, 1.0, 0.5], dtype=torch.float64) * 0.06 * self.noise
            fresh = std * torch.randn(n, 3, generator=self.gen, dtype=torch.float64)
            self.offset = torch.where(redraw[:, None], fresh, self.offset)
        a = self.act()
        self.timer += 1
        if self.noise > 0:
            a = a + self.action_noise * self.noise * torch.randn(a.shape, generator=self.gen,
                                                                 dtype=a.dtype)
        return a.clamp(-1.0, 1.0)
