"""What every Panda task shares: the scene's table, the arm's observation terms,
the end-effector frame, and a differential-IK helper for scripted experts."""

from __future__ import annotations

import mujoco
import torch

from sim.task import ObsTerm, Task, add_floor_and_light

TABLE_TOP = 0.0  # the arm's base stands on the table top; objects rest at z = TABLE_TOP
WORKSPACE_CENTER = (0.5, 0.0)


class PandaTask(Task):
    """Base of the Panda tasks: a table in front of the arm, ee site, arm terms."""

    robot_name = "panda"
    cameras = ("front", "side", "wrist")

    def build_scene(self, spec: mujoco.MjSpec) -> None:
        add_floor_and_light(spec, rgba=(0.55, 0.5, 0.45, 1.0))  # the floor is the table top

    def setup(self, sim) -> None:
        super().setup(sim)
        self.ee = sim.site_id(self.robot.sites["ee"])
        g = self.robot.gripper
        self.finger_qpos_ids = torch.tensor([sim.joint_qpos_slice(n).start for n in g.joints])
        self.finger_dof_ids = torch.tensor([sim.joint_dof_slice(n).start for n in g.joints])
        self.gripper_range = g.upper - g.lower

    @property
    def ee_pos(self) -> torch.Tensor:
        return self.sim.site_xpos[:, self.ee]

    @property
    def gripper_opening(self) -> torch.Tensor:
        """[B, 1] in [0, 1]: 0 closed, 1 fully open."""
        q = self.sim.qpos[:, self.finger_qpos_ids].mean(1, keepdim=True)
        return (q - self.robot.gripper.lower) / self.gripper_range

    def arm_observation_terms(self) -> list[ObsTerm]:
        """Joint positions relative to default, joint velocities, gripper, ee, last action."""
        return [
            ObsTerm("joint_pos", lambda: self.joint_pos - self.default_q, noise=0.01),
            ObsTerm("joint_vel", lambda: 0.1 * self.joint_vel, noise=0.01),
            ObsTerm("gripper", lambda: self.gripper_opening),
            ObsTerm("ee_pos", lambda: self.ee_pos),
            ObsTerm("last_action", lambda: self.last_action),
        ]

    def reset(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        super().reset(env_ids, gen)
        sim, n = self.sim, len(env_ids)
        noise = self.rand(n, [-0.05] * len(self.robot.joints), [0.05] * len(self.robot.joints),
                          gen)
        sim.qpos[env_ids[:, None], self.qpos_ids] = self.default_q + noise
        sim.qpos[env_ids[:, None], self.finger_qpos_ids] = self.robot.gripper.upper
        sim.qvel[env_ids[:, None], self.finger_dof_ids] = 0.0
        self.last_action[env_ids, -1] = 1.0  # gripper open


def add_box(spec: mujoco.MjSpec, name: str, size, rgba, pos=(0.0, 0.0, 0.0), mass=None,
            free: bool = False, collide: bool = True, mocap: bool = False) -> mujoco.MjsBody:
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
    if not collide:
        geom.contype = geom.conaffinity = 0
    return body


def add_marker(spec: mujoco.MjSpec, name: str, radius: float, rgba) -> None:
    """A visual-only mocap sphere (targets, goals): seen by cameras, no collisions."""
    body = spec.worldbody.add_body()
    body.name = name
    body.mocap = True
    geom = body.add_geom()
    geom.name = name
    geom.type = mujoco.mjtGeom.mjGEOM_SPHERE
    geom.size = [radius, 0, 0]
    geom.rgba = list(rgba)
    geom.contype = geom.conaffinity = 0


class DiffIK:
    """Damped least-squares IK on the ee site: actions that move the ee towards targets.

    The action space is the env's (absolute joint targets around the default
    pose), so experts and policies are interchangeable.
    """

    def __init__(self, task: PandaTask, max_step: float = 0.04, damping: float = 0.05):
        self.task, self.max_step, self.damping = task, max_step, damping
        from sim.actions import JointPositionAction

        self.action_map = JointPositionAction(task.robot)

    def __call__(self, ee_target: torch.Tensor, gripper_open: torch.Tensor) -> torch.Tensor:
        """Actions [B, 8] stepping the ee towards ``ee_target`` [B, 3]."""
        task = self.task
        err = ee_target - task.ee_pos
        norm = err.norm(dim=1, keepdim=True).clamp_min(1e-9)
        err = err * (self.max_step / norm).clamp(max=1.0)
        jac = task.sim.site_jacobian(task.ee)[:, :, task.dof_ids]  # [B, 3, 7]
        jjt = jac @ jac.transpose(1, 2) + self.damping**2 * torch.eye(3, dtype=jac.dtype)
        dq = (jac.transpose(1, 2) @ torch.linalg.solve(jjt, err.unsqueeze(-1))).squeeze(-1)
        return self.action_map.inverse(task.joint_pos + dq, gripper_open)
