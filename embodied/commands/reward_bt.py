"""`embodied reward bt`: preference labels on simulated frames -> a Bradley-Terry reward model.

Steps: frames (a PRM frame dataset from ``data=``, or simulated now), pairs of states
sampled from the training episodes, labels from the configured labeller (``sim``: the
simulator's true progress; ``vlm``: a generative VLM asked which state shows more
progress; ``model``: any reward model's scores), Bradley-Terry training, then
evaluation on held-out episodes: pairwise accuracy against the simulator's progress,
and the PRM metrics (VOC, correlation, ...) with a PNG.

Writes to ``run_dir``: ``bt.pt`` (the reward model: ``reward=bt
reward.model.checkpoint=<run_dir>``), ``pairs.npz`` (a, b, labels), ``metrics.json``,
``progress.png`` and the resolved ``config.yaml``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from embodied.commands.registry import command
from embodied.config import save_config
from embodied.reward.bradley_terry import (
    BradleyTerryReward,
    BTConfig,
    fit_normaliser,
    rewards,
    save_bt,
    train_bradley_terry,
)
from embodied.reward.preferences import (
    label_pairs,
    make_labeller,
    preference_counts,
    sample_pairs,
    true_preference_accuracy,
)
from embodied.reward.prm.data import DataConfig, load_or_simulate
from embodied.reward.prm.evaluate import evaluate


@command("reward bt", "train a Bradley-Terry reward model from preference labels (simulator "
         "progress or a VLM judge)", errors=(FileNotFoundError, ValueError))
def run_bt(cfg: DictConfig) -> dict[str, Any]:
    """Label, train and evaluate as configured; returns the metrics (also in metrics.json)."""
    torch.set_num_threads(int(cfg.torch_threads))
    out = Path(cfg.run_dir)
    save_config(cfg, out)
    start = time.perf_counter()
    sim_cfg = DataConfig(task=cfg.task.name, **OmegaConf.to_container(cfg.simulate, resolve=True))
    data, _ = load_or_simulate(cfg.data or None, sim_cfg, out / "frames", bool(cfg.progress))
    seconds = {"data": time.perf_counter() - start}
    rng = np.random.default_rng(int(cfg.seed))
    a, b = sample_pairs(data.episode_rows("train"), int(cfg.pairs), rng,
                        float(cfg.within_episode))
    labeller = make_labeller(OmegaConf.to_container(cfg.labeller, resolve=True), data.cameras)
    start = time.perf_counter()
    labels = label_pairs(labeller, data.frames, a, b, data.instruction,
                         state={"progress": data.progress, "success": data.success},
                         batch_size=int(cfg.label_batch_size), progress_bar=cfg.progress)
    seconds["label"] = time.perf_counter() - start
    np.savez(out / "pairs.npz", a=a, b=b, labels=labels)

    bt_cfg = BTConfig.from_dict(OmegaConf.to_container(cfg.bt))
    start = time.perf_counter()
    net, history = train_bradley_terry(
        data.frames, a, b, labels, bt_cfg,
        log=(lambda e, loss: print(f"epoch {e + 1}/{bt_cfg.epochs}  loss {loss:.4f}"))
        if cfg.progress else None)
    seconds["train"] = time.perf_counter() - start
    r = rewards(net, data.frames)
    path = save_bt(out / "bt.pt", net, bt_cfg, data.cameras,
                   fit_normaliser(r[data.rows("train")]),
                   {"task": data.meta["task"], "instruction": data.instruction})
    truth = true_preference_accuracy(r, data, a, b, labels, float(cfg.labeller.margin),
                                     int(cfg.val_pairs), rng, float(cfg.within_episode))
    metrics: dict[str, Any] = {
        "task": data.meta["task"], "labeller": cfg.labeller.kind,
        "pairs": len(a), "labels": preference_counts(labels),
        "labeller_accuracy": truth["labeller_accuracy"],
        "train_pairs_used": history["pairs"], "train_accuracy": history["train_acc"],
        "train_accuracy_true": truth["train_accuracy_true"],
        "val_pairwise_accuracy": truth["val_pairwise_accuracy"], "val_pairs": truth["val_pairs"],
        "loss": history["loss"], "seconds": seconds,
    }
    metrics["eval"] = evaluate(BradleyTerryReward(path), data, "val", plot=out / "progress.png")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1, default=float))
    print(f"Bradley-Terry reward: held-out pairwise accuracy {truth['val_pairwise_accuracy']:.3f} "
          f"({truth['val_pairs']} pairs); labeller agreement with true progress "
          f"{truth['labeller_accuracy']:.3f}")
    print(f"  checkpoint: {path}  (reward=bt reward.model.checkpoint={out})")
    return metrics
