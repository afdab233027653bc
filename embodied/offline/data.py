"""Transitions ``(s, a, r, s', terminal)`` of a LeRobot dataset's state observations.

Frame t of an episode is the state s_t and the action a_t; its ``next.reward`` is the
reward of that transition and the next frame is s_{t+1}. The last frame of an episode
has no stored next state: if the episode ended by termination (``next.done`` and not
``next.truncated``) it is a terminal transition (its next state is never used);
if it ended by a time limit it is dropped, since its value cannot be bootstrapped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from embodied.datasets import DatasetError, LeRobotDataset
from embodied.datasets.format import ACTION, DONE, REWARD, STATE, TRUNCATED


@dataclass
class Transitions:
    """Tensors of N transitions (float32; ``terminal`` 1.0 where the MDP ended)."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    terminal: torch.Tensor
    episode_end: torch.Tensor  # bool: the last transition kept of its episode
    episode_returns: np.ndarray  # per episode, of the chosen reward column

    def __len__(self) -> int:
        return len(self.obs)

    def sample(self, batch_size: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        """A uniform minibatch (with replacement): obs, actions, rewards, next_obs, terminal."""
        ids = torch.randint(len(self.obs), (batch_size,), generator=gen)
        return (self.obs[ids], self.actions[ids], self.rewards[ids], self.next_obs[ids],
                self.terminal[ids])


def load_transitions(root: str | Path, reward_key: str = REWARD,
                     obs_key: str = STATE) -> Transitions:
    """All transitions of a dataset, with rewards from ``reward_key``."""
    ds = LeRobotDataset(root)
    for key in (obs_key, ACTION, reward_key):
        if key not in ds.features:
            raise DatasetError(f"{ds.root / 'meta/info.json'}: no feature '{key}' (features: "
                               f"{sorted(ds.features)}); label the dataset (embodied label) "
                               "or choose reward_key=")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("o", "a", "r", "n", "t", "e")}
    returns = []
    for ep in range(ds.num_episodes):
        d = ds.episode_data(ep, [obs_key, ACTION, reward_key]
                            + [k for k in (DONE, TRUNCATED) if k in ds.features])
        obs, length = d[obs_key].astype(np.float32), len(d[ACTION])
        done_last = bool(d[DONE][-1]) if DONE in d else False
        truncated_last = bool(d[TRUNCATED][-1]) if TRUNCATED in d else True
        terminal = np.zeros(length, np.float32)
        keep = length - 1
        if done_last and not truncated_last:
            terminal[-1] = 1.0
            keep = length
        next_obs = np.concatenate([obs[1:], obs[-1:]])
        parts["o"].append(obs[:keep])
        parts["a"].append(d[ACTION][:keep].astype(np.float32))
        parts["r"].append(d[reward_key][:keep].astype(np.float32).reshape(-1))
        parts["n"].append(next_obs[:keep])
        parts["t"].append(terminal[:keep])
        parts["e"].append(np.arange(keep) == keep - 1)
        returns.append(float(np.sum(d[reward_key])))
    cat = {k: torch.from_numpy(np.concatenate(v)) for k, v in parts.items()}
    return Transitions(cat["o"], cat["a"], cat["r"], cat["n"], cat["t"], cat["e"],
                       np.array(returns))
