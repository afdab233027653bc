"""Choose where a VLM reward model's prompts are answered: locally or by a server.

``make_chat(model, server, ...)`` returns a backend with ``generate(rows,
max_new_tokens) -> answers``: ``VlmChat`` (the model loaded in this process) when
``server`` is None or has no ``url``, else ``ServerChat`` (an OpenAI-compatible
endpoint). ``server.cache`` (a file path) wraps either in ``CachedChat``.

``server`` keys (``configs/reward/*.yaml``: ``reward.server.*``): ``url`` (base URL,
``http://host:port/v1``), ``model`` (the served name; None: the ``model`` argument),
``api_key`` (None: ``$OPENAI_API_KEY``, else none), ``max_in_flight``, ``timeout``
(seconds per request), ``retries``, ``cache``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from embodied.reward.vlm.cache import CachedChat, Chat

SERVER_KEYS = ("url", "model", "api_key", "max_in_flight", "timeout", "retries", "cache")


def make_chat(model: str, server: Mapping[str, Any] | None = None, *, batch_size: int = 8,
              device: str = "cpu", dtype: str = "float32", system_prompt: str | None = None,
              local_files_only: bool = False) -> Chat:
    """The prompting backend of a reward model (module docstring)."""
    server = dict(server or {})
    unknown = sorted(set(server) - set(SERVER_KEYS))
    if unknown:
        raise ValueError(f"unknown reward.server key(s) {unknown}; known: {list(SERVER_KEYS)}")
    chat: Chat
    if server.get("url"):
        from embodied.reward.vlm.remote import ServerChat

        chat = ServerChat(str(server["url"]), str(server.get("model") or model),
                          api_key=server.get("api_key") or os.environ.get("OPENAI_API_KEY"),
                          max_in_flight=int(server.get("max_in_flight") or 8),
                          timeout=float(server.get("timeout") or 60.0),
                          retries=int(server.get("retries", 3)), system_prompt=system_prompt)
    else:
        from embodied.reward.vlm.chat import VlmChat

        chat = VlmChat(model, batch_size=batch_size, device=device, dtype=dtype,
                       system_prompt=system_prompt, local_files_only=local_files_only)
    if server.get("cache"):
        chat = CachedChat(chat, server["cache"])
    return chat


__all__ = ["SERVER_KEYS", "make_chat"]
