"""An on-disk cache of VLM answers, keyed by the request: model, settings, text and frame hashes.

``CachedChat(chat, path)`` answers rows it has seen from an SQLite file and asks
``chat`` (local or a server) only for the others, in one call, so relabelling a
dataset with the same model and prompts does not pay twice. A row's key is the
SHA-256 of the model name, ``max_new_tokens``, the system prompt, every text part and
every image's shape and bytes, in order: a changed prompt, frame or model misses.
Answers are greedy (deterministic), which is what makes reusing them sound.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

Row = Sequence[dict[str, str] | np.ndarray]


class Chat(Protocol):
    """What the prompting backends have in common: one greedy answer per row."""

    model_name: str
    system_prompt: str | None

    def generate(self, rows: Sequence[Row], max_new_tokens: int = 8) -> list[str]:
        """One answer per row (at most ``max_new_tokens`` tokens), in the order of ``rows``."""
        ...


def row_key(row: Row, model: str, max_new_tokens: int, system_prompt: str | None) -> str:
    """The cache key of one row (see the module docstring)."""
    h = hashlib.sha256(f"{model}\0{max_new_tokens}\0{system_prompt or ''}".encode())
    for part in row:
        if isinstance(part, np.ndarray):
            h.update(b"\1" + str(part.shape).encode())
            h.update(np.ascontiguousarray(part).tobytes())
        else:
            h.update(b"\2" + str(part.get("text", "")).encode())
    return h.hexdigest()


class AnswerCache:
    """A key -> answer table in an SQLite file (created with its folder if missing)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, check_same_thread=False)
        self.db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT)")
        self.db.commit()

    def get(self, keys: Sequence[str]) -> dict[str, str]:
        """The stored answers of ``keys`` (keys without one are left out)."""
        found: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            chunk = list(keys[i:i + 500])
            marks = ",".join("?" * len(chunk))
            found.update(self.db.execute(
                f"SELECT key, answer FROM answers WHERE key IN ({marks})", chunk).fetchall())
        return found

    def put(self, items: dict[str, str]) -> None:
        """Store key -> answer pairs, replacing earlier answers of the same keys."""
        self.db.executemany("INSERT OR REPLACE INTO answers VALUES (?, ?)", list(items.items()))
        self.db.commit()

    def __len__(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        """Close the SQLite connection."""
        self.db.close()


class CachedChat:
    """``chat`` with answers served from (and stored into) an ``AnswerCache``.

    ``hits`` / ``misses`` count rows answered from the cache / by ``chat``.
    """

    def __init__(self, chat: Chat, path: str | Path) -> None:
        self.chat = chat
        self.cache = AnswerCache(path)
        self.model_name = chat.model_name
        self.system_prompt = chat.system_prompt
        self.hits = 0
        self.misses = 0

    def __getattr__(self, name: str) -> Any:  # stats of the wrapped backend
        if name == "chat":
            raise AttributeError(name)
        return getattr(self.chat, name)

    def generate(self, rows: Sequence[Row], max_new_tokens: int = 8) -> list[str]:
        """One answer per row; only rows missing from the cache are sent to ``chat``."""
        keys = [row_key(r, self.model_name, max_new_tokens, self.system_prompt) for r in rows]
        known = self.cache.get(keys)
        todo = sorted({k: i for i, k in enumerate(keys) if k not in known}.values())
        if todo:
            answers = self.chat.generate([rows[i] for i in todo], max_new_tokens)
            new = {keys[i]: a for i, a in zip(todo, answers, strict=True)}
            self.cache.put(new)
            known.update(new)
        self.misses += len(todo)
        self.hits += len(rows) - len(todo)
        return [known[k] for k in keys]


__all__ = ["AnswerCache", "CachedChat", "Chat", "Row", "row_key"]
