"""MuJoCo Warp: the same MJCF GPU-parallel (one "world" per env), or on Warp's CPU device.

Warp computes in float32 and its arrays are shared with torch without a copy
(``wp.to_torch``). Task code is written in float64 (the C engine's precision), so the
state it sees is a float64 mirror on the engine's device: fields the tasks write (qpos,
qvel, ctrl, mocap) are pushed into the engine before a step or forward pass, and every
field is pulled back after it: one device-side cast per field and control step.

Stepping follows ``mujoco.batch``'s persistent ``mjSTAGE_VEL`` convention exactly (so the
two engines can be compared step by step): after every physics step the position- and
velocity-dependent quantities and sensors are recomputed at the new state (``step1``),
and the next step continues from them (``step2``). Acceleration-stage sensors (touch)
keep the values of the step that produced the state, as in C MuJoCo.

Camera frames come from MuJoCo Warp's ray tracer (:meth:`MujocoWarpPhysics.render`, all
worlds at once on the engine's device) or from the OpenGL renderer on CPU copies of the
requested envs (:meth:`MujocoWarpPhysics.mjdata`); ``EnvConfig.renderer`` chooses.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import mujoco
import numpy as np
import torch

from sim.backends import BackendUnavailable
from sim.backends.model_lookup import ModelLookup
from sim.backends.state_fields import StateTensors
from sim.env import EnvConfig, TaskEnv
from sim.task import TaskConfig
from sim.tasks import get_task

INSTALL_HINT = ("MuJoCo Warp is not installed: install the project's 'gpu' extra, "
                "`pip install -e '.[gpu]'` (or `EMBODIED_EXTRAS=dev,vlm,ros,gpu "
                "scripts/bootstrap.sh`)")

WRITABLE = ("qpos", "qvel", "ctrl", "mocap_pos", "mocap_quat")
_RANDOMIZED = ("geom_friction", "body_mass", "actuator_gainprm", "actuator_biasprm")


def _import_warp() -> tuple[ModuleType, ModuleType]:
    try:
        import mujoco_warp as mjw
        import warp as wp
    except ImportError as e:
        raise BackendUnavailable(f"{INSTALL_HINT} ({e})") from e
    wp.config.log_level = wp.LOG_WARNING  # no line per compiled or loaded kernel module
    wp.init()  # once per process; later calls return at once
    return wp, mjw


def default_device() -> str:
    """``cuda:0`` when torch sees a GPU, else Warp's ``cpu`` device."""
    return "cuda:0" if torch.cuda.is_available() else "cpu"


class WarpState(ModelLookup, StateTensors):
    """:class:`sim.protocol.SimState` over ``mujoco_warp`` Model/Data arrays (float32)."""

    mocap_quat: torch.Tensor  # [B, nmocap, 4]; the other fields: StateTensors

    def __init__(self, model: mujoco.MjModel, wm: Any, wd: Any, decimation: int, device: str):
        wp, mjw = _import_warp()
        self._wp, self._mjw, self._wm, self._wd = wp, mjw, wm, wd
        self.model = model
        self.num_envs = wd.nworld
        self.device = torch.device(device)
        self.physics_dt = float(model.opt.timestep)
        self.control_dt = self.physics_dt * decimation
        t = wp.to_torch
        nsite = model.nsite
        # engine arrays (float32, zero-copy views), by SimState field name
        self.engine = {"qpos": t(wd.qpos), "qvel": t(wd.qvel), "ctrl": t(wd.ctrl),
                       "mocap_pos": t(wd.mocap_pos), "mocap_quat": t(wd.mocap_quat),
                       "xpos": t(wd.xpos), "xquat": t(wd.xquat), "site_xpos": t(wd.site_xpos),
                       "site_xmat": t(wd.site_xmat).view(self.num_envs, nsite, 9),
                       "sensordata": t(wd.sensordata), "time": t(wd.time)}
        for name, array in self.engine.items():
            setattr(self, name, array.to(torch.float64))
        self._jacp = wp.zeros((self.num_envs, 3, model.nv), dtype=float, device=device)
        self._jac_body = wp.zeros(self.num_envs, dtype=int, device=device)

    def push(self) -> None:
        """Copy the fields tasks write (qpos, qvel, ctrl, mocap) into the engine."""
        for name in WRITABLE:
            self.engine[name].copy_(getattr(self, name))

    def pull(self) -> None:
        """Copy every field from the engine into the float64 mirror."""
        for name, array in self.engine.items():
            getattr(self, name).copy_(array)

    def site_jacobian(self, site: int) -> torch.Tensor:
        """Translational Jacobian [B, 3, nv] of a site's origin (``mujoco_warp.jac``)."""
        wp = self._wp
        self._jac_body.fill_(int(self.model.site_bodyid[site]))
        point = wp.from_torch(self.engine["site_xpos"][:, site].contiguous(), dtype=wp.vec3)
        self._mjw.jac(self._wm, self._wd, self._jacp, None, point, self._jac_body)
        return wp.to_torch(self._jacp).to(torch.float64)


