"""panda_reach: move the end effector to a random target (dense reward)."""

from __future__ import annotations

from robots.panda.observation import build_reach_observation, target_rel
from sim.tasks.panda_reach.config import PandaReachConfig
from sim.tasks.panda_reach.expert import ReachExpert
from sim.tasks.panda_reach.task import SUCCESS_RADIUS, TARGET_HIGH, TARGET_LOW, PandaReach
from sim.tasks.registry import register_task

register_task(PandaReach, gym_id="embodied/PandaReach-v0", expert=ReachExpert)

__all__ = [
    "SUCCESS_RADIUS",
    "TARGET_HIGH",
    "TARGET_LOW",
    "PandaReach",
    "PandaReachConfig",
    "ReachExpert",
    "build_reach_observation",
    "target_rel",
]
