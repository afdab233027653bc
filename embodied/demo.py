"""`embodied demo`: one episode per env of a task's scripted expert, filmed from every camera."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from embodied.config import ConfigError, save_config
from embodied.plots import plot_progress
from sim import DomainRandomization, make_env
from sim.experts import expert_names, make_expert
from sim.render import tile_batch
from sim.video import write_mp4


def env_kwargs(task_cfg: DictConfig) -> dict:
    """Env settings from a task config group entry."""
    kwargs = {"obs_noise": bool(task_cfg.obs_noise),
              "randomization": DomainRandomization(enabled=bool(task_cfg.randomization.enabled))}
    if task_cfg.episode_length_s is not None:
        kwargs["episode_length_s"] = float(task_cfg.episode_length_s)
    if task_cfg.get("decimation") is not None:
        kwargs["decimation"] = int(task_cfg.decimation)
    if task_cfg.get("action") is not None:
        kwargs["action"] = str(task_cfg.action)
    terms = {k: task_cfg[k] for k in ("rewards", "observations") if task_cfg.get(k) is not None}
    if terms:  # reward weights/params and observation noise over the task's defaults
        kwargs["task_cfg"] = OmegaConf.to_container(OmegaConf.create(terms), resolve=True)
    return kwargs


def sim_kwargs(cfg: DictConfig) -> dict:
    """``make_env`` arguments of the command's ``sim`` group (backend, device, renderer)."""
    sim = cfg.get("sim") or {"name": "mujoco"}
    kwargs = {"backend": str(sim["name"])}
    for key in ("device", "renderer"):
        if sim.get(key) is not None:
            kwargs[key] = str(sim[key])
    return kwargs


def run_demo(cfg: DictConfig) -> dict:
    """Roll out the expert on ``cfg.num_envs`` envs for one episode; write MP4, PNG, config."""
    if cfg.task.name not in expert_names():
        raise ConfigError(f"task '{cfg.task.name}' has no scripted expert to film; "
                          f"choose task= one of {expert_names()}")
    run_dir = Path(cfg.run_dir)
    save_config(cfg, run_dir)
    env = make_env(cfg.task.name, num_envs=cfg.num_envs, seed=cfg.seed, **env_kwargs(cfg.task),
                   **sim_kwargs(cfg))
    expert = make_expert(env, noise=cfg.noise, seed=cfg.seed)
    cameras = list(cfg.video.cameras or env.camera_names)
    frame_every = max(1, round(1.0 / (cfg.video.fps * env.state.control_dt)))
    start = time.perf_counter()
    env.reset(seed=cfg.seed)
    frames, progress = [], []
    success = torch.zeros(env.num_envs, dtype=torch.bool)
    finished = torch.zeros(env.num_envs, dtype=torch.bool)
    for step in tqdm(range(env.max_episode_steps), desc=f"{cfg.task.name} expert", unit="step"):
        if step % frame_every == 0:
            views = env.render(cameras, width=cfg.video.width, height=cfg.video.height)
            frames.append(tile_batch(views.numpy(), max_envs=env.num_envs))
        _, _, _, _, info = env.step(expert())
        progress.append(info["progress"].numpy().copy())
        if "done_ids" in info:  # record each env's first episode only
            ids = info["done_ids"][~finished[info["done_ids"]]]
            success[ids] = info["final_success"][ids]
            finished[ids] = True
    elapsed = time.perf_counter() - start
    env.close()

    video = write_mp4(run_dir / "rollout.mp4", np.stack(frames), fps=cfg.video.fps)
    plot = plot_progress(np.stack(progress), env.state.control_dt, run_dir / "progress.png",
                         f"{cfg.task.name}: privileged progress of the scripted expert "
                         f"(green: success)", success.numpy())
    summary = {
        "task": cfg.task.name,
        "instruction": env.instruction,
        "episodes": env.num_envs,
        "success_rate": success.float().mean().item(),
        "cameras": cameras,
        "video": str(video),
        "progress_plot": str(plot),
        "seconds": round(elapsed, 1),
    }
    print(f"\n{cfg.task.name}: '{env.instruction}'")
    print(f"  expert success      {summary['success_rate']:.0%} of {env.num_envs} episodes "
          f"(noise {cfg.noise})")
    print(f"  video ({len(frames)} frames, views {', '.join(cameras)}): {video}")
    print(f"  progress plot: {plot}")
    print(f"  run folder: {run_dir}  ({elapsed:.1f} s)")
    return summary