class MujocoWarpPhysics:
    """:class:`sim.physics.Physics` on ``mujoco_warp`` (``nworld`` = number of envs)."""

    name = "mujoco_warp"
    supports_parameter_randomization = True

    def __init__(self, model: mujoco.MjModel, num_envs: int, decimation: int,
                 device: str | None = None, randomize: bool = True,
                 nconmax: int = 48, njmax: int = 192):
        wp, mjw = _import_warp()
        self._wp, self._mjw = wp, mjw
        self.model = model
        self.device = device or default_device()
        print(f"[sim] MuJoCo Warp: {num_envs} worlds on '{self.device}' (the first use of a "
              "model compiles its kernels, about a minute; cached afterwards)", flush=True)
        batch = {name: num_envs for name in _RANDOMIZED} if randomize else None
        with wp.ScopedDevice(self.device):
            self.wm = mjw.put_model(model, batch_sizes=batch)
            self.wd = mjw.put_data(model, mujoco.MjData(model), nworld=num_envs,
                                   nconmax=nconmax, njmax=njmax)
        self.state = WarpState(model, self.wm, self.wd, decimation, self.device)
        acc = model.sensor_needstage == int(mujoco.mjtStage.mjSTAGE_ACC)
        cols = [np.arange(a, a + d)
                for a, d in zip(model.sensor_adr[acc], model.sensor_dim[acc], strict=True)]
        self._acc_sensors = torch.as_tensor(np.concatenate(cols) if cols else [],
                                            dtype=torch.long, device=self.device)
        self._mask = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self._params = ({name: wp.to_torch(getattr(self.wm, name)) for name in _RANDOMIZED}
                        if randomize else None)
        self._datas: dict[int, mujoco.MjData] = {}
        self._contexts: dict[tuple[int, int], tuple] = {}  # (width, height) -> ray tracer

    def reset(self, ids: torch.Tensor) -> None:
        """Put envs ``ids`` in the model's default state (no derived quantities)."""
        self._mask.zero_()
        self._mask[ids] = True
        self._mjw.reset_data(self.wm, self.wd, reset=self._wp.from_torch(self._mask))
        self.state.pull()

    def forward(self, ids: torch.Tensor) -> None:
        """Recompute the derived quantities of every env (``ids`` only for the protocol)."""
        # Every world: Warp launches cover all worlds; a forward pass at an unchanged state
        # leaves the others' trajectories as they were.
        self.state.push()
        self._mjw.forward(self.wm, self.wd)
        self.state.pull()

    def step(self, nstep: int) -> None:
        """Advance every env ``nstep`` physics steps with ``ctrl`` held."""
        mjw, s = self._mjw, self.state
        s.push()
        sensors = s.engine["sensordata"]
        acc_ids = self._acc_sensors if len(self._acc_sensors) else None
        for _ in range(nstep):
            if acc_ids is None:  # no touch/force sensors: nothing to carry over
                mjw.step2(self.wm, self.wd)
                mjw.step1(self.wm, self.wd)
                continue
            sensors[:, acc_ids] = 0.0  # step2 adds acc-stage sensors (touch) onto zeros
            mjw.step2(self.wm, self.wd)
            acc = sensors[:, acc_ids].clone()
            mjw.step1(self.wm, self.wd)  # zeroes every sensor; acc-stage ones are restored
            sensors[:, acc_ids] = acc
        s.pull()

    def scale_parameters(self, ids: torch.Tensor, friction: torch.Tensor, mass: torch.Tensor,
                         actuator_gain: torch.Tensor, actuated: slice) -> None:
        """Scale per-env friction, mass and PD gains of ``ids``.

        Each is the model's value times the factors [len(ids)]. Raises ``RuntimeError`` when the
        model was built with ``randomize=False``.
        """
        if self._params is None:
            raise RuntimeError("this MuJoCo Warp model was built without per-env parameters "
                               "(randomize=False)")
        m, p, dev = self.model, self._params, self.device

        def base(name: str, index: Any = ...) -> torch.Tensor:
            return torch.as_tensor(getattr(m, name)[index], dtype=torch.float32, device=dev)

        ids = ids.to(dev)
        p["geom_friction"][ids] = (base("geom_friction")
                                   * friction.to(dev, torch.float32)[:, None, None])
        p["body_mass"][ids] = base("body_mass") * mass.to(dev, torch.float32)[:, None]
        gain = actuator_gain.to(dev, torch.float32)[:, None]
        p["actuator_gainprm"][ids, actuated, 0] = base("actuator_gainprm", (actuated, 0)) * gain
        for k in (1, 2):  # position actuator: bias = -kp * q - kd * qdot
            p["actuator_biasprm"][ids, actuated, k] = base("actuator_biasprm",
                                                           (actuated, k)) * gain
        self._mjw.set_const(self.wm, self.wd)

    def mjdata(self, ids: list[int]) -> list[mujoco.MjData]:
        """C MuJoCo copies of envs ``ids`` (positions recomputed on the CPU for rendering)."""
        s, out = self.state, []
        qpos, mocap_pos = s.qpos[ids].double().cpu().numpy(), s.mocap_pos[ids].double().cpu()
        mocap_quat = s.mocap_quat[ids].double().cpu().numpy()
        for row, i in enumerate(ids):
            d = self._datas.setdefault(i, mujoco.MjData(self.model))
            d.qpos[:], d.mocap_pos[:], d.mocap_quat[:] = qpos[row], mocap_pos[row], mocap_quat[row]
            mujoco.mj_kinematics(self.model, d)
            mujoco.mj_camlight(self.model, d)
            out.append(d)
        return out

    def render(self, cameras: list[int], ids: list[int], width: int,
               height: int) -> torch.Tensor:
        """Frames uint8 [len(ids), V, H, W, 3] from the ray tracer (every world is traced)."""
        wp, mjw = self._wp, self._mjw
        key = (width, height)
        if key not in self._contexts:
            with wp.ScopedDevice(self.device):
                context = mjw.create_render_context(
                    self.model, nworld=self.state.num_envs, cam_res=(width, height),
                    render_rgb=True, render_depth=False, use_shadows=False)
                rgb = wp.zeros((self.state.num_envs, height, width), dtype=wp.vec3)
            self._contexts[key] = (context, rgb)
        context, rgb = self._contexts[key]
        mjw.refit_bvh(self.wm, self.wd, context)
        mjw.render(self.wm, self.wd, context)
        rows = torch.as_tensor(ids, device=self.device)
        views = []
        for camera in cameras:
            mjw.get_rgb(context, camera, rgb)
            views.append(wp.to_torch(rgb)[rows])
        return (torch.stack(views, 1).clamp(0.0, 1.0) * 255.0).round().to(torch.uint8)

    def close(self) -> None:
        """Drop the cached ``MjData`` copies and ray tracers."""
        self._datas.clear()
        self._contexts.clear()


def mujoco_warp_physics(model: mujoco.MjModel, num_envs: int, decimation: int,
                        cfg: EnvConfig) -> MujocoWarpPhysics:
    """The :data:`sim.env.PhysicsFactory` of MuJoCo Warp.

    Device: ``cfg.device``; by default a GPU if torch sees one, else Warp's CPU device.
    """
    return MujocoWarpPhysics(model, num_envs, decimation, device=cfg.device,
                             randomize=cfg.randomization.enabled)


def make_mujoco_warp_env(task: str, num_envs: int = 16,
                         task_cfg: Mapping[str, Any] | TaskConfig | None = None,
                         **cfg: Any) -> TaskEnv:
    """``sim=mujoco_warp``: the registered ``task`` on MuJoCo Warp.

    ``task_cfg``: term settings; ``cfg``: :class:`sim.env.EnvConfig` settings.
    """
    return TaskEnv(get_task(task).make_task(task_cfg), EnvConfig(num_envs=num_envs),
                   physics=mujoco_warp_physics, **cfg)
