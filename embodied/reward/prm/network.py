"""The learned multi-view PRM network: per-view encoder, view fusion, instruction, heads.

    views [B, V, H, W, 3] --encoder (shared over views) + view embedding--> [B, V, D]
      --mean over the views present--> [B, D]
    instruction --InstructionEncoder--> [B, D]
    MLP([fused, text, fused * text]) --> progress logits [B, K] (expected value over bins)
                                     --> success logit [B]

A missing view (``present[b, v] = False``) is left out of the mean; training drops
views at random (``view_dropout``) so every subset of cameras gives sensible scores.

Temporal context (``context: start``): the views of the episode's first state follow
the current views as extra slots (named ``<camera>@start``, ``start_slots``), averaged
on their own and given to the head beside the current state's, so progress can be
judged against where the episode began and its direction is visible. Without them
(all start slots absent) the model scores the current state alone.
The per-view encoder is a small CNN trained from scratch (``encoder: cnn``) or a
pretrained vision tower loaded with transformers from a local path or hub id
(``encoder: hf``, frozen by default).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from embodied.reward.prm.labels import expected_progress
from embodied.reward.prm.text import InstructionEncoder


@dataclass
class PRMConfig:
    """Architecture of the PRM (stored in its checkpoint)."""

    cameras: list[str] = field(default_factory=lambda: ["front", "side", "wrist"])
    num_bins: int = 21
    image_size: int = 64           # views are resized to this (cnn encoder)
    encoder: str = "cnn"           # cnn | hf
    vision_model: str | None = None  # encoder=hf: local folder or hub id (AutoModel)
    freeze_vision: bool = True     # encoder=hf: train only the layers above the tower
    channels: list[int] = field(default_factory=lambda: [32, 64, 64])
    dim: int = 128
    text: str = "minilm"           # minilm | learned
    view_dropout: float = 0.25
    context: str = "none"          # none | start (the episode's first views as extra slots)
    fusion: str = "mean"           # mean | concat (how the views' features are joined)

    def __post_init__(self) -> None:
        """Reject unknown choices with the valid ones named."""
        if self.fusion not in ("mean", "concat"):
            raise ValueError(f"model.fusion must be 'mean' or 'concat', got '{self.fusion}'")
        if self.context not in ("none", "start"):
            raise ValueError(f"model.context must be 'none' or 'start', got '{self.context}'")
        if self.encoder not in ("cnn", "hf"):
            raise ValueError(f"model.encoder must be 'cnn' or 'hf', got '{self.encoder}'")


START_SUFFIX = "@start"


def start_slots(cameras: list[str]) -> list[str]:
    """Slot names of the episode's first views of ``cameras`` (``front`` -> ``front@start``)."""
    return [f"{c}{START_SUFFIX}" for c in cameras]


def masked_mean(feats: torch.Tensor, present: torch.Tensor | None) -> torch.Tensor:
    """Mean over dim 1 of ``feats`` [B, V, F] of the ``present`` [B, V] rows (0 if none)."""
    if present is None:
        return feats.mean(1)
    weight = present.to(feats.dtype).unsqueeze(-1)
    return (feats * weight).sum(1) / weight.sum(1).clamp_min(1.0)


class ConvEncoder(nn.Module):
    """A small CNN from scratch: [N, 3, S, S] in [0, 1] -> [N, dim] (keeps the layout).

    A patchify stem (kernel = stride = 4) then stride-2 3x3 convolutions: about 2.2M
    multiply-adds per 64x64 view, so thousands of views per second on two CPU cores.
    """

    def __init__(self, channels: list[int], image_size: int, dim: int) -> None:
        super().__init__()
        layers = [nn.Conv2d(3, channels[0], 4, stride=4), nn.ReLU(inplace=True)]
        size = image_size // 4
        for c_in, c in itertools.pairwise(channels):
            layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.ReLU(inplace=True)]
            size = (size + 1) // 2
        self.conv = nn.Sequential(*layers)
        self.fc = nn.Linear(channels[-1] * size * size, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features [N, dim] of images ``x`` [N, 3, S, S] in [0, 1]."""
        return self.fc(self.conv(x - 0.5).flatten(1))


class HFVisionEncoder(nn.Module):
    """A transformers vision tower (CLIP, SigLIP, ...) -> pooled features -> [N, dim]."""

    def __init__(self, name: str, dim: int, freeze: bool = True) -> None:
        super().__init__()
        from transformers import AutoConfig, AutoModel

        cfg = AutoConfig.from_pretrained(name)
        model = AutoModel.from_pretrained(name)
        self.tower = getattr(model, "vision_model", model)
        vision_cfg = getattr(cfg, "vision_config", cfg)
        self.image_size = int(vision_cfg.image_size)
        mean, std = _image_stats(name)
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)
        self.freeze = freeze
        if freeze:
            self.tower.requires_grad_(False).eval()
        self.proj = nn.Linear(int(vision_cfg.hidden_size), dim)

    def train(self, mode: bool = True) -> HFVisionEncoder:
        """Set the training mode; a frozen tower stays in eval mode."""
        super().train(mode)
        if self.freeze:
            self.tower.eval()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features [N, dim] of images ``x`` [N, 3, H, W] in [0, 1].

        Images are resized to the tower's input size.
        """
        x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear",
                          align_corners=False, antialias=True)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.freeze):
            out = self.tower(pixel_values=(x - self.mean) / self.std)
        pooled = getattr(out, "pooler_output", None)
        if pooled is None:
            pooled = out.last_hidden_state.mean(1)
        return self.proj(pooled)


