"""What every Panda task shares: the scene's table, the arm's observation terms, the ee frame.

The cube-on-the-table base is in :mod:`sim.tasks.panda_base.cube`, the experts' IK
in :mod:`sim.tasks.panda_base.ik` and their base in :mod:`sim.tasks.panda_base.expert`.

Frames: the ``tcp`` site (the grasp centre between the finger pads) shares the
hand's orientation; in the default pose the hand x axis is world x and the
hand z axis (flange -> fingertips) points down, the fingers sliding along hand
y. "Hand yaw" is the angle of the hand x axis about world z when the hand
points down (0 in the default pose).
"""

from __future__ import annotations

import mujoco
import torch

from robots.math import quat_rotate
from robots.panda.observation import (
    JOINT_VEL_OBS_SCALE,
    gripper_opening,
)
from robots.spec import GripperSpec
from sim.protocol import SimState
from sim.task import (
    ObsTermCfg,
    Task,
    TermBounds,
    add_floor_and_light,
    per_step,
    rows,
    soft_limit_bounds,
)
from sim.terms import last_action

TABLE_TOP = 0.0  # the arm's base stands on the table top; objects rest at z = TABLE_TOP
WORKSPACE_CENTER = (0.5, 0.0)
# Sliding, torsional, rolling friction of the table (MuJoCo takes the max of a contact pair).
TABLE_FRICTION = (0.5, 0.005, 0.0001)


# ------------------------------------------------------- arm terms of a task
def obs_joint_pos(task: PandaTask) -> torch.Tensor:
    """[B, nj] joint positions relative to the default pose."""
    return task.joint_pos - task.default_q


def obs_joint_vel(task: PandaTask) -> torch.Tensor:
    """[B, nj] joint velocities scaled by ``JOINT_VEL_OBS_SCALE``."""
    return JOINT_VEL_OBS_SCALE * task.joint_vel


def obs_gripper(task: PandaTask) -> torch.Tensor:
    """[B, 1] gripper opening in [0, 1]."""
    return task.gripper_opening


def obs_ee_pos(task: PandaTask) -> torch.Tensor:
    """[B, 3] tcp position (arm base frame = world)."""
    return task.ee_pos


# The arm's observation terms, in order, and their default noise.
ARM_OBSERVATIONS = {"joint_pos": obs_joint_pos, "joint_vel": obs_joint_vel,
                    "gripper": obs_gripper, "ee_pos": obs_ee_pos,
                    "last_action": last_action}


def arm_observation_config() -> dict[str, ObsTermCfg]:
    """Default noise of the :data:`ARM_OBSERVATIONS` terms."""
    return {"joint_pos": ObsTermCfg(0.01), "joint_vel": ObsTermCfg(0.01),
            "gripper": ObsTermCfg(), "ee_pos": ObsTermCfg(), "last_action": ObsTermCfg()}


class PandaTask(Task):
    """Base of the Panda tasks: a table in front of the arm, ee site, arm terms."""

    robot_name = "panda"
    cameras = ("front", "side", "wrist")
    # ee_delta: the commanded tcp stays 1.5 cm above the table (finger pads 6.5 mm above)
    ee_bounds = ((0.1, -0.6, TABLE_TOP + 0.015), (0.9, 0.6, TABLE_TOP + 0.7))

    @property
    def gripper(self) -> GripperSpec:
        """The robot's gripper; ValueError if the robot has none (Panda tasks need one)."""
        g = self.robot.gripper
        if g is None:
            raise ValueError(f"robot '{self.robot.name}' has no gripper; the Panda tasks "
                             "need one")
        return g

    def build_scene(self, spec: mujoco.MjSpec) -> None:
        """The table top (the floor plane, friction ``TABLE_FRICTION``) and the light."""
        add_floor_and_light(spec, rgba=(0.55, 0.5, 0.45, 1.0))  # the floor is the table top
        spec.geom("floor").friction = list(TABLE_FRICTION)

    def setup(self, sim: SimState) -> None:
        """Resolve the ee, finger pads, finger joints and arm links."""
        super().setup(sim)
        self.ee = sim.site_id(self.robot.sites["ee"])
        self.pads = [sim.site_id(self.robot.sites[s]) for s in ("left_pad", "right_pad")]
        g = self.gripper
        self.finger_qpos_ids = torch.tensor([sim.joint_qpos_slice(n).start for n in g.joints])
        self.finger_dof_ids = torch.tensor([sim.joint_dof_slice(n).start for n in g.joints])
        self.gripper_range = g.upper - g.lower
        # Every Panda joint i is a hinge about the z axis of body link<i> (see panda.xml).
        self.joint_bodies = torch.tensor(
            [sim.body_id(f"link{i + 1}") for i in range(len(self.robot.joints))])
        self.episode_count = torch.zeros(sim.num_envs, dtype=torch.long, device=sim.device)

    def observation_bounds(self) -> TermBounds:
        """The arm terms that are bounded.

        Joint positions (soft limits), gripper opening (the fingers' soft limits,
        normalised) and the last action ([-1, 1]).
        """
        g = self.gripper
        low, high = soft_limit_bounds(g.lower, g.upper)
        opening = (float(low - g.lower) / (g.upper - g.lower),
                   float(high - g.lower) / (g.upper - g.lower))
        return {"joint_pos": self.relative_joint_bounds(), "gripper": opening,
                "last_action": (-1.0, 1.0)}

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
        g = self.gripper
        return gripper_opening(self.sim.qpos[:, self.finger_qpos_ids], g.lower, g.upper)

    def reset(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        """Default pose +-0.05 rad per joint, gripper open."""
        super().reset(env_ids, gen)
        sim, n = self.sim, len(env_ids)
        noise = self.rand(n, [-0.05] * len(self.robot.joints), [0.05] * len(self.robot.joints),
                          gen)
        sim.qpos[rows(env_ids, self.qpos_ids)] = self.default_q + noise
        sim.qpos[rows(env_ids, self.finger_qpos_ids)] = self.gripper.upper
        sim.qvel[rows(env_ids, self.finger_dof_ids)] = 0.0
        if self.action_map is None or self.action_map.gripper_dim:
            self.last_action[env_ids, -1] = 1.0  # gripper open (a held-closed one has no action)
        self.episode_count[env_ids] += 1  # lets experts notice auto-resets
