"""Velocity-tracking evaluation of a legged policy under a fixed command (go2_walk).

``evaluate_velocity_tracking`` resets every env, holds one command for a fixed
time with the deterministic policy and measures what a user watching the robot
would: how far it walked, how well it tracked the command, and whether it fell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from robots.math import quat_rotate
from sim.protocol import BatchedEnv


class TaskedEnv(BatchedEnv, Protocol):
    """A batched env that exposes its task (``sim.env.TaskEnv`` and the Isaac Lab proxy do)."""

    @property
    def task(self) -> Any:
        """The env's task; what it offers is checked where it is used."""
        ...

@torch.inference_mode()
def evaluate_velocity_tracking(policy: Callable[[torch.Tensor], torch.Tensor], env: TaskedEnv,
                               command: Sequence[float] = (0.5, 0.0, 0.0), seconds: float = 10.0,
                               settle_s: float = 1.0, pushes: bool = False,
                               seed: int | None = 0) -> dict[str, Any]:
    """Walk every env of ``env`` for ``seconds`` under ``command`` (vx, vy, yaw rate).

    ``policy(obs) -> actions`` should be deterministic (an exported policy, or an
    :class:`~embodied.rl.actor_critic.ActorCritic` whose ``forward`` is the mean action).
    The env's task must offer ``set_command(env_ids, command)`` and the base state
    (``base_pos``, ``base_quat``, ``lin_vel_b``, ``ang_vel_b``), as go2_walk does.

    Returned (means over the envs that did not fall, unless noted):

    - ``distance_m``: planar distance walked; ``forward_distance_m``: along the
      command's direction in the start heading (``distance`` for a pure vx command);
    - ``mean_speed_mps``: forward distance / time;
    - ``lin_vel_error_mps``: mean ``|v_xy - cmd_xy|`` (base frame) after ``settle_s``;
      ``yaw_rate_error_rps`` likewise; ``mean_vx_mps``: mean base-frame forward velocity;
    - ``falls`` / ``fall_rate``: envs whose episode ended (a fall, or a diverged
      simulation), over all envs;
    - ``per_env``: the per-env distance, tracking error and fall flags.

    Pushes (random base kicks during training) are off unless ``pushes``.
    """
    task = env.task
    dt = float(env.control_dt)
    steps = round(seconds / dt)
    if steps > env.max_episode_steps:
        raise ValueError(f"{seconds} s is longer than the task's episodes "
                         f"({env.max_episode_steps * dt:.1f} s)")
    if hasattr(policy, "eval"):
        policy.eval()
    n = env.num_envs
    ids = torch.arange(n)
    cmd = torch.as_tensor(command, dtype=torch.float64)
    obs = env.reset(seed=seed)
    task.set_command(ids, cmd)
    if not pushes and hasattr(task, "push_timer"):
        task.push_timer[:] = float("inf")
    obs = env.observe()  # the command is part of the observation

    start = task.base_pos[:, :2].clone()
    heading = quat_rotate(task.base_quat, torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
                          .expand(n, 3))[:, :2]
    heading = heading / heading.norm(dim=1, keepdim=True).clamp_min(1e-9)
    # Command direction in the world, from the start heading (base frame -> world, planar).
    cmd_dir_b = cmd[:2] / cmd[:2].norm().clamp_min(1e-9)
    left = torch.stack([-heading[:, 1], heading[:, 0]], dim=1)
    cmd_dir = cmd_dir_b[0] * heading + cmd_dir_b[1] * left

    fell = torch.zeros(n, dtype=torch.bool)
    last_pos = start.clone()
    lin_err_sum = torch.zeros(n, dtype=torch.float64)
    yaw_err_sum = torch.zeros(n, dtype=torch.float64)
    vx_sum = torch.zeros(n, dtype=torch.float64)
    counted = 0
    settle = round(settle_s / dt)
    for step in range(steps):
        obs, _, terminated, truncated, _ = env.step(policy(obs))
        alive = ~fell & ~(terminated | truncated)
        # An env that finished was reset by the env: its state is a new episode's.
        last_pos[alive] = task.base_pos[alive, :2]
        fell |= terminated | truncated
        if step >= settle:
            lin_err_sum += (task.lin_vel_b[:, :2] - cmd[:2]).norm(dim=1)
            yaw_err_sum += (task.ang_vel_b[:, 2] - cmd[2]).abs()
            vx_sum += task.lin_vel_b[:, 0]
            counted += 1

    disp = last_pos - start
    distance = disp.norm(dim=1)
    forward = (disp * cmd_dir).sum(1)
    lin_err = lin_err_sum / max(counted, 1)
    yaw_err = yaw_err_sum / max(counted, 1)
    ok = ~fell

    def mean(x: torch.Tensor) -> float:
        return float(x[ok].mean()) if ok.any() else float("nan")

    return {
        "command": [float(c) for c in cmd],
        "seconds": steps * dt,
        "episodes": n,
        "distance_m": mean(distance),
        "forward_distance_m": mean(forward),
        "min_forward_distance_m": float(forward[ok].min()) if ok.any() else float("nan"),
        "mean_speed_mps": mean(forward) / (steps * dt),
        "mean_vx_mps": mean(vx_sum / max(counted, 1)),
        "lin_vel_error_mps": mean(lin_err),
        "yaw_rate_error_rps": mean(yaw_err),
        "falls": int(fell.sum()),
        "fall_rate": float(fell.float().mean()),
        "per_env": {"forward_distance_m": forward.tolist(), "lin_vel_error_mps": lin_err.tolist(),
                    "fell": fell.tolist()},
    }


def is_legged(env: TaskedEnv) -> bool:
    """The env's task takes velocity commands (so a velocity-tracking evaluation applies)."""
    return hasattr(env.task, "set_command")


def tracking_summary(policy: Callable[[torch.Tensor], torch.Tensor], env: TaskedEnv,
                     command: Sequence[float] = (0.5, 0.0, 0.0), seconds: float = 10.0,
                     seed: int | None = 0) -> dict[str, Any]:
    """:func:`evaluate_velocity_tracking` without the per-env lists, for records and summaries."""
    result = evaluate_velocity_tracking(policy, env, command, seconds, seed=seed)
    result.pop("per_env")
    return result


def format_tracking(result: dict[str, Any]) -> str:
    """One summary line: distance, speed, tracking error and falls under the command."""
    vx, vy, yaw = result["command"]
    return (f"command ({vx:g}, {vy:g}, {yaw:g}) for {result['seconds']:.0f} s: walked "
            f"{result['forward_distance_m']:.2f} m forward, speed error "
            f"{result['lin_vel_error_mps']:.2f} m/s, falls {result['falls']}/{result['episodes']}")
