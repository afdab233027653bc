"""``sim=isaaclab``: a task on Isaac Lab 3, run in a worker process of the Isaac Lab environment.

Isaac Lab 3.0 needs Python >= 3.12 and pins its own torch (2.11), Warp, Newton
and mujoco, so it lives in ``.venv-isaaclab`` (``scripts/isaaclab_env.sh``), not
in the project's environment. :class:`IsaacLabEnv` implements
:class:`sim.protocol.BatchedEnv` in this process and forwards every call to
``python -m sim.backends.isaaclab_worker`` in that environment, which hosts the
backend-neutral ``TaskEnv`` on :class:`sim.backends.isaaclab_physics.IsaacLabPhysics`.

The boundary is a socket pair carrying pickled builtins with tensors as raw
bytes (:mod:`sim.backends.isaaclab_wire`): one round trip per call, versions of
torch and numpy on either side do not matter, and a step of a few hundred
envs is a few hundred kB. Shared memory would save that copy but ties both
sides to one tensor layout and device; on a GPU machine the copy of
observations to this process is the price of the separate environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from robots import RobotSpec
from robots.actions import make_action_map
from sim.backends import BackendUnavailable
from sim.backends.isaaclab_physics import check_supported
from sim.backends.isaaclab_wire import decode, encode
from sim.env import EnvConfig, compile_task_model
from sim.protocol import BatchedEnv
from sim.task import ObsTerm, TaskConfig
from sim.tasks import get_task, get_task_class

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-isaaclab"
INSTALL_COMMAND = "scripts/isaaclab_env.sh"
STARTUP_TIMEOUT_S = 1800.0  # first start compiles Warp kernels (minutes on a loaded CPU)


def isaaclab_python(venv: Path = VENV) -> Path:
    """The Isaac Lab environment's Python; :class:`BackendUnavailable` if not installed."""
    python = venv / "bin" / "python"
    if not python.exists() or not any(venv.glob(".installed-*")):
        raise BackendUnavailable(
            f"sim=isaaclab needs the Isaac Lab environment {venv.name}/ (Python 3.12, "
            f"isaaclab==3.0.0, ~8 GB), which is not installed: run `{INSTALL_COMMAND}` "
            "(a few minutes), then try again")
    return python


class IsaacLabWorkerError(RuntimeError):
    """The worker raised an exception or died; the message carries its traceback or log."""


class _RemoteTask:
    """The task as seen from this process.

    Name, instruction, robot, observation layout, and the privileged ``progress()``/``success()``
    evaluated in the worker.
    """

    def __init__(self, env: IsaacLabEnv, name: str, instruction: str, robot: RobotSpec,
                 layout: list[tuple[str, int, float]]):
        self._env, self.name, self.instruction, self.robot = env, name, instruction, robot
        self._layout = layout

    def observation_terms(self) -> list[ObsTerm]:
        n = self._env.num_envs
        return [ObsTerm(name, functools.partial(torch.zeros, n, size), noise)
                for name, size, noise in self._layout]

    def progress(self) -> torch.Tensor:
        return self._env.call("task", method="progress")

    def success(self) -> torch.Tensor:
        return self._env.call("task", method="success")


class _RemoteBuffer:
    """A per-env buffer of the worker's task that this process may assign into (``[ids] = v``)."""

    def __init__(self, env: IsaacLabEnv, name: str):
        self._env, self._name = env, name

    def __setitem__(self, key: Any, value: Any) -> None:
        self._env.call("task_set", name=self._name, key=key,
                       value=torch.as_tensor(value, dtype=torch.float64))


def _remote_state(name: str, doc: str) -> property:
    """A read-only property fetching the worker task's ``name`` (one round trip per read)."""
    return property(lambda self: self._env.call("task", method=name), doc=doc)


class _RemoteLeggedTask(_RemoteTask):
    """A velocity-command task (go2_walk) seen from this process.

    Commands, the base state and the push timers, as the locomotion evaluation uses them.
    """

    base_pos = _remote_state("base_pos", "[B, 3] world position of the base.")
    base_quat = _remote_state("base_quat", "[B, 4] base orientation (w, x, y, z).")
    lin_vel_b = _remote_state("lin_vel_b", "[B, 3] base linear velocity, base frame.")
    ang_vel_b = _remote_state("ang_vel_b", "[B, 3] base angular velocity, base frame.")

    @property
    def push_timer(self) -> _RemoteBuffer:
        """Seconds to each env's next push; assign ``inf`` to stop pushes."""
        return _RemoteBuffer(self._env, "push_timer")

    def set_command(self, env_ids: torch.Tensor, command: Sequence[float] | torch.Tensor,
                    hold: bool = True) -> None:
        """Command ``(vx, vy, yaw rate)`` to ``env_ids`` (see the task's ``set_command``)."""
        self._env.call("task", method="set_command",
                       args=(torch.as_tensor(env_ids), torch.as_tensor(command), hold))


