"""Batched envs from command configs: the ``task`` and ``sim`` groups -> ``sim.make_env``."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from embodied.config import ConfigError
from sim import DomainRandomization, make_env
from sim.protocol import BatchedEnv
from sim.visual import VisualRandomization


def env_kwargs(task_cfg: DictConfig) -> dict[str, Any]:
    """Env settings from a task config group entry."""
    kwargs = {"obs_noise": bool(task_cfg.obs_noise),
              "randomization": DomainRandomization(enabled=bool(task_cfg.randomization.enabled))}
    if task_cfg.episode_length_s is not None:
        kwargs["episode_length_s"] = float(task_cfg.episode_length_s)
    if task_cfg.get("decimation") is not None:
        kwargs["decimation"] = int(task_cfg.decimation)
    if task_cfg.get("action") is not None:
        kwargs["action"] = str(task_cfg.action)
    if task_cfg.get("deploy_limits"):  # the ROS policy node's target filters in the loop
        kwargs["deploy_limits"] = True
    terms = {k: task_cfg[k] for k in ("rewards", "observations", "settings")
             if task_cfg.get(k) is not None}
    if terms:  # reward weights/params, observation noise, settings over the task's defaults
        kwargs["task_cfg"] = OmegaConf.to_container(OmegaConf.create(terms), resolve=True)
    return kwargs


def sim_kwargs(cfg: DictConfig) -> dict[str, Any]:
    """``make_env`` arguments of the command's ``sim`` group (backend, device, renderer)."""
    sim = cfg.get("sim") or {"name": "mujoco"}
    kwargs = {"backend": str(sim["name"])}
    for key in ("device", "renderer"):
        if sim.get(key) is not None:
            kwargs[key] = str(sim[key])
    return kwargs


def visual_kwargs(cfg: DictConfig) -> dict[str, Any]:
    """``visual`` (:class:`sim.visual.VisualRandomization`) from the command's ``visual`` group.

    Nothing if the command has no ``visual`` group (frames as the scene is built).

    Raises:
        ConfigError: For an unknown setting or a malformed range.
    """
    visual = cfg.get("visual")
    if visual is None:
        return {}
    try:
        return {"visual": VisualRandomization.from_mapping(
            OmegaConf.to_container(visual, resolve=True))}
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{err} (configs/visual/train.yaml shows the settings)") from err


def thread_kwargs(cfg: DictConfig) -> dict[str, Any]:
    """``nthread`` from the command's ``physics_threads`` (nothing if unset: all cores)."""
    threads = cfg.get("physics_threads")
    return {} if threads is None else {"nthread": int(threads)}


def make_task_env(task_cfg: DictConfig, cfg: DictConfig, num_envs: int,
                  seed: int) -> BatchedEnv:
    """The env of ``task_cfg`` on the ``sim`` backend and ``physics_threads`` of ``cfg``."""
    return make_env(str(task_cfg.name), num_envs=num_envs, seed=seed, **env_kwargs(task_cfg),
                    **sim_kwargs(cfg), **thread_kwargs(cfg), **visual_kwargs(cfg))


def make_train_env(cfg: DictConfig, num_envs: int, seed: int) -> BatchedEnv:
    """The env of the command's ``task`` (see :func:`make_task_env`)."""
    return make_task_env(cfg.task, cfg, num_envs, seed)
