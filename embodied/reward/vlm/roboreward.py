"""RoboReward (Qwen3-VL 4B / 8B fine-tunes): a clip and the instruction in, a 1-5 score out.

The model card's protocol: the rollout so far and the task go in; the answer is
``ANSWER: <score>``, a discrete judgement of the *final* state on a rubric: 1 no
success, 2 minimal progress, 3 partial completion, 4 near completion, 5 perfect
completion. Here:

- the clip is ``clip_frames`` frames spread evenly over the episode up to the judged
  frame (first and judged frame included), of one camera (the first of
  ``camera_names``), sent as a sequence of images in time order (the card feeds a
  video; the processors here are loaded without video support);
- progress = (score - 1) / 4; success probability = 1 if score >= ``success_score``
  (default 5, "perfect completion") else 0;
- an unreadable answer scores ``fallback_score`` (default 1) and is counted.

``embodied label`` scores every ``stride``-th frame (and the last) from the clip up to
it, the frames in between linearly interpolated; in RL, each env's clip comes from its
``EpisodeHistory``. Registered as ``roboreward`` (``configs/reward/roboreward.yaml``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from embodied.reward.base import RewardOutput
from embodied.reward.episodic import EpisodeHistory, fill, keyframes, spread
from embodied.reward.vlm.cache import Row
from embodied.reward.vlm.parsing import parse_score
from embodied.reward.vlm.protocol import ProtocolVlmReward

DEFAULT_PROMPT = (
    "The {frames} frames above show a robot rollout, oldest first. Rate the robot's "
    "progress on the task with a discrete score 1, 2, 3, 4 or 5, written as ANSWER: <score>\n"
    "Judge only the final state, without time limits:\n"
    "1 - No success: the final state shows no change relevant to the goal.\n"
    "2 - Minimal progress: a small but insufficient change toward the goal.\n"
    "3 - Partial completion: good progress, but a major requirement (or more than one) is "
    "not met.\n"
    "4 - Near completion: right region and intent, a single minor requirement missed.\n"
    "5 - Perfect completion: the final state meets every requirement.\n"
    "Task: {instruction}")


def score_to_progress(score: int | np.ndarray) -> np.ndarray:
    """RoboReward's 1-5 score as progress in [0, 1]: (score - 1) / 4."""
    return ((np.asarray(score, np.float32) - 1.0) / 4.0).clip(0.0, 1.0)


class RoboReward(ProtocolVlmReward):
    """RoboReward's clip protocol (module docstring).

    ``prompt``: a template with ``{instruction}`` and ``{frames}`` (the clip length).
    ``clip_frames``: frames per clip. ``stride``: frames between scored frames when
    labelling an episode. Other arguments: ``ProtocolVlmReward``.
    """

    def __init__(self, model: str, *, prompt: str | None = None, clip_frames: int = 8,
                 stride: int = 1, success_score: int = 5, fallback_score: int = 1,
                 server: Mapping[str, Any] | None = None,
                 camera_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        prompt = DEFAULT_PROMPT if prompt is None else prompt
        if "{instruction}" not in prompt:
            raise ValueError(f"prompt must contain '{{instruction}}', got {prompt!r}")
        if clip_frames < 1 or stride < 1:
            raise ValueError(f"clip_frames and stride must be >= 1, got {clip_frames}, {stride}")
        for name, value in (("success_score", success_score), ("fallback_score", fallback_score)):
            if not 1 <= value <= 5:
                raise ValueError(f"{name} must be a RoboReward score 1-5, got {value}")
        super().__init__(model, server=server, camera_names=camera_names, **kwargs)
        self.prompt = prompt
        self.clip_frames = int(clip_frames)
        self.stride = int(stride)
        self.success_score = int(success_score)
        self.fallback_score = int(fallback_score)
        self.history_keep = self.clip_frames

    def _row(self, clip: Sequence[np.ndarray], instruction: str) -> Row:
        text = self.prompt.format(instruction=instruction.rstrip("."), frames=len(clip))
        return [*(frame[0] for frame in clip), {"type": "text", "text": text}]

    def _output(self, scores: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        scores = np.asarray(scores)
        return score_to_progress(scores), (scores >= self.success_score).astype(np.float32)

    def _scores(self, rows: list[Row]) -> list[int]:
        return self.ask(rows, parse_score, self.fallback_score,
                        f"score {self.fallback_score}")

    def _score_episode(self, frames: np.ndarray, instruction: str) -> RewardOutput:
        at = keyframes(len(frames), self.stride)
        rows = [self._row(frames[spread(t + 1, self.clip_frames)], instruction) for t in at]
        progress, success = self._output(self._scores(rows))
        return RewardOutput(progress=torch.from_numpy(fill(len(frames), at, progress)),
                            success_prob=torch.from_numpy(fill(len(frames), at, success)))

    def _score_latest(self, histories: list[EpisodeHistory],
                      instructions: list[str]) -> RewardOutput:
        rows = []
        for history, instruction in zip(histories, instructions, strict=True):
            kept = history.kept
            rows.append(self._row([kept[i] for i in spread(len(kept), self.clip_frames)],
                                  instruction))
        progress, success = self._output(self._scores(rows))
        return RewardOutput(progress=torch.from_numpy(progress),
                            success_prob=torch.from_numpy(success))


__all__ = ["DEFAULT_PROMPT", "RoboReward", "score_to_progress"]
