"""What the published-protocol VLM reward models share: a prompting backend and answer counts.

``ProtocolVlmReward`` is an ``EpisodeRewardModel`` whose prompts are answered by
``backend.make_chat`` (the model loaded here, or a server with ``server.url``). Its
subclasses (``roboreward``, ``grm``, ``sarm``) build rows, ask them all at once with
``ask``, and parse the answers; unreadable answers are counted (``num_unparsed`` of
``num_answers``) and warned about at the 1st, 10th, 100th, ... one, and
``last_answers`` holds the raw answers of the last call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import torch

from embodied.reward.episodic import EpisodeRewardModel
from embodied.reward.vlm.backend import make_chat
from embodied.reward.vlm.cache import Row
from embodied.reward.vlm.chat import UnparsedCounter

T = TypeVar("T")


class ProtocolVlmReward(EpisodeRewardModel):
    """Shared constructor arguments of the protocol backends.

    ``model``: local folder or hub id (with a server: its name there unless
    ``server.model`` is set). ``server``: ``backend.make_chat``'s mapping (None or no
    ``url``: local). ``camera_names``: the views to use, in order (None: all given).
    ``max_new_tokens``: answer length. ``batch_size``: rows per local ``generate`` call.
    """

    def __init__(self, model: str, *, server: Mapping[str, Any] | None = None,
                 camera_names: Sequence[str] | None = None, max_new_tokens: int = 16,
                 batch_size: int = 8, system_prompt: str | None = None, device: str = "cpu",
                 dtype: str = "float32", local_files_only: bool = False) -> None:
        super().__init__()
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.chat = make_chat(model, server, batch_size=batch_size, device=device, dtype=dtype,
                              system_prompt=system_prompt, local_files_only=local_files_only)
        self.device = torch.device("cpu")  # frames go to the processor or the wire from the CPU
        self.camera_names = tuple(camera_names) if camera_names else None
        self.max_new_tokens = int(max_new_tokens)
        self.counter = UnparsedCounter(type(self).__name__)
        self.last_answers: list[str] = []

    num_answers = property(lambda self: self.counter.num_answers, doc="answers parsed so far")
    num_unparsed = property(lambda self: self.counter.num_unparsed, doc="unreadable ones")

    def ask(self, rows: Sequence[Row], parse: Callable[[str], T | None],
            fallback: T, what: str) -> list[T]:
        """Answers to ``rows`` (one backend call), parsed; ``fallback`` where unreadable."""
        if not rows:
            return []
        answers = self.chat.generate(list(rows), self.max_new_tokens)
        parsed = [parse(a) for a in answers]
        self.counter.add(answers, parsed, what)
        self.last_answers = answers
        return [fallback if p is None else p for p in parsed]


__all__ = ["ProtocolVlmReward"]
