"""stable-baselines3 PPO and SAC as :class:`~embodied.learners.base.Learner` s.

``embodied train algo=sb3_ppo|sb3_sac`` leaves the same run folder as our PPO
(:mod:`embodied.run_folder`): config.yaml, checkpoints/,
metrics.csv (the same column names where they exist), TensorBoard events (if
installed), learning_curve.png, eval.json + eval.mp4 (deterministic policy) and
summary.json. The env is :class:`sim.adapters.sb3_vec.SB3VecEnv` over our batched
env, optionally inside SB3's ``VecNormalize`` (observations).

Checkpoints (``checkpoints/``, each file written to a temporary name and renamed):
``vecnormalize_<steps>.pkl`` (the normaliser statistics), ``state_<steps>.json``
(wall time, metrics row counter, recent episodes), ``replay_buffer.pkl`` (SAC, the
latest only, if ``algo.save_replay_buffer``) and, last, ``model_<steps>.zip`` (SB3's
own format): a checkpoint is complete once its model file exists. Resume
(``resume=<run folder or model_*.zip>``) restores all of them and continues the
env-step counter; the envs start fresh episodes (SB3 does not snapshot them).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from embodied.learners.base import Policy, register_learner
from embodied.rl.checkpoint import CheckpointError
from embodied.rl.logger import MetricsLogger
from embodied.run_folder import RunFolder
from sim.adapters.sb3_vec import SB3VecEnv
from sim.protocol import BatchedEnv

_MODEL_RE = re.compile(r"model_(\d+)\.zip$")
ACTIVATIONS = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU, "elu": torch.nn.ELU}

# metrics.csv columns: the names of embodied/rl/runner.py where the quantity exists, then the
# algorithm's own diagnostics (from SB3's logger keys; NaN in rows where SB3 logged none).
BASE_COLUMNS = ("iteration", "env_steps", "wall_time", "episode_return", "success_rate",
                "episode_length", "fps", "collection_fps", "learning_fps", "collection_s",
                "learning_s")
SB3_COLUMNS = {
    "sb3_ppo": {"approx_kl": "train/approx_kl", "clip_fraction": "train/clip_fraction",
                "explained_variance": "train/explained_variance",
                "entropy": "train/entropy_loss", "learning_rate": "train/learning_rate",
                "policy_loss": "train/policy_gradient_loss", "value_loss": "train/value_loss",
                "action_std": "train/std"},
    "sb3_sac": {"actor_loss": "train/actor_loss", "critic_loss": "train/critic_loss",
                "ent_coef": "train/ent_coef", "learning_rate": "train/learning_rate"},
}


# ------------------------------------------------------------------ config
def algo_class(name: str) -> type[BaseAlgorithm]:
    """The SB3 algorithm class of ``algo.name``."""
    from stable_baselines3 import PPO, SAC

    classes = {"sb3_ppo": PPO, "sb3_sac": SAC}
    if name not in classes:
        raise ValueError(f"unknown SB3 algo '{name}'; available: {sorted(classes)}")
    return classes[name]


def policy_kwargs(values: dict[str, Any] | None) -> dict[str, Any]:
    """SB3 ``policy_kwargs`` from the config (activation by name; null entries dropped)."""
    out = {k: v for k, v in (values or {}).items() if v is not None}
    if "activation_fn" in out:
        name = str(out["activation_fn"]).lower()
        if name not in ACTIVATIONS:
            raise ValueError(f"activation_fn '{name}' not one of {sorted(ACTIVATIONS)}")
        out["activation_fn"] = ACTIVATIONS[name]
    return out


def build_model(algo: dict[str, Any], env: VecEnv, seed: int) -> BaseAlgorithm:
    """A fresh SB3 model from an ``algo`` config (``hyperparams`` + ``policy_kwargs``)."""
    return algo_class(algo["name"])("MlpPolicy", env, seed=seed, device="cpu", verbose=0,
                                    policy_kwargs=policy_kwargs(algo.get("policy_kwargs")),
                                    **dict(algo.get("hyperparams") or {}))


def wrap_env(venv: VecEnv, algo: dict[str, Any]) -> VecEnv:
    """``venv`` inside ``VecNormalize`` if the config normalises observations or rewards."""
    if not (algo.get("normalize_obs") or algo.get("normalize_reward")):
        return venv
    return VecNormalize(venv, norm_obs=bool(algo.get("normalize_obs")),
                        norm_reward=bool(algo.get("normalize_reward")),
                        clip_obs=float(algo.get("clip_obs", 10.0)),
                        gamma=float((algo.get("hyperparams") or {}).get("gamma", 0.99)))


def sb3_policy(model: BaseAlgorithm, env: VecEnv | None = None
               ) -> Callable[[torch.Tensor], torch.Tensor]:
    """``policy(obs) -> action`` (deterministic) for :func:`embodied.rl.evaluate.evaluate`.

    Raw observations are normalised with ``env``'s ``VecNormalize`` statistics if it
    is one (without updating them).
    """
    norm = env if isinstance(env, VecNormalize) else None

    def act(obs: torch.Tensor) -> torch.Tensor:
        x = obs.detach().cpu().numpy()
        if norm is not None:
            x = norm.normalize_obs(x)
        actions, _ = model.predict(x, deterministic=True)
        return torch.as_tensor(actions, dtype=obs.dtype, device=obs.device)

    return act


# ------------------------------------------------------------- checkpoints
def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def _write_model(model: BaseAlgorithm, path: Path) -> None:
    with path.open("wb") as f:  # a file object: SB3 would append ".zip" to a bare path
        model.save(f)


def _write_replay_buffer(model: BaseAlgorithm, path: Path) -> None:
    with path.open("wb") as f:
        model.save_replay_buffer(f)


def save_checkpoint(model: BaseAlgorithm, env: VecEnv, folder: Path, state: dict[str, Any],
                    replay_buffer: bool = False) -> Path:
    """Write one checkpoint (normaliser, state, replay buffer, then the model); returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    tag = f"{model.num_timesteps:09d}"
    if isinstance(env, VecNormalize):
        _atomic(folder / f"vecnormalize_{tag}.pkl", lambda p: env.save(str(p)))
    _atomic(folder / f"state_{tag}.json", lambda p: p.write_text(json.dumps(state)))
    if replay_buffer and getattr(model, "replay_buffer", None) is not None:
        _atomic(folder / "replay_buffer.pkl", lambda p: _write_replay_buffer(model, p))
    path = folder / f"model_{tag}.zip"
    _atomic(path, lambda p: _write_model(model, p))
    return path


