"""Training checkpoints on disk: find, read and write (atomically) ``model_<n>.pt`` files.

A checkpoint is a ``torch.save`` dict with at least ``format`` (:data:`CHECKPOINT_FORMAT`),
``policy`` (the :class:`~embodied.rl.actor_critic.ActorCritic` state), ``ppo`` (the
optimiser state; empty for offline runs), ``iteration``, ``global_step`` and ``rng``.
Run folders keep them in ``checkpoints/``; stable-baselines3 runs keep ``model_<n>.zip``
there instead (same naming, found by :func:`find_checkpoint` with ``suffix=".zip"``).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import torch

from embodied.files import writing
from embodied.torch_file import InvalidTorchFileError, load_weights

CHECKPOINT_FORMAT = 1
REQUIRED_KEYS = frozenset({"format", "policy", "ppo", "iteration", "global_step", "rng"})


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit the run (names the file)."""


def checkpoint_path(run_dir: str | Path, iteration: int) -> Path:
    """``<run_dir>/checkpoints/model_<iteration>.pt``."""
    return Path(run_dir) / "checkpoints" / f"model_{iteration:06d}.pt"


def find_checkpoint(path: str | Path, suffix: str = ".pt", what: str = "checkpoint") -> Path:
    """A checkpoint file, or the newest ``checkpoints/model_*<suffix>`` of a run folder.

    ``suffix`` is ``.pt`` for our PPO and ``.zip`` for stable-baselines3 models.
    """
    path = Path(path)
    if path.is_file():
        return path
    folder = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    pattern = re.compile(rf"model_(\d+){re.escape(suffix)}$")
    found = sorted((int(m.group(1)), p) for p in folder.glob(f"model_*{suffix}")
                   if (m := pattern.search(p.name)))
    if not found:
        raise CheckpointError(f"no {what} found at {path} (expected a model_*{suffix} file "
                              f"or a run folder with checkpoints/model_*{suffix})")
    return found[-1][1]


def run_dir_of(checkpoint: Path) -> Path:
    """The run folder a checkpoint file belongs to (the parent of ``checkpoints/``)."""
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" \
        else checkpoint.parent


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True``.

    A :class:`CheckpointError` names the file if it is missing, corrupt or foreign (never
    torch's advice to load it unsafely).
    """
    path = Path(path)
    try:
        state = load_weights(path, "training checkpoint")
    except InvalidTorchFileError as err:
        raise CheckpointError(str(err)) from None
    missing = REQUIRED_KEYS - set(state if isinstance(state, dict) else {})
    if missing:
        raise CheckpointError(f"{path} is not a training checkpoint (missing {sorted(missing)})")
    return state


def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` to ``path`` atomically (tmp file + ``os.replace``); returns ``path``.

    Serialised in memory first, so a failed write (a full disk) is an :class:`OSError`
    naming ``path`` rather than an error of torch's stream writer.
    """
    path = Path(path)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    with writing(path) as tmp:
        tmp.write_bytes(buffer.getbuffer())
    return path
