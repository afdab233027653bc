"""Batched physics simulation: tasks, backends, cameras and adapters."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

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
from sim.task import TaskConfig, TaskConfigError
from sim.tasks import task_names


def make_env(task: str, num_envs: int = 16, backend: str = "mujoco",
             task_cfg: Mapping[str, Any] | TaskConfig | None = None, **cfg: Any) -> BatchedEnv:
    """A batched env of a registered task on a registered backend.

    Backends (``sim.backends.BACKENDS``): ``mujoco`` (C MuJoCo, CPU; the default), ``mujoco_warp``
    or ``isaaclab``. ``task_cfg``: term settings over the task's defaults (``{"rewards":
    {"push_pose": {"weight": 2}}}``, see :func:`sim.task.configure`); ``cfg``: :class:`EnvConfig`
    settings. A backend that is not installed raises :class:`BackendUnavailable` naming the install
    command.
    """
    return BACKENDS.get(backend).build(task, num_envs, task_cfg=task_cfg, **cfg)


__all__ = [
    "BACKENDS",
    "BackendError",
    "BackendUnavailable",
    "BatchedEnv",
    "DomainRandomization",
    "EnvConfig",
    "MujocoBatchEnv",
    "SimState",
    "TaskConfig",
    "TaskConfigError",
    "TaskEnv",
    "TaskNotSupported",
    "make_env",
    "task_names",
]
