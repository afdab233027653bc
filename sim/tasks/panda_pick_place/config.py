"""panda_pick_place's term settings: reward weights and parameters, observation noise."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.task import ObsTermCfg, RewardTermCfg, TaskConfig
from sim.tasks.panda_base import arm_observation_config
from sim.tasks.panda_base.cube import cube_observation_config


def _rewards() -> dict[str, RewardTermCfg]:
    return {
        "reach": RewardTermCfg(1.0, {"std": 0.1}),
        "grasp": RewardTermCfg(0.5),
        "lift": RewardTermCfg(1.0, {"height": 0.04}),
        "cube_to_goal": RewardTermCfg(2.0, {"std": 0.1}),
        "action_rate": RewardTermCfg(-0.01),
        "success": RewardTermCfg(10.0),
    }


def _observations() -> dict[str, ObsTermCfg]:
    return {**arm_observation_config(), **cube_observation_config()}


@dataclass
class PandaPickPlaceConfig(TaskConfig):
    """panda_pick_place's default term settings."""

    rewards: dict[str, RewardTermCfg] = field(default_factory=_rewards)
    observations: dict[str, ObsTermCfg] = field(default_factory=_observations)
