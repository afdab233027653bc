"""A cube on the table: the base of the Panda cube tasks (push, pick-and-place).

Also the scene helpers they share (boxes, goal markers) and the cube's derived state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import mujoco
import torch

from robots.math import quat_rotate_inverse, quat_to_matrix, yaw_quat
from sim.protocol import SimState
from sim.task import ObsTermCfg, TermBounds, per_step
from sim.tasks.panda_base import TABLE_TOP, PandaTask


def add_box(spec: mujoco.MjSpec, name: str, size: Sequence[float], rgba: Sequence[float],
            pos: Sequence[float] = (0.0, 0.0, 0.0), mass: float | None = None,
            free: bool = False, collide: bool = True, mocap: bool = False,
            friction: Sequence[float] | None = None) -> mujoco.MjsBody:
    """A box body (free object, mocap marker or static) with one geom named ``name``.

    ``size`` [3]: half extents (m); ``rgba`` [4]; ``pos`` [3]: world position (m);
    ``mass`` (kg) and ``friction`` [3] default to MuJoCo's.
    """
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


def add_marker(spec: mujoco.MjSpec, name: str, radius: float, rgba: Sequence[float],
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


# ------------------------------------------------------ cube terms of a task
def obs_cube_pos(task: CubeTask) -> torch.Tensor:
    """[B, 3] cube centre."""
    return task.cube_pos


def obs_cube_rot6d(task: CubeTask) -> torch.Tensor:
    """[B, 6] the cube's 6D orientation."""
    return task.cube_rot6d


def obs_cube_to_goal(task: CubeTask) -> torch.Tensor:
    """[B, 3] goal minus cube centre."""
    return task.goal - task.cube_pos


def obs_ee_to_cube(task: CubeTask) -> torch.Tensor:
    """[B, 3] cube centre minus tcp."""
    return task.cube_pos - task.ee_pos


def cube_to_goal(task: CubeTask, std: float) -> torch.Tensor:
    """[B] tanh kernel of the planar cube-to-goal distance: ``1 - tanh(d / std)``."""
    return 1.0 - torch.tanh(task.cube_goal_dist / std)


# The cube's observation terms (after the arm's), in order, and their default noise.
CUBE_OBSERVATIONS = {"cube_pos": obs_cube_pos, "cube_rot6d": obs_cube_rot6d,
                     "cube_to_goal": obs_cube_to_goal, "ee_to_cube": obs_ee_to_cube}


def cube_observation_config() -> dict[str, ObsTermCfg]:
    """Default noise of the :data:`CUBE_OBSERVATIONS` terms."""
    return {"cube_pos": ObsTermCfg(0.005), "cube_rot6d": ObsTermCfg(0.02),
            "cube_to_goal": ObsTermCfg(0.005), "ee_to_cube": ObsTermCfg(0.005)}


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

    def setup(self, sim: SimState) -> None:
        """Cube indices and per-env goal buffers."""
        super().setup(sim)
        n = sim.num_envs
        self.cube = sim.body_id("cube")
        self.cube_qpos = sim.joint_qpos_slice("cube_joint")
        self.cube_dofs = sim.joint_dof_slice("cube_joint")
        self.goal = torch.zeros(n, 3, dtype=torch.float64, device=sim.device)
        self.goal_mocap = 0  # the only mocap body of the scene
        self.start_cube_goal = torch.ones(n, dtype=torch.float64, device=sim.device)
        self.start_ee_cube = torch.ones(n, dtype=torch.float64, device=sim.device)

    # ------------------------------------------------------------ state
    def observation_bounds(self) -> TermBounds:
        """The arm's bounds and the cube's 6D orientation (rotation matrix entries)."""
        return {**super().observation_bounds(), "cube_rot6d": (-1.0, 1.0)}

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

    def terminated(self) -> torch.Tensor:
        """The cube left the workspace (pushed or thrown off the table area)."""
        xy = self.cube_pos[:, :2]
        low = torch.tensor(self.workspace_low, dtype=xy.dtype, device=xy.device)
        high = torch.tensor(self.workspace_high, dtype=xy.dtype, device=xy.device)
        return ((xy < low) | (xy > high)).any(1)

    # ------------------------------------------------------------ reset
    def sample_goal(self, cube_xy: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """[n, 2] goals at ``goal_distance`` from ``cube_xy`` inside the goal box."""
        n = cube_xy.shape[0]
        goal = torch.empty_like(cube_xy)
        todo = torch.ones(n, dtype=torch.bool, device=goal.device)
        low = torch.tensor(self.goal_low, dtype=goal.dtype, device=goal.device)
        high = torch.tensor(self.goal_high, dtype=goal.dtype, device=goal.device)
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
        qpos = torch.cat([xy, torch.full((n, 1), TABLE_TOP + h, dtype=xy.dtype, device=xy.device),
                          yaw_quat(yaw)], dim=1)
        sim.qpos[env_ids, self.cube_qpos] = qpos
        sim.qvel[env_ids, self.cube_dofs] = 0.0
        goal = self.sample_goal(xy, gen)
        self.goal[env_ids] = torch.cat([goal, torch.full((n, 1), TABLE_TOP, dtype=goal.dtype,
                                                         device=goal.device)], dim=1)
        sim.mocap_pos[env_ids, self.goal_mocap] = self.goal[env_ids]

    def after_reset(self, env_ids: torch.Tensor) -> None:
        """Remember the initial distances that normalise progress."""
        self.start_cube_goal[env_ids] = self.cube_goal_dist[env_ids].clamp_min(1e-3)
        self.start_ee_cube[env_ids] = self.ee_cube_dist[env_ids]


# ----------------------------------------------------------------- experts
