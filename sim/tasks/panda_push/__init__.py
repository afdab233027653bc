"""panda_push: push a cube across the table into a goal region."""

from __future__ import annotations

from sim.tasks.panda_push.config import PandaPushConfig
from sim.tasks.panda_push.expert import PushExpert
from sim.tasks.panda_push.task import PUSH_HEIGHT, SUCCESS_RADIUS, PandaPush, push_target
from sim.tasks.registry import register_task

register_task(PandaPush, gym_id="embodied/PandaPush-v0", expert=PushExpert)

__all__ = ["PUSH_HEIGHT", "SUCCESS_RADIUS", "PandaPush", "PandaPushConfig", "PushExpert",
           "push_target"]
