"""panda_push's term settings: reward weights and parameters, observation noise."""

from __future__ import annotations

from dataclasses import dataclass, field

from robots.panda.observation import PUSH_GEOMETRY
from sim.task import ObsTermCfg, RewardTermCfg, TaskConfig
from sim.tasks.panda_base import arm_observation_config
from sim.tasks.panda_base.cube import cube_observation_config


def _rewards() -> dict[str, RewardTermCfg]:
    return {
        "push_approach": RewardTermCfg(0.05),
        "push_pose": RewardTermCfg(0.2, {"std": 0.2}),
        "push_low": RewardTermCfg(0.0, {"std": 0.03}),
        "push_cube": RewardTermCfg(0.4, {"std": 0.1}),
        "push_progress": RewardTermCfg(0.0, {"speed": 0.1, "taper": 0.0}),
        "push_lateral": RewardTermCfg(0.0, {"std": 0.01}),
        "goal_rest": RewardTermCfg(0.0, {"speed": 0.02}),
        "goal_hold": RewardTermCfg(0.0, {"speed": 0.1}),
        "gripper_open": RewardTermCfg(-0.02),
        "action_rate": RewardTermCfg(-0.0005),
        "success": RewardTermCfg(1.0),
    }


def _observations() -> dict[str, ObsTermCfg]:
    return {**arm_observation_config(), **cube_observation_config(),
            "push_target_rel": ObsTermCfg(0.005)}


@dataclass
class PandaPushConfig(TaskConfig):
    """panda_push's default term settings."""

    rewards: dict[str, RewardTermCfg] = field(default_factory=_rewards)
    observations: dict[str, ObsTermCfg] = field(default_factory=_observations)
    # release_radius: the cube this close to the goal (m), the push target is the tcp
    settings: dict[str, float] = field(
        default_factory=lambda: {"release_radius": PUSH_GEOMETRY.release_radius})
