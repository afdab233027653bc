"""Reward models that judge a state from its episode so far (a clip, the first frame, a window).

Some published reward models do not score one observation on its own: RoboReward
judges a whole clip, Robo-Dopamine's GRM compares a state with the previous one and
with the episode's first state, a SARM-style model reads a short window of frames.
``EpisodeRewardModel`` gives them the ``score`` seam of every reward model and one
more entry point:

- ``score_episode(frames [T, V, H, W, 3], instruction)`` -> progress [T]: every frame of
  one recorded episode (``embodied label``). All of an episode's prompts are planned
  first and sent in one backend call, so a server gets them concurrently.
- ``score(frames [B, V, H, W, 3], instruction, env_ids=...)``: the newest frame of B
  running episodes (RL). The model remembers each env's episode (``EpisodeHistory``);
  ``env_ids`` says which env each row is (None: rows are envs 0..B-1).
  ``end_episodes(env_ids)`` forgets finished episodes, so the next frame of those envs
  starts a new one. The RL wrapper calls it at every episode boundary.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from embodied.reward.base import Frames, RewardModel, RewardOutput, check_frames, instructions


class EpisodeHistory:
    """The frames of one running episode, thinned so a long episode stays bounded.

    It keeps the first frame, the last ``recent`` ones, and up to ``2 * keep`` frames
    spread over the whole episode (every other one is dropped when there are more,
    always keeping the first and the newest). ``memo``: model state.
    """

    def __init__(self, keep: int = 32, recent: int = 1) -> None:
        self.keep = max(2, int(keep))
        self.steps = 0
        self.first: np.ndarray | None = None
        self.recent: deque[np.ndarray] = deque(maxlen=max(1, int(recent)))
        self.kept: list[np.ndarray] = []
        self.memo: dict[str, Any] = {}

    def add(self, frame: np.ndarray) -> None:
        """Append the episode's next frame (uint8 [V, H, W, 3])."""
        if self.first is None:
            self.first = frame
        self.steps += 1
        self.recent.append(frame)
        self.kept.append(frame)
        if len(self.kept) > 2 * self.keep:
            self.kept = [*self.kept[:-1:2], self.kept[-1]]

    @property
    def last(self) -> np.ndarray:
        """The newest frame."""
        return self.recent[-1]


def keyframes(length: int, stride: int) -> np.ndarray:
    """Frame indices 0, stride, 2 * stride, ... and always the last one (length - 1)."""
    if length < 1:
        raise ValueError("an episode needs at least one frame")
    idx = np.arange(0, length, max(1, int(stride)))
    return idx if idx[-1] == length - 1 else np.append(idx, length - 1)


def spread(count: int, k: int) -> np.ndarray:
    """``min(k, count)`` indices evenly over [0, count - 1], first and last included."""
    if count <= k:
        return np.arange(count)
    return np.unique(np.round(np.linspace(0, count - 1, k)).astype(int))


def fill(length: int, at: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Values at every frame from values at the frames ``at`` (linear in between)."""
    return np.interp(np.arange(length), at, values).astype(np.float32)


class EpisodeRewardModel(RewardModel):
    """A frame model that reads each env's episode so far (module docstring).

    Subclasses implement ``_score_episode`` (one recorded episode) and
    ``_score_latest`` (the newest frame of each of B running episodes); frames reach
    them as uint8 numpy arrays with the model's views selected. ``history_keep`` and
    ``history_recent`` size each env's ``EpisodeHistory``.
    """

    history_keep: int = 32
    history_recent: int = 1

    def __init__(self) -> None:
        self.histories: dict[int, EpisodeHistory] = {}
        self._env_ids: list[int] | None = None

    def score(self, frames: Frames | None, instruction: str | Sequence[str], *,
              cameras: Sequence[str] | None = None, state: Mapping[str, Any] | None = None,
              env_ids: Sequence[int] | torch.Tensor | None = None) -> RewardOutput:
        """``RewardModel.score`` of the newest frame of running episodes.

        ``env_ids`` names the env of each row (None: rows are envs 0..B-1).
        """
        self._env_ids = None if env_ids is None else [int(i) for i in env_ids]
        try:
            return super().score(frames, instruction, cameras=cameras, state=state)
        finally:
            self._env_ids = None

    __call__ = score

    def _score(self, frames: torch.Tensor | None, instructions: list[str],
               state: Mapping[str, Any] | None) -> RewardOutput:
        assert frames is not None  # score() checked
        ids = self._env_ids if self._env_ids is not None else list(range(frames.shape[0]))
        if len(ids) != frames.shape[0]:
            raise ValueError(f"got {len(ids)} env_ids for a batch of {frames.shape[0]}")
        histories = []
        for env, frame in zip(ids, frames.cpu().numpy(), strict=True):
            if env not in self.histories:
                self.histories[env] = EpisodeHistory(self.history_keep, self.history_recent)
            self.histories[env].add(frame)
            histories.append(self.histories[env])
        return self._score_latest(histories, instructions)

    def end_episodes(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Forget the episodes of ``env_ids`` (None: all): their next frame starts anew."""
        if env_ids is None:
            self.histories.clear()
            return
        for env in env_ids:
            self.histories.pop(int(env), None)

    def score_episode(self, frames: Frames, instruction: str, *,
                      cameras: Sequence[str] | None = None) -> RewardOutput:
        """Progress [T] (and success probability [T] or None) of every frame of one episode.

        ``frames`` are uint8 [T, V, H, W, 3] in time order.
        """
        frames = self._select_views(check_frames(frames), cameras)
        out = self._score_episode(frames.cpu().numpy(), instructions(instruction, 1)[0])
        if out.progress.shape != (frames.shape[0],):
            raise RuntimeError(f"{type(self).__name__} returned progress of shape "
                               f"{tuple(out.progress.shape)}, expected ({frames.shape[0]},)")
        return out

    @abc.abstractmethod
    def _score_episode(self, frames: np.ndarray, instruction: str) -> RewardOutput:
        """Progress [T] of every frame of one episode, frames uint8 [T, V, H, W, 3]."""

    @abc.abstractmethod
    def _score_latest(self, histories: list[EpisodeHistory],
                      instructions: list[str]) -> RewardOutput:
        """Progress [B] of the newest frame of each history (its ``last``)."""


@torch.inference_mode()
def score_whole_episode(model: EpisodeRewardModel, views: np.ndarray, instruction: str,
                        cameras: Sequence[str] | None = None
                        ) -> tuple[np.ndarray, np.ndarray | None]:
    """Progress [T] and success probability [T] (or None) of one recorded episode.

    ``views`` are uint8 [T, V, H, W, 3]; the results are numpy arrays, what a labeller
    writes.
    """
    out = model.score_episode(torch.from_numpy(np.ascontiguousarray(views)), instruction,
                              cameras=cameras)
    success = None if out.success_prob is None else out.success_prob.float().cpu().numpy()
    return out.progress.float().cpu().numpy(), success


__all__ = ["EpisodeHistory", "EpisodeRewardModel", "fill", "keyframes", "score_whole_episode",
           "spread"]
