"""The Isaac Lab worker: hosts ``TaskEnv(task, IsaacLabPhysics)`` in the Isaac Lab environment.

Started by :class:`sim.backends.isaaclab.IsaacLabEnv` as
``.venv-isaaclab/bin/python -m sim.backends.isaaclab_worker --fd N``; serves
requests on the connected socket ``N`` (messages: :mod:`sim.backends.isaaclab_wire`)
until ``close`` or the other end goes away.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import torch

from sim.backends.isaaclab_wire import decode, encode

if TYPE_CHECKING:  # the env modules are loaded by build_env, inside the worker
    from sim.env import TaskEnv


def build_env(task_name: str, num_envs: int, device: str | None, cfg: dict[str, Any],
              task_cfg: dict[str, Any] | None = None) -> TaskEnv:
    """``TaskEnv`` of ``task_name`` on :class:`IsaacLabPhysics`.

    ``task_cfg``: term settings over the task's defaults; ``cfg``: EnvConfig settings.
    """
    from sim.backends.isaaclab_physics import isaaclab_physics_factory
    from sim.env import EnvConfig, TaskEnv
    from sim.randomization import DomainRandomization
    from sim.tasks import get_task

    if device is None:
        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    task = get_task(task_name).make_task(task_cfg)
    cfg = dict(cfg)
    if isinstance(cfg.get("randomization"), dict):
        cfg["randomization"] = DomainRandomization(**cfg["randomization"])
    return TaskEnv(task, EnvConfig(num_envs=num_envs),
                   physics=isaaclab_physics_factory(task, device), **cfg)


def describe(env: TaskEnv) -> dict[str, Any]:
    """What the proxy mirrors: the BatchedEnv attributes and the observation layout.

    Raises:
        TypeError: ``env`` does not run on :class:`IsaacLabPhysics`.
    """
    from sim.backends.isaaclab_physics import IsaacLabPhysics

    if not isinstance(env.physics, IsaacLabPhysics):
        raise TypeError(f"the worker serves Isaac Lab envs, got {type(env.physics).__name__}")
    layout = [(t.name, int(t.fn().reshape(env.num_envs, -1).shape[1]), float(t.noise))
              for t in env.task.observation_terms()]
    return {"num_envs": env.num_envs, "control_dt": env.control_dt,
            "max_episode_steps": env.max_episode_steps, "obs_dim": env.obs_dim,
            "action_dim": env.action_dim, "device": str(env.device),
            "instruction": env.instruction, "camera_names": list(env.camera_names),
            "decimation": env.decimation, "observation_layout": layout,
            "obs_bounds": [b.tolist() for b in env.obs_bounds],
            "startup_s": env.physics.startup_s,
            "versions": _versions()}


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for pkg in ("isaaclab", "newton", "warp-lang", "mujoco-warp", "mujoco", "torch"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[pkg] = md.version(pkg)
    return out


def handle(env: TaskEnv, cmd: str, kwargs: dict[str, Any]) -> Any:
    """Run one request on the env."""
    if cmd == "step":
        obs, reward, terminated, truncated, info = env.step(kwargs["actions"].to(env.device))
        return obs, reward, terminated, truncated, info
    if cmd == "reset":
        return env.reset(seed=kwargs.get("seed"))
    if cmd == "observe":
        return env.observe(noise=kwargs.get("noise", True))
    if cmd == "render":
        return env.render(**kwargs)
    if cmd == "request_final_frames":
        return env.request_final_frames(**kwargs)
    if cmd == "task":  # privileged task quantities (progress, success), commands, base state
        value = getattr(env.task, kwargs["method"])
        return value(*kwargs.get("args", ())) if callable(value) else value
    if cmd == "task_set":  # assign into a per-env task buffer (push timers)
        getattr(env.task, kwargs["name"])[kwargs["key"]] = kwargs["value"]
        return None
    if cmd == "state":  # state tensors in MuJoCo's layout (for parity checks)
        return {name: getattr(env.state, name) for name in kwargs["names"]}
    if cmd == "parameters":  # randomised physical parameters as Isaac Lab holds them
        from sim.backends.isaaclab_physics import IsaacLabPhysics

        if not isinstance(env.physics, IsaacLabPhysics):
            raise TypeError(f"the worker serves Isaac Lab envs, got {type(env.physics).__name__}")
        return env.physics.parameters()
    raise ValueError(f"unknown request '{cmd}'")


def serve(conn: Connection) -> int:
    """Build the env from the first message, then answer requests until ``close``."""
    env = None
    try:
        cmd, kwargs = decode(conn.recv_bytes())
        if cmd != "make":
            raise ValueError(f"the first request must be 'make', got '{cmd}'")
        env = build_env(**kwargs)
        conn.send_bytes(encode(("ok", describe(env))))
    except Exception as exc:  # reported to the proxy, which raises it there
        conn.send_bytes(encode(("error", type(exc).__name__, str(exc), traceback.format_exc())))
        return 1
    while True:
        try:
            cmd, kwargs = decode(conn.recv_bytes())
        except (EOFError, OSError):
            break
        if cmd == "close":
            env.close()
            conn.send_bytes(encode(("ok", None)))
            break
        try:
            reply: tuple[Any, ...] = ("ok", handle(env, cmd, kwargs))
        except Exception as exc:
            reply = ("error", type(exc).__name__, str(exc), traceback.format_exc())
        conn.send_bytes(encode(reply))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Serve one env over the socket ``--fd`` until told to close; the exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fd", type=int, required=True, help="connected socket to serve")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    return serve(Connection(args.fd))


if __name__ == "__main__":
    sys.exit(main())
