"""go2_walk's term settings: reward weights and parameters, observation noise.

Reward weights are per second, as in legged_gym / Isaac Lab; the task multiplies them by the control
dt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.task import ObsTermCfg, RewardTermCfg, TaskConfig


def _rewards() -> dict[str, RewardTermCfg]:
    return {
        "track_lin_vel_xy": RewardTermCfg(1.5, {"std": 0.5}),
        "track_ang_vel_z": RewardTermCfg(0.75, {"std": 0.5}),
        "lin_vel_z": RewardTermCfg(-2.0),
        "ang_vel_xy": RewardTermCfg(-0.05),
        "joint_torques": RewardTermCfg(-2.0e-4),
        "joint_acc": RewardTermCfg(-2.5e-7),
        "action_rate": RewardTermCfg(-0.01),
        "gait_contact": RewardTermCfg(2.0),
        "feet_clearance": RewardTermCfg(-30.0, {"height": 0.08}),
        "undesired_contacts": RewardTermCfg(-1.0),
        "flat_orientation": RewardTermCfg(-2.5),
        "termination": RewardTermCfg(-200.0),
    }


def _observations() -> dict[str, ObsTermCfg]:
    return {
        "base_lin_vel": ObsTermCfg(0.1),
        "base_ang_vel": ObsTermCfg(0.2),
        "projected_gravity": ObsTermCfg(0.05),
        "velocity_command": ObsTermCfg(),
        "gait_phase": ObsTermCfg(),
        "joint_pos": ObsTermCfg(0.01),
        "joint_vel": ObsTermCfg(1.5),
        "last_action": ObsTermCfg(),
    }


@dataclass
class Go2WalkConfig(TaskConfig):
    """go2_walk's default term settings."""

    rewards: dict[str, RewardTermCfg] = field(default_factory=_rewards)
    observations: dict[str, ObsTermCfg] = field(default_factory=_observations)
