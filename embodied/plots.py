"""PNG plots users look at: task progress over an episode, learning curves."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np


def plot_progress(progress: np.ndarray, dt: float, path: Path, title: str,
                  success: np.ndarray | None = None) -> Path:
    """Plot per-env progress curves [T, B] against time; ``success`` [B] colours them."""
    t = np.arange(progress.shape[0]) * dt
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    for b in range(progress.shape[1]):
        ok = success is None or bool(success[b])
        ax.plot(t, progress[:, b], color="tab:green" if ok else "tab:red", alpha=0.8, lw=1.2)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("task progress")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_learning_curve(env_steps: np.ndarray, episode_return: np.ndarray,
                        success_rate: np.ndarray, path: Path, title: str,
                        eval_success: float | None = None, xlabel: str = "env steps") -> Path:
    """Mean episode return and success rate against env steps (or ``xlabel``), one panel each.

    ``success_rate`` is the training (stochastic) policy's; ``eval_success``, if
    given, is the final deterministic evaluation, drawn as a point at the last step.
    """
    fig, (ax_ret, ax_ok) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=120)
    ax_ret.plot(env_steps, episode_return, color="tab:blue", lw=1.4)
    ax_ret.set_ylabel("mean episode return")
    ax_ok.plot(env_steps, success_rate, color="tab:green", lw=1.4, label="training (sampled)")
    if eval_success is not None and len(env_steps):
        ax_ok.plot([env_steps[-1]], [eval_success], "o", color="black",
                   label=f"eval, mean action: {eval_success:.0%}")
    ax_ok.legend(fontsize=7, loc="lower right")
    ax_ok.set_ylabel("success rate")
    ax_ok.set_ylim(-0.02, 1.02)
    for ax in (ax_ret, ax_ok):
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
