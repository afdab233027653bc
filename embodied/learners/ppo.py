"""Our PPO (:class:`embodied.rl.OnPolicyRunner`) as a :class:`~embodied.learners.base.Learner`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from omegaconf import DictConfig, OmegaConf

from embodied import distributed
from embodied.config import run_iterations
from embodied.learners.base import Policy, register_learner
from embodied.rl import OnPolicyRunner, PPOConfig
from embodied.rl.logger import MetricsLogger
from embodied.run_folder import RunFolder
from sim.protocol import BatchedEnv


@register_learner("ppo")
class PPOLearner:
    """PPO on a :class:`~sim.protocol.BatchedEnv`; the budget is ``max_iterations``."""

    label: str = "PPO"
    online: ClassVar[bool] = True
    uses_reward_models: ClassVar[bool] = True
    checkpoint_suffix: ClassVar[str] = ".pt"
    checkpoint_kind: ClassVar[str] = "checkpoint"
    data_parallel: ClassVar[bool] = True  # one runner per torchrun rank

    def __init__(self, runner: OnPolicyRunner) -> None:
        self.runner = runner

    @classmethod
    def prepare(cls, cfg: DictConfig, run: RunFolder) -> DictConfig:
        """``cfg``, with the resumed run's learning-curve settings on resume."""
        return cfg if run.resume_from is None else run.resume_config(cfg)

    @classmethod
    def budget(cls, cfg: DictConfig) -> int:
        """``max_iterations``, or the iterations that cover ``total_env_steps`` if set."""
        return run_iterations(cfg)

    @classmethod
    def build(cls, cfg: DictConfig, env: BatchedEnv, run: RunFolder,
              data: Any = None) -> PPOLearner:
        """An :class:`OnPolicyRunner` per ``cfg.algo``, resumed from ``run.resume_from``."""
        algo = PPOConfig.from_dict(OmegaConf.to_container(cfg.algo, resolve=True))
        learner = cls(OnPolicyRunner(env, algo, run.path,
                                     seed=distributed.rank_seed(int(cfg.seed)),
                                     save_interval=int(cfg.save_interval),
                                     progress=bool(cfg.progress)))
        if run.resume_from is not None:
            learner.load(run.resume_from)
            print(f"resumed from {run.resume_from} (iteration {learner.iteration}, "
                  f"{learner.env_steps} env steps)")
        return learner

    @property
    def iteration(self) -> int:
        """PPO iterations done."""
        return self.runner.iteration

    @property
    def env_steps(self) -> int:
        """Env steps collected."""
        return self.runner.global_step

    @property
    def wall_time(self) -> float:
        """Seconds of training over all resumes."""
        return self.runner.wall_time

    @property
    def episodes_seen(self) -> int:
        """Recent episodes in the success rate."""
        return len(self.runner.episodes)

    def progress_text(self) -> str:
        """``"<n> iterations, <m> env steps"``."""
        return f"{self.iteration} iterations, {self.env_steps:,} env steps"

    def learn(self, budget: int, logger: MetricsLogger | None = None) -> dict[str, Any]:
        """:meth:`OnPolicyRunner.learn` up to ``budget`` iterations."""
        return self.runner.learn(budget, logger)

    def save(self) -> Path:
        """A checkpoint of the current iteration."""
        return self.runner.save()

    def load(self, path: Path) -> Path:
        """Restore a checkpoint (a file or a run folder's newest)."""
        return self.runner.load(path)

    def act(self) -> Policy:
        """The :class:`~embodied.rl.ActorCritic` (deterministic in eval mode)."""
        return self.runner.policy

    def close(self) -> None:
        """Close the training env."""
        self.runner.env.close()
