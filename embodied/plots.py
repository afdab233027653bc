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
