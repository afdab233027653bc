"""Online fine-tuning of an offline IQL policy in the batched simulator (``finetune.*``).

After the offline gradient steps, the policy acts in ``num_envs`` simulated envs of the
dataset's task (its chunks temporally ensembled as at evaluation, plus Gaussian
exploration noise of std ``noise`` on the executed action, clipped to [-1, 1]); every
finished episode becomes transitions exactly as a dataset episode does
(:func:`embodied.offline.data.episode_transitions`: chunks of the actions executed, the
last frame of a time-limited episode dropped) and is appended to the replay buffer that
already holds the dataset. IQL keeps updating on uniform minibatches of the grown buffer,
``updates_per_env_step`` gradient steps per env step (one env step: one transition of
one env), as in IQL's own offline-to-online fine-tuning.

The reward of online transitions is the one the dataset was labelled with, computed
online by the RL loop's reward wrapper (:func:`embodied.reward.rl_wrapper.wrap_reward`)
from the labelling settings in ``meta/labelling.json``: the same mode, discount, weights
and model (the simulator's progress is read from the state; a learned PRM scores the
dataset's cameras, rendered at the dataset's image size, every step: the potential of
every transition exact). A dataset trained on another reward column, or never
labelled, gets the task's own reward online: a documented stand-in, since nothing tells
how that column was made.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from embodied.datasets import LeRobotDataset
from embodied.datasets.format import REWARD, camera_key
from embodied.datasets.meta import read_json
from embodied.offline.data import Transitions, episode_transitions
from embodied.offline.iql import OfflineLearner, settings_from
from embodied.policy_io import ChunkedPolicy

LABELLING = "meta/labelling.json"  # written by `embodied label`: the labels' settings


@dataclass
class FinetuneConfig:
    """Settings of online fine-tuning (``finetune`` in configs/commands/offline.yaml)."""

    env_steps: int = 0                   # env steps (over all envs); 0: no fine-tuning
    num_envs: int = 16
    noise: float = 0.1                   # std of the exploration noise (action units)
    updates_per_env_step: float = 0.25   # IQL gradient steps per env step

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> FinetuneConfig:
        """Build from a config mapping; unknown keys or bad values raise ``ValueError``."""
        cfg = settings_from(cls, values, "finetune")
        if cfg.env_steps < 0 or cfg.num_envs < 1 or cfg.noise < 0 or \
                cfg.updates_per_env_step < 0:
            raise ValueError("finetune needs env_steps >= 0, num_envs >= 1, noise >= 0 and "
                             "updates_per_env_step >= 0")
        return cfg


def online_reward(ds: LeRobotDataset, reward_key: str) -> dict[str, Any] | None:
    """The reward config to compute ``reward_key`` online, or None (the task's reward).

    The labelled ``next.reward`` of a dataset `embodied label` wrote: its reward config,
    scored every step (``loop.scoring=direct``) from the labelled cameras at the dataset's
    image size, with the labelling discount (``reward.gamma``, else its ``gamma``).
    """
    path = ds.root / LABELLING
    if reward_key != REWARD or not path.exists():
        return None
    settings = read_json(path)["settings"]
    reward = dict(settings["reward"])
    if reward.get("gamma") is None:
        reward["gamma"] = settings.get("gamma")
    cameras = list(settings.get("cameras") or ds.cameras)
    loop = dict(reward.get("loop") or {})
    if cameras and (reward.get("model") or {}).get("name") not in (None, "sim_progress"):
        height, width = ds.features[camera_key(cameras[0])]["shape"][:2]
        loop |= {"cameras": cameras, "width": int(width), "height": int(height)}
    reward["loop"] = loop | {"scoring": "direct", "every": 1, "start_views": False}
    return reward


def finetune_env(ds: LeRobotDataset, reward_key: str, make_env: Any, num_envs: int,
                 seed: int) -> tuple[Any, str]:
    """``make_env(num_envs, seed)`` with the online reward; and what that reward is."""
    from embodied.reward.rl_wrapper import wrap_reward

    env = make_env(num_envs, seed)
    reward = online_reward(ds, reward_key)
    if reward is None:
        return env, "the task's reward (the dataset's reward column has no online source)"
    model = (reward.get("model") or {}).get("name", "none")
    wrapped = wrap_reward(env, reward, gamma=float(reward["gamma"]), seed=seed,
                          task=env.task.name)
    return wrapped, f"{reward['mode']} of {model} as labelled, computed online"


class EpisodeRecorder:
    """Per-env observations, executed actions and rewards of the running episodes."""

    def __init__(self, num_envs: int):
        self.obs: list[list[np.ndarray]] = [[] for _ in range(num_envs)]
        self.actions: list[list[np.ndarray]] = [[] for _ in range(num_envs)]
        self.rewards: list[list[float]] = [[] for _ in range(num_envs)]

    def add(self, obs: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor) -> None:
        """One step of every env: ``obs`` s_t [N, D], the executed ``actions``, rewards."""
        o, a, r = obs.float().numpy(), actions.float().numpy(), rewards.float().numpy()
        for i in range(len(o)):
            self.obs[i].append(o[i])
            self.actions[i].append(a[i])
            self.rewards[i].append(float(r[i]))

    def pop(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Env ``i``'s finished episode as arrays (obs, actions, rewards); starts a new one."""
        out = (np.stack(self.obs[i]), np.stack(self.actions[i]),
               np.array(self.rewards[i], np.float32))
        self.obs[i], self.actions[i], self.rewards[i] = [], [], []
        return out


def finetune(learner: OfflineLearner, data: Transitions, policy: ChunkedPolicy | Any,
             env: Any, cfg: FinetuneConfig, gen: torch.Generator, chunk: int,
             progress: bool = False) -> dict[str, Any]:
    """Fine-tune ``learner`` (IQL) online in ``env`` for ``cfg.env_steps``; grows ``data``.

    ``policy``: the learner's acting policy (a :class:`ChunkedPolicy` for chunks; bound to
    ``env`` here); ``env`` returns the reward online transitions are stored with. Returns
    the env steps, gradient steps, transitions added, online episodes, their success
    rate and return, the mean losses and the seconds taken.
    """
    if learner.q is None:
        raise ValueError(f"online fine-tuning updates IQL's critics; algo={learner.cfg.name} "
                         "has none (use algo=iql)")
    if isinstance(policy, ChunkedPolicy):
        policy.bind_env(env)
    n = env.num_envs
    recorder = EpisodeRecorder(n)
    obs = env.reset()
    if isinstance(policy, ChunkedPolicy):
        policy.reset()
    start, size, owed, updates = time.perf_counter(), len(data), 0.0, 0
    successes: list[bool] = []
    returns: list[float] = []
    sums: dict[str, float] = {}
    bar = tqdm(total=cfg.env_steps, unit="env step", desc="finetune", disable=not progress,
               dynamic_ncols=True)
    steps = 0
    try:
        while steps < cfg.env_steps:
            with torch.no_grad():
                action = policy(obs).float()
            action = (action + cfg.noise * torch.randn(action.shape, generator=gen)).clamp(-1, 1)
            next_obs, reward, terminated, truncated, info = env.step(action)
            recorder.add(obs, action, reward)
            done = (terminated | truncated).nonzero().flatten().tolist()
            final_success = info.get("final_success")
            for i in done:
                o, a, r = recorder.pop(i)
                data.extend(episode_transitions(o, a, r, bool(terminated[i]), chunk),
                            float(r.sum()))
                returns.append(float(r.sum()))
                if final_success is not None:
                    successes.append(bool(final_success[i]))
            obs = next_obs
            steps += n
            owed += cfg.updates_per_env_step * n
            while owed >= 1.0:
                for key, value in learner.update(*data.sample(learner.cfg.batch_size,
                                                              gen)).items():
                    sums[key] = sums.get(key, 0.0) + value
                owed -= 1.0
                updates += 1
            bar.update(n)
            if successes:
                bar.set_postfix(success=f"{np.mean(successes[-64:]):.2f}", refresh=False)
    finally:
        bar.close()
    return {"env_steps": steps, "gradient_steps": updates, "transitions_added": len(data) - size,
            "episodes": len(returns),
            "online_success_rate": float(np.mean(successes)) if successes else math.nan,
            "online_episode_return": float(np.mean(returns)) if returns else math.nan,
            **{k: v / max(updates, 1) for k, v in sums.items()},
            "seconds": round(time.perf_counter() - start, 1)}
