"""The embedded default engine: C MuJoCo batched on a thread pool (``mujoco.batch``).

State tensors are zero-copy torch views of the batch's float64 arrays.
"""

from __future__ import annotations

import os
import warnings
from typing import Protocol

import mujoco
import numpy as np
import torch

from sim.backends.model_lookup import ModelLookup
from sim.backends.state_fields import StateTensors
from sim.memory import check_memory


def _view(array: np.ndarray) -> torch.Tensor:
    """A torch view of a batch array (output arrays are read-only; torch only warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


class MujocoState(ModelLookup, StateTensors):
    """:class:`sim.protocol.SimState` over a persistent ``mujoco.batch.Batch``."""

    def __init__(self, model: mujoco.MjModel, batch: mujoco.batch.Batch, decimation: int):
        self.model, self.batch = model, batch
        self.num_envs = batch.nsim
        self.device = torch.device("cpu")
        self.physics_dt = float(model.opt.timestep)
        self.control_dt = self.physics_dt * decimation
        for name in ("qpos", "qvel", "ctrl", "mocap_pos", "xpos", "xquat", "site_xpos",
                     "site_xmat", "sensordata", "time"):
            setattr(self, name, _view(batch.bind(name)))

    def site_jacobian(self, site: int) -> torch.Tensor:
        """Translational Jacobian [B, 3, nv] of a site's origin (``Batch.jac``)."""
        body = int(self.model.site_bodyid[site])
        jacp, _ = self.batch.jac(body, self.site_xpos[:, site].numpy())
        return torch.from_numpy(jacp)


class MujocoPhysics:
    """:class:`sim.physics.Physics` on a persistent ``mujoco.batch.Batch`` (CPU, float64)."""

    name = "mujoco"
    supports_parameter_randomization = True

    def __init__(self, model: mujoco.MjModel, num_envs: int, decimation: int,
                 nthread: int | None = None):
        self.model = model
        nthread = nthread or os.cpu_count() or 1
        # Imported here: mujoco.batch is MuJoCo 4's; the Isaac Lab environment (mujoco 3)
        # imports this package without using this backend.
        from mujoco import batch as mjbatch

        self.batch = mjbatch.Batch(model, num_envs, min(nthread, num_envs), persistent=True)
        self.state = MujocoState(model, self.batch, decimation)
        self._scaled: dict[str, torch.Tensor] | None = None  # per-env parameter views
        self._datas: dict[int, mujoco.MjData] = {}

    def reset(self, ids: torch.Tensor) -> None:
        """Put envs ``ids`` in the model's default state (no derived quantities)."""
        self.batch.reset(ids.numpy(), stage=int(mujoco.mjtStage.mjSTAGE_NONE))

    def forward(self, ids: torch.Tensor) -> None:
        """Recompute the derived quantities of envs ``ids``."""
        self.batch.forward(ids.numpy())

    def step(self, nstep: int) -> None:
        """Advance every env ``nstep`` physics steps with ``ctrl`` held."""
        self.batch.step(nstep=nstep, stage=int(mujoco.mjtStage.mjSTAGE_VEL))

    def scale_parameters(self, ids: torch.Tensor, friction: torch.Tensor, mass: torch.Tensor,
                         actuator_gain: torch.Tensor, actuated: slice) -> None:
        """Scale per-env friction, mass and PD gains of ``ids``.

        Each is the model's value times the factors [len(ids)].
        """
        if self._scaled is None:  # per-env copies only once randomisation is used
            self._scaled = {name: _view(self.batch.expand(name)) for name in
                            ("geom_friction", "body_mass", "actuator_gainprm",
                             "actuator_biasprm")}
        m, v = self.model, self._scaled
        v["geom_friction"][ids] = torch.from_numpy(m.geom_friction) * friction[:, None, None]
        v["body_mass"][ids] = torch.from_numpy(m.body_mass) * mass[:, None]
        gain = actuator_gain[:, None]
        v["actuator_gainprm"][ids, actuated, 0] = torch.from_numpy(
            m.actuator_gainprm[actuated, 0]) * gain
        for k in (1, 2):  # position actuator: bias = -kp * q - kd * qdot
            v["actuator_biasprm"][ids, actuated, k] = torch.from_numpy(
                m.actuator_biasprm[actuated, k]) * gain
        self.batch.set_const(ids.numpy())

    def mjdata(self, ids: list[int]) -> list[mujoco.MjData]:
        """``MjData`` of envs ``ids`` (copies, reused between calls)."""
        for i in ids:
            if i not in self._datas:
                self._datas[i] = mujoco.MjData(self.model)
        return [self.batch.get_data(i, self._datas[i]) for i in ids]

    def close(self) -> None:
        """Drop the cached ``MjData`` copies."""
        self._datas.clear()


class ThreadSettings(Protocol):
    """The env settings this engine reads (:class:`sim.env.EnvConfig` has them)."""

    @property
    def nthread(self) -> int | None:
        """Worker threads of the batch (None: all cores)."""
        ...


def mujoco_physics(model: mujoco.MjModel, num_envs: int, decimation: int,
                   cfg: ThreadSettings) -> MujocoPhysics:
    """The :data:`sim.env.PhysicsFactory` of the C MuJoCo engine (``cfg.nthread`` threads)."""
    check_memory(model, num_envs)  # InsufficientMemoryError before allocating what cannot fit
    return MujocoPhysics(model, num_envs, decimation, cfg.nthread)
