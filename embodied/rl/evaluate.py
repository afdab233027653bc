"""Evaluate a policy deterministically (mean action), optionally filming a few envs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from sim.protocol import BatchedEnv


@torch.inference_mode()
def evaluate(policy: Callable[[torch.Tensor], torch.Tensor], env: BatchedEnv,
             render: Callable[[], np.ndarray] | None = None, frame_every: int = 1,
             max_steps: int | None = None) -> dict[str, Any]:
    """One episode per env with ``policy(obs) -> action``; success from ``final_success``.

    ``render()`` (if given) is called every ``frame_every`` steps before acting and
    its frames are returned; an exception from it stops filming, not the evaluation
    (the message is returned as ``render_error``).
    """
    obs = env.reset()
    n = env.num_envs
    finished = torch.zeros(n, dtype=torch.bool)
    success = torch.zeros(n, dtype=torch.bool)
    returns = torch.zeros(n, dtype=torch.float64)
    lengths = torch.zeros(n, dtype=torch.float64)
    frames: list[np.ndarray] = []
    render_error = None
    max_steps = max_steps or 2 * env.max_episode_steps
    for step in range(max_steps):
        if render is not None and render_error is None and step % frame_every == 0 and \
                not finished.all():
            try:
                frames.append(render())
            except Exception as err:  # no GL, missing renderer, ...
                render_error = f"{type(err).__name__}: {err}"
        obs, _, _, _, info = env.step(policy(obs))
        if "done_ids" in info:
            ids = info["done_ids"]
            first = ids[~finished[ids]]
            sel = ~finished[ids]
            success[first] = info["final_success"][first]
            returns[first] = info["episode_return"][sel].to(torch.float64)
            lengths[first] = info["episode_length"][sel].to(torch.float64)
            finished[first] = True
        if finished.all():
            break
    done = finished.sum().item()
    return {
        "episodes": int(done),
        "success_rate": success[finished].float().mean().item() if done else float("nan"),
        "episode_return": returns[finished].mean().item() if done else float("nan"),
        "episode_length": lengths[finished].mean().item() if done else float("nan"),
        "frames": frames,
        "render_error": render_error,
    }
