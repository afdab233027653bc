"""Bradley-Terry reward network trained from preference labels (RL-VLM-F), as a reward model.

A small CNN maps each view of an observation to features (one encoder shared by the
views), the views' features are concatenated in a fixed camera order, and an MLP gives
a scalar reward ``r``. Bradley-Terry: ``P(a preferred over b) = sigmoid(r_a - r_b)``,
trained with the cross-entropy against the label (1, 0, or 0.5 for a tie).

As a ``RewardModel`` (registered as ``bt``): progress is the reward normalised by its
spread on the training observations, ``(r - lo) / (hi - lo)`` clamped to [0, 1], with
``lo``/``hi`` the 2nd/98th percentiles, stored in the checkpoint. Rewards are only
defined up to an offset (and, in effect, a scale), so this is the convention that puts
them in [0, 1]; shaping is unaffected by the offset.

Checkpoint (``torch.save`` of a dict, ``format`` = "embodied-bt"): ``version``,
``config`` (the network's ``BTConfig`` fields), ``cameras`` (view order), ``task``,
``instruction``, ``normaliser`` ([lo, hi]), ``state_dict``, ``metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from embodied.reward.base import RewardModel, RewardOutput
from embodied.torch_file import load_weights

FORMAT = "embodied-bt"
FORMAT_VERSION = 1


@dataclass
class BTConfig:
    """Network and training settings of the Bradley-Terry reward model."""

    image_size: int = 64                      # views are resized to this square
    channels: list[int] = field(default_factory=lambda: [16, 32, 64, 64])
    hidden: int = 128
    epochs: int = 30
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    shift: int = 4                            # random-shift augmentation, pixels (0: off)
    no_preference: str = "drop"               # 0.5 labels: drop | tie
    seed: int = 0

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> BTConfig:
        """The settings in ``values`` that are fields of this class (others are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


class BTRewardNet(nn.Module):
    """Reward ``r`` [B] of uint8 observations [B, V, H, W, 3] (V fixed at construction)."""

    def __init__(self, num_views: int, cfg: BTConfig) -> None:
        super().__init__()
        self.num_views = num_views
        self.image_size = cfg.image_size
        layers: list[nn.Module] = []
        c_in = 3
        for i, c in enumerate(cfg.channels):
            k = 5 if i == 0 else 3
            layers += [nn.Conv2d(c_in, c, k, stride=2, padding=k // 2), nn.ReLU(inplace=True)]
            c_in = c
        layers += [nn.AdaptiveAvgPool2d(2), nn.Flatten()]
        self.encoder = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(num_views * c_in * 4, cfg.hidden),
                                  nn.ReLU(inplace=True), nn.Linear(cfg.hidden, 1))

    def images(self, frames: torch.Tensor) -> torch.Tensor:
        """uint8 [B, V, H, W, 3] -> normalised float [B * V, 3, S, S]."""
        b, v, h, w, _ = frames.shape
        x = frames.reshape(b * v, h, w, 3).permute(0, 3, 1, 2).float().div_(255.0)
        if (h, w) != (self.image_size, self.image_size):
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear",
                              align_corners=False, antialias=True)
        return (x - 0.5) / 0.25

    def forward(self, frames: torch.Tensor, shift: int = 0) -> torch.Tensor:
        """Rewards [B] of ``frames`` uint8 [B, V, H, W, 3].

        ``shift`` > 0 translates each view by up to that many pixels (augmentation). Raises
        ``ValueError`` when V is not the network's number of views.
        """
        b, v = frames.shape[:2]
        if v != self.num_views:
            raise ValueError(f"the reward network takes {self.num_views} views, got {v}")
        x = self.images(frames)
        if shift > 0:
            x = random_shift(x, shift)
        return self.head(self.encoder(x).reshape(b, -1)).squeeze(-1)


def random_shift(x: torch.Tensor, pad: int) -> torch.Tensor:
    """Each image translated by up to ``pad`` pixels (replicate padding, random crop)."""
    n, _, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad), mode="replicate")
    dx = torch.randint(0, 2 * pad + 1, (n,))
    dy = torch.randint(0, 2 * pad + 1, (n,))
    rows = (dy[:, None] + torch.arange(h)[None])[:, None, :, None].expand(n, 3, h, w + 2 * pad)
    out = padded.gather(2, rows)
    cols = (dx[:, None] + torch.arange(w)[None])[:, None, None, :].expand(n, 3, h, w)
    return out.gather(3, cols)


