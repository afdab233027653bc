"""IQL and BC on a dataset's transitions as a :class:`~embodied.learners.base.Learner`.

Checkpoints have the format of PPO runs (:mod:`embodied.rl.checkpoint`; ``embodied
eval`` and ``embodied export`` read them) plus the offline learner's state and RNG
states, so a run resumes exactly. Metrics rows hold the losses, gradient steps/s and,
every ``eval_interval`` gradient steps, the success rate in simulation.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from embodied.config import ConfigError
from embodied.datasets import DatasetError, LeRobotDataset
from embodied.learners.base import Policy, register_learner
from embodied.offline.data import Transitions, term_of
from embodied.offline.finetune import FinetuneConfig, finetune
from embodied.offline.iql import OfflineConfig, OfflineLearner
from embodied.policy_io import ChunkedPolicy
from embodied.rl.checkpoint import (
    CHECKPOINT_FORMAT,
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
)
from embodied.rl.evaluate import evaluate
from embodied.rl.logger import MetricsLogger
from embodied.run_folder import RunFolder
from sim.protocol import BatchedEnv


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


def ignored_inputs(names: list[str] | None, terms: list[str]) -> torch.Tensor | None:
    """Bool mask of the observation dimensions whose term is in ``terms`` (None: none).

    ``names`` are the dataset's per-dimension names (``<term>`` or ``<term>.<i>``).
    """
    if not terms:
        return None
    if not names:
        raise DatasetError("algo.ignore_obs needs the dataset's observation names (recollect "
                           "it with this version of `embodied collect`)")
    known = [term_of(n) for n in names]
    unknown = sorted(set(terms) - set(known))
    if unknown:
        raise DatasetError(f"algo.ignore_obs names {unknown}, not observation terms of the "
                           f"dataset ({list(dict.fromkeys(known))})")
    return torch.tensor([t in terms for t in known])


@register_learner("iql", "bc", "rabc")
class OfflineRunner:
    """Gradient steps on minibatches of a :class:`Transitions`.

    Periodic evaluation and checkpoints; exact resume (networks, optimisers, step, RNG states).

    The budget is ``steps`` gradient steps; a metrics row every ``log_interval``,
    an evaluation on ``eval_env`` (if given) every ``eval_interval`` and a
    checkpoint every ``save_interval`` gradient steps.
    """

    label: str = "offline"
    online: ClassVar[bool] = False
    uses_reward_models: ClassVar[bool] = False
    checkpoint_suffix: ClassVar[str] = ".pt"
    checkpoint_kind: ClassVar[str] = "checkpoint"
    wall_time: float = 0.0  # seconds of gradient steps, summed over resumes

    def __init__(self, data: Transitions, cfg: OfflineConfig, run_dir: Path, seed: int = 0,
                 eval_env: BatchedEnv | None = None, schedule: dict[str, Any] | None = None):
        self.data, self.cfg, self.run_dir = data, cfg, Path(run_dir)
        self.label = cfg.name.upper()
        torch.manual_seed(seed)
        self.learner = OfflineLearner(data.obs.shape[1], data.actions.shape[1] // cfg.chunk,
                                      cfg, ignored_inputs(data.obs_names, cfg.ignore_obs))
        self.learner.set_obs_statistics(data.obs)
        self.gen = torch.Generator().manual_seed(seed)
        self.step = 0
        self.finetuned_env_steps = 0  # env steps of online fine-tuning done
        self.wall_time = 0.0
        self.eval_env = eval_env
        self.schedule = {"log_interval": 500, "eval_interval": 5000, "eval_episodes": 32,
                         "save_interval": 5000, "progress": False, **(schedule or {})}

    @classmethod
    def prepare(cls, cfg: DictConfig, run: RunFolder) -> DictConfig:
        """``cfg`` as given (the dataset defines the run)."""
        return cfg

    @classmethod
    def budget(cls, cfg: DictConfig) -> int:
        """``steps``: gradient steps, resumed ones included."""
        return int(cfg.steps)

    @classmethod
    def build(cls, cfg: DictConfig, env: BatchedEnv | None, run: RunFolder,
              data: Transitions | None = None) -> OfflineRunner:
        """A runner on ``data`` evaluated on ``env``, resumed from ``run.resume_from``."""
        if data is None:
            raise ConfigError(f"algo={cfg.algo.name} learns from a dataset: use `embodied "
                              "offline dataset=PATH`")
        algo = OfflineConfig.from_dict(OmegaConf.to_container(cfg.algo, resolve=True))
        schedule = {k: cfg[k] for k in ("log_interval", "eval_interval", "eval_episodes",
                                        "save_interval", "progress")}
        runner = cls(data, algo, run.path, int(cfg.seed), env, schedule)
        if run.resume_from is not None:
            runner.load(run.resume_from)
            print(f"resumed from {run.resume_from} (gradient step {runner.step})")
        return runner

    @property
    def policy(self) -> torch.nn.Module:
        """The policy network (an :class:`~embodied.rl.ActorCritic`)."""
        return self.learner.policy

    @property
    def iteration(self) -> int:
        """Gradient steps done."""
        return self.step

    @property
    def env_steps(self) -> int:
        """Gradient steps done (no env steps are taken)."""
        return self.step

    @property
    def episodes_seen(self) -> int:
        """No training episodes: the data is fixed."""
        return 0

    def progress_text(self) -> str:
        """``"<n> gradient steps"``."""
        return f"{self.step:,} gradient steps"

    def act(self) -> Policy:
        """The policy network (deterministic in eval mode); chunks temporally ensembled."""
        if self.cfg.chunk == 1:
            return self.policy
        return ChunkedPolicy(self.policy, self.cfg.chunk,
                             self.data.actions.shape[1] // self.cfg.chunk, self.cfg.ensemble_decay)

    def close(self) -> None:
        """Close the evaluation env."""
        if self.eval_env is not None:
            self.eval_env.close()

    def checkpoint_path(self) -> Path:
        """Where the checkpoint of the current gradient step goes."""
        return checkpoint_path(self.run_dir, self.step)

    def save(self) -> Path:
        """Atomic checkpoint in the format of PPO runs (``embodied eval/export`` read it)."""
        state = {"format": CHECKPOINT_FORMAT, "policy": self.policy.state_dict(),
                 "ppo": {},  # the keys every training checkpoint has; no PPO state here
                 "offline": self.learner.state_dict(), "iteration": self.step,
                 "global_step": self.finetuned_env_steps, "wall_time": self.wall_time,
                 "rng": {"torch": torch.get_rng_state(), "sampler": self.gen.get_state()},
                 "obs_dim": self.data.obs.shape[1], "action_dim": self.data.actions.shape[1],
                 "config": asdict(self.cfg)}
        return save_checkpoint(state, self.checkpoint_path())

    def load(self, path: Path) -> Path:
        """Restore a checkpoint of `embodied offline`; returns the file read."""
        state = load_checkpoint(path)
        if "offline" not in state:
            raise DatasetError(f"{path} is not a checkpoint of `embodied offline`")
        self.policy.load_state_dict(state["policy"])
        self.learner.load_state_dict(state["offline"])
        self.step = int(state["iteration"])
        self.finetuned_env_steps = int(state.get("global_step", 0))
        self.wall_time = float(state.get("wall_time", 0.0))
        torch.set_rng_state(state["rng"]["torch"])
        self.gen.set_state(state["rng"]["sampler"])
        return Path(path)

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

    def finetune(self, cfg: FinetuneConfig, env: BatchedEnv) -> dict[str, Any]:
        """Online fine-tuning in ``env`` (:mod:`embodied.offline.finetune`), then a checkpoint.

        The online transitions join this runner's data; the checkpoint's gradient step
        counts the fine-tuning's too and its ``global_step`` the env steps taken, so a
        resumed run that finished fine-tuning does not repeat it. Returns the statistics.
        """
        start = time.perf_counter()
        stats = finetune(self.learner, self.data, self.act(), env, cfg, self.gen,
                         self.cfg.chunk, progress=bool(self.schedule["progress"]))
        self.step += stats["gradient_steps"]
        self.finetuned_env_steps += stats["env_steps"]
        self.wall_time += time.perf_counter() - start
        self.save()
        return stats

    def learn(self, budget: int, logger: MetricsLogger | None = None) -> dict[str, Any]:
        """Gradient steps up to ``budget`` in total, logging, evaluating and saving on schedule.

        Ctrl-C writes a checkpoint, says where, and re-raises ``KeyboardInterrupt``.
        Returns the last metrics row.
        """
        sched = self.schedule
        interval = max(1, int(sched["log_interval"]))
        bar = tqdm(total=budget, initial=self.step, unit="step", desc=f"{self.cfg.name}",
                   disable=not sched["progress"], dynamic_ncols=True)
        last: dict[str, Any] = {}
        try:
            while self.step < budget:
                stats = self.run(min(interval, budget - self.step))
                row: dict[str, Any] = {"iteration": self.step, "env_steps": self.step,
                                       "gradient_steps": self.step, **stats,
                                       "success_rate": math.nan, "episode_return": math.nan}
                if self.eval_env is not None and (self.step % int(sched["eval_interval"]) == 0
                                                  or self.step == budget):
                    policy = self.act()
                    if isinstance(policy, ChunkedPolicy):
                        policy.bind_env(self.eval_env)
                    result = evaluate(policy, self.eval_env,
                                      episodes=int(sched["eval_episodes"]))
                    row |= {"success_rate": result["success_rate"],
                            "episode_return": result["episode_return"]}
                if logger is not None:
                    logger.log(row)
                last = row
                bar.update(int(self.step - bar.n))
                bar.set_postfix(success=f"{row['success_rate']:.2f}", refresh=False)
                if int(sched["save_interval"]) and self.step % int(sched["save_interval"]) == 0:
                    self.save()
            if self.step and not self.checkpoint_path().exists():
                self.save()
        except KeyboardInterrupt:
            print(f"\ninterrupted: checkpoint written to {self.save()}")
            raise
        finally:
            bar.close()
        return last
