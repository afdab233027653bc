"""The command registry: every CLI verb registers itself here once, with :func:`command`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from omegaconf import DictConfig

Run = Callable[[DictConfig], Any]
F = TypeVar("F", bound=Run)


@dataclass(frozen=True)
class Command:
    """One CLI verb.

    ``name`` is what users type (``"train"``, ``"reward train"``); ``config`` the
    file under ``configs/commands/`` (the command module's name); ``errors`` the
    exceptions that mean bad input (they name the file or value and the fix): the
    CLI prints them as one ``error: ...`` line with exit code 2, no traceback.
    """

    name: str
    help: str
    run: Run
    config: str
    errors: tuple[type[BaseException], ...] = ()


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, errors: tuple[type[BaseException], ...] = ()
            ) -> Callable[[F], F]:
    """Decorator: register the function as the command ``name``.

    Its config is ``configs/commands/<module>.yaml``, named after the module that
    defines it (``embodied/commands/reward_train.py`` -> ``reward_train.yaml``).
    """

    def add(run: F) -> F:
        if name in COMMANDS:
            raise ValueError(f"command '{name}' is registered twice")
        COMMANDS[name] = Command(name, help, run, run.__module__.rsplit(".", 1)[-1], errors)
        return run

    return add
