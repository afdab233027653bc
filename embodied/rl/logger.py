"""Training metrics to a CSV file (always) and TensorBoard events (if installed)."""

from __future__ import annotations

import csv
import math
from collections import deque
from pathlib import Path
from typing import Any

import torch


class MetricsLogger:
    """Appends one row per iteration to ``metrics.csv``; mirrors scalars to TensorBoard.

    TensorBoard needs the ``tensorboard`` package; without it only the CSV is
    written (``self.tensorboard`` is False). ``resume_iteration`` drops CSV rows
    after that iteration (and ``resume_step`` TensorBoard events after that env
    step), so a resumed run continues the same curve.
    """

    def __init__(self, run_dir: Path, resume_iteration: int | None = None,
                 resume_step: int | None = None):
        self.path = Path(run_dir) / "metrics.csv"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fields: list[str] | None = None
        if resume_iteration is not None and self.path.exists():
            with self.path.open(newline="") as f:
                reader = csv.DictReader(f)
                self._fields = list(reader.fieldnames or [])
                rows = [r for r in reader if int(float(r["iteration"])) <= resume_iteration]
            with self.path.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=self._fields)
                writer.writeheader()
                writer.writerows(rows)
        elif self.path.exists():
            self.path.unlink()
        self._writer = None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            self.tensorboard = False
        else:
            self.tensorboard = True
            self._writer = SummaryWriter(log_dir=str(run_dir), purge_step=resume_step)

    def log(self, row: dict[str, Any]) -> None:
        """Write one iteration's metrics (``row['env_steps']`` is the TensorBoard x axis)."""
        new = self._fields is None
        fields = list(row) if self._fields is None else self._fields
        self._fields = fields
        with self.path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(row)
        if self._writer is not None:
            for key, value in row.items():
                if isinstance(value, int | float) and not math.isnan(value) and key != "env_steps":
                    self._writer.add_scalar(key, value, global_step=int(row["env_steps"]))

    def close(self) -> None:
        """Flush TensorBoard events."""
        if self._writer is not None:
            self._writer.close()


class RewardTermStats:
    """Per-episode sums of the env's weighted reward terms: the ``reward/<term>`` metrics.

    Terms come from ``info["reward_terms"]`` (name -> [B]), summed over each episode and averaged
    over the last ``window`` finished episodes.

    The window is not part of checkpoints: after a resume it refills from new episodes.
    """

    def __init__(self, window: int):
        self.window = window
        self._running: dict[str, torch.Tensor] = {}
        self._episodes: dict[str, deque[float]] = {}

    def reset(self) -> None:
        """Forget the episodes in flight (the envs were reset)."""
        self._running.clear()

    def step(self, terms: dict[str, torch.Tensor], done_ids: torch.Tensor | None) -> None:
        """Add one step's terms; close the episodes of ``done_ids``."""
        for name, value in terms.items():
            running = self._running.setdefault(name, torch.zeros_like(value, dtype=torch.float64))
            running += value
            episodes = self._episodes.setdefault(name, deque(maxlen=self.window))
            if done_ids is not None:
                episodes.extend(running[done_ids].tolist())
                running[done_ids] = 0.0

    def means(self) -> dict[str, float]:
        """``reward/<term>``: mean per-episode sum of each term (NaN before an episode ends)."""
        return {f"reward/{name}": sum(eps) / len(eps) if eps else math.nan
                for name, eps in self._episodes.items()}


def read_metrics(path: Path) -> dict[str, list[float]]:
    """A metrics.csv as columns of floats (empty cells are NaN)."""
    with Path(path).open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return {}
    return {key: [float(r[key]) if r[key] not in ("", None) else math.nan for r in rows]
            for key in rows[0]}
