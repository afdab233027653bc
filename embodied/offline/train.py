"""`embodied offline`: IQL or BC from a dataset path, evaluated in simulation.

The run folder is the one of online training: config.yaml, checkpoints/ (atomic,
resumable, loadable by `embodied eval` and `embodied export`), metrics.csv and
TensorBoard events (losses, gradient steps/s, periodic success in simulation),
learning_curve.png, eval.json and eval.mp4 (every camera view), summary.json.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from embodied.config import ConfigError, save_config
from embodied.datasets import DatasetError, LeRobotDataset
from embodied.offline.data import Transitions, load_transitions
from embodied.offline.iql import OfflineConfig, OfflineLearner
from embodied.plots import plot_learning_curve
from embodied.rl.evaluate import evaluate
from embodied.rl.logger import MetricsLogger, read_metrics
from embodied.rl.runner import CHECKPOINT_FORMAT, find_checkpoint, load_checkpoint
from embodied.train import make_train_env, print_summary, resolve_run_dir, run_eval


def with_dataset_task(cfg: DictConfig, ds: LeRobotDataset) -> DictConfig:
    """``cfg`` with ``task`` set to the task config the dataset was collected with.

    A ``task=...`` override must name the same task (the policy is evaluated there).
    """
    recorded = (ds.info.get("embodied") or {}).get("task_config")
    given = cfg.get("task")
    if given is not None:
        if recorded and recorded.get("name") != given.name:
            raise ConfigError(f"task={given.name} but {ds.root} was collected on task "
                              f"'{recorded['name']}'")
        return cfg
    if not recorded:
        raise ConfigError(f"{ds.root / 'meta/info.json'} does not say which simulated task it "
                          "was collected on; pass task=<name> to evaluate the policy there")
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    cfg.task = recorded
    return cfg


class OfflineRunner:
    """Gradient steps on minibatches of a :class:`Transitions`; periodic evaluation and
    checkpoints; exact resume (networks, optimisers, step, RNG states)."""

    def __init__(self, data: Transitions, cfg: OfflineConfig, run_dir: Path, seed: int = 0):
        self.data, self.cfg, self.run_dir = data, cfg, Path(run_dir)
        torch.manual_seed(seed)
        self.learner = OfflineLearner(data.obs.shape[1], data.actions.shape[1], cfg)
        self.learner.set_obs_statistics(data.obs)
        self.gen = torch.Generator().manual_seed(seed)
        self.step = 0
        self.wall_time = 0.0

    @property
    def policy(self):
        return self.learner.policy

    def checkpoint_path(self) -> Path:
        return self.run_dir / "checkpoints" / f"model_{self.step:06d}.pt"

    def save(self) -> Path:
        """Atomic checkpoint in the format of PPO runs (``embodied eval/export`` read it)."""
        path = self.checkpoint_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {"format": CHECKPOINT_FORMAT, "policy": self.policy.state_dict(),
                 "ppo": {},  # the keys every training checkpoint has; no PPO state here
                 "offline": self.learner.state_dict(), "iteration": self.step,
                 "global_step": 0, "wall_time": self.wall_time,
                 "rng": {"torch": torch.get_rng_state(), "sampler": self.gen.get_state()},
                 "obs_dim": self.data.obs.shape[1], "action_dim": self.data.actions.shape[1],
                 "config": asdict(self.cfg)}
        tmp = path.with_name(path.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)
        return path

    def load(self, path: Path) -> None:
        state = load_checkpoint(path)
        if "offline" not in state:
            raise DatasetError(f"{path} is not a checkpoint of `embodied offline`")
        self.policy.load_state_dict(state["policy"])
        self.learner.load_state_dict(state["offline"])
        self.step = int(state["iteration"])
        self.wall_time = float(state.get("wall_time", 0.0))
        torch.set_rng_state(state["rng"]["torch"])
        self.gen.set_state(state["rng"]["sampler"])

    def run(self, steps: int) -> dict[str, float]:
        """``steps`` gradient steps; returns the losses averaged over them and steps/s."""
        sums: dict[str, float] = {}
        start = time.perf_counter()
        for _ in range(steps):
            batch = self.data.sample(self.cfg.batch_size, self.gen)
            for key, value in self.learner.update(*batch).items():
                sums[key] = sums.get(key, 0.0) + value
            self.step += 1
        seconds = time.perf_counter() - start
        self.wall_time += seconds
        return {**{k: v / max(steps, 1) for k, v in sums.items()},
                "gradient_steps_per_s": steps / seconds if seconds > 0 else math.nan}


def run_offline(cfg: DictConfig) -> dict[str, Any]:
    """Train per ``cfg`` (configs/offline.yaml); returns the summary."""
    torch.set_num_threads(int(cfg.torch_threads))
    if not cfg.get("dataset"):
        raise DatasetError("no dataset given: pass dataset=PATH (a LeRobot dataset folder)")
    ds = LeRobotDataset(str(cfg.dataset))
    cfg = with_dataset_task(cfg, ds)
    run_dir, ckpt = resolve_run_dir(cfg)
    cfg = OmegaConf.merge(cfg, {"run_dir": str(run_dir)})
    save_config(cfg, run_dir)
    data = load_transitions(ds.root, str(cfg.reward_key))
    algo = OfflineConfig.from_dict(OmegaConf.to_container(cfg.algo, resolve=True))
    runner = OfflineRunner(data, algo, run_dir, int(cfg.seed))
    if ckpt is not None:
        runner.load(ckpt)
        print(f"resumed from {ckpt} (gradient step {runner.step})")
    logger = MetricsLogger(run_dir, resume_iteration=runner.step if ckpt else None,
                           resume_step=runner.step if ckpt else None)
    eval_env = None
    if int(cfg.eval_episodes) > 0:
        eval_env = make_train_env(cfg, min(int(cfg.eval_episodes), 64), int(cfg.seed) + 10_000)
    total = int(cfg.steps)
    interval = max(1, int(cfg.log_interval))
    bar = tqdm(total=total, initial=runner.step, unit="step", desc=f"{algo.name}",
               disable=not cfg.progress, dynamic_ncols=True)
    start = time.perf_counter()
    last: dict[str, Any] = {}
    try:
        while runner.step < total:
            stats = runner.run(min(interval, total - runner.step))
            row: dict[str, Any] = {"iteration": runner.step, "env_steps": runner.step,
                                   "gradient_steps": runner.step, **stats,
                                   "success_rate": math.nan, "episode_return": math.nan}
            if eval_env is not None and (runner.step % int(cfg.eval_interval) == 0
                                         or runner.step == total):
                result = evaluate(runner.policy, eval_env, episodes=int(cfg.eval_episodes))
                row |= {"success_rate": result["success_rate"],
                        "episode_return": result["episode_return"]}
            logger.log(row)
            last = row
            bar.update(int(runner.step - bar.n))
            bar.set_postfix(success=f"{row['success_rate']:.2f}", refresh=False)
            if int(cfg.save_interval) and runner.step % int(cfg.save_interval) == 0:
                runner.save()
        if runner.step and not runner.checkpoint_path().exists():
            runner.save()
    except KeyboardInterrupt:
        print(f"\ninterrupted: checkpoint written to {runner.save()}; resume with: "
              f"embodied offline dataset={cfg.dataset} resume={run_dir}")
        raise
    finally:
        bar.close()
        logger.close()
        if eval_env is not None:
            eval_env.close()
    train_s = time.perf_counter() - start
    evaluation = run_eval(cfg, runner.policy, run_dir) if int(cfg.eval.num_envs) > 0 else None
    metrics = read_metrics(logger.path)
    curve = None
    if metrics:
        ok = ~np.isnan(np.array(metrics["success_rate"]))
        curve = plot_learning_curve(
            np.array(metrics["gradient_steps"])[ok], np.array(metrics["episode_return"])[ok],
            np.array(metrics["success_rate"])[ok], run_dir / "learning_curve.png",
            f"{cfg.task.name}: {algo.name.upper()} from {ds.root.name} ({len(data)} "
            f"transitions), seed {cfg.seed}",
            evaluation["success_rate"] if evaluation else None, xlabel="gradient steps")
    summary = {"task": cfg.task.name, "algo": algo.name, "dataset": str(ds.root),
               "reward_key": str(cfg.reward_key), "transitions": len(data),
               "run_dir": str(run_dir), "gradient_steps": runner.step,
               "train_seconds": round(train_s, 1),
               "gradient_steps_per_s": last.get("gradient_steps_per_s"),
               "learning_curve": str(curve) if curve else None, "eval": evaluation}
    print_summary(f"{cfg.task.name}: {algo.name.upper()} on {len(data):,} transitions of "
                  f"{ds.root}, {runner.step:,} gradient steps in {train_s:.0f} s", None, 0,
                  evaluation, run_dir)
    print(f"  run folder          {run_dir}")
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


__all__ = ["OfflineRunner", "find_checkpoint", "run_offline", "with_dataset_task"]
