"""Transitions ``(s, a, r, s', terminal)`` of a LeRobot dataset's state observations.

Frame t of an episode is the state s_t and the action a_t; its ``next.reward`` is the
reward of that transition and the next frame is s_{t+1}. The last frame of an episode
has no stored next state: if the episode ended by termination (``next.done`` and not
``next.truncated``) it is a terminal transition (its next state is never used);
if it ended by a time limit it is dropped, since its value cannot be bootstrapped.

With ``chunk`` k > 1 the action of a transition is the chunk ``a_t .. a_{t+k-1}``
flattened ([k * A]; past the episode's end its last action repeats), what an
action-chunking policy regresses; critics see its first action ``a_t``.
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
    weights: torch.Tensor | None = None  # per-transition policy-loss weights (e.g. RA-BC)
    obs_names: list[str] | None = None  # per observation dimension, from the dataset

    def __len__(self) -> int:
        return len(self.obs)

    def extend(self, more: dict[str, np.ndarray], episode_return: float) -> None:
        """Append one episode's transitions (:func:`episode_transitions`, no weights)."""
        if self.weights is not None:
            raise ValueError("transitions with per-frame weights cannot take unweighted ones")
        for name, key in (("obs", "o"), ("actions", "a"), ("rewards", "r"),
                          ("next_obs", "n"), ("terminal", "t"), ("episode_end", "e")):
            old = getattr(self, name)
            setattr(self, name, torch.cat([old, torch.as_tensor(more[key]).to(old.dtype)]))
        self.episode_returns = np.append(self.episode_returns, episode_return)

    def sample(self, batch_size: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        """A uniform minibatch (with replacement).

        obs, actions, rewards, next_obs, terminal, and the weights (ones without them).
        """
        ids = torch.randint(len(self.obs), (batch_size,), generator=gen)
        weights = torch.ones(batch_size) if self.weights is None else self.weights[ids]
        return (self.obs[ids], self.actions[ids], self.rewards[ids], self.next_obs[ids],
                self.terminal[ids], weights)


def chunks(actions: np.ndarray, k: int) -> np.ndarray:
    """[T, k * A]: row t holds ``actions[t .. t+k-1]`` (the last action repeats past the end)."""
    idx = np.minimum(np.arange(len(actions))[:, None] + np.arange(k)[None], len(actions) - 1)
    return actions[idx].reshape(len(actions), -1)


LAST_ACTION = "last_action"  # the observation term holding the previous action


def term_of(name: str) -> str:
    """The observation term of a dimension's name (``<term>`` or ``<term>.<i>``)."""
    head, _, tail = name.rpartition(".")
    return head if head and tail.isdigit() else name


def with_last_action_names(names: list[str], width: int) -> list[str]:
    """``names`` with the ``last_action`` term ``width`` dimensions wide."""
    cols = [i for i, n in enumerate(names) if term_of(n) == LAST_ACTION]
    if not cols:
        return names
    return names[:cols[0]] + [f"{LAST_ACTION}.{i}" for i in range(width)] + names[cols[-1] + 1:]


def with_last_action(obs: np.ndarray, names: list[str] | None,
                     actions: np.ndarray) -> np.ndarray:
    """``obs`` [T, D] of an episode with its ``last_action`` term in another action space.

    ``actions`` [T, A] are the episode's actions in that space; the term becomes the
    previous one (at t = 0: zeros, with the recorded first value of the last dimension,
    the gripper). An observation without that term, or without names, is returned as is.
    """
    cols = [i for i, n in enumerate(names or []) if term_of(n) == LAST_ACTION]
    if not cols:
        return obs
    first = np.zeros((1, actions.shape[1]), np.float32)
    first[0, -1] = obs[0, cols[-1]]
    prev = np.concatenate([first, actions[:-1]]).astype(np.float32)
    return np.concatenate([obs[:, :cols[0]], prev, obs[:, cols[-1] + 1:]], axis=1)


def episode_transitions(obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                        terminated: bool, chunk: int = 1,
                        weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The transitions of one episode of T frames, as the module doc says.

    ``obs`` [T, D], ``actions`` [T, A], ``rewards`` [T] (frame t: the reward of s_t ->
    s_{t+1}); ``terminated``: the episode ended by termination (its last frame is a
    terminal transition), else by a time limit (its last frame is dropped). Returns
    arrays keyed ``o`` (obs), ``a`` (action chunks [*, chunk * A]), ``r``, ``n`` (next
    obs), ``t`` (terminal), ``e`` (episode end) and, with ``weights``, ``w``.
    """
    length = len(actions)
    terminal = np.zeros(length, np.float32)
    keep = length - 1
    if terminated:
        terminal[-1] = 1.0
        keep = length
    next_obs = np.concatenate([obs[1:], obs[-1:]])
    out = {"o": obs[:keep], "a": chunks(actions, chunk)[:keep], "r": rewards[:keep],
           "n": next_obs[:keep], "t": terminal[:keep], "e": np.arange(keep) == keep - 1}
    if weights is not None:
        out["w"] = np.asarray(weights, np.float32).reshape(-1)[:keep]
    return out


def load_transitions(root: str | Path, reward_key: str = REWARD, obs_key: str = STATE,
                     action_key: str = ACTION, chunk: int = 1,
                     weight_key: str | None = None) -> Transitions:
    """All transitions of a dataset, rewards from ``reward_key``, actions from ``action_key``.

    ``chunk``: actions per transition (see the module doc); ``weight_key``: a column of
    per-frame policy-loss weights (``embodied label``'s ``rabc.weight``), or None.
    """
    ds = LeRobotDataset(root)
    hints = {reward_key: "label the dataset (embodied label) or choose reward_key=",
             action_key: "choose action_space= among the dataset's action columns",
             obs_key: "", **({weight_key: "label the dataset with rabc weights "
                                          "(embodied label ... rabc.window=...)"}
                             if weight_key else {})}
    for key, hint in hints.items():
        if key not in ds.features:
            raise DatasetError(f"{ds.root / 'meta/info.json'}: no feature '{key}' (features: "
                               f"{sorted(ds.features)}); {hint}".rstrip("; "))
    if chunk < 1:
        raise DatasetError(f"chunk must be >= 1 actions, got {chunk}")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("o", "a", "r", "n", "t", "e", "w")}
    returns = []
    source_names = names = ds.features[obs_key].get("names")
    if action_key != ACTION and names:
        names = with_last_action_names(names, ds.features[action_key]["shape"][0])
    for ep in range(ds.num_episodes):
        d = ds.episode_data(ep, [obs_key, action_key, reward_key]
                            + ([weight_key] if weight_key else [])
                            + [k for k in (DONE, TRUNCATED) if k in ds.features])
        obs = d[obs_key].astype(np.float32)
        if action_key != ACTION:  # the policy will see its own space's last action
            obs = with_last_action(obs, source_names, d[action_key].astype(np.float32))
        done_last = bool(d[DONE][-1]) if DONE in d else False
        truncated_last = bool(d[TRUNCATED][-1]) if TRUNCATED in d else True
        part = episode_transitions(obs, d[action_key].astype(np.float32),
                                   d[reward_key].astype(np.float32).reshape(-1),
                                   done_last and not truncated_last, chunk,
                                   d[weight_key] if weight_key else None)
        for key, value in part.items():
            parts[key].append(value)
        returns.append(float(np.sum(d[reward_key])))
    cat = {k: torch.from_numpy(np.concatenate(v)) for k, v in parts.items() if v}
    return Transitions(cat["o"], cat["a"], cat["r"], cat["n"], cat["t"], cat["e"],
                       np.array(returns), cat.get("w"), names)
