"""Scripted experts: ``make_expert(env)`` for demonstrations and baselines.

Each task registers its own expert, see :mod:`sim.tasks.registry`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from sim.env import TaskEnv
from sim.tasks import TASKS, get_task


def expert_names() -> list[str]:
    """Names of the tasks that have a scripted expert."""
    return [name for name in TASKS.names() if get_task(name).expert is not None]


def make_expert(env: TaskEnv, noise: float = 0.0,
                seed: int = 0) -> Callable[[], torch.Tensor]:
    """The scripted expert of ``env.task``: a callable returning actions [B, action_dim].

    ``noise`` degrades it (Gaussian action noise and waypoint perturbations);
    ``seed`` seeds the expert's own noise generator.
    """
    name = env.task.name
    expert = get_task(name).expert if name in TASKS else None
    if expert is None:
        raise KeyError(f"no scripted expert for task '{name}'; experts exist for "
                       f"{expert_names()}")
    return expert(env.task, noise=noise, gen=torch.Generator().manual_seed(seed))
