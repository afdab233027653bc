"""panda_reach's term settings: reward weights and parameters, observation noise."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.task import ObsTermCfg, RewardTermCfg, TaskConfig
from sim.tasks.panda_base import arm_observation_config


def _rewards() -> dict[str, RewardTermCfg]:
    return {
        "distance": RewardTermCfg(1.0),
        "near": RewardTermCfg(1.0, {"std": 0.05}),
        "action_rate": RewardTermCfg(-0.01),
        "joint_vel": RewardTermCfg(-1e-3),
    }


def _observations() -> dict[str, ObsTermCfg]:
    return {**arm_observation_config(), "target_rel": ObsTermCfg()}


@dataclass
class PandaReachConfig(TaskConfig):
    """panda_reach's default term settings."""

    rewards: dict[str, RewardTermCfg] = field(default_factory=_rewards)
    observations: dict[str, ObsTermCfg] = field(default_factory=_observations)
