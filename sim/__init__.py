"""Batched physics simulation: tasks, backends, cameras and adapters."""

from __future__ import annotations

import contextlib

from sim.gl import select_gl_backend

# Choose EGL or OSMesa before mujoco is imported. Without any GL, physics still
# works and render() raises the error that names the packages to install.
with contextlib.suppress(RuntimeError):
    select_gl_backend()

from sim.mujoco_env import EnvConfig, MujocoBatchEnv
from sim.protocol import BatchedEnv, SimState
from sim.randomization import DomainRandomization
from sim.tasks import get_task_class, task_names


def make_env(task: str, num_envs: int = 16, backend: str = "mujoco", **cfg) -> MujocoBatchEnv:
    """Build a batched env of a registered task on a backend (``mujoco``: C MuJoCo, CPU)."""
    if backend != "mujoco":
        raise ValueError(f"unknown simulation backend '{backend}'; available: ['mujoco']")
    return MujocoBatchEnv(get_task_class(task), EnvConfig(num_envs=num_envs), **cfg)


__all__ = [
    "BatchedEnv",
    "DomainRandomization",
    "EnvConfig",
    "MujocoBatchEnv",
    "SimState",
    "make_env",
    "task_names",
]
