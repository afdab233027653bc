"""Evaluate a policy deterministically (mean action), optionally filming a few envs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from embodied.locomotion_eval import is_legged, tracking_summary
from sim.protocol import BatchedEnv


@torch.inference_mode()
def evaluate(policy: Callable[[torch.Tensor], torch.Tensor], env: BatchedEnv,
             render: Callable[[], np.ndarray] | None = None, frame_every: int = 1,
             max_steps: int | None = None, episodes: int | None = None,
             progress: bool = False) -> dict[str, Any]:
    """Run ``policy(obs) -> action`` for ``episodes`` episodes; success from ``final_success``.

    By default one episode per env. With ``episodes`` the envs share them as evenly
    as possible (env ``i`` counts its first ``episodes // n (+1)`` episodes), so
    short episodes are not over-represented. ``render()`` (if given) is called
    every ``frame_every`` steps of the first ``max_episode_steps`` before acting
    and its frames are returned; an exception from it stops filming, not the
    evaluation (the message is returned as ``render_error``).
    """
    obs = env.reset()
    n = env.num_envs
    total = n if episodes is None else int(episodes)
    quota = torch.full((n,), total // n, dtype=torch.long)
    quota[: total % n] += 1
    counted = torch.zeros(n, dtype=torch.long)
    finished = counted >= quota
    success: list[torch.Tensor] = []
    returns: list[torch.Tensor] = []
    lengths: list[torch.Tensor] = []
    frames: list[np.ndarray] = []
    render_error = None
    max_steps = max_steps or (int(quota.max()) + 1) * env.max_episode_steps
    bar = tqdm(total=total, unit="ep", desc="eval", disable=not progress, dynamic_ncols=True)
    try:
        for step in range(max_steps):
            if render is not None and render_error is None and step % frame_every == 0 and \
                    step < env.max_episode_steps and not finished.all():
                try:
                    frames.append(render())
                except Exception as err:  # no GL, missing renderer, ...
                    render_error = f"{type(err).__name__}: {err}"
            obs, _, _, _, info = env.step(policy(obs))
            if "done_ids" in info:
                ids = info["done_ids"]
                sel = ~finished[ids]
                first = ids[sel]
                success.append(info["final_success"][first].cpu())
                returns.append(info["episode_return"][sel].to(torch.float64).cpu())
                lengths.append(info["episode_length"][sel].to(torch.float64).cpu())
                counted[first] += 1
                finished = counted >= quota
                bar.update(len(first))
            if finished.all():
                break
    finally:
        bar.close()
    done = int(counted.sum())

    def mean(parts: list[torch.Tensor]) -> float:
        return torch.cat(parts).double().mean().item() if done else float("nan")

    return {
        "episodes": done,
        "success_rate": mean(success),
        "episode_return": mean(returns),
        "episode_length": mean(lengths),
        "frames": frames,
        "render_error": render_error,
    }


def evaluate_and_film(policy: Callable[[torch.Tensor], torch.Tensor], env: Any,
                      video_path: str | Path | None, *, video_envs: int = 4,
                      cameras: Sequence[str] | None = None, width: int = 96, height: int = 96,
                      fps: int = 25, episodes: int | None = None,
                      progress: bool = False) -> dict[str, Any]:
    """:func:`evaluate` and an MP4 of the first ``video_envs`` envs from every camera.

    ``env`` is a :class:`sim.MujocoBatchEnv` (needs ``render``/``camera_names``/
    ``control_dt``); it is closed at the end. No video if ``video_path`` is None or
    ``video_envs`` is 0; a rendering or encoding failure is reported as
    ``render_error`` and never fails the evaluation. Returns the metrics with
    ``video`` (the file or None) and ``cameras``.
    """
    from sim.render import tile_batch
    from sim.video import write_mp4

    video_envs = min(int(video_envs), env.num_envs) if video_path is not None else 0
    cameras = list(cameras or env.camera_names)
    ids = torch.arange(video_envs)

    def render() -> np.ndarray:
        views = env.render(cameras, ids, int(width), int(height))
        return tile_batch(views.numpy(), max_envs=video_envs)

    frame_every = max(1, round(1.0 / (fps * env.control_dt)))
    result = evaluate(policy, env, render if video_envs else None, frame_every,
                      episodes=episodes, progress=progress)
    frames = result.pop("frames")
    result["video"] = None
    if frames and video_path is not None and result["render_error"] is None:
        try:
            result["video"] = str(write_mp4(Path(video_path), np.stack(frames), fps=int(fps)))
        except Exception as err:  # codec missing, disk full, ...
            result["render_error"] = f"{type(err).__name__}: {err}"
    try:
        env.close()
    except Exception as err:
        result["render_error"] = result["render_error"] or f"close: {err}"
    result["cameras"] = cameras
    return result


def evaluate_and_track(policy: Callable[[torch.Tensor], torch.Tensor], env: Any,
                       video_path: str | Path | None, seed: int | None,
                       **film: Any) -> dict[str, Any]:
    """Evaluate, film and, for a legged task, track a forward command.

    :func:`evaluate_and_film` (``film``: its keyword arguments), and for a legged task first the
    velocity tracking under a fixed forward command (``velocity_tracking``).
    """
    tracking = tracking_summary(policy, env, seed=seed) if is_legged(env) else None
    result = evaluate_and_film(policy, env, video_path, **film)
    if tracking is not None:
        result["velocity_tracking"] = tracking
    return result


def print_video_and_walking(result: dict[str, Any], video_label: str = "video") -> None:
    """Print the summary lines every evaluation prints after its success rate.

    The video (or why it is missing) and, for legged tasks, the velocity-tracking result.
    """
    from embodied.locomotion_eval import format_tracking

    if result["video"]:
        print(f"  {video_label:<20}{result['video']}")
    elif result["render_error"]:
        print(f"  {video_label:<20}not written: {result['render_error']}")
    if "velocity_tracking" in result:
        print(f"  {'walking':<20}{format_tracking(result['velocity_tracking'])}")
