"""SARM-style stage + progress prompting over a short frame window, for multi-stage tasks.

SARM (Stage-Aware Reward Modeling) predicts which stage of a long task the robot is in
and how far through that stage it is, and turns the pair into task progress with
dataset-level stage proportions (alpha_k, the mean share of a demonstration spent in
stage k): progress = sum(alpha_1 .. alpha_{k-1}) + alpha_k * within. This backend asks
a generative VLM the same question: the last ``window`` frames (``window_stride``
apart, oldest first, one camera: the first of ``camera_names``), the instruction and
the numbered ``stages``; the answer ``STAGE: <k> PROGRESS: <p>%`` is parsed
(``parsing.parse_stage_progress``) and mapped through ``stage_weights`` (the alpha_k,
normalised to sum 1; None: equal). Near the start of an episode the window repeats the
first frame. An unreadable answer keeps the env's previous progress in RL (0 at the
start) and scores ``fallback`` when labelling; either is counted.

Labelling scores every ``stride``-th frame (and the last), interpolating in between.
Registered as ``sarm`` (``configs/reward/sarm.yaml``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from embodied.reward.base import RewardOutput
from embodied.reward.episodic import EpisodeHistory, fill, keyframes
from embodied.reward.vlm.cache import Row
from embodied.reward.vlm.parsing import parse_stage_progress
from embodied.reward.vlm.protocol import ProtocolVlmReward

DEFAULT_PROMPT = (
    "The {frames} images above are consecutive camera frames of a robot, oldest first. "
    "Its task: {instruction}.\nThe task has these stages, in order:\n{stages}\n"
    "In the LAST frame, which stage is the robot in, and how much of that stage is done? "
    "Answer in the format: STAGE: <number> PROGRESS: <percent>%")


def stage_progress(stage: np.ndarray, within: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Task progress in [0, 1] (float32, shaped like ``stage``) of stages and shares done.

    ``stage`` holds stage indices (from 0), ``within`` the progress within that stage,
    ``weights`` the stage proportions (summing to 1): progress is the weight of the prior
    stages plus the done share of the current one.
    """
    done_before = np.concatenate([[0.0], np.cumsum(weights)[:-1]])
    stage = np.asarray(stage, int)
    return np.clip(done_before[stage] + weights[stage] * np.asarray(within, np.float64),
                   0.0, 1.0).astype(np.float32)


class StageProgressReward(ProtocolVlmReward):
    """SARM-style stage and within-stage progress (module docstring).

    ``stages``: the stage descriptions, in order (None: one stage, the whole task).
    ``stage_weights``: their proportions alpha_k (None: equal). ``window``: frames
    shown. ``window_stride``: frames between them. ``stride``: frames between scored
    frames when labelling. ``fallback``: labelled progress of an unreadable answer.
    ``prompt``: a template with ``{instruction}``, ``{stages}`` and ``{frames}``.
    """

    def __init__(self, model: str, *, stages: Sequence[str] | None = None,
                 stage_weights: Sequence[float] | None = None, window: int = 4,
                 window_stride: int = 1, stride: int = 1, fallback: float = 0.0,
                 prompt: str | None = None, server: Mapping[str, Any] | None = None,
                 camera_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        prompt = DEFAULT_PROMPT if prompt is None else prompt
        for key in ("{instruction}", "{stages}"):
            if key not in prompt:
                raise ValueError(f"prompt must contain '{key}', got {prompt!r}")
        if window < 1 or window_stride < 1 or stride < 1:
            raise ValueError(f"window, window_stride and stride must be >= 1, got {window}, "
                             f"{window_stride}, {stride}")
        if not 0.0 <= fallback <= 1.0:
            raise ValueError(f"fallback progress must be in [0, 1], got {fallback}")
        self.stages = list(stages) if stages else None
        n = len(self.stages) if self.stages else 1
        weights = np.ones(n) if stage_weights is None else np.asarray(stage_weights, float)
        if weights.shape != (n,) or (weights < 0).any() or weights.sum() <= 0:
            raise ValueError(f"stage_weights must be {n} non-negative numbers (one per stage) "
                             f"with a positive sum, got {stage_weights}")
        super().__init__(model, server=server, camera_names=camera_names, **kwargs)
        self.weights = weights / weights.sum()
        self.prompt = prompt
        self.window = int(window)
        self.window_stride = int(window_stride)
        self.stride = int(stride)
        self.fallback = float(fallback)
        self.history_recent = (self.window - 1) * self.window_stride + 1

    def _row(self, frames: Sequence[np.ndarray], instruction: str) -> Row:
        stages = self.stages or [f"{instruction.rstrip('.')} (the whole task)"]
        text = self.prompt.format(instruction=instruction.rstrip("."), frames=len(frames),
                                  stages="\n".join(f"{i + 1}. {s}" for i, s in enumerate(stages)))
        return [*(f[0] for f in frames), {"type": "text", "text": text}]

    def _window(self, t: int) -> np.ndarray:
        """Indices of the window ending at frame t (clipped at the episode start)."""
        return np.maximum(t - self.window_stride * np.arange(self.window - 1, -1, -1), 0)

    def _ask(self, rows: list[Row]) -> list[tuple[int, float] | None]:
        n = len(self.weights)
        return self.ask(rows, lambda a: parse_stage_progress(a, n), None,
                        "the previous progress (labelling: fallback)")

    def _progress(self, answers: list[tuple[int, float] | None],
                  default: Sequence[float]) -> np.ndarray:
        out = np.asarray(default, np.float32).copy()
        for i, answer in enumerate(answers):
            if answer is not None:
                out[i] = stage_progress(np.array([answer[0]]), np.array([answer[1]]),
                                        self.weights)[0]
        return out

    def _score_episode(self, frames: np.ndarray, instruction: str) -> RewardOutput:
        at = keyframes(len(frames), self.stride)
        answers = self._ask([self._row(frames[self._window(int(t))], instruction) for t in at])
        progress = self._progress(answers, [self.fallback] * len(at))
        return RewardOutput(progress=torch.from_numpy(fill(len(frames), at, progress)))

    def _score_latest(self, histories: list[EpisodeHistory],
                      instructions: list[str]) -> RewardOutput:
        rows = []
        for h, instruction in zip(histories, instructions, strict=True):
            recent = list(h.recent)
            rows.append(self._row([recent[i] for i in self._window(len(recent) - 1)],
                                  instruction))
        previous = [h.memo.get("progress", 0.0) for h in histories]
        progress = self._progress(self._ask(rows), previous)
        for h, p in zip(histories, progress, strict=True):
            h.memo["progress"] = float(p)
        return RewardOutput(progress=torch.from_numpy(progress))


__all__ = ["DEFAULT_PROMPT", "StageProgressReward", "stage_progress"]
