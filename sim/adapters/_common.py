"""Helpers shared by the adapters: tensor <-> numpy, spaces, fps, tiled camera frames."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from gymnasium import spaces

from sim.protocol import BatchedEnv, batch_actions


def to_numpy(x: torch.Tensor) -> np.ndarray:
    """A numpy array of a tensor's values (a copy if it lives off the CPU)."""
    return x.detach().cpu().numpy()


def as_actions(env: BatchedEnv, actions: np.ndarray | torch.Tensor) -> torch.Tensor:
    """Actions [B, action_dim] as a tensor on the env's device.

    A flat [action_dim] is accepted for a batch of one; any other shape raises
    ``ValueError`` (:func:`sim.protocol.batch_actions`).
    """
    return batch_actions(actions, env.num_envs, env.action_dim, env.device)


def single_spaces(env: BatchedEnv) -> tuple[spaces.Box, spaces.Box]:
    """The observation and action spaces of one env.

    The observation space is float32 [obs_dim] within the env's ``obs_bounds`` (unbounded
    without them); the action space is float32 [action_dim] in [-1, 1].
    """
    bounds = getattr(env, "obs_bounds", None)
    if bounds is None:
        obs = spaces.Box(-np.inf, np.inf, shape=(env.obs_dim,), dtype=np.float32)
    else:
        obs = spaces.Box(to_numpy(bounds[0]).astype(np.float32),
                         to_numpy(bounds[1]).astype(np.float32), dtype=np.float32)
    act = spaces.Box(-1.0, 1.0, shape=(env.action_dim,), dtype=np.float32)
    return obs, act


def control_dt(env: BatchedEnv) -> float | None:
    """Seconds per env step (None if the env does not say)."""
    dt = getattr(env, "control_dt", None)
    return float(dt) if dt else None


def render_fps(env: BatchedEnv) -> int:
    """Frames per second of a video with one frame per env step (30 if unknown)."""
    dt = control_dt(env)
    return max(1, round(1.0 / dt)) if dt else 30


def render_tiled(env: BatchedEnv, env_ids: Sequence[int], cameras: Sequence[str] | None = None,
                 width: int | None = None, height: int | None = None) -> np.ndarray:
    """uint8 frames [len(env_ids), H, V * W, 3]: each env's camera views side by side."""
    from sim.render import tile_views  # imports (and selects) the GL backend: only when used

    frames = to_numpy(env.render(list(cameras) if cameras else None,
                                 torch.as_tensor(list(env_ids), dtype=torch.long), width, height))
    return np.stack([tile_views(f) for f in frames])
