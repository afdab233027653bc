"""Physics engines behind :class:`sim.env.TaskEnv` (see :mod:`sim.physics`).

Each is registered once by name (``sim=<name>``) with a description and the ``"module:function"``
that builds an env on it, imported on first use so listing them loads no engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sim.registry import Registry, resolve
from sim.task import TaskConfig


class BackendError(RuntimeError):
    """A simulation backend cannot run what was asked.

    The message says why and what to do (the commands print it without a traceback).
    """


class BackendUnavailable(BackendError):
    """A simulation backend's engine or environment is not installed.

    The message names the command that installs it.
    """


class TaskNotSupported(BackendError, NotImplementedError):
    """The backend does not map something the task's model needs (yet).

    The message names it and the backend that runs the task.
    """


@dataclass(frozen=True)
class Backend:
    """A registered backend: its description and the path of its env builder.

    ``make_env(task, num_envs, task_cfg=None, **env_settings) -> BatchedEnv``, given as a
    ``"module:function"`` path.
    """

    description: str
    make_env: str

    def build(self, task: str, num_envs: int,
              task_cfg: Mapping[str, Any] | TaskConfig | None = None,
              **cfg: Any) -> Any:
        """An env of the registered ``task`` on this backend."""
        factory: Callable[..., Any] = resolve(self.make_env)
        return factory(task, num_envs, task_cfg=task_cfg, **cfg)


BACKENDS: Registry[Backend] = Registry("simulation backend", ValueError,
                                       listing="choose sim= one of")


def register_backend(name: str, description: str, make_env: str) -> None:
    """Register a backend under ``name`` (``make_env``: see :class:`Backend`)."""
    BACKENDS.register(name, Backend(description, make_env))


register_backend("mujoco", "C MuJoCo, batched on CPU threads (mujoco.batch)",
                 "sim.mujoco_env:make_mujoco_env")
register_backend("mujoco_warp", "MuJoCo Warp: GPU-parallel, or on Warp's CPU device",
                 "sim.backends.mujoco_warp:make_mujoco_warp_env")
register_backend("isaaclab", "Isaac Lab 3 (Newton physics), in its own Python 3.12 environment",
                 "sim.backends.isaaclab:make_isaaclab_env")