def bradley_terry_loss(r_a: torch.Tensor, r_b: torch.Tensor, p_a: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of ``P(a > b) = sigmoid(r_a - r_b)`` against the label ``p_a`` in [0, 1]."""
    return F.binary_cross_entropy_with_logits(r_a - r_b, p_a)


def usable_pairs(a: np.ndarray, b: np.ndarray, labels: np.ndarray,
                 no_preference: str = "drop") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs training uses: NaN (no label) dropped; 0.5 (tie) dropped or kept."""
    if no_preference not in ("drop", "tie"):
        raise ValueError(f"no_preference must be 'drop' or 'tie', got '{no_preference}'")
    labels = np.asarray(labels, np.float32)
    keep = ~np.isnan(labels)
    if no_preference == "drop":
        keep &= labels != 0.5
    return np.asarray(a)[keep], np.asarray(b)[keep], labels[keep]


@torch.inference_mode()
def rewards(net: BTRewardNet, frames: np.ndarray | torch.Tensor, rows: np.ndarray | None = None,
            batch_size: int = 256) -> np.ndarray:
    """Rewards [N] of ``frames[rows]`` (all rows if None), in batches."""
    net.eval()
    rows = np.arange(len(frames)) if rows is None else np.asarray(rows)
    device = next(net.parameters()).device
    out = [net(torch.as_tensor(np.ascontiguousarray(frames[rows[i:i + batch_size]]))
               .to(device)).float().cpu().numpy() for i in range(0, len(rows), batch_size)]
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def preference_accuracy(reward: np.ndarray, a: np.ndarray, b: np.ndarray,
                        labels: np.ndarray) -> tuple[float, int]:
    """Share of strict-preference pairs (label 0 or 1) that ``reward`` orders alike; #pairs.

    ``reward`` is indexed by the row numbers in ``a`` and ``b``.
    """
    labels = np.asarray(labels, np.float32)
    strict = (labels == 0.0) | (labels == 1.0)
    n = int(strict.sum())
    if n == 0:
        return float("nan"), 0
    pred_a = reward[np.asarray(a)[strict]] > reward[np.asarray(b)[strict]]
    return float((pred_a == (labels[strict] == 1.0)).mean()), n


def train_bradley_terry(frames: np.ndarray, a: np.ndarray, b: np.ndarray, labels: np.ndarray,
                        cfg: BTConfig, *, num_views: int | None = None,
                        device: str | torch.device = "cpu",
                        log: Any = None) -> tuple[BTRewardNet, dict[str, Any]]:
    """Train a reward network on the labelled row pairs (a, b) of ``frames`` [M, V, H, W, 3].

    Returns the network and a history (``loss`` per epoch, ``pairs`` used, ``train_acc``:
    the final preference accuracy on the training pairs). ``log(epoch, loss)`` is called
    after every epoch if given.
    """
    a, b, y = usable_pairs(a, b, labels, cfg.no_preference)
    if len(y) == 0:
        raise ValueError("no usable preference pairs (all unlabelled, or all ties with "
                         "no_preference='drop'); label more pairs or use no_preference=tie")
    torch.manual_seed(cfg.seed)
    gen = np.random.default_rng(cfg.seed)
    net = BTRewardNet(num_views or frames.shape[1], cfg).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    history: dict[str, Any] = {"loss": [], "pairs": len(y)}
    for epoch in range(cfg.epochs):
        net.train()
        order = gen.permutation(len(y))
        total = 0.0
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i:i + cfg.batch_size]
            both = np.concatenate([a[idx], b[idx]])
            x = torch.as_tensor(np.ascontiguousarray(frames[both])).to(device)
            r = net(x, shift=cfg.shift)
            loss = bradley_terry_loss(r[:len(idx)], r[len(idx):],
                                      torch.as_tensor(y[idx], device=device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        history["loss"].append(total / len(y))
        if log is not None:
            log(epoch, history["loss"][-1])
    used = np.unique(np.concatenate([a, b]))
    r = np.zeros(len(frames), np.float32)
    r[used] = rewards(net, frames, used)
    history["train_acc"] = preference_accuracy(r, a, b, y)[0]
    return net, history


def fit_normaliser(reward: np.ndarray, q: float = 0.02) -> tuple[float, float]:
    """``(lo, hi)``: the ``q`` and ``1 - q`` quantiles of rewards (hi > lo guaranteed)."""
    lo, hi = (float(v) for v in np.quantile(np.asarray(reward, np.float64), [q, 1.0 - q]))
    return (lo, hi) if hi > lo else (lo, lo + 1e-6)


def save_bt(path: str | Path, net: BTRewardNet, cfg: BTConfig, cameras: Sequence[str],
            normaliser: tuple[float, float], info: Mapping[str, Any] | None = None) -> Path:
    """Write a checkpoint (see the module docstring)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save({"format": FORMAT, "version": FORMAT_VERSION, "config": asdict(cfg),
                "cameras": list(cameras), "normaliser": [float(v) for v in normaliser],
                "state_dict": net.state_dict(), **dict(info or {})}, tmp)
    tmp.replace(path)
    return path


def load_bt(path: str | Path, device: str | torch.device = "cpu"
            ) -> tuple[BTRewardNet, dict[str, Any]]:
    """``(network in eval mode, checkpoint dict without the weights)``."""
    path = Path(path)
    if path.is_dir():
        path = path / "bt.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no Bradley-Terry checkpoint at {path}; train one with "
                                "`embodied reward bt task=<task>` (it writes <run>/bt.pt)")
    ckpt = load_weights(path, "Bradley-Terry checkpoint", device)
    if not isinstance(ckpt, dict) or (ckpt.get("format"), ckpt.get("version")) != (
            FORMAT, FORMAT_VERSION):
        raise ValueError(f"{path}: format {ckpt.get('format')} v{ckpt.get('version')}, "
                         f"expected {FORMAT} v{FORMAT_VERSION}")
    known = {f.name for f in fields(BTConfig)}
    cfg = BTConfig(**{k: v for k, v in ckpt["config"].items() if k in known})
    net = BTRewardNet(len(ckpt["cameras"]), cfg).to(device)
    net.load_state_dict(ckpt.pop("state_dict"))
    net.eval()
    return net, ckpt


class BradleyTerryReward(RewardModel):
    """A trained Bradley-Terry reward network (``checkpoint``: bt.pt or its run folder).

    The frames must have the cameras it was trained on (picked by name when ``cameras``
    is passed to ``score``). No success estimate.
    """

    def __init__(self, checkpoint: str | Path | None = None, device: str = "cpu",
                 batch_size: int = 256) -> None:
        if checkpoint is None:
            raise ValueError("reward model 'bt' needs a checkpoint: train one with "
                             "`embodied reward bt task=<task>` and pass "
                             "reward.model.checkpoint=<its run folder or bt.pt>")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.net, self.info = load_bt(checkpoint, self.device)
        self.camera_names = tuple(self.info["cameras"])
        self.image_size = (self.net.image_size, self.net.image_size)
        self.lo, self.hi = self.info["normaliser"]
        self.batch_size = int(batch_size)

    def _score(self, frames: torch.Tensor | None, instructions: list[str],
               state: Mapping[str, Any] | None) -> RewardOutput:
        assert frames is not None  # score() checked
        r = torch.from_numpy(rewards(self.net, frames, batch_size=self.batch_size))
        progress = ((r - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
        return RewardOutput(progress=progress.float().to(self.device))


__all__ = ["BTConfig", "BTRewardNet", "BradleyTerryReward", "bradley_terry_loss",
           "fit_normaliser", "load_bt", "preference_accuracy", "rewards", "save_bt",
           "train_bradley_terry", "usable_pairs"]
