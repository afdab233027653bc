"""Physics engines behind :class:`sim.env.TaskEnv` (see :mod:`sim.physics`)."""

from __future__ import annotations


class BackendError(RuntimeError):
    """A simulation backend cannot run what was asked; the message says why and what to do
    (the commands print it without a traceback)."""


class BackendUnavailable(BackendError):
    """A simulation backend's engine or environment is not installed; the message names
    the command that installs it."""


class TaskNotSupported(BackendError, NotImplementedError):
    """The backend does not map something the task's model needs (yet); the message names
    it and the backend that runs the task."""


# sim=... name -> what it is (the default first)
BACKENDS = {
    "mujoco": "C MuJoCo, batched on CPU threads (mujoco.batch)",
    "mujoco_warp": "MuJoCo Warp: GPU-parallel, or on Warp's CPU device",
    "isaaclab": "Isaac Lab 3 (Newton physics), in its own Python 3.12 environment",
}