def load_checkpoint(path: Path, algo: dict[str, Any], venv: VecEnv
                    ) -> tuple[BaseAlgorithm, VecEnv, dict[str, Any]]:
    """The model, the (normalising) env and the state saved at ``path`` (a model_*.zip)."""
    tag = _MODEL_RE.search(path.name)
    if tag is None:
        raise CheckpointError(f"{path} is not an SB3 checkpoint (model_<steps>.zip)")
    folder, steps = path.parent, tag.group(1)
    env = venv
    norm_path = folder / f"vecnormalize_{steps}.pkl"
    if algo.get("normalize_obs") or algo.get("normalize_reward"):
        if not norm_path.exists():
            raise CheckpointError(f"{path}: its normaliser statistics {norm_path} are missing")
        env = VecNormalize.load(str(norm_path), venv)
        env.training = True
    try:
        model = algo_class(algo["name"]).load(path, env=env, device="cpu")
    except Exception as err:  # truncated zip, wrong algo, spaces that do not match, ...
        raise CheckpointError(f"cannot load {path}: {type(err).__name__}: {err}") from err
    state_path = folder / f"state_{steps}.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    buffer = folder / "replay_buffer.pkl"
    if algo.get("save_replay_buffer") and buffer.exists() and hasattr(model, "replay_buffer"):
        model.load_replay_buffer(buffer)
    return model, env, state


