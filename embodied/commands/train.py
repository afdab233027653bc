"""`embodied train`: a learner (``algo=ppo|sb3_ppo|sb3_sac``) on a batched sim task.

Leaves a self-contained, resumable run folder (:mod:`embodied.run_folder`). Under
``torchrun`` PPO trains data-parallel, one env batch of ``num_envs`` per rank
(:mod:`embodied.distributed`); rank 0 writes the run folder, evaluates and plots.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from embodied import distributed
from embodied.commands.registry import command
from embodied.config import ConfigError, saved_config
from embodied.envs import make_train_env
from embodied.learners.base import train_in
from embodied.learners.factory import learner_class
from embodied.reward.rl_wrapper import RewardEnv, wrap_reward
from embodied.reward.vlm.remote import ServerError
from embodied.rl.checkpoint import CheckpointError
from embodied.run_folder import RunFolder, print_summary
from sim import BackendError


@command("train", "train a policy with PPO (resumable run folder: metrics, checkpoints, "
         "eval video)", errors=(CheckpointError, FileNotFoundError, BackendError, ServerError))
def run_train(cfg: DictConfig) -> dict[str, Any]:
    """Train (or resume), then plot, evaluate and print a summary; returns the summary."""
    cfg = restarted_config(cfg)
    saved = saved_config(cfg.resume) if cfg.resume is not None else None
    algo = str((OmegaConf.select(saved, "algo.name") if saved is not None else None)
               or cfg.algo.name)
    learner_cls = learner_class(algo)
    if not learner_cls.online:
        raise ConfigError(f"algo={algo} learns from a dataset: use `embodied offline`")
    reward = cfg.reward.mode if "reward" in cfg else "oracle"
    if reward != "oracle" and not learner_cls.uses_reward_models:
        raise ConfigError(f"reward={reward} is wired into our PPO (algo=ppo) only; "
                          "SB3 learners train on the task's own reward (reward=oracle)")
    if distributed.init() and not getattr(learner_cls, "data_parallel", False):
        raise ConfigError(f"algo={algo} (stable-baselines3) runs in a single process: launch "
                          "it without torchrun, or use algo=ppo for data-parallel training")
    cfg = rank_config(cfg)
    torch.set_num_threads(int(cfg.torch_threads))
    run = RunFolder.from_config(cfg, learner_cls.checkpoint_suffix, learner_cls.checkpoint_kind)
    cfg = run.write_config(learner_cls.prepare(cfg, run))
    seed = distributed.rank_seed(int(cfg.seed))
    env = make_train_env(cfg, int(cfg.num_envs), seed)
    if learner_cls.uses_reward_models and "reward" in cfg:  # the RL reward of a reward mode
        env = wrap_reward(env, cfg.reward, gamma=float(cfg.algo.gamma), seed=seed,
                          task=cfg.task.name)
    learner = learner_cls.build(cfg, env, run)
    trained = train_in(run, learner, learner_cls.budget(cfg), f"embodied train resume={run.path}")
    last, train_s = trained.last, trained.seconds
    if not distributed.is_main():  # rank 0 evaluates, plots and summarises
        return {"rank": distributed.rank(), "iterations": learner.iteration,
                "env_steps": learner.env_steps}
    evaluation = run.evaluate(cfg, learner.act())

    backend = str(cfg.sim.name) if "sim" in cfg else "mujoco"
    title = f"{learner.label}{'' if backend == 'mujoco' else f' on {backend}'}"
    curve = run.plot(f"{cfg.task.name}: {learner.label}, {cfg.num_envs} envs, seed {cfg.seed}",
                     evaluation)
    timing = None
    if isinstance(env, RewardEnv):
        timing = env.timing_summary()
        refreshed = env.save_reward_model(run.path)  # the PRM as the run left it
        timing["refreshed_prm"] = None if refreshed is None else str(refreshed)
    summary = {
        "task": cfg.task.name, "algo": algo, "run_dir": str(run.path),
        "iterations": learner.iteration, "env_steps": learner.env_steps,
        "train_seconds": round(train_s, 1), "train_seconds_total": round(learner.wall_time, 1),
        "train_success_rate": last.get("success_rate"),
        "collection_fps": last.get("collection_fps"), "learning_fps": last.get("learning_fps"),
        "tensorboard": trained.tensorboard, "reward": reward, "reward_timing": timing,
        "learning_curve": str(curve) if curve else None, "eval": evaluation, "sim": backend,
    }
    print_summary(f"{cfg.task.name}: {title}, {cfg.num_envs} envs, {learner.progress_text()} in "
                  f"{train_s:.0f} s" + (f" (run total {learner.wall_time:.0f} s)"
                                        if run.resume_from else ""),
                  last, learner.episodes_seen, evaluation)
    if timing is not None:
        print(f"  reward {cfg.reward.mode:<12} time share: " + ", ".join(
            f"{k} {v:.0%}" for k, v in timing["share"].items()) + f" ({timing['frames_scored']} "
            f"frames scored for {timing['env_steps']} env steps, {timing['scoring']})")
    if not trained.tensorboard:
        print("  tensorboard         not installed: metrics in metrics.csv only")
    summary["world_size"] = distributed.world_size()
    return run.finish(summary)


def restarted_config(cfg: DictConfig) -> DictConfig:
    """After a torchrun restart (``--max-restarts``), resume from ``run_dir``.

    Only when it holds a checkpoint, so ``run_dir`` must be given: the default one is
    named by the start time.
    """
    if distributed.restart_count() == 0 or cfg.get("resume") is not None:
        return cfg
    if not list((Path(str(cfg.run_dir)) / "checkpoints").glob("model_*")):
        return cfg
    print(f"torchrun restart {distributed.restart_count()}: resuming {cfg.run_dir}")
    return OmegaConf.merge(cfg, {"resume": str(cfg.run_dir)})


def rank_config(cfg: DictConfig) -> DictConfig:
    """``cfg`` with rank 0's ``run_dir`` and, on a GPU backend, this rank's GPU as device."""
    if not distributed.is_distributed():
        return cfg
    cfg = OmegaConf.merge(cfg, {"run_dir": distributed.broadcast_object(str(cfg.run_dir))})
    device = distributed.default_device()
    if device and "sim" in cfg and cfg.sim.name != "mujoco" and cfg.sim.get("device") is None:
        cfg.sim.device = device
    return cfg
