"""The task registry: each task folder registers its task once, under its name.

It registers its task class, scripted expert and gymnasium id; the default config is the class's
``config_class``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robots import load_robot
from sim.registry import Registry
from sim.task import Task, TaskConfig, configure


@dataclass(frozen=True)
class TaskEntry:
    """What a task registers: its class, its scripted expert (if any) and its gymnasium id.

    ``expert`` is a class ``(task, noise=..., gen=...)`` whose instances return actions
    [B, action_dim] when called.
    """

    task: type[Task]
    gym_id: str
    expert: type | None = None

    @property
    def name(self) -> str:
        """The task's registered name."""
        return self.task.name

    def default_config(self) -> TaskConfig:
        """The task's default term settings."""
        return self.task.config_class()

    def config(self, overrides: Mapping[str, Any] | TaskConfig | None = None) -> TaskConfig:
        """The default config with ``overrides`` (see :func:`sim.task.configure`) applied."""
        if isinstance(overrides, TaskConfig):
            return copy.deepcopy(overrides)
        return configure(self.default_config(), overrides, self.name)

    def make_task(self, overrides: Mapping[str, Any] | TaskConfig | None = None) -> Task:
        """A task instance on its robot, with its config overridden by ``overrides``."""
        return self.task(load_robot(self.task.robot_name), self.config(overrides))


TASKS: Registry[TaskEntry] = Registry("task", KeyError, listing="known tasks:")


def register_task(task: type[Task], gym_id: str, expert: type | None = None) -> None:
    """Register ``task`` under ``task.name`` (once, from the task's folder)."""
    TASKS.register(task.name, TaskEntry(task, gym_id, expert))


def get_task(name: str) -> TaskEntry:
    """The registration of the task ``name``."""
    return TASKS.get(name)


def task_names() -> list[str]:
    """Names of the registered tasks."""
    return TASKS.names()


def get_task_class(name: str) -> type[Task]:
    """The Task class registered under ``name``."""
    return get_task(name).task
