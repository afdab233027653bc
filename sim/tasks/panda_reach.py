"""panda_reach: move the end effector to a random target (dense reward)."""

from __future__ import annotations

import mujoco
import torch

from sim.task import ObsTerm, RewardTerm
from sim.tasks.cube_task import add_marker
from sim.tasks.panda_base import PandaTask, build_arm_observation
from sim.tasks.scripted_expert import ScriptedExpert

TARGET_LOW = (0.35, -0.25, 0.15)
TARGET_HIGH = (0.65, 0.25, 0.45)
SUCCESS_RADIUS = 0.04


def target_rel(target: torch.Tensor, ee_pos: torch.Tensor) -> torch.Tensor:
    """[B, 3] target minus tcp position (the last observation term)."""
    return target - ee_pos


def build_reach_observation(joint_pos: torch.Tensor, joint_vel: torch.Tensor,
                            default_pos: torch.Tensor, opening: torch.Tensor,
                            ee_pos: torch.Tensor, last_action: torch.Tensor,
                            target: torch.Tensor) -> torch.Tensor:
    """The noiseless 29-d panda_reach observation [B, 29] from plain tensors (the task's
    term order); the ROS deployment node calls this with joint states and kinematics."""
    return torch.cat([build_arm_observation(joint_pos, joint_vel, default_pos, opening, ee_pos,
                                            last_action), target_rel(target, ee_pos)], dim=1)


class PandaReach(PandaTask):
    """Reach a target sphere; success within 4 cm."""

    name = "panda_reach"
    instruction = "move the gripper to the red ball"
    episode_length_s = 3.0

    def build_scene(self, spec: mujoco.MjSpec) -> None:
        super().build_scene(spec)
        add_marker(spec, "target", 0.025, (0.9, 0.1, 0.1, 1.0))

    def setup(self, sim) -> None:
        super().setup(sim)
        self.target = torch.zeros(sim.num_envs, 3, dtype=torch.float64, device=sim.device)
        self.start_dist = torch.ones(sim.num_envs, dtype=torch.float64, device=sim.device)
        self.mocap = 0

    @property
    def dist(self) -> torch.Tensor:
        return (self.target - self.ee_pos).norm(dim=1)

    def observation_terms(self) -> list[ObsTerm]:
        return [*self.arm_observation_terms(),
                ObsTerm("target_rel", lambda: target_rel(self.target, self.ee_pos))]

    def reward_terms(self) -> list[RewardTerm]:
        return [
            RewardTerm("distance", lambda: -self.dist, 1.0),
            RewardTerm("near", lambda: 1.0 - torch.tanh(self.dist / 0.05), 1.0),
            RewardTerm("action_rate", self.action_rate, -0.01),
            RewardTerm("joint_vel", lambda: self.joint_vel.square().sum(1), -1e-3),
        ]

    def success(self) -> torch.Tensor:
        return self.dist < SUCCESS_RADIUS

    def progress(self) -> torch.Tensor:
        done = (self.start_dist - self.dist) / (self.start_dist - SUCCESS_RADIUS).clamp_min(1e-3)
        return torch.where(self.success(), 1.0, done.clamp(0.0, 0.99))

    def reset(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        super().reset(env_ids, gen)
        self.target[env_ids] = self.rand(len(env_ids), TARGET_LOW, TARGET_HIGH, gen)
        self.sim.mocap_pos[env_ids, self.mocap] = self.target[env_ids]

    def after_reset(self, env_ids: torch.Tensor) -> None:
        self.start_dist[env_ids] = self.dist[env_ids]


class ReachExpert(ScriptedExpert):
    """Scripted expert: differential IK (position only) straight to the target.

    ``noise`` adds Gaussian action noise and waypoint perturbations (see
    :class:`sim.tasks.scripted_expert.ScriptedExpert`).
    """

    def __init__(self, task: PandaReach, noise: float = 0.0, gen: torch.Generator | None = None):
        super().__init__(task, noise, gen)

    def act(self) -> torch.Tensor:
        """Actions moving the tcp towards the (perturbed) target, gripper open."""
        t = self.task
        return self.ik(self.waypoint(t.target), torch.ones(t.sim.num_envs, device=t.sim.device))
