"""A name -> entry registry, one per kind of thing (tasks, backends, reward models).

An entry is registered once, under one name. It may be given as a ``"module:attr"``
string, imported on first :meth:`Registry.get`, so that listing the names never
imports an optional dependency (a backend's engine, a reward model's transformers).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def resolve(path: str) -> Any:
    """The object a ``"module:attr"`` path names (importing the module)."""
    module, attr = path.split(":")
    return getattr(importlib.import_module(module), attr)


class Registry(Generic[T]):
    """Entries of one ``kind`` by name; unknown names raise ``error`` naming the known ones.

    The unknown-name message reads ``unknown <kind> '<name>'; <listing> [names]<hint>``.
    """

    def __init__(self, kind: str, error: type[Exception] = KeyError, listing: str = "known:",
                 hint: str = ""):
        self.kind, self.error, self.listing, self.hint = kind, error, listing, hint
        self._entries: dict[str, T | str] = {}

    def register(self, name: str, entry: T | str) -> None:
        """Add ``entry`` (or its ``"module:attr"`` path) under ``name``; a name is taken once."""
        old = self._entries.get(name)
        if old is not None and old is not entry and old != entry:
            raise ValueError(f"{self.kind} name '{name}' is already registered ({old!r})")
        self._entries[name] = entry

    def get(self, name: str) -> T:
        """The entry registered as ``name`` (importing it on first use if given as a path)."""
        if name not in self._entries:
            raise self.error(f"unknown {self.kind} '{name}'; {self.listing} {self.names()}"
                             f"{self.hint}")
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = resolve(entry)
            self._entries[name] = entry
        return entry

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
