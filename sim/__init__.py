"""Batched physics simulation: tasks, backends, cameras and adapters."""

from __future__ import annotations

import contextlib

from sim.gl import select_gl_backend

# Choose EGL or OSMesa before mujoco is imported. Without any GL, physics still
# works and render() raises the error that names the packages to install.
with contextlib.suppress(RuntimeError):
    select_gl_backend()

from sim.backends import BACKENDS, BackendError, BackendUnavailable, TaskNotSupported
from sim.env import EnvConfig, TaskEnv
from sim.mujoco_env import MujocoBatchEnv
from sim.protocol import BatchedEnv, SimState
from sim.randomization import DomainRandomization
from sim.tasks import get_task_class, task_names


def make_env(task: str, num_envs: int = 16, backend: str = "mujoco", **cfg) -> BatchedEnv:
    """A batched env of a registered task on a backend (see ``sim.backends.BACKENDS``):
    ``mujoco`` (C MuJoCo, CPU; the default), ``mujoco_warp`` or ``isaaclab``. ``cfg``:
    :class:`EnvConfig` settings. A backend that is not installed raises
    :class:`BackendUnavailable` naming the install command."""
    if backend == "mujoco":
        return MujocoBatchEnv(get_task_class(task), EnvConfig(num_envs=num_envs), **cfg)
    if backend == "mujoco_warp":
        from sim.backends.mujoco_warp import mujoco_warp_physics

        return TaskEnv(get_task_class(task), EnvConfig(num_envs=num_envs),
                       physics=mujoco_warp_physics, **cfg)
    if backend == "isaaclab":
        from sim.backends.isaaclab import make_isaaclab_env

        return make_isaaclab_env(task, num_envs, **cfg)
    raise ValueError(f"unknown simulation backend '{backend}'; choose sim= one of "
                     f"{list(BACKENDS)}")


__all__ = [
    "BACKENDS",
    "BackendError",
    "BackendUnavailable",
    "BatchedEnv",
    "DomainRandomization",
    "EnvConfig",
    "MujocoBatchEnv",
    "SimState",
    "TaskEnv",
    "TaskNotSupported",
    "make_env",
    "task_names",
]
