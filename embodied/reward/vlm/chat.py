"""Batched prompting of a generative VLM: images + text in, short answers out.

``VlmChat`` holds a loaded image-text-to-text model and its processor. One call
handles a whole batch: each row is a list of images and a prompt, formatted with the
model's own chat template, left-padded, and answered by one greedy ``generate`` call
per ``batch_size`` rows (or, for yes/no questions, read off one forward pass).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from embodied.reward.vlm.loading import load_vlm

log = logging.getLogger(__name__)


def view_content(views: np.ndarray, labels: Sequence[str] | None) -> list[Any]:
    """One observation's views [V, H, W, 3] as chat content, each after its label if any."""
    content: list[Any] = []
    for i, image in enumerate(views):
        if labels is not None:
            content.append({"type": "text", "text": f"{labels[i]}:"})
        content.append(np.ascontiguousarray(image))
    return content


class UnparsedCounter:
    """Counts unreadable answers and logs a warning at the 1st, 10th, 100th, ... one."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.num_answers = 0
        self.num_unparsed = 0

    def add(self, answers: Sequence[str], parsed: Sequence[Any], fallback: str) -> None:
        """Count ``answers``; a ``None`` in ``parsed`` marks an unreadable one.

        ``fallback`` names the value used instead of an unreadable answer (for the warning).
        """
        self.num_answers += len(answers)
        for answer, value in zip(answers, parsed, strict=True):
            if value is not None:
                continue
            self.num_unparsed += 1
            if math.log10(self.num_unparsed).is_integer():
                log.warning("%d of %d %s answers unreadable so far (latest: %r); using %s",
                            self.num_unparsed, self.num_answers, self.what, answer[:80],
                            fallback)


class VlmChat:
    """Ask a VLM about images, many rows at once.

    ``model``: local folder or hub id of any ``AutoModelForImageTextToText``.
    ``batch_size``: rows per forward pass. ``system_prompt``: an optional system turn.
    """

    def __init__(self, model: str, *, batch_size: int = 8, device: str = "cpu",
                 dtype: str = "float32", system_prompt: str | None = None,
                 local_files_only: bool = False) -> None:
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_name = model
        self.device = torch.device(device)
        self.model, self.processor = load_vlm(model, device=self.device, dtype=dtype,
                                              local_files_only=local_files_only)
        self.tokenizer = self.processor.tokenizer
        self.batch_size = int(batch_size)
        self.system_prompt = system_prompt

    def prompt_text(self, content: Sequence[dict[str, str] | np.ndarray]) -> str:
        """The chat-formatted prompt of one user turn (text parts and images, in order)."""
        parts = [{"type": "image"} if isinstance(c, np.ndarray) else dict(c) for c in content]
        messages = [{"role": "user", "content": parts}]
        if self.system_prompt:
            messages.insert(0, {"role": "system",
                                "content": [{"type": "text", "text": self.system_prompt}]})
        return self.processor.apply_chat_template(messages, add_generation_prompt=True,
                                                  tokenize=False)

    def _inputs(self, rows: Sequence[Sequence[dict[str, str] | np.ndarray]]) -> Any:
        texts = [self.prompt_text(row) for row in rows]
        images = [[c for c in row if isinstance(c, np.ndarray)] for row in rows]
        inputs = self.processor(text=texts, images=images, padding=True, return_tensors="pt")
        dtype = self.model.dtype
        return {k: (v.to(self.device, dtype) if torch.is_floating_point(v) else v.to(self.device))
                for k, v in inputs.items()}

    @torch.inference_mode()
    def generate(self, rows: Sequence[Sequence[dict[str, str] | np.ndarray]],
                 max_new_tokens: int = 8) -> list[str]:
        """Greedy answers, one per row, of at most ``max_new_tokens`` tokens.

        A row is a user turn: ``{"type": "text", ...}`` parts and uint8 [H, W, 3]
        images, in the order the model sees them.
        """
        answers: list[str] = []
        for i in range(0, len(rows), self.batch_size):
            inputs = self._inputs(rows[i:i + self.batch_size])
            out = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                                      pad_token_id=self.tokenizer.pad_token_id)
            new = out[:, inputs["input_ids"].shape[1]:]
            answers += [a.strip() for a in self.tokenizer.batch_decode(
                new, skip_special_tokens=True)]
        return answers

    def _first_token_ids(self, words: Sequence[str]) -> set[int]:
        ids = set()
        for word in words:
            for variant in (word, word.capitalize(), " " + word, " " + word.capitalize()):
                tokens = self.tokenizer.encode(variant, add_special_tokens=False)
                if tokens:
                    ids.add(tokens[0])
        return ids

    @torch.inference_mode()
    def choice_probability(self, rows: Sequence[Sequence[dict[str, str] | np.ndarray]],
                           yes: Sequence[str] = ("yes",),
                           no: Sequence[str] = ("no",)) -> torch.Tensor | None:
        """P(the answer starts with a ``yes`` word rather than a ``no`` word) [N].

        Read from the next-token logits after the prompt (one forward pass, no generation).
        None if the tokenizer cannot tell the two apart by their first token (then ask
        with ``generate`` and parse the text instead).
        """
        yes_ids, no_ids = self._first_token_ids(yes), self._first_token_ids(no)
        shared = yes_ids & no_ids
        yes_ids, no_ids = sorted(yes_ids - shared), sorted(no_ids - shared)
        if not yes_ids or not no_ids:
            return None
        out = []
        for i in range(0, len(rows), self.batch_size):
            inputs = self._inputs(rows[i:i + self.batch_size])
            logits = self.model(**inputs).logits[:, -1].float()  # left padding: last = next
            logp = torch.log_softmax(logits, -1)
            pair = torch.stack([logp[:, yes_ids].logsumexp(-1), logp[:, no_ids].logsumexp(-1)], -1)
            out.append(torch.softmax(pair, -1)[:, 0])
        return torch.cat(out).cpu()


__all__ = ["UnparsedCounter", "VlmChat", "view_content"]