def _image_stats(name: str) -> tuple[list[float], list[float]]:
    """image_mean/std of a local model's preprocessor_config.json; 0.5/0.5 otherwise."""
    path = Path(name) / "preprocessor_config.json"
    if path.is_file():
        cfg = json.loads(path.read_text())
        if "image_mean" in cfg and "image_std" in cfg:
            return list(cfg["image_mean"]), list(cfg["image_std"])
    return [0.5] * 3, [0.5] * 3


class MultiViewPRM(nn.Module):
    """Frames + instructions -> progress logits [B, K] and success logits [B]."""

    def __init__(self, cfg: PRMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        if cfg.encoder == "cnn":
            self.encoder: nn.Module = ConvEncoder(cfg.channels, cfg.image_size, cfg.dim)
        elif cfg.encoder == "hf":
            if not cfg.vision_model:
                raise ValueError("encoder=hf needs vision_model (a local folder or hub id "
                                 "of a transformers vision model, e.g. a CLIP/SigLIP)")
            self.encoder = HFVisionEncoder(cfg.vision_model, cfg.dim, cfg.freeze_vision)
        else:
            raise ValueError(f"encoder must be 'cnn' or 'hf', got '{cfg.encoder}'")
        self.view_embedding = nn.Parameter(torch.zeros(len(self.slots), cfg.dim))
        views = len(cfg.cameras)
        self.join_views: nn.Module | None = None
        self.join_starts: nn.Module | None = None
        if cfg.fusion == "concat":
            self.join_views = nn.Linear(views * cfg.dim, cfg.dim)
            if cfg.context == "start":
                self.join_starts = nn.Linear(views * cfg.dim, cfg.dim)
        self.text = InstructionEncoder(cfg.text, cfg.dim)
        inputs = (4 if cfg.context == "start" else 3) * cfg.dim
        self.head = nn.Sequential(nn.Linear(inputs, 256), nn.ReLU(inplace=True),
                                  nn.Linear(256, 128), nn.ReLU(inplace=True),
                                  nn.Linear(128, cfg.num_bins + 1))

    @property
    def slots(self) -> list[str]:
        """The view slots in input order: the cameras, then (context start) their starts."""
        cams = list(self.cfg.cameras)
        return cams + start_slots(cams) if self.cfg.context == "start" else cams

    def prepare(self, frames: torch.Tensor) -> torch.Tensor:
        """uint8 [B, V, H, W, 3] -> float [B*V, 3, S, S] in [0, 1] (cnn: resized to S)."""
        b, v, h, w, _ = frames.shape
        x = frames.reshape(b * v, h, w, 3).permute(0, 3, 1, 2).float().div_(255.0)
        size = self.cfg.image_size
        if self.cfg.encoder == "cnn" and (h, w) != (size, size):
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        return x

    def forward(self, frames: torch.Tensor, instructions: list[str],
                present: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``frames`` uint8 [B, V, H, W, 3] in ``slots`` order; ``present`` bool [B, V]."""
        b, v = frames.shape[:2]
        out = self.fuse(self.encoder(self.prepare(frames)).view(b, v, -1), instructions, present)
        return out[:, :-1], out[:, -1]

    def fuse(self, feats: torch.Tensor, instructions: list[str],
             present: torch.Tensor | None = None) -> torch.Tensor:
        """Per-view features [B, V, F] -> head outputs [B, bins + 1].

        Outputs are the progress logits, then the success logit. Views are tagged and averaged (only
        the ``present`` ones; the start slots on their own, zero if none is present) and
        joined with the instruction embedding. ``feats`` may hold only the current views
        (V = len(cameras)): the start slots then count as absent.
        """
        v = len(self.cfg.cameras)
        feats = feats + self.view_embedding[:feats.shape[1]]
        fused = self._join(feats[:, :v], None if present is None else present[:, :v],
                           self.join_views)
        text = self.text(instructions)
        parts = [fused, text, fused * text]
        if self.cfg.context == "start":
            start = torch.zeros_like(fused)
            if feats.shape[1] > v:
                mask = (torch.ones(feats.shape[0], v, dtype=torch.bool, device=feats.device)
                        if present is None else present[:, v:])
                start = self._join(feats[:, v:], mask, self.join_starts)
            parts.insert(1, start)
        return self.head(torch.cat(parts, dim=-1))

    @staticmethod
    def _join(feats: torch.Tensor, present: torch.Tensor | None,
              join: nn.Module | None) -> torch.Tensor:
        """One camera set's features [B, V, F] -> [B, F].

        ``mean`` fusion (``join`` None) averages the present views; ``concat`` zeroes the
        absent ones and maps the concatenation through ``join``, so the head can combine
        what each camera sees (a position seen from two sides) instead of a blend of them.
        """
        if join is None:
            return masked_mean(feats, present)
        if present is not None:
            feats = feats * present.to(feats.dtype).unsqueeze(-1)
        return join(feats.flatten(1))

    def predict(self, frames: torch.Tensor, instructions: list[str],
                present: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Progress [B] (expected value over bins) and success probability [B]."""
        logits, success = self(frames, instructions, present)
        return expected_progress(logits), success.sigmoid()


def view_dropout_mask(batch: int, views: int, p: float, gen: torch.Generator) -> torch.Tensor:
    """bool [B, V]: each view kept with probability 1 - p, at least one view per row."""
    keep = torch.rand(batch, views, generator=gen) >= p
    empty = ~keep.any(1)
    if empty.any():
        pick = torch.randint(views, (int(empty.sum()),), generator=gen)
        keep[empty.nonzero().flatten(), pick] = True
    return keep
