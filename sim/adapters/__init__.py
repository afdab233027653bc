"""Adapters from :class:`sim.protocol.BatchedEnv` to the RL libraries' env APIs.

* :class:`GymnasiumVectorEnv` / :class:`GymnasiumEnv` (gymnasium 1.x, same-step autoreset)
* :class:`SB3VecEnv` (Stable-Baselines3 ``VecEnv``; imported on first use)

Importing this package registers every task of :func:`sim.tasks.task_names` with
gymnasium under the id the task registered (``panda_reach`` -> ``embodied/PandaReach-v0``)::

    import gymnasium, sim.adapters
    env = gymnasium.make("embodied/PandaReach-v0", episode_length_s=2.0)
    envs = gymnasium.make_vec("embodied/PandaReach-v0", num_envs=64)  # one batched env

Keyword arguments go to :class:`sim.mujoco_env.EnvConfig` (``seed``, ``obs_noise``, ...).
"""

from __future__ import annotations

from typing import Any

import gymnasium

from sim.adapters.gymnasium_vec import (
    GymnasiumEnv,
    GymnasiumVectorEnv,
    make_vector_env,
)
from sim.tasks import get_task, task_names

NAMESPACE = "embodied"

__all__ = [
    "NAMESPACE",
    "GymnasiumEnv",
    "GymnasiumVectorEnv",
    "SB3VecEnv",
    "gym_id",
    "make_vector_env",
    "register_gymnasium_envs",
]


def gym_id(task: str) -> str:
    """The gymnasium id a task registered: ``panda_reach`` -> ``embodied/PandaReach-v0``."""
    return get_task(task).gym_id


def register_gymnasium_envs() -> list[str]:
    """Register every task with gymnasium (idempotent); returns the ids."""
    ids = []
    for task in task_names():
        env_id = gym_id(task)
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point="sim.adapters.gymnasium_vec:GymnasiumEnv",
                vector_entry_point="sim.adapters.gymnasium_vec:make_vector_env",
                kwargs={"task": task},
                # The batched env truncates at its own episode length; no TimeLimit on top.
                max_episode_steps=None,
            )
        ids.append(env_id)
    return ids


register_gymnasium_envs()


def __getattr__(name: str) -> Any:
    """Import the SB3 adapter (and Stable-Baselines3) only when it is asked for."""
    if name == "SB3VecEnv":
        from sim.adapters.sb3_vec import SB3VecEnv

        return SB3VecEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
