"""Task registry: name -> Task class."""

from __future__ import annotations

import importlib

from sim.task import Task

# name -> "module:Class", imported on first use so a task's import cost is paid only when used.
_TASKS = {
    "panda_reach": "sim.tasks.panda_reach:PandaReach",
    "panda_push": "sim.tasks.panda_push:PandaPush",
    "panda_pick_place": "sim.tasks.panda_pick_place:PandaPickPlace",
    "go2_walk": "sim.tasks.go2_walk:Go2Walk",
}


def task_names() -> list[str]:
    """Names of the registered tasks."""
    return sorted(_TASKS)


def get_task_class(name: str) -> type[Task]:
    """The Task class registered under ``name``."""
    if name not in _TASKS:
        raise KeyError(f"unknown task '{name}'; known tasks: {task_names()}")
    module, cls = _TASKS[name].split(":")
    return getattr(importlib.import_module(module), cls)
