"""The :class:`Learner` protocol every training algorithm implements, and its registry.

A learner is chosen by ``algo.name`` from a registry
(:func:`embodied.learners.factory.learner_class`). Its class builds it from the
composed config and an env (:meth:`Learner.build`, resuming from the run folder's
checkpoint if there is one); it trains for a budget in its own unit (iterations,
env steps or gradient steps: :meth:`Learner.budget`), saves and loads checkpoints,
and hands out ``act(raw obs) -> action`` for evaluation and export.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import torch
from omegaconf import DictConfig

from embodied import distributed
from embodied.config import ConfigError
from embodied.rl.logger import MetricsLogger
from embodied.run_folder import RunFolder

Policy = Callable[[torch.Tensor], torch.Tensor]


class Learner(Protocol):
    """A trainable policy behind one interface (PPO, SB3 PPO/SAC, IQL, BC).

    ``label`` is the name printed (e.g. ``"PPO"``); class attributes: ``online`` (learns from
    an env, else from a dataset), ``uses_reward_models`` (trains on a wrapped env's
    reward: ``reward=prm`` etc.), ``checkpoint_suffix`` (``".pt"``, ``".zip"``) and
    ``checkpoint_kind`` (what error messages call its checkpoints).
    """

    label: str
    online: ClassVar[bool]
    uses_reward_models: ClassVar[bool]
    checkpoint_suffix: ClassVar[str]
    checkpoint_kind: ClassVar[str]

    @classmethod
    def prepare(cls, cfg: DictConfig, run: RunFolder) -> DictConfig:
        """The config to run with (on resume: the run's own learning-curve settings)."""
        ...

    @classmethod
    def budget(cls, cfg: DictConfig) -> int:
        """How far :meth:`learn` goes, in the learner's own unit."""
        ...

    @classmethod
    def build(cls, cfg: DictConfig, env: Any, run: RunFolder, data: Any = None) -> Learner:
        """A learner for ``cfg`` on ``env`` (and ``data`` for offline learners).

        Resumes from ``run.resume_from`` if set (and says so).
        """
        ...

    @property
    def iteration(self) -> int:
        """Iterations (metrics rows) done, resumed ones included."""
        ...

    @property
    def env_steps(self) -> int:
        """Env steps (offline: gradient steps) done, resumed ones included."""
        ...

    @property
    def wall_time(self) -> float:
        """Seconds of training summed over resumes."""
        ...

    @property
    def episodes_seen(self) -> int:
        """Recent training episodes behind the last metrics row's success rate."""
        ...

    def progress_text(self) -> str:
        """How far training went, for the summary header (``"5 iterations, 640 env steps"``)."""
        ...

    def learn(self, budget: int, logger: MetricsLogger | None = None) -> dict[str, Any]:
        """Train until ``budget`` in total; returns the last metrics row.

        Ctrl-C writes a checkpoint, says where, and re-raises ``KeyboardInterrupt``.
        """
        ...

    def save(self) -> Path:
        """Write a checkpoint of the current state into the run folder; returns it."""
        ...

    def load(self, path: Path) -> Path:
        """Restore a checkpoint; returns the file read."""
        ...

    def act(self) -> Policy:
        """The deterministic policy: raw observations [N, obs_dim] -> actions [N, action_dim]."""
        ...

    def close(self) -> None:
        """Release the learner's env(s)."""
        ...


@dataclass
class Training:
    """What :func:`train_in` returns: the last metrics row, seconds, TensorBoard written."""

    last: dict[str, Any]
    seconds: float
    tensorboard: bool


def train_in(run: RunFolder, learner: Learner, budget: int, resume_command: str) -> Training:
    """``learner.learn(budget)`` logging to the run folder's metrics; closes the learner's env.

    On Ctrl-C (the learner has written a checkpoint) prints ``resume with:
    <resume_command>`` and re-raises ``KeyboardInterrupt``. Under torchrun only rank 0
    logs.
    """
    logger = run.metrics_logger(learner.iteration, learner.env_steps) \
        if distributed.is_main() else None
    start = time.perf_counter()
    try:
        last = learner.learn(budget, logger)
    except KeyboardInterrupt:
        print(f"resume with: {resume_command}")
        raise
    finally:
        if logger is not None:
            logger.close()
        learner.close()
    return Training(last, time.perf_counter() - start,
                    logger is not None and logger.tensorboard)


L = TypeVar("L", bound=type)
_LEARNERS: dict[str, type] = {}


def register_learner(*names: str) -> Callable[[L], L]:
    """Class decorator: the learner class for each ``algo.name`` in ``names``."""

    def add(cls: L) -> L:
        for name in names:
            if name in _LEARNERS:
                raise ValueError(f"learner '{name}' is registered twice")
            _LEARNERS[name] = cls
        return cls

    return add


def learner_names() -> list[str]:
    """Every registered ``algo.name``."""
    return sorted(_LEARNERS)


def learner_class(name: str) -> type[Learner]:
    """The learner class of ``algo.name`` among those registered so far.

    :func:`embodied.learners.factory.learner_class` is the same with every learner of
    the project registered.
    """
    if name not in _LEARNERS:
        raise ConfigError(f"unknown algo '{name}'; available: {learner_names()}")
    return _LEARNERS[name]
