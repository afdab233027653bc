"""Physics engines behind :class:`sim.env.TaskEnv` (see :mod:`sim.physics`)."""

from __future__ import annotations


class BackendUnavailable(RuntimeError):
    """A simulation backend's engine or environment is not installed; the message names
    the command that installs it."""


# sim=... name -> what it is (the default first)
BACKENDS = {
    "mujoco": "C MuJoCo, batched on CPU threads (mujoco.batch)",
    "mujoco_warp": "MuJoCo Warp: GPU-parallel, or on Warp's CPU device",
    "isaaclab": "Isaac Lab 3 (Newton physics), in its own Python 3.12 environment",
}
