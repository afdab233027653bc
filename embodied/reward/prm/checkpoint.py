"""PRM checkpoints: one ``torch.save`` file per trained model.

It holds the weights, the architecture config, the task's instruction and camera order, the data it
was trained on, the success calibration fitted on held-out episodes and its metrics.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from embodied.reward.prm.calibration import SuccessCalibration
from embodied.reward.prm.network import MultiViewPRM, PRMConfig
from embodied.torch_file import load_weights

CHECKPOINT_FORMAT = "embodied-prm"
CHECKPOINT_VERSION = 1
CHECKPOINT_NAME = "prm.pt"


def save_prm(path: str | Path, net: MultiViewPRM, info: dict[str, Any]) -> Path:
    """Write ``net`` (without a frozen pretrained tower's weights) and ``info`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v for k, v in net.state_dict().items()
             if not (net.cfg.encoder == "hf" and net.cfg.freeze_vision
                     and k.startswith("encoder.tower."))}
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
                "config": asdict(net.cfg), "state_dict": state, "info": info}, tmp)
    os.replace(tmp, path)
    return path


def find_prm_checkpoint(path: str | Path) -> Path:
    """A checkpoint file, or the ``prm.pt`` inside a training run folder."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no PRM checkpoint at {path}; train one with "
                                "`embodied reward train task=<task>` (it writes "
                                f"<run folder>/{CHECKPOINT_NAME})")
    return path


RUNS = Path("runs/reward/prm")


def newest_prm_checkpoint(task: str, runs: str | Path = RUNS) -> Path:
    """The newest ``<runs>/<task>/*/prm.pt`` (what ``embodied reward train`` writes)."""
    found = sorted(Path(runs, task).glob(f"*/{CHECKPOINT_NAME}"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no trained PRM for task '{task}' under {Path(runs, task)}; "
                                f"train one with `embodied reward train task={task}` or pass "
                                "reward.checkpoint=<run folder or prm.pt>")
    return found[-1]


def load_prm(path: str | Path, device: str | torch.device = "cpu"
             ) -> tuple[MultiViewPRM, dict[str, Any]]:
    """The network (eval mode) and the ``info`` saved with it.

    The network carries the checkpoint's success calibration as ``success_calibration``
    (a :class:`~embodied.reward.prm.calibration.SuccessCalibration`; the identity if the
    checkpoint has none), which the scoring paths of ``inference.py`` apply.
    """
    path = find_prm_checkpoint(path)
    ckpt = load_weights(path, "PRM checkpoint")
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a PRM checkpoint (written by embodied reward train)")
    if ckpt["version"] != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: PRM checkpoint version {ckpt['version']}, this code reads "
                         f"{CHECKPOINT_VERSION}")
    net = MultiViewPRM(PRMConfig(**ckpt["config"]))
    strict = not (net.cfg.encoder == "hf" and net.cfg.freeze_vision)
    net.load_state_dict(ckpt["state_dict"], strict=strict)
    net.success_calibration = SuccessCalibration.from_info(ckpt["info"])
    return net.to(device).eval(), ckpt["info"]
