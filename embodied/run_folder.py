"""The run folder of a training command and what every learner leaves in it.

``<run_dir>/config.yaml`` (the resolved config), ``checkpoints/``, ``metrics.csv``
(+ TensorBoard events if installed), ``learning_curve.png``, ``eval.json`` and
``eval.mp4`` (deterministic policy, every camera view of a few envs) and
``summary.json``. A resumed run (``resume=<run folder or checkpoint>``) keeps its
folder and the settings that define its learning curve.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from embodied import distributed
from embodied.config import save_config
from embodied.envs import make_train_env
from embodied.plots import plot_learning_curve
from embodied.rl.checkpoint import find_checkpoint, run_dir_of
from embodied.rl.evaluate import evaluate_and_track, print_video_and_walking
from embodied.rl.logger import MetricsLogger, read_metrics

# What defines a run's learning curve: on resume these come from the run's own config.yaml.
RUN_KEYS = ("task", "algo", "reward", "num_envs", "seed", "save_interval")
EVAL_SEED_OFFSET = 10_000  # evaluation envs are seeded apart from the training envs


def _kind(section: DictConfig) -> tuple[Any, Any]:
    """What a config section is: its ``name`` (a learner, a task, a model) and ``mode``."""
    return section.get("name"), section.get("mode")


def _resumed_value(given: Any, saved: Any) -> Any:
    """A resumed run's setting: ``saved``, over ``given`` where both are sections of one kind.

    Sections of one kind (the same ``name`` and ``mode``) are joined key by key, each
    subsection by the same rule, so keys a config gained since the run was saved get
    their given values. Sections of another kind (an ``algo`` of another learner, a
    ``reward`` of another mode) are replaced whole: the given section's keys are not theirs.
    """
    if not (OmegaConf.is_dict(given) and OmegaConf.is_dict(saved)) \
            or _kind(given) != _kind(saved):
        return saved
    joined = {key: _resumed_value(given.get(key), saved[key]) for key in saved}
    return OmegaConf.create({**{k: given[k] for k in given if k not in saved}, **joined})


@dataclass
class RunFolder:
    """A run's folder and, when resuming, the checkpoint it continues from."""

    path: Path
    resume_from: Path | None = None

    @classmethod
    def from_config(cls, cfg: DictConfig, suffix: str = ".pt",
                    what: str = "checkpoint") -> RunFolder:
        """``cfg.run_dir``, or the folder of ``cfg.resume``'s newest ``model_*<suffix>``."""
        if cfg.get("resume") is None:
            return cls(Path(cfg.run_dir))
        ckpt = find_checkpoint(cfg.resume, suffix=suffix, what=what)
        return cls(run_dir_of(ckpt), ckpt)

    @property
    def checkpoints(self) -> Path:
        """Where the learner writes its checkpoints."""
        return self.path / "checkpoints"

    def resume_config(self, cfg: DictConfig) -> DictConfig:
        """``cfg`` with the resumed run's task/algo/num_envs/seed/save_interval (notes differences).

        Everything else (eval, progress, threads) is taken from ``cfg``, the budget too:
        :func:`~embodied.config.load_config` made it the run's own unless the command line
        set one, so a finished run can be extended with e.g. ``max_iterations=500``.
        """
        path = self.path / "config.yaml"
        if not path.exists():
            return cfg
        saved = OmegaConf.load(path)
        differs = [k for k in RUN_KEYS if k in saved and OmegaConf.select(cfg, k) != saved[k]]
        if differs:
            print(f"resume: using the run's own {', '.join(differs)} from {path} "
                  f"(the given values are ignored)")
        cfg = cfg.copy()
        with open_dict(cfg):
            for key in (k for k in RUN_KEYS if k in saved):
                cfg[key] = _resumed_value(cfg.get(key), saved[key])
        return cfg

    def write_config(self, cfg: DictConfig) -> DictConfig:
        """``cfg`` with ``run_dir`` set to this folder, written to config.yaml (by rank 0)."""
        cfg = OmegaConf.merge(cfg, {"run_dir": str(self.path)})
        if distributed.is_main():
            save_config(cfg, self.path)
        return cfg

    def metrics_logger(self, iteration: int | None = None,
                       env_steps: int | None = None) -> MetricsLogger:
        """metrics.csv (+ TensorBoard); on resume cut after ``iteration`` / ``env_steps``."""
        resumed = self.resume_from is not None
        return MetricsLogger(self.path, resume_iteration=iteration if resumed else None,
                             resume_step=env_steps if resumed else None)

    def plot(self, title: str, evaluation: dict[str, Any] | None, x: str = "env_steps",
             xlabel: str = "env steps", evaluated_only: bool = False) -> Path | None:
        """learning_curve.png from metrics.csv (None without rows).

        ``evaluated_only`` keeps the rows that have a success rate (periodic evaluations).
        """
        path = self.path / "metrics.csv"
        metrics = read_metrics(path) if path.exists() else {}
        if not metrics:
            return None
        keep = slice(None)
        if evaluated_only:
            keep = ~np.isnan(np.array(metrics["success_rate"]))
        return plot_learning_curve(np.array(metrics[x])[keep],
                                   np.array(metrics["episode_return"])[keep],
                                   np.array(metrics["success_rate"])[keep],
                                   self.path / "learning_curve.png", title,
                                   evaluation["success_rate"] if evaluation else None,
                                   xlabel=xlabel)

    def evaluate(self, cfg: DictConfig, policy: Callable[[torch.Tensor], torch.Tensor]
                 ) -> dict[str, Any] | None:
        """Deterministic-policy success over ``eval.num_envs`` episodes and an MP4 of a few envs.

        ``policy(raw obs) -> action``: an :class:`~embodied.rl.ActorCritic` (put in eval
        mode) or any callable. Writes eval.json and eval.mp4; None if ``eval.num_envs`` is 0.
        """
        if int(cfg.eval.num_envs) <= 0:
            return None
        seed = int(cfg.seed) + EVAL_SEED_OFFSET
        env = make_train_env(cfg, int(cfg.eval.num_envs), seed)
        if isinstance(policy, torch.nn.Module):
            policy.eval()
        bind_env = getattr(policy, "bind_env", None)  # a stateful policy, reset per episode
        if bind_env is not None:
            bind_env(env)
        result = evaluate_and_track(
            policy, env, self.path / "eval.mp4", seed, video_envs=int(cfg.eval.video_envs),
            cameras=cfg.eval.cameras, width=int(cfg.eval.width), height=int(cfg.eval.height),
            fps=int(cfg.eval.fps))
        (self.path / "eval.json").write_text(json.dumps(result, indent=2))
        return result

    def finish(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Print the run folder line and write summary.json; returns ``summary``."""
        print(f"  run folder          {self.path}")
        (self.path / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        return summary


def print_summary(header: str, last: dict | None, n_episodes: int,
                  evaluation: dict | None) -> None:
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
