"""go2_walk: the Unitree Go2 tracks a planar velocity command on flat ground."""

from __future__ import annotations

from robots.go2.observation import (
    GAIT_PERIOD_S,
    OBS_LAYOUT,
    advance_phase,
    base_lin_vel_b,
    build_observation,
    gait_clock,
    joint_pos_rel,
)
from sim.tasks.go2_walk.config import Go2WalkConfig
from sim.tasks.go2_walk.task import (
    COMMAND_HIGH,
    COMMAND_LOW,
    FALL_HEIGHT,
    FALL_TILT,
    RESAMPLE_S,
    Go2Walk,
)
from sim.tasks.go2_walk.terms import desired_contact
from sim.tasks.registry import register_task

register_task(Go2Walk, gym_id="embodied/Go2Walk-v0")

__all__ = [
    "COMMAND_HIGH",
    "COMMAND_LOW",
    "FALL_HEIGHT",
    "FALL_TILT",
    "GAIT_PERIOD_S",
    "OBS_LAYOUT",
    "RESAMPLE_S",
    "Go2Walk",
    "Go2WalkConfig",
    "advance_phase",
    "base_lin_vel_b",
    "build_observation",
    "desired_contact",
    "gait_clock",
    "joint_pos_rel",
]
