"""panda_reach: move the end effector to a random target (dense reward)."""

from __future__ import annotations

from typing import ClassVar

import mujoco
import torch

from sim.protocol import SimState
from sim.task import TermFunctions
from sim.tasks.panda_base import ARM_OBSERVATIONS, PandaTask
from sim.tasks.panda_base.cube import add_marker
from sim.tasks.panda_reach.config import PandaReachConfig
from sim.tasks.panda_reach.terms import distance, joint_vel_l2, near, obs_target_rel
from sim.terms import action_rate

TARGET_LOW = (0.35, -0.25, 0.15)
TARGET_HIGH = (0.65, 0.25, 0.45)
SUCCESS_RADIUS = 0.04


class PandaReach(PandaTask):
    """Reach a target sphere; success within 4 cm."""

    name = "panda_reach"
    instruction = "move the gripper to the red ball"
    episode_length_s = 3.0
    config_class = PandaReachConfig
    observation_functions: ClassVar[TermFunctions] = {
        **ARM_OBSERVATIONS, "target_rel": obs_target_rel}
    reward_functions: ClassVar[TermFunctions] = {
        "distance": distance, "near": near, "action_rate": action_rate, "joint_vel": joint_vel_l2}

    def build_scene(self, spec: mujoco.MjSpec) -> None:
        """The Panda scene plus a red target marker (a mocap body)."""
        super().build_scene(spec)
        add_marker(spec, "target", 0.025, (0.9, 0.1, 0.1, 1.0))

    def setup(self, sim: SimState) -> None:
        """Base setup plus per-env target [B, 3] and start distance [B]."""
        super().setup(sim)
        self.target = torch.zeros(sim.num_envs, 3, dtype=torch.float64, device=sim.device)
        self.start_dist = torch.ones(sim.num_envs, dtype=torch.float64, device=sim.device)
        self.mocap = 0

    @property
    def dist(self) -> torch.Tensor:
        """tcp-to-target distance [B] (m)."""
        return (self.target - self.ee_pos).norm(dim=1)

    def success(self) -> torch.Tensor:
        """bool [B]: the tcp is within ``SUCCESS_RADIUS`` of the target."""
        return self.dist < SUCCESS_RADIUS

    def progress(self) -> torch.Tensor:
        """[B] in [0, 1]: share of the start distance covered (<= 0.99 before success)."""
        done = (self.start_dist - self.dist) / (self.start_dist - SUCCESS_RADIUS).clamp_min(1e-3)
        return torch.where(self.success(), 1.0, done.clamp(0.0, 0.99))

    def reset(self, env_ids: torch.Tensor, gen: torch.Generator) -> None:
        """Default pose and a uniform random target for ``env_ids``.

        The target is drawn in the box [TARGET_LOW, TARGET_HIGH].
        """
        super().reset(env_ids, gen)
        self.target[env_ids] = self.rand(len(env_ids), TARGET_LOW, TARGET_HIGH, gen)
        self.sim.mocap_pos[env_ids, self.mocap] = self.target[env_ids]

    def after_reset(self, env_ids: torch.Tensor) -> None:
        """Remember the start distance of ``env_ids`` (for :meth:`progress`)."""
        self.start_dist[env_ids] = self.dist[env_ids]