# ----------------------------------------------------------------- logging
class RunFolderCallback(BaseCallback):
    """Times collection and learning, writes metrics.csv rows and periodic checkpoints.

    SB3 calls ``_on_rollout_start`` after the previous rollout's update, so the time
    between a rollout's end and the next one's start is learning time. Rows are written
    (and checkpoints saved) there, outside both timed phases.
    """

    def __init__(self, algo: dict[str, Any], metrics: MetricsLogger, folder: Path,
                 state: dict[str, Any]):
        super().__init__()
        self.algo, self.metrics, self.folder = algo, metrics, folder
        self.columns = SB3_COLUMNS[algo["name"]]
        self.log_every = int(algo.get("log_every_env_steps") or 0)
        self.save_every = int(algo.get("save_every_env_steps") or 0)
        self.row_index = int(state.get("iteration", 0))
        self.wall_time = float(state.get("wall_time", 0.0))
        self.collect_s = self.learn_s = 0.0
        self._mark: float | None = None
        self._phase = "idle"
        self.last_row: dict[str, Any] = {}
        self.last_checkpoint: Path | None = None

    def _on_training_start(self) -> None:
        self._logged_at = self._saved_at = self.num_timesteps

    def _close_phase(self) -> None:
        now = time.perf_counter()
        if self._mark is not None:
            if self._phase == "collect":
                self.collect_s += now - self._mark
            elif self._phase == "learn":
                self.learn_s += now - self._mark

    def _on_rollout_start(self) -> None:
        self._close_phase()
        self._maybe_log_and_save()
        self._phase, self._mark = "collect", time.perf_counter()

    def _on_rollout_end(self) -> None:
        self._close_phase()
        self._phase, self._mark = "learn", time.perf_counter()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self._close_phase()
        self._phase, self._mark = "idle", None
        if self.num_timesteps > self._logged_at:
            self.log_row()
        self.save()

    def _maybe_log_and_save(self) -> None:
        steps = self.num_timesteps
        if steps > self._logged_at and steps - self._logged_at >= self.log_every:
            self.log_row()
        if self.save_every and steps - self._saved_at >= self.save_every:
            self.save()

    def log_row(self) -> dict[str, Any]:
        """Write one metrics.csv row for the steps since the last one."""
        model, steps = self.model, self.num_timesteps - self._logged_at
        self._logged_at = self.num_timesteps
        self.row_index += 1
        self.wall_time += self.collect_s + self.learn_s
        eps = list(model.ep_info_buffer or [])
        oks = list(model.ep_success_buffer or [])
        values = model.logger.name_to_value
        total = self.collect_s + self.learn_s
        row = {
            "iteration": self.row_index,
            "env_steps": self.num_timesteps,
            "wall_time": round(self.wall_time, 3),
            "episode_return": float(np.mean([e["r"] for e in eps])) if eps else float("nan"),
            "success_rate": float(np.mean(oks)) if oks else float("nan"),
            "episode_length": float(np.mean([e["l"] for e in eps])) if eps else float("nan"),
            "fps": steps / total if total else float("nan"),
            "collection_fps": steps / self.collect_s if self.collect_s else float("nan"),
            "learning_fps": steps / self.learn_s if self.learn_s else float("nan"),
            "collection_s": self.collect_s,
            "learning_s": self.learn_s,
        }
        for column, key in self.columns.items():
            value = values.get(key, float("nan"))
            row[column] = -value if column == "entropy" else float(value)  # SB3 logs -entropy
        self.collect_s = self.learn_s = 0.0
        self.metrics.log(row)
        self.last_row = row
        return row

    def state(self) -> dict[str, Any]:
        """What the checkpoint needs beyond SB3's zip: counters and recent episodes."""
        return {"iteration": self.row_index, "wall_time": self.wall_time,
                "env_steps": int(self.num_timesteps),
                "episodes": [dict(e) for e in (self.model.ep_info_buffer or [])],
                "successes": [bool(s) for s in (self.model.ep_success_buffer or [])]}

    def save(self) -> Path:
        """A checkpoint of the current step (the model file is written last)."""
        self._saved_at = self.num_timesteps
        self.last_checkpoint = save_checkpoint(self.model, self.training_env, self.folder,
                                               self.state(),
                                               bool(self.algo.get("save_replay_buffer")))
        return self.last_checkpoint


# ----------------------------------------------------------------- learner
def _with_saved_algo(cfg: DictConfig, run_dir: Path) -> DictConfig:
    """``cfg`` with the run's own ``algo`` section, replaced whole (the default is PPO's)."""
    path = run_dir / "config.yaml"
    if not path.exists():
        return cfg
    saved = OmegaConf.load(path)
    if str(cfg.algo.name) == str(saved.algo.name) and cfg.algo != saved.algo:
        print(f"resume: using the run's own algo settings from {path} (the given values are "
              f"ignored)")
    cfg = cfg.copy()
    OmegaConf.set_struct(cfg, False)
    cfg.algo = saved.algo
    return cfg


def _has_progress_bar() -> bool:
    try:
        import rich  # noqa: F401  (SB3's progress bar needs tqdm and rich)
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


