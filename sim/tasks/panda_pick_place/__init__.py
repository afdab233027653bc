"""panda_pick_place: pick a cube up and place it on a target on the table."""

from __future__ import annotations

from sim.tasks.panda_pick_place.config import PandaPickPlaceConfig
from sim.tasks.panda_pick_place.expert import PickPlaceExpert
from sim.tasks.panda_pick_place.task import SUCCESS_RADIUS, PandaPickPlace
from sim.tasks.registry import register_task

register_task(PandaPickPlace, gym_id="embodied/PandaPickPlace-v0", expert=PickPlaceExpert)

__all__ = ["SUCCESS_RADIUS", "PandaPickPlace", "PandaPickPlaceConfig", "PickPlaceExpert"]
