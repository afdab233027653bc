"""Generative-VLM progress reward: ask any image-text-to-text model how far the task is.

Every env's views (optionally labelled by camera) and the instruction go into one user
turn of the model's chat template; the model answers greedily in a few tokens and the
answer is parsed into progress (``parsing.parse_progress``: percentages, fractions,
bare numbers, words). The batch is left-padded and answered by one ``generate`` call
per ``batch_size`` envs.

Unreadable answers: progress is ``fallback`` (default 0.0, "no progress claimed"), the
answer is counted in ``num_unparsed`` (of ``num_answers``), and a warning with the
running count is logged at the 1st, 10th, 100th, ... unreadable answer. ``last_answers``
holds the raw answers of the last batch for inspection.

Success (optional, ``success_prompt``): a yes/no question, answered from the next-token
logits as P(yes) / (P(yes) + P(no)) in one forward pass; if the tokenizer cannot tell
"yes" from "no" by the first token, the answer is generated and parsed (yes 1, no 0,
unreadable 0.5, counted as unparsed).

Config: ``configs/reward/vlm.yaml`` (``reward=vlm reward.model.model=PATH_OR_HUB_ID``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from embodied.reward.base import RewardModel, RewardOutput
from embodied.reward.vlm.backend import make_chat
from embodied.reward.vlm.chat import UnparsedCounter, view_content
from embodied.reward.vlm.parsing import parse_progress, parse_yes_no

DEFAULT_PROMPT = (
    "The images show a robot from {views} cameras at the same moment. The robot's task: "
    "{instruction}.\nHow much of the task has been completed? Answer with a single "
    "percentage from 0% (not started) to 100% (complete).")
DEFAULT_SUCCESS_PROMPT = (
    "The images show a robot from {views} cameras at the same moment. The robot's task: "
    "{instruction}.\nIs the task complete? Answer yes or no.")


class VlmProgressReward(RewardModel):
    """Progress (and optionally success) of B multi-view observations asked of a VLM.

    ``model``: local folder or hub id. ``prompt``/``success_prompt``: templates with
    ``{instruction}`` and ``{views}`` (the number of views); ``prompt=None`` is
    ``DEFAULT_PROMPT``; ``success_prompt=None`` skips the success question.
    ``camera_names``: the views to use, in order (None: all given). ``label_views``:
    put "<camera>:" (or "view i:") before each image.
    ``max_new_tokens``: answer length. ``batch_size``: envs per ``generate`` call.
    ``fallback``: progress of an unreadable answer. ``dtype``: the weights' dtype.
    ``server``: ``backend.make_chat``'s mapping (with a ``url``: ask that server; the
    success question is then generated and parsed, as servers return no logits here).
    """

    def __init__(self, model: str, prompt: str | None = None,
                 success_prompt: str | None = None,
                 camera_names: Sequence[str] | None = None, label_views: bool = True,
                 max_new_tokens: int = 8, batch_size: int = 8, fallback: float = 0.0,
                 system_prompt: str | None = None, device: str = "cpu",
                 dtype: str = "float32", local_files_only: bool = False,
                 server: Mapping[str, Any] | None = None) -> None:
        prompt = DEFAULT_PROMPT if prompt is None else prompt
        for name, text in (("prompt", prompt), ("success_prompt", success_prompt)):
            if text is not None and "{instruction}" not in text:
                raise ValueError(f"{name} must contain '{{instruction}}' (and may contain "
                                 f"'{{views}}'), got {text!r}")
        if not 0.0 <= fallback <= 1.0:
            raise ValueError(f"fallback progress must be in [0, 1], got {fallback}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.chat = make_chat(model, server, batch_size=batch_size, device=device, dtype=dtype,
                              system_prompt=system_prompt, local_files_only=local_files_only)
        self.device = torch.device("cpu")  # frames go to the processor from the CPU
        self.prompt = prompt
        self.success_prompt = success_prompt
        self.camera_names = tuple(camera_names) if camera_names else None
        self.label_views = label_views
        self.max_new_tokens = int(max_new_tokens)
        self.fallback = float(fallback)
        self.progress_counter = UnparsedCounter("progress")
        self.success_counter = UnparsedCounter("success")
        self.last_answers: list[str] = []

    @property
    def num_answers(self) -> int:
        """Progress answers parsed so far, readable or not."""
        return self.progress_counter.num_answers

    @property
    def num_unparsed(self) -> int:
        """Progress answers so far that could not be read (scored ``fallback``)."""
        return self.progress_counter.num_unparsed

    def _rows(self, frames: torch.Tensor, instructions: list[str], template: str) -> list:
        views = frames.shape[1]
        labels = None
        if self.label_views:
            labels = list(self.camera_names or [f"view {i + 1}" for i in range(views)])
        rows = []
        for obs, instruction in zip(frames.cpu().numpy(), instructions, strict=True):
            text = template.format(instruction=instruction.rstrip("."), views=views)
            rows.append([*view_content(obs, labels), {"type": "text", "text": text}])
        return rows

    def _success(self, frames: torch.Tensor, instructions: list[str]) -> torch.Tensor:
        rows = self._rows(frames, instructions, self.success_prompt)
        choice = getattr(self.chat, "choice_probability", None)
        prob = choice(rows) if choice is not None else None
        if prob is not None:
            return prob.float()
        answers = self.chat.generate(rows, self.max_new_tokens)
        parsed = [parse_yes_no(a) for a in answers]
        self.success_counter.add(answers, parsed, "0.5")
        return torch.tensor([0.5 if p is None else float(p) for p in parsed])

    def _score(self, frames: torch.Tensor | None, instructions: list[str],
               state: Mapping[str, Any] | None) -> RewardOutput:
        assert frames is not None  # score() checked
        answers = self.chat.generate(self._rows(frames, instructions, self.prompt),
                                     self.max_new_tokens)
        parsed = [parse_progress(a) for a in answers]
        self.progress_counter.add(answers, parsed, f"progress {self.fallback}")
        self.last_answers = answers
        progress = torch.tensor([self.fallback if p is None else p for p in parsed],
                                dtype=torch.float32)
        success = self._success(frames, instructions) if self.success_prompt else None
        return RewardOutput(progress=progress, success_prob=success)


__all__ = ["DEFAULT_PROMPT", "DEFAULT_SUCCESS_PROMPT", "VlmProgressReward"]
