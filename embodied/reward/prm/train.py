"""Training the multi-view PRM on simulated episodes (``embodied reward train``).

Each minibatch mixes:

- states of train episodes with their two-hot progress targets and success labels;
  states that end a temporal clip of an episode before its first success (RoboReward's
  partial-progress negatives) are drawn ``clip_weight`` times as often, since those
  near-success states are where success detection errs;
- counterfactuals: with probability ``counterfactual_prob`` a state gets another task's
  (or an unrelated) instruction and the targets progress 0, success 0;
- near misses: with probability ``near_miss_prob`` the task's own instruction with one
  detail changed (another colour, another object, the opposite relation;
  ``labels.near_miss_instructions``), also with the targets 0, 0;
- paraphrases: with probability ``paraphrase_prob`` the true instruction is reworded
  (``text.paraphrase``, training synonyms only), targets unchanged;
- view dropout: every view is hidden with probability ``view_dropout`` (at least one
  stays), so the fused score survives a missing camera;
- temporal context (a PRM with ``context: start``): every state comes with the views of
  its episode's first state; with probability ``shift_prob`` an earlier state stands in
  as the start, with ``reverse_prob`` a later one (a reversed clip: no progress), both
  with the progress from that start as target (``labels.context_starts``); with
  probability ``context_dropout`` the start views are left out, so the model also
  scores a state alone;
- frame augmentation (``brightness``, ``colour_std``, ``pixel_shift``; ``augment.py``):
  each state's views relit by one brightness factor and colour gain, for light levels past the
  rendered range; each camera's image translated by up to ``pixel_shift`` pixels, for
  cameras moved past the rendered range.

``kinds`` restricts training to some kinds of episodes (an ablation: e.g. without the
policy rollouts of the same dataset).

Under torchrun the network is wrapped in ``DistributedDataParallel``: every rank draws
its own minibatches of ``batch_size`` (rank 0 with the single-process draws), so an
epoch takes ``1 / world_size`` of the steps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from embodied import distributed
from embodied.reward.prm.augment import check_settings, photometric, pixel_shift
from embodied.reward.prm.data import FrameDataset
from embodied.reward.prm.labels import (
    context_starts,
    near_miss_instructions,
    temporal_clips,
    two_hot,
)
from embodied.reward.prm.network import MultiViewPRM, PRMConfig, view_dropout_mask
from embodied.reward.prm.text import paraphrase


@dataclass
class TrainConfig:
    """Optimisation settings of ``embodied reward train``."""

    epochs: int = 6
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    counterfactual_prob: float = 0.2
    near_miss_prob: float = 0.15
    paraphrase_prob: float = 0.3
    clips_per_episode: int = 4
    clip_weight: float = 3.0
    success_weight: float = 1.0
    shuffle_labels: bool = False   # a control: progress labels permuted across states
    shift_prob: float = 0.15       # context start: an earlier state as the start
    reverse_prob: float = 0.15     # context start: a later state as the start (reversed clip)
    context_dropout: float = 0.2   # context start: no start views
    kinds: list[str] | None = None  # episode kinds to train on; None: all
    # frame augmentation (augment.py): per-state brightness factor range, colour gain std
    brightness: list[float] = field(default_factory=lambda: [1.0, 1.0])
    colour_std: float = 0.0
    pixel_shift: int = 0           # each camera's image translated by up to this many pixels
    seed: int = 0

    def __post_init__(self) -> None:
        """Out-of-range augmentation settings raise ``ValueError`` naming the fix."""
        check_settings(self.brightness, self.colour_std, self.pixel_shift)


def sample_weights(data: FrameDataset, rows: np.ndarray, cfg: TrainConfig,
                   rng: np.random.Generator) -> np.ndarray:
    """Per-row sampling weights: 1, or ``clip_weight`` for temporal-clip ends."""
    weights = np.ones(len(data.progress))
    for ep in data.episode_rows("train"):
        ends = temporal_clips(data.success[ep], cfg.clips_per_episode, rng)
        weights[ep[ends]] = cfg.clip_weight
    return weights[rows] / weights[rows].sum()


def instructions(instruction: str, others: list[str], near: list[str], n: int,
                 cfg: TrainConfig, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """The instruction of every row of a minibatch, and which rows are negatives.

    Negatives (targets progress 0, success 0) get another task's instruction
    (``counterfactual_prob``) or a near miss (``near_miss_prob``); the other rows get the
    true instruction, reworded with probability ``paraphrase_prob``.
    """
    draw = rng.random(n)
    texts, negative = [], np.zeros(n, dtype=bool)
    for d in draw:
        if d < cfg.counterfactual_prob:
            texts.append(others[rng.integers(len(others))])
        elif d < cfg.counterfactual_prob + cfg.near_miss_prob and near:
            texts.append(near[rng.integers(len(near))])
        else:
            reword = rng.random() < cfg.paraphrase_prob
            texts.append(paraphrase(instruction, rng) if reword else instruction)
            continue
        negative[len(texts) - 1] = True
    return texts, negative


def prm_loss(model: torch.nn.Module, frames: torch.Tensor, texts: list[str],
             target_p: torch.Tensor, target_s: torch.Tensor, present: torch.Tensor | None,
             success_weight: float = 1.0) -> torch.Tensor:
    """The PRM's training loss on one minibatch (a scalar with gradient).

    Cross-entropy of the progress logits against the two-hot targets of ``target_p`` [B]
    plus ``success_weight`` x the binary cross-entropy of the success logit against
    ``target_s`` [B] (floats in [0, 1]).
    """
    logits, success = model(frames, texts, present)
    bins = logits.shape[-1]
    loss_p = -(two_hot(target_p, bins).to(logits) * logits.log_softmax(-1)).sum(-1).mean()
    return loss_p + success_weight * F.binary_cross_entropy_with_logits(success, target_s)


def train_prm(data: FrameDataset, model_cfg: PRMConfig, cfg: TrainConfig,
              log: bool = True) -> tuple[MultiViewPRM, dict[str, Any]]:
    """Train a PRM on the ``train`` episodes of ``data``; returns it and training stats."""
    if list(model_cfg.cameras) != data.cameras:
        raise ValueError(f"the PRM's cameras {model_cfg.cameras} differ from the dataset's "
                         f"{data.cameras}")
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    net = MultiViewPRM(model_cfg)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    rows = data.rows("train", None if cfg.kinds is None else tuple(cfg.kinds))
    if len(rows) == 0:
        raise ValueError(f"the dataset has no train episodes of the kinds {cfg.kinds}")
    progress = data.progress.copy()
    if cfg.shuffle_labels:
        progress[rows] = progress[rng.permutation(rows)]
    probs = sample_weights(data, rows, cfg, rng)
    if distributed.rank() > 0:  # this rank's own minibatches and view dropout
        rng = np.random.default_rng(distributed.rank_seed(cfg.seed))
        gen.manual_seed(distributed.rank_seed(cfg.seed))
    model = DistributedDataParallel(net, find_unused_parameters=True) \
        if distributed.init() else net
    others = list(data.meta["counterfactual_instructions"])
    near = [t for texts in near_miss_instructions(data.instruction).values() for t in texts]
    steps_per_epoch = max(1, math.ceil(len(rows) / (cfg.batch_size
                                                    * distributed.world_size())))
    total = cfg.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, cfg.learning_rate, total_steps=total,
                                                pct_start=0.1)
    first = np.array([e["start"] for e in data.episodes])[data.episode]
    last = first + np.array([e["length"] - 1 for e in data.episodes])[data.episode]
    context = model_cfg.context == "start"
    net.train()
    start, losses = time.perf_counter(), []
    for step in range(total):
        batch = np.sort(rng.choice(rows, size=cfg.batch_size, p=probs))  # sorted: mmap reads
        frames = torch.from_numpy(np.ascontiguousarray(data.frames[batch]))
        target_p = torch.from_numpy(progress[batch])
        if context:
            starts, rel = context_starts(batch, first, last, progress, cfg.shift_prob,
                                         cfg.reverse_prob, rng)
            frames = torch.cat([frames, torch.from_numpy(np.ascontiguousarray(
                data.frames[starts]))], dim=1)
            keep = torch.from_numpy(rng.random(len(batch)) >= cfg.context_dropout)
            target_p = torch.where(keep, torch.from_numpy(rel), target_p)
        frames = photometric(frames, cfg.brightness, cfg.colour_std, rng)
        frames = pixel_shift(frames, cfg.pixel_shift, len(data.cameras), rng)
        target_s = torch.from_numpy(data.success[batch].astype(np.float32))
        texts, cf = instructions(data.instruction, others, near, len(batch), cfg, rng)
        cf_t = torch.from_numpy(cf)
        target_p = torch.where(cf_t, 0.0, target_p)
        target_s = torch.where(cf_t, 0.0, target_s)
        present = view_dropout_mask(len(batch), len(data.cameras), model_cfg.view_dropout, gen)
        if context:
            start_present = view_dropout_mask(len(batch), len(data.cameras),
                                              model_cfg.view_dropout, gen) & keep[:, None]
            present = torch.cat([present, start_present], dim=1)
        loss = prm_loss(model, frames, texts, target_p, target_s, present, cfg.success_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if log and distributed.is_main() and (step + 1) % steps_per_epoch == 0:
            print(f"epoch {(step + 1) // steps_per_epoch}/{cfg.epochs}  loss "
                  f"{np.mean(losses[-steps_per_epoch:]):.3f}  "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
    net.eval()
    return net, {"train_seconds": round(time.perf_counter() - start, 1), "steps": total,
                 "final_loss": distributed.mean_over_ranks(
                     float(np.mean(losses[-steps_per_epoch:]))),
                 "train_states": len(rows)}
