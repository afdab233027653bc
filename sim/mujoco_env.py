"""The default env: a task on C MuJoCo (``mujoco.batch``), the name most code uses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.backends.mujoco_c import MujocoPhysics, mujoco_physics
from sim.env import EnvConfig, TaskEnv, compile_task_model
from sim.task import Task, TaskConfig
from sim.tasks import get_task


class MujocoBatchEnv(TaskEnv):
    """:class:`sim.env.TaskEnv` on C MuJoCo; ``batch`` is the engine's ``mujoco.batch.Batch``."""

    physics: MujocoPhysics

    def __init__(self, task: Task | type[Task], cfg: EnvConfig | None = None,
                 **overrides: Any):
        super().__init__(task, cfg, physics=mujoco_physics, **overrides)
        self.batch = self.physics.batch


def make_mujoco_env(task: str, num_envs: int = 16,
                    task_cfg: Mapping[str, Any] | TaskConfig | None = None,
                    **cfg: Any) -> MujocoBatchEnv:
    """``sim=mujoco``: the registered ``task`` on C MuJoCo.

    ``task_cfg``: term settings; ``cfg``: :class:`EnvConfig` settings.
    """
    return MujocoBatchEnv(get_task(task).make_task(task_cfg), EnvConfig(num_envs=num_envs),
                          **cfg)


__all__ = ["EnvConfig", "MujocoBatchEnv", "compile_task_model", "make_mujoco_env"]
