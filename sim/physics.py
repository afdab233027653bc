"""The seam between the backend-neutral env and a physics engine.

:class:`sim.env.TaskEnv` owns everything a task needs besides physics: actions
and their latency, observations, rewards, auto-reset, divergence handling and
randomisation draws. A backend supplies a :class:`Physics`: a batch of
simulations of the task's compiled MJCF, whose state it exposes as a
:class:`sim.protocol.SimState` of torch tensors in MuJoCo's layout (same qpos,
qvel, body, site and sensor order as the compiled ``model``), so every task runs
unchanged on every engine.
"""

from __future__ import annotations

from typing import Protocol, TypeGuard

import mujoco
import torch

from sim.protocol import SimState


class Physics(Protocol):
    """A batch of ``state.num_envs`` simulations of one compiled task model."""

    name: str  # the backend's name in ``sim=...``
    model: mujoco.MjModel  # the task's compiled MJCF: names, ids, defaults, cameras
    # Whether ``scale_parameters`` works; without it only action latency is randomised.
    supports_parameter_randomization: bool

    @property
    def state(self) -> SimState:
        """The batched state tasks read and write (a backend may narrow its type)."""
        ...

    def reset(self, ids: torch.Tensor) -> None:
        """Put envs ``ids`` in the model's default state.

        qpos0, zero velocities and controls, the model's mocap poses, time 0. Derived quantities are
        not yet valid: the caller writes the task's initial state, then calls :meth:`forward`.
        """
        ...

    def forward(self, ids: torch.Tensor) -> None:
        """Recompute positions, orientations and sensors of ``ids``.

        From their qpos, qvel and mocap poses (after the caller wrote them).
        """
        ...

    def step(self, nstep: int) -> None:
        """Advance every env ``nstep`` physics steps with ``state.ctrl`` held.

        Derived quantities (positions, sensors) are valid afterwards.
        """
        ...

    def scale_parameters(self, ids: torch.Tensor, friction: torch.Tensor, mass: torch.Tensor,
                         actuator_gain: torch.Tensor, actuated: slice) -> None:
        """Set per-env physical parameters of ``ids`` to the model's values times factors.

        Factors are [len(ids)] each: geom friction, body masses, and the PD gains (kp and kd) of the
        ``actuated`` actuators.
        """
        ...

    def mjdata(self, ids: list[int]) -> list[mujoco.MjData]:
        """C MuJoCo copies of the state of envs ``ids`` (for the CPU renderer)."""
        ...

    def close(self) -> None:
        """Release engine resources."""
        ...


class RenderingPhysics(Physics, Protocol):
    """A :class:`Physics` with a renderer of its own (e.g. MuJoCo Warp's ray tracer)."""

    def render(self, cameras: list[int], ids: list[int], width: int,
               height: int) -> torch.Tensor:
        """Frames uint8 [len(ids), V, H, W, 3] of envs ``ids`` from camera ids ``cameras``."""
        ...


def has_renderer(physics: Physics) -> TypeGuard[RenderingPhysics]:
    """Whether ``physics`` renders frames itself (has a ``render`` method)."""
    return callable(getattr(physics, "render", None))
