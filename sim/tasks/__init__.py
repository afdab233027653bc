"""The tasks, one folder each (terms, config, expert, registration).

Importing this package registers them all (see :mod:`sim.tasks.registry`).
"""

from __future__ import annotations

from sim.tasks import go2_walk, panda_pick_place, panda_push, panda_reach
from sim.tasks.registry import TASKS, TaskEntry, get_task, get_task_class, register_task, task_names

__all__ = [
    "TASKS",
    "TaskEntry",
    "get_task",
    "get_task_class",
    "go2_walk",
    "panda_pick_place",
    "panda_push",
    "panda_reach",
    "register_task",
    "task_names",
]
