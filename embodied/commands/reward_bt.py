"""`embodied reward bt`: preference labels on simulated frames -> a Bradley-Terry reward model.

Steps: frames (a PRM frame dataset from ``data=``, or simulated now with the PRM's
``simulate``), pairs of states sampled from the training episodes, labels from the
configured labeller (``sim``: the simulator's true progress; ``vlm``: a generative VLM
asked which state shows more progress; ``model``: any reward model's scores), Bradley-
Terry training, then evaluation on held-out episodes: pairwise accuracy against the
simulator's progress, and the PRM metrics (VOC, correlation, ...) with a PNG.

Writes to ``run_dir``: ``bt.pt`` (the reward model: ``reward=bt
reward.model.checkpoint=<run_dir>``), ``pairs.npz`` (a, b, labels), ``metrics.json``,
``progress.png`` and the resolved ``config.yaml``.
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
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
    preference_accuracy,
    rewards,
    save_bt,
    train_bradley_terry,
)
from embodied.reward.preferences import label_pairs, make_labeller, preference_counts, sample_pairs
from embodied.reward.prm.data import DataConfig, load_frames, save_frames, simulate
from embodied.reward.prm.evaluate import evaluate


@command("reward bt", "train a Bradley-Terry reward model from preference labels (simulator "
         "progress or a VLM judge)", errors=(FileNotFoundError, ValueError))
def run_bt(cfg: DictConfig) -> dict[str, Any]:
    """Label, train and evaluate as configured; returns the metrics (also in metrics.json)."""
    torch.set_num_threads(int(cfg.torch_threads))
    out = Path(cfg.run_dir)
    save_config(cfg, out)
    t0 = time.perf_counter()
    if cfg.data:
        data = load_frames(cfg.data)
    else:
        sim_cfg = OmegaConf.to_container(cfg.simulate, resolve=True)
        data = simulate(DataConfig(task=cfg.task.name, **sim_cfg), progress_bar=cfg.progress)
        save_frames(data, out / "frames")
    t_data = time.perf_counter() - t0
    truth = {"progress": data.progress, "success": data.success}
    rng = np.random.default_rng(int(cfg.seed))
    a, b = sample_pairs(data.episode_rows("train"), int(cfg.pairs), rng,
                        float(cfg.within_episode))
    labeller = make_labeller(OmegaConf.to_container(cfg.labeller, resolve=True), data.cameras)
    t0 = time.perf_counter()
    labels = label_pairs(labeller, data.frames, a, b, data.instruction, state=truth,
                         batch_size=int(cfg.label_batch_size), progress_bar=cfg.progress)
    t_label = time.perf_counter() - t0
    np.savez(out / "pairs.npz", a=a, b=b, labels=labels)

    known = {f.name for f in fields(BTConfig)}
    bt_cfg = BTConfig(**{k: v for k, v in OmegaConf.to_container(cfg.bt).items() if k in known})
    t0 = time.perf_counter()
    net, history = train_bradley_terry(
        data.frames, a, b, labels, bt_cfg,
        log=(lambda e, loss: print(f"epoch {e + 1}/{bt_cfg.epochs}  loss {loss:.4f}"))
        if cfg.progress else None)
    t_train = time.perf_counter() - t0
    r = rewards(net, data.frames)
    path = save_bt(out / "bt.pt", net, bt_cfg, data.cameras,
                   fit_normaliser(r[data.rows("train")]),
                   {"task": data.meta["task"], "instruction": data.instruction})

    # Held out: pairs of val episodes judged by the simulator's true progress.
    va, vb = sample_pairs(data.episode_rows("val"), int(cfg.val_pairs), rng,
                          float(cfg.within_episode))
    sim = make_labeller({"kind": "sim", "margin": cfg.labeller.margin}, data.cameras)
    true_val = label_pairs(sim, data.frames, va, vb, data.instruction, state=truth)
    true_train = label_pairs(sim, data.frames, a, b, data.instruction, state=truth)
    val_acc, val_n = preference_accuracy(r, va, vb, true_val)
    label_acc, _ = preference_accuracy(data.progress, a, b, labels)  # labeller vs truth
    metrics: dict[str, Any] = {
        "task": data.meta["task"], "labeller": cfg.labeller.kind,
        "pairs": len(a), "labels": preference_counts(labels),
        "labeller_accuracy": label_acc,   # the labels' agreement with the true progress
        "train_pairs_used": history["pairs"], "train_accuracy": history["train_acc"],
        "train_accuracy_true": preference_accuracy(r, a, b, true_train)[0],
        "val_pairwise_accuracy": val_acc, "val_pairs": val_n,
        "loss": history["loss"],
        "seconds": {"data": t_data, "label": t_label, "train": t_train},
    }
    model = BradleyTerryReward(path)
    metrics["eval"] = evaluate(model, data, "val", plot=out / "progress.png")
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1, default=float))
    print(f"Bradley-Terry reward: held-out pairwise accuracy {val_acc:.3f} ({val_n} pairs); "
          f"labeller agreement with true progress {label_acc:.3f}")
    print(f"  checkpoint: {path}  (reward=bt reward.model.checkpoint={out})")
    return metrics

