"""`embodied train`: PPO on a batched sim task; leaves a self-contained run folder.

The run folder holds config.yaml, checkpoints/, metrics.csv, TensorBoard events
(if tensorboard is installed), learning_curve.png, eval.mp4 (every camera view
of a few envs, deterministic policy) and eval.json.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from embodied.config import ConfigError, save_config
from embodied.demo import env_kwargs, sim_kwargs
from embodied.locomotion_eval import is_legged, tracking_summary
from embodied.plots import plot_learning_curve
from embodied.reward.rl_wrapper import RewardEnv, wrap_reward
from embodied.rl import OnPolicyRunner, PPOConfig
from embodied.rl.evaluate import evaluate_and_film, print_video_and_walking
from embodied.rl.logger import MetricsLogger, read_metrics
from embodied.rl.runner import find_checkpoint
from sim import make_env


def resolve_run_dir(cfg: DictConfig) -> tuple[Path, Path | None]:
    """The run folder and the checkpoint to resume (a resumed run keeps its folder)."""
    if cfg.resume is None:
        return Path(cfg.run_dir), None
    ckpt = find_checkpoint(cfg.resume)
    run_dir = ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent
    return run_dir, ckpt


# What defines a run's learning curve: on resume these come from the run's own config.yaml.
RUN_KEYS = ("task", "algo", "reward", "num_envs", "seed", "save_interval")


def resume_config(cfg: DictConfig, run_dir: Path) -> DictConfig:
    """``cfg`` with the resumed run's task/algo/num_envs/seed/save_interval (notes differences).

    Everything else (max_iterations, eval, progress, threads) is taken from ``cfg``,
    so a finished run can be extended with e.g. ``max_iterations=500``.
    """
    path = run_dir / "config.yaml"
    if not path.exists():
        return cfg
    saved = OmegaConf.load(path)
    differs = [k for k in RUN_KEYS if k in saved and OmegaConf.select(cfg, k) != saved[k]]
    if differs:
        print(f"resume: using the run's own {', '.join(differs)} from {path} "
              f"(the given values are ignored)")
    return OmegaConf.merge(cfg, {k: saved[k] for k in RUN_KEYS if k in saved})


def max_iterations(cfg: DictConfig) -> int:
    """``max_iterations``, or the iterations that cover ``total_env_steps`` if set."""
    if cfg.total_env_steps is None:
        return int(cfg.max_iterations)
    return math.ceil(cfg.total_env_steps / (cfg.num_envs * cfg.algo.num_steps))


def make_train_env(cfg: DictConfig, num_envs: int, seed: int):
    """The task's batched env on the ``sim`` backend with the task config's settings."""
    extra = {} if cfg.physics_threads is None else {"nthread": int(cfg.physics_threads)}
    return make_env(cfg.task.name, num_envs=num_envs, seed=seed, **env_kwargs(cfg.task),
                    **sim_kwargs(cfg), **extra)


SB3_ALGOS = ("sb3_ppo", "sb3_sac")


def wants_sb3(cfg: DictConfig) -> bool:
    """An SB3 run: ``algo.name`` is one, or ``resume`` points into a run whose config says so."""
    name = None
    if cfg.resume is not None:
        path = Path(cfg.resume)
        for folder in (path, path.parent, path.parent.parent):
            if (folder / "config.yaml").is_file():
                name = OmegaConf.select(OmegaConf.load(folder / "config.yaml"), "algo.name")
                break
    return (name or str(cfg.algo.name)) in SB3_ALGOS


def run_eval(cfg: DictConfig, policy: Callable[[torch.Tensor], torch.Tensor],
             run_dir: Path) -> dict[str, Any]:
    """Deterministic-policy success over ``eval.num_envs`` episodes and an MP4 of a few envs.

    ``policy(raw obs) -> action``: our :class:`ActorCritic` (put in eval mode) or any
    callable, e.g. an SB3 model's (embodied/sb3_train.py).
    """
    env = make_train_env(cfg, int(cfg.eval.num_envs), int(cfg.seed) + 10_000)
    if isinstance(policy, torch.nn.Module):
        policy.eval()
    # How a legged policy walks under a fixed forward command (before the env is closed).
    tracking = tracking_summary(policy, env, seed=int(cfg.seed) + 10_000) \
        if is_legged(env) else None
    result = evaluate_and_film(
        policy, env, run_dir / "eval.mp4", video_envs=int(cfg.eval.video_envs),
        cameras=cfg.eval.cameras, width=int(cfg.eval.width), height=int(cfg.eval.height),
        fps=int(cfg.eval.fps))
    if tracking is not None:
        result["velocity_tracking"] = tracking
    (run_dir / "eval.json").write_text(json.dumps(result, indent=2))
    return result


def print_summary(header: str, last: dict | None, n_episodes: int,
                  evaluation: dict | None, run_dir: Path) -> None:
    """The end-of-training summary every learner prints."""
    print(f"\n{header}")
    if last and n_episodes == 0:
        print("  training success    no episode finished yet")
    elif last:
        print(f"  training success    {last['success_rate']:.0%} (last {n_episodes} "
              f"episodes), return {last['episode_return']:.1f}")
        print(f"  steps/s             {last['fps']:.0f} (collection {last['collection_fps']:.0f},"
              f" learning {last['learning_fps']:.0f})")
    if evaluation is not None:
        print(f"  eval success        {evaluation['success_rate']:.0%} of "
              f"{evaluation['episodes']} episodes (deterministic policy)")
        print_video_and_walking(evaluation, "eval video")


def run_train(cfg: DictConfig) -> dict[str, Any]:
    """Train (or resume), then plot, evaluate and print a summary; returns the summary.

    ``algo=sb3_ppo|sb3_sac`` (or resuming such a run) goes to embodied/sb3_train.py.
    """
    if wants_sb3(cfg):
        if "reward" in cfg and cfg.reward.mode != "oracle":
            raise ConfigError(f"reward={cfg.reward.mode} is wired into our PPO (algo=ppo) only; "
                             "SB3 learners train on the task's own reward (reward=oracle)")
        from embodied.sb3_train import run_sb3_train  # imports SB3: only for SB3 runs

        return run_sb3_train(cfg)
    torch.set_num_threads(int(cfg.torch_threads))
    run_dir, ckpt = resolve_run_dir(cfg)
    if ckpt is not None:
        cfg = resume_config(cfg, run_dir)
    cfg = OmegaConf.merge(cfg, {"run_dir": str(run_dir)})
    save_config(cfg, run_dir)
    algo_cfg = PPOConfig.from_dict(OmegaConf.to_container(cfg.algo, resolve=True))
    env = make_train_env(cfg, int(cfg.num_envs), int(cfg.seed))
    if "reward" in cfg:  # reward=sparse|prm|...: the RL reward of a reward mode
        env = wrap_reward(env, cfg.reward, gamma=float(cfg.algo.gamma), seed=int(cfg.seed),
                          task=cfg.task.name)
    runner = OnPolicyRunner(env, algo_cfg, run_dir, seed=int(cfg.seed),
                            save_interval=int(cfg.save_interval), progress=bool(cfg.progress))
    if ckpt is not None:
        runner.load(ckpt)
        print(f"resumed from {ckpt} (iteration {runner.iteration}, "
              f"{runner.global_step} env steps)")
    logger = MetricsLogger(run_dir, resume_iteration=runner.iteration if ckpt else None,
                           resume_step=runner.global_step if ckpt else None)
    start = time.perf_counter()
    try:
        last = runner.learn(max_iterations(cfg), logger)
    except KeyboardInterrupt:
        print(f"resume with: embodied train resume={run_dir}")
        raise
    finally:
        logger.close()
        env.close()
    train_s = time.perf_counter() - start

    evaluation = run_eval(cfg, runner.policy, run_dir) if int(cfg.eval.num_envs) > 0 else None
    metrics = read_metrics(logger.path)
    curve = None
    if metrics:
        curve = plot_learning_curve(np.array(metrics["env_steps"]),
                                    np.array(metrics["episode_return"]),
                                    np.array(metrics["success_rate"]),
                                    run_dir / "learning_curve.png",
                                    f"{cfg.task.name}: PPO, {cfg.num_envs} envs, seed {cfg.seed}",
                                    evaluation["success_rate"] if evaluation else None)

    summary = {
        "task": cfg.task.name,
        "run_dir": str(run_dir),
        "iterations": runner.iteration,
        "env_steps": runner.global_step,
        "train_seconds": round(train_s, 1),
        "train_seconds_total": round(runner.wall_time, 1),
        "train_success_rate": last.get("success_rate"),
        "collection_fps": last.get("collection_fps"),
        "learning_fps": last.get("learning_fps"),
        "tensorboard": logger.tensorboard,
        "reward": cfg.reward.mode if "reward" in cfg else "oracle",
        "reward_timing": env.timing_summary() if isinstance(env, RewardEnv) else None,
        "learning_curve": str(curve) if curve else None,
        "eval": evaluation,
    }
    backend = summary["sim"] = str(cfg.sim.name) if "sim" in cfg else "mujoco"
    where = "" if backend == "mujoco" else f" on {backend}"
    print_summary(f"{cfg.task.name}: PPO{where}, {cfg.num_envs} envs, {runner.iteration} "
                  "iterations, "
                  f"{runner.global_step:,} env steps in {train_s:.0f} s"
                  + (f" (run total {runner.wall_time:.0f} s)" if ckpt else ""),
                  last, len(runner.episodes), evaluation, run_dir)
    if isinstance(env, RewardEnv):
        t = env.timing_summary()
        print(f"  reward {cfg.reward.mode:<12} time share: " + ", ".join(
            f"{k} {v:.0%}" for k, v in t["share"].items()) + f" ({t['frames_scored']} frames "
            f"scored for {t['env_steps']} env steps, {t['scoring']})")
    if not logger.tensorboard:
        print("  tensorboard         not installed: metrics in metrics.csv only")
    print(f"  run folder          {run_dir}")
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary
