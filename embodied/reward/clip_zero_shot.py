"""Zero-shot CLIP/SigLIP reward with goal-baseline projection (VLM-RM, Rocamonde et al. 2023).

With unit-norm embeddings ``x`` (image), ``g`` (goal text) and ``b`` (baseline text),

    R = 1 - 0.5 * |(x - g) P|^2,   P = a * d d^T / |d|^2 + (1 - a) * I,   d = g - b.

``a = 0`` gives the plain cosine similarity ``x . g``; ``a = 1`` keeps only the component
along the baseline-to-goal direction, which removes what the goal and baseline
descriptions share ("a robot arm" in both). For unit vectors and ``a`` in [0, 1], P's
eigenvalues are 1 (along d) and 1 - a, so ``|(x - g) P| <= |x - g| <= 2`` and R lies in
[-1, 1]. Progress is the affine map ``(R - lo) / (hi - lo)`` clamped to [0, 1], with
``reward_range = (lo, hi)`` defaulting to (-1, 1), the exact range (no clamping).
Real CLIP rewards sit in a narrow band (cosines of about 0.2-0.35); narrow
``reward_range`` to that band, measured on the task's frames, to spread progress over
[0, 1]; shaping is unaffected by the offset and scales with the slope.

The goal text is the env's instruction (through ``goal_template``), the baseline text
is configurable. Multi-view fusion: ``mean``/``min``/``max`` of the per-view rewards, or
``embedding`` (average the views' unit image embeddings, renormalise, then score).

Models load with transformers' ``AutoModel``/``AutoProcessor`` from a local folder or a
hub id (``model``); any model with ``get_image_features``/``get_text_features`` works
(CLIP, SigLIP, SigLIP 2). Needs the ``vlm`` extra. Only the image processor of the
processor is used for pixels (no video processor, so torchvision is not needed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch

from embodied.reward.base import RewardModel, RewardOutput

Fusion = Literal["mean", "min", "max", "embedding"]


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def projection_matrix(goal: torch.Tensor, baseline: torch.Tensor, alpha: float) -> torch.Tensor:
    """VLM-RM's ``P = a d d^T / |d|^2 + (1 - a) I`` [D, D], ``d = g - b`` (unit g, b)."""
    d = _unit(goal) - _unit(baseline)
    eye = torch.eye(d.shape[-1], dtype=d.dtype, device=d.device)
    return alpha * torch.outer(d, d) / d.dot(d).clamp_min(1e-12) + (1.0 - alpha) * eye


