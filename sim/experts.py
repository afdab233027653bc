"""Scripted experts by task name: ``make_expert(env)`` for demonstrations and baselines."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from sim.mujoco_env import MujocoBatchEnv

# task name -> "module:Class" of its expert, imported on first use.
_EXPERTS = {
    "panda_reach": "sim.tasks.panda_reach:ReachExpert",
    "panda_push": "sim.tasks.panda_push:PushExpert",
    "panda_pick_place": "sim.tasks.panda_pick_place:PickPlaceExpert",
}


def expert_names() -> list[str]:
    """Names of the tasks that have a scripted expert."""
    return sorted(_EXPERTS)


def make_expert(env: MujocoBatchEnv, noise: float = 0.0,
                seed: int = 0) -> Callable[[], torch.Tensor]:
    """The scripted expert of ``env.task``: a callable returning actions [B, action_dim].

    ``noise`` degrades it (Gaussian action noise and waypoint perturbations);
    ``seed`` seeds the expert's own noise generator.
    """
    name = env.task.name
    if name not in _EXPERTS:
        raise KeyError(f"no scripted expert for task '{name}'; experts exist for "
                       f"{expert_names()}")
    module, cls = _EXPERTS[name].split(":")
    expert_cls = getattr(importlib.import_module(module), cls)
    return expert_cls(env.task, noise=noise, gen=torch.Generator().manual_seed(seed))
