"""`embodied reward eval`: reward-model metrics on the held-out episodes of a frame dataset.

Then, unless ``shift.episodes=0``, the visual-shift suite on fresh episodes (see
:func:`embodied.reward.prm.evaluate.shift_suite`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from embodied.commands.registry import command
from embodied.reward.base import make_reward_model
from embodied.reward.prm.checkpoint import find_prm_checkpoint, newest_prm_checkpoint
from embodied.reward.prm.data import load_frames
from embodied.reward.prm.evaluate import evaluate, print_metrics, shift_suite


@command("reward eval", "reward-model metrics on held-out episodes (VOC, success F1/AUROC, ...) "
         "and under visual shift",
         errors=(FileNotFoundError, ValueError))
def run_reward_eval(cfg: DictConfig) -> dict[str, Any]:
    """Metrics of any reward model on the held-out episodes of a frame dataset."""
    torch.set_num_threads(int(cfg.torch_threads))
    model_cfg = OmegaConf.to_container(cfg.reward.model, resolve=True)
    if model_cfg is None:
        raise ValueError(f"reward={cfg.reward.mode} has no model to evaluate; use reward=prm, "
                         "reward=clip, ...")
    ckpt = None
    if model_cfg.get("name") == "prm":
        ckpt = (newest_prm_checkpoint(cfg.task.name) if model_cfg.get("checkpoint") is None
                else find_prm_checkpoint(model_cfg["checkpoint"]))
        model_cfg["checkpoint"] = str(ckpt)
    model = make_reward_model(model_cfg)
    data_path = cfg.data
    if data_path is None:
        if ckpt is None:
            raise ValueError("data=<frame dataset folder> is needed for a model without a "
                             "PRM checkpoint (see embodied/reward/prm/data.py)")
        data_path = getattr(model, "info", {}).get("data")
    data = load_frames(data_path)
    out_dir = Path(cfg.out_dir or (ckpt.parent if ckpt else data_path))
    metrics = evaluate(model, data, split=cfg.split, plot=out_dir / "eval.png")
    shift = cfg.get("shift") or {}
    if int(shift.get("episodes") or 0) > 0:
        kinds = OmegaConf.to_container(shift.kinds, resolve=True)
        metrics["shift"] = shift_suite(model, data, kinds, int(shift.episodes), int(shift.seed),
                                       int(shift.batch_envs), shift.get("cache"),
                                       plot=out_dir / "eval_shift.png")
    (out_dir / "eval_metrics.json").write_text(json.dumps(metrics, indent=2))
    print_metrics(metrics)
    return metrics