def goal_baseline_reward(x: torch.Tensor, goal: torch.Tensor, baseline: torch.Tensor,
                         alpha: float) -> torch.Tensor:
    """``R = 1 - 0.5 |(x - g) P|^2`` [...] for image embeddings x [..., D].

    ``goal`` [..., D] broadcasts against x (one goal per sample allowed), ``baseline``
    [D] or broadcastable; all are normalised here. Computed without forming P:
    ``v P = a (v . d) d / |d|^2 + (1 - a) v`` (P is symmetric).
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    x, g, b = _unit(x), _unit(goal), _unit(baseline)
    d = g - b
    v = x - g
    along = (v * d).sum(-1, keepdim=True) / (d * d).sum(-1, keepdim=True).clamp_min(1e-12)
    vp = alpha * along * d + (1.0 - alpha) * v
    return 1.0 - 0.5 * vp.square().sum(-1)


def _features(out: Any) -> torch.Tensor:
    """Embeddings from ``get_*_features``: a tensor (transformers 4) or an output (5)."""
    if isinstance(out, torch.Tensor):
        return out
    pooled = getattr(out, "pooler_output", None)
    if pooled is None:
        raise RuntimeError(f"cannot find embeddings in {type(out).__name__}")
    return pooled


class ClipZeroShotReward(RewardModel):
    """CLIP/SigLIP goal-baseline reward as progress in [0, 1] (see the module docstring).

    ``model``: local folder or hub id. ``baseline``: the baseline text. ``alpha``: the
    projection strength. ``goal_template``: formats the instruction into the goal text.
    ``fusion``: how views combine. ``camera_names``: the views to use (None: all given).
    ``reward_range``: (lo, hi) of R mapped to progress 0 and 1. ``batch_size``: images
    per forward pass. ``device``: "cpu", "cuda", ... or "auto".
    """

    def __init__(self, model: str, baseline: str = "a robot arm", alpha: float = 0.5,
                 goal_template: str = "{instruction}", fusion: Fusion = "mean",
                 camera_names: Sequence[str] | None = None,
                 reward_range: Sequence[float] = (-1.0, 1.0), batch_size: int = 64,
                 device: str = "cpu", local_files_only: bool = False) -> None:
        try:
            from transformers import AutoModel, AutoProcessor
        except ImportError as err:
            raise ImportError("the clip reward model needs transformers: "
                              "pip install -e '.[vlm]'") from err
        if fusion not in ("mean", "min", "max", "embedding"):
            raise ValueError(f"fusion must be mean, min, max or embedding, got '{fusion}'")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        lo, hi = (float(v) for v in reward_range)
        if not hi > lo:
            raise ValueError(f"reward_range must be (lo, hi) with hi > lo, got {reward_range}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.model_name = model
        self.model = AutoModel.from_pretrained(model, local_files_only=local_files_only)
        self.model.to(self.device).eval()
        processor = AutoProcessor.from_pretrained(model, local_files_only=local_files_only)
        self.image_processor = getattr(processor, "image_processor", processor)
        self.tokenizer = getattr(processor, "tokenizer", None)
        if self.tokenizer is None or not hasattr(self.model, "get_image_features"):
            raise ValueError(f"'{model}' is not an image-text dual encoder (CLIP/SigLIP): "
                             "it needs a tokenizer, an image processor and get_image_features")
        self.baseline = baseline
        self.alpha = float(alpha)
        self.goal_template = goal_template
        self.fusion: Fusion = fusion
        self.camera_names = tuple(camera_names) if camera_names else None
        self.reward_range = (lo, hi)
        self.batch_size = int(batch_size)
        self.image_size = self._processor_size()
        self._text_cache: dict[str, torch.Tensor] = {}

    def _processor_size(self) -> tuple[int, int] | None:
        for key in ("crop_size", "size"):
            size = getattr(self.image_processor, key, None)
            h = getattr(size, "height", None) or (size.get("height") if isinstance(size, dict)
                                                  else None)
            w = getattr(size, "width", None) or (size.get("width") if isinstance(size, dict)
                                                 else None)
            if h and w:
                return int(h), int(w)
        return None

    @torch.inference_mode()
    def embed_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Unit text embeddings [N, D] (cached per string)."""
        new = [t for t in dict.fromkeys(texts) if t not in self._text_cache]
        if new:
            siglip = "siglip" in getattr(self.model.config, "model_type", "")
            max_len = getattr(getattr(self.model.config, "text_config", None),
                              "max_position_embeddings", None)
            tok = self.tokenizer(new, padding="max_length" if siglip else True,
                                 truncation=True, max_length=max_len, return_tensors="pt")
            kwargs = {k: tok[k].to(self.device) for k in ("input_ids", "attention_mask")
                      if k in tok}
            emb = _unit(_features(self.model.get_text_features(**kwargs)).float())
            self._text_cache.update(zip(new, emb, strict=True))
        return torch.stack([self._text_cache[t] for t in texts])

    @torch.inference_mode()
    def embed_images(self, images: torch.Tensor) -> torch.Tensor:
        """Unit image embeddings [N, D] of uint8 images [N, H, W, 3]."""
        arrays = list(images.cpu().numpy())
        out = []
        for i in range(0, len(arrays), self.batch_size):
            pixels = self.image_processor(images=arrays[i:i + self.batch_size],
                                          return_tensors="pt")["pixel_values"]
            pixels = pixels.to(self.device, next(self.model.parameters()).dtype)
            out.append(_features(self.model.get_image_features(pixel_values=pixels)).float())
        return _unit(torch.cat(out))

    def rewards(self, frames: torch.Tensor, instructions: list[str]) -> torch.Tensor:
        """The fused goal-baseline reward R [B] (before the map to progress)."""
        b, v = frames.shape[:2]
        x = self.embed_images(frames.reshape(b * v, *frames.shape[2:])).reshape(b, v, -1)
        goals = self.embed_text([self.goal_template.format(instruction=s)
                                 for s in instructions])  # [B, D]
        base = self.embed_text([self.baseline])[0]
        if self.fusion == "embedding":
            return goal_baseline_reward(_unit(x.mean(1)), goals, base, self.alpha)
        r = goal_baseline_reward(x, goals[:, None], base, self.alpha)  # [B, V]
        return {"mean": r.mean, "min": lambda d: r.min(d).values,
                "max": lambda d: r.max(d).values}[self.fusion](1)

    def _score(self, frames: torch.Tensor | None, instructions: list[str],
               state: Mapping[str, Any] | None) -> RewardOutput:
        assert frames is not None  # score() checked
        lo, hi = self.reward_range
        progress = ((self.rewards(frames, instructions) - lo) / (hi - lo)).clamp(0.0, 1.0)
        return RewardOutput(progress=progress.float())


__all__ = ["ClipZeroShotReward", "goal_baseline_reward", "projection_matrix"]