class IsaacLabEnv:
    """A batch of one task's envs on Isaac Lab, in a worker process.

    Implements :class:`sim.protocol.BatchedEnv`. Tensors come back on the CPU.
    """

    def __init__(self, task: str, num_envs: int = 16, device: str | None = None,
                 venv: Path = VENV, log_path: Path | None = None,
                 task_cfg: Mapping[str, Any] | TaskConfig | None = None, **cfg: Any):
        python = isaaclab_python(venv)
        entry = get_task(task)
        cls = entry.task
        local_task = entry.make_task(task_cfg)  # validates task_cfg before the worker starts
        self.robot = local_task.robot
        # Refuse a task the backend cannot map before starting the worker.
        check_supported(compile_task_model(local_task), task)
        from sim.backends.isaaclab_usd import cache_dir

        self.log_path = log_path or cache_dir() / f"worker-{os.getpid()}-{id(self):x}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        ours, theirs = socket.socketpair()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.setdefault("MUJOCO_GL", "egl")
        t0 = time.perf_counter()
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                [str(python), "-m", "sim.backends.isaaclab_worker", "--fd", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT)
        theirs.close()
        self._conn = Connection(ours.detach())
        self._closed = False
        cfg = {k: (dataclasses.asdict(v)
                   if dataclasses.is_dataclass(v) and not isinstance(v, type) else v)
               for k, v in cfg.items()}
        try:
            info = self.call("make", timeout=STARTUP_TIMEOUT_S, task_name=task,
                             num_envs=num_envs, device=device, cfg=cfg,
                             task_cfg=dataclasses.asdict(local_task.cfg))
        except BaseException:
            self._kill()
            raise
        self.startup_s = time.perf_counter() - t0
        self.num_envs = int(info["num_envs"])
        self.control_dt = float(info["control_dt"])
        self.max_episode_steps = int(info["max_episode_steps"])
        self.obs_dim, self.action_dim = int(info["obs_dim"]), int(info["action_dim"])
        self.obs_bounds = tuple(torch.tensor(b, dtype=torch.float32) for b in info["obs_bounds"])
        self.device = torch.device("cpu")
        self.worker_device = info["device"]
        self.instruction = info["instruction"]
        self.camera_names = tuple(info["camera_names"])
        self.decimation = int(info["decimation"])
        self.engine_startup_s = float(info["startup_s"])
        self.versions = info["versions"]
        self.backend = "isaaclab"
        remote = _RemoteLeggedTask if callable(getattr(cls, "set_command", None)) else _RemoteTask
        self.task = remote(self, cls.name, self.instruction, self.robot,
                                info["observation_layout"])
        self.action_map = make_action_map(cfg.get("action") or cls.action_type, self.robot,
                                          self.num_envs, cfg.get("action_speed", 0.5))

    # ----------------------------------------------------------- transport
    def call(self, cmd: str, timeout: float | None = None, **kwargs: Any) -> Any:
        """Send one request to the worker and return its result (raises its errors)."""
        if self._closed:
            raise IsaacLabWorkerError("the Isaac Lab env is closed")
        try:
            self._conn.send_bytes(encode((cmd, kwargs)))
            deadline = None if timeout is None else time.monotonic() + timeout
            while not self._conn.poll(1.0):
                if self._proc.poll() is not None:
                    raise EOFError
                if deadline is not None and time.monotonic() > deadline:
                    raise IsaacLabWorkerError(f"the Isaac Lab worker did not answer '{cmd}' "
                                              f"within {timeout:.0f} s; log: {self.log_path}")
            reply = decode(self._conn.recv_bytes())
        except (EOFError, OSError, BrokenPipeError) as exc:
            self._closed = True
            raise IsaacLabWorkerError(f"the Isaac Lab worker exited (code {self._proc.poll()})"
                                      f" during '{cmd}'; end of its log {self.log_path}:\n"
                                      f"{self._log_tail()}") from exc
        if reply[0] == "error":
            _, kind, message, trace = reply
            raise IsaacLabWorkerError(f"{kind} in the Isaac Lab worker: {message}\n{trace}")
        return reply[1]

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # ---------------------------------------------------------- BatchedEnv
    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Observations [B, obs_dim] of freshly reset envs (``seed`` reseeds the worker)."""
        return self.call("reset", seed=seed)

    def observe(self, noise: bool = True) -> torch.Tensor:
        """Current observations [B, obs_dim], with observation noise if ``noise``."""
        return self.call("observe", noise=noise)

    def step(self, actions: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """``(obs, reward, terminated, truncated, info)``, as in the BatchedEnv protocol."""
        actions = torch.as_tensor(actions).detach().to("cpu", torch.float32)
        return tuple(self.call("step", actions=actions))

    def render(self, cameras: list[str] | None = None, env_ids: torch.Tensor | None = None,
               width: int | None = None, height: int | None = None) -> torch.Tensor:
        """uint8 [len(env_ids), V, H, W, 3] images of ``cameras``.

        Defaults: every env and camera, the configured resolution.
        """
        return self.call("render", cameras=list(cameras) if cameras else None,
                         env_ids=None if env_ids is None else torch.as_tensor(env_ids),
                         width=width, height=height)

    def request_final_frames(self, cameras: list[str] | None = None, width: int | None = None,
                             height: int | None = None, enabled: bool = True) -> None:
        """Make ``step`` also render finished episodes' last frames.

        Disabled again with ``enabled=False``.
        """
        self.call("request_final_frames", cameras=list(cameras) if cameras else None,
                  width=width, height=height, enabled=enabled)

    def state(self, *names: str) -> dict[str, torch.Tensor]:
        """State tensors of the worker's env in MuJoCo's layout (``qpos``, ``site_xpos``...)."""
        return self.call("state", names=list(names))

    def parameters(self) -> dict[str, torch.Tensor]:
        """Per-env friction, masses and PD gains read back from Isaac Lab, in MuJoCo's layout.

        See :meth:`sim.backends.isaaclab_physics.IsaacLabPhysics.parameters`.
        """
        return self.call("parameters")

    def close(self) -> None:
        """Stop the worker (politely, then by force); its log is removed after a clean exit."""
        if getattr(self, "_closed", True):
            return
        clean = False
        with contextlib.suppress(IsaacLabWorkerError):
            self.call("close", timeout=60.0)
            clean = True
        self._closed = True
        self._kill()
        if clean and self._proc.returncode == 0:
            self.log_path.unlink(missing_ok=True)

    def _kill(self) -> None:
        self._closed = True
        self._conn.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


def make_isaaclab_env(task: str, num_envs: int = 16, **cfg: Any) -> IsaacLabEnv:
    """``sim=isaaclab``: ``task`` on Isaac Lab in a worker process (see :class:`IsaacLabEnv`).

    ``cfg``: ``device`` (``cpu``/``cuda:0``; None: a GPU if the worker sees one), ``task_cfg`` (term
    settings over the task's defaults) and :class:`sim.env.EnvConfig` settings.
    """
    return IsaacLabEnv(task, num_envs, **cfg)


def _random_steps_per_s(env: BatchedEnv, steps: int | None, seconds: float | None,
                        gen: torch.Generator) -> float:
    """Env steps/s of ``env`` under uniform random actions.

    ``steps`` timed steps, or as many as fit in ``seconds`` (at least two), after one untimed step
    (lazy initialisation).
    """
    if steps is None and seconds is None:
        raise ValueError("give steps or seconds")

    def act() -> torch.Tensor:
        return 2 * torch.rand(env.num_envs, env.action_dim, generator=gen) - 1

    env.step(act())
    done, t0 = 0, time.perf_counter()
    while True:
        env.step(act())
        done += 1
        elapsed = time.perf_counter() - t0
        if (steps is not None and done >= steps) or \
                (steps is None and seconds is not None and done >= 2
                 and elapsed >= seconds):
            return env.num_envs * done / elapsed


def isaaclab_throughput(task: str, num_envs: int, steps: int | None = None,
                        seconds: float | None = None, seed: int = 0,
                        reference: bool = True) -> dict[str, Any]:
    """Env steps/s of ``task`` on Isaac Lab with random actions, and start-up times.

    With ``reference``, also C MuJoCo (the default backend) on the same task and envs in the same
    call.

    Times ``steps`` env steps, or as many as fit in ``seconds``. ``startup_s``: from the
    call to a ready env (worker start, USD conversion or cache, Warp kernel compile or
    cache, scene build); ``engine_startup_s``: the Isaac Lab part of it.
    """
    if (steps is None) == (seconds is None) or (steps is not None and steps < 1):
        raise ValueError("isaaclab_throughput needs steps >= 1 or seconds, not both")
    env = make_isaaclab_env(task, num_envs, seed=seed)
    try:
        env.reset(seed=seed)
        rate = _random_steps_per_s(env, steps, seconds, torch.Generator().manual_seed(seed))
        row = {"backend": "isaaclab", "task": task, "num_envs": num_envs,
               "env_steps_per_s": rate, "startup_s": env.startup_s,
               "engine_startup_s": env.engine_startup_s, "device": env.worker_device,
               "versions": env.versions}
    finally:
        env.close()
    if reference:
        from sim.mujoco_env import MujocoBatchEnv  # C MuJoCo; not via `sim` (no import cycle)

        ref = MujocoBatchEnv(get_task_class(task), EnvConfig(num_envs=num_envs), seed=seed)
        try:
            ref.reset(seed=seed)
            c_rate = _random_steps_per_s(ref, steps, seconds, torch.Generator().manual_seed(seed))
        finally:
            ref.close()
        row.update(c_mujoco_env_steps_per_s=c_rate, ratio_to_c_mujoco=rate / c_rate)
    return row
