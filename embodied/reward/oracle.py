"""``SimProgressReward``: the simulator's privileged progress, behind the reward-model seam.

It cannot see progress in pixels; it reads the env step's ``info["progress"]`` (the
task's ``progress()``, in [0, 1]) and ``info["success"]``. It fits the registry as a
state model: ``requires_state = True`` makes ``score`` demand ``state=info``, and
``requires_frames = False`` makes frames optional, so callers skip rendering for it.
Uses: a reference in tests and benchmarks (the PRM's ceiling), and the stand-in
model for dataset labelling until a learned PRM exists (a dataset row passes its
recorded progress column as ``state={"progress": ...}``).

Note on auto-reset: ``info["progress"]`` of an env that finished in this step is the
progress of its terminal state (computed before the reset), which is what shaping
wants for the last transition (``phi_final``); the first state of the next episode is
not in ``info``: ``SimProgressReward.env_state(env)`` reads it (``phi_obs``; see
``embodied.reward.shaping``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from embodied.reward.base import RewardModel, RewardOutput


class SimProgressReward(RewardModel):
    """Returns ``state[progress_key]`` as progress and ``state[success_key]`` as success."""

    requires_frames = False
    requires_state = True

    def __init__(self, progress_key: str = "progress", success_key: str | None = "success",
                 device: str = "cpu") -> None:
        self.progress_key = progress_key
        self.success_key = success_key
        self.device = torch.device(device)

    @staticmethod
    def env_state(env: Any) -> dict[str, torch.Tensor]:
        """The state of the observations ``env.step`` just returned (after auto-reset).

        ``info`` describes the reached states (for finished envs: the terminal one);
        this describes the current ones (for finished envs: the next episode's first
        state), which shaping needs as ``phi_obs``. Reads ``env.task`` (MujocoBatchEnv).
        """
        return {"progress": env.task.progress(), "success": env.task.success()}

    def _state_batch(self, state: Mapping[str, Any]) -> int:
        return len(self._get(state, self.progress_key))

    def _get(self, state: Mapping[str, Any], key: str) -> torch.Tensor:
        if key not in state:
            raise ValueError(f"SimProgressReward reads state['{key}'] but the state has keys "
                             f"{sorted(state)}; pass the env step's info, or set "
                             f"progress_key/success_key to the dataset's column names")
        value = state[key]
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        value = torch.as_tensor(value)
        if value.ndim != 1:
            raise ValueError(f"state['{key}'] must be per-env [B], got shape {list(value.shape)}")
        return value.to(self.device, torch.float32)

    def _score(self, frames: torch.Tensor | None, instructions: list[str],
               state: Mapping[str, Any] | None) -> RewardOutput:
        assert state is not None  # score() checked
        progress = self._get(state, self.progress_key).clamp(0.0, 1.0)
        success = None
        if self.success_key is not None and self.success_key in state:
            success = self._get(state, self.success_key)
        return RewardOutput(progress=progress, success_prob=success)