@register_learner("sb3_ppo", "sb3_sac")
class SB3Learner:
    """An SB3 model on :class:`SB3VecEnv` (optionally in ``VecNormalize``).

    The budget is ``total_env_steps`` (top level, else the algo's default); one
    metrics row per ``algo.log_every_env_steps``. Trains on the task's own reward.
    """

    label: str = "SB3"
    online: ClassVar[bool] = True
    uses_reward_models: ClassVar[bool] = False
    checkpoint_suffix: ClassVar[str] = ".zip"
    checkpoint_kind: ClassVar[str] = "SB3 checkpoint"

    def __init__(self, model: BaseAlgorithm, env: VecEnv, algo: dict[str, Any],
                 folder: Path, state: dict[str, Any], progress: bool,
                 resumed: bool = False) -> None:
        self.model, self.env, self.algo, self.folder = model, env, algo, folder
        self.state, self.progress, self.resumed = state, progress, resumed
        self.callback: RunFolderCallback | None = None
        self.label = f"SB3 {algo['name'].removeprefix('sb3_').upper()}"

    @classmethod
    def prepare(cls, cfg: DictConfig, run: RunFolder) -> DictConfig:
        """``cfg``; on resume with the run's own ``algo`` and learning-curve settings."""
        if run.resume_from is None:
            return cfg
        return run.resume_config(_with_saved_algo(cfg, run.path))

    @classmethod
    def budget(cls, cfg: DictConfig) -> int:
        """The run's total env steps: top-level ``total_env_steps``, else the algo's default."""
        value = cfg.total_env_steps if cfg.total_env_steps is not None \
            else cfg.algo.total_env_steps
        return int(value)

    @classmethod
    def build(cls, cfg: DictConfig, env: BatchedEnv, run: RunFolder,
              data: Any = None) -> SB3Learner:
        """A fresh model per ``cfg.algo``, or the one saved at ``run.resume_from``."""
        algo = OmegaConf.to_container(cfg.algo, resolve=True)
        venv = SB3VecEnv(env)
        state: dict[str, Any] = {}
        if run.resume_from is None:
            wrapped = wrap_env(venv, algo)
            model = build_model(algo, wrapped, int(cfg.seed))
        else:
            model, wrapped, state = load_checkpoint(run.resume_from, algo, venv)
            print(f"resumed from {run.resume_from} ({model.num_timesteps} env steps)")
        model.set_logger(Logger(folder=None, output_formats=[]))  # metrics go to our logger
        if state.get("episodes"):  # kept by learn(reset_num_timesteps=False)
            model.ep_info_buffer = deque(state["episodes"], maxlen=model._stats_window_size)
            model.ep_success_buffer = deque(state.get("successes", []),
                                            maxlen=model._stats_window_size)
        return cls(model, wrapped, algo, run.checkpoints, state, bool(cfg.progress),
                   resumed=run.resume_from is not None)

    @property
    def iteration(self) -> int:
        """Metrics rows written, resumed ones included."""
        return self.callback.row_index if self.callback else int(self.state.get("iteration", 0))

    @property
    def env_steps(self) -> int:
        """The model's env-step counter."""
        return int(self.model.num_timesteps)

    @property
    def wall_time(self) -> float:
        """Seconds of training over all resumes."""
        return self.callback.wall_time if self.callback else float(self.state.get("wall_time", 0))

    @property
    def episodes_seen(self) -> int:
        """Recent episodes in the success rate."""
        return len(self.model.ep_success_buffer or [])

    def progress_text(self) -> str:
        """``"<m> env steps"``."""
        return f"{self.env_steps:,} env steps"

    def learn(self, budget: int, logger: MetricsLogger | None = None) -> dict[str, Any]:
        """``model.learn`` up to ``budget`` env steps in total; returns the last metrics row."""
        if logger is None:
            raise ValueError("SB3Learner.learn needs a MetricsLogger (rows and checkpoints)")
        self.callback = RunFolderCallback(self.algo, logger, self.folder, self.state)
        remaining = max(0, budget - self.env_steps)
        try:
            if remaining:
                self.model.learn(remaining, callback=self.callback,
                                 reset_num_timesteps=not self.resumed,
                                 progress_bar=self.progress and _has_progress_bar())
        except KeyboardInterrupt:
            print(f"\ninterrupted: checkpoint written to {self.save()}")
            raise
        return self.callback.last_row

    def save(self) -> Path:
        """A checkpoint of the current step (the model file is written last)."""
        if self.callback is None:
            raise RuntimeError("SB3Learner.save before learn: nothing new to save")
        return self.callback.save()

    def load(self, path: Path) -> Path:
        """Restore the model, normaliser and state saved at ``path`` (a model_*.zip)."""
        self.model, self.env, self.state = load_checkpoint(path, self.algo, self.env)
        self.resumed = True
        return path

    def act(self) -> Policy:
        """The deterministic policy on raw observations (normalised as in training)."""
        return sb3_policy(self.model, self.env)

    def close(self) -> None:
        """Close the env."""
        self.env.close()
