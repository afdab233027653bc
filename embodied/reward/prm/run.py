"""`embodied reward train` and `embodied reward eval`: the commands around the PRM."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from embodied.config import save_config


def run_reward_train(cfg: DictConfig) -> dict[str, Any]:
    """Simulate (or load) a frame dataset, train the PRM, evaluate it; returns metrics."""
    from embodied.reward.prm.checkpoint import CHECKPOINT_NAME, save_prm
    from embodied.reward.prm.data import DataConfig, load_frames, save_frames, simulate
    from embodied.reward.prm.evaluate import evaluate
    from embodied.reward.prm.model import LearnedPRM
    from embodied.reward.prm.network import PRMConfig
    from embodied.reward.prm.train import TrainConfig, train_prm

    torch.set_num_threads(int(cfg.torch_threads))
    run_dir = Path(cfg.run_dir)
    save_config(cfg, run_dir)
    data_cfg = OmegaConf.to_container(cfg.data, resolve=True)
    path = data_cfg.pop("path")
    start = time.perf_counter()
    if path is None:
        print(f"simulating {data_cfg['episodes']} episodes of {cfg.task.name} ...", flush=True)
        data = simulate(DataConfig(task=cfg.task.name, **data_cfg), progress_bar=True)
        path = save_frames(data, run_dir / "data")
    else:
        data = load_frames(path)
    sim_s = time.perf_counter() - start
    print(f"dataset {path}: {len(data.progress)} states of {len(data.episodes)} episodes "
          f"({sim_s:.0f} s)", flush=True)
    model_cfg = PRMConfig(cameras=data.cameras, **OmegaConf.to_container(cfg.model,
                                                                          resolve=True))
    net, stats = train_prm(data, model_cfg, TrainConfig(**OmegaConf.to_container(
        cfg.train, resolve=True)))
    info = {"task": data.meta["task"], "instruction": data.instruction,
            "cameras": data.cameras, "data": str(path), "train": stats,
            "data_seconds": round(sim_s, 1)}
    ckpt = save_prm(run_dir / CHECKPOINT_NAME, net, info)
    metrics = evaluate(LearnedPRM(ckpt), data, plot=run_dir / "eval.png")
    info["metrics"] = metrics
    save_prm(ckpt, net, info)
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    if not cfg.keep_data and Path(path) == run_dir / "data":
        shutil.rmtree(path)
    print_metrics(metrics)
    print(f"  checkpoint          {ckpt}\n  use it              embodied train task="
          f"{cfg.task.name} reward=prm reward.checkpoint={run_dir}")
    return metrics


def run_reward_eval(cfg: DictConfig) -> dict[str, Any]:
    """Metrics of any reward model on the held-out episodes of a frame dataset."""
    from embodied.reward.base import make_reward_model
    from embodied.reward.prm.checkpoint import find_prm_checkpoint, newest_prm_checkpoint
    from embodied.reward.prm.data import load_frames
    from embodied.reward.prm.evaluate import evaluate

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
    (out_dir / "eval_metrics.json").write_text(json.dumps(metrics, indent=2))
    print_metrics(metrics)
    return metrics


def print_metrics(m: dict[str, Any]) -> None:
    """The metrics of a reward model, one per line."""
    print(f"\nheld-out episodes {m['kinds']}")
    rows = [("VOC (expert)", "voc"), ("VOC reversed", "voc_reversed"),
            ("success F1", "success_f1"), ("success AUROC", "success_auroc"),
            ("Pearson vs sim", "progress_pearson"), ("Spearman vs sim", "progress_spearman"),
            ("pairwise accuracy", "pairwise_accuracy"),
            ("counterfactual gap", "counterfactual_gap"),
            ("counterfactual AUROC", "counterfactual_auroc")]
    for label, key in rows:
        if key in m:
            print(f"  {label:<22}{m[key]:.3f}")
    if "plot" in m:
        print(f"  plot                  {m['plot']}")
