"""panda_pick_place's term settings: reward weights and parameters, observation noise."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.task import ObsTermCfg, RewardTermCfg, TaskConfig
from sim.tasks.panda_base import arm_observation_config
from sim.tasks.panda_base.cube import cube_observation_config


def _rewards() -> dict[str, RewardTermCfg]:
    return {
        "reach": RewardTermCfg(0.1, {"std": 0.2}),
        "grasp": RewardTermCfg(0.05),
        "lift": RewardTermCfg(0.2, {"height": 0.04}),
        "place_coarse": RewardTermCfg(0.2, {"std": 0.2}),
        "place_fine": RewardTermCfg(0.2, {"std": 0.05}),
        "release": RewardTermCfg(0.3),
        "action_rate": RewardTermCfg(-0.0002),
        "success": RewardTermCfg(1.5),
    }


def _observations() -> dict[str, ObsTermCfg]:
    return {**arm_observation_config(), **cube_observation_config(),
            "grasp_state": ObsTermCfg(0.0)}


@dataclass
class PandaPickPlaceConfig(TaskConfig):
    """panda_pick_place's default term settings."""

    rewards: dict[str, RewardTermCfg] = field(default_factory=_rewards)
    observations: dict[str, ObsTermCfg] = field(default_factory=_observations)
