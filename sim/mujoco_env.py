"""The default env: a task on C MuJoCo (``mujoco.batch``), the name most code uses."""

from __future__ import annotations

from sim.backends.mujoco_c import MujocoPhysics, mujoco_physics
from sim.env import EnvConfig, TaskEnv, compile_task_model
from sim.task import Task


class MujocoBatchEnv(TaskEnv):
    """:class:`sim.env.TaskEnv` on C MuJoCo; ``batch`` is the engine's ``mujoco.batch.Batch``."""

    physics: MujocoPhysics

    def __init__(self, task: Task | type[Task], cfg: EnvConfig | None = None, **overrides):
        super().__init__(task, cfg, physics=mujoco_physics, **overrides)
        self.batch = self.physics.batch


__all__ = ["EnvConfig", "MujocoBatchEnv", "compile_task_model"]
