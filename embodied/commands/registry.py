"""The command registry: every CLI verb registers itself here once, with :func:`command`.

Also what an error of any command looks like to its user (:func:`error_line`).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from omegaconf import DictConfig

from embodied.config import ConfigError
from robots.spec import RobotSpecError
from sim.memory import InsufficientMemoryError

Run = Callable[[DictConfig], Any]
F = TypeVar("F", bound=Run)


@dataclass(frozen=True)
class Command:
    """One CLI verb.

    ``name`` is what users type (``"train"``, ``"reward train"``); ``config`` the
    file under ``configs/commands/`` (the command module's name); ``errors`` the
    exceptions that mean bad input (they name the file or value and the fix): the
    CLI prints them as one ``error: ...`` line with exit code 2, no traceback, as it
    does the errors of every command (:data:`COMMON_ERRORS`, :class:`OSError`).
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


# Bad input any command can meet: a config value, a robot.yaml, more envs than memory.
COMMON_ERRORS: tuple[type[BaseException], ...] = (ConfigError, RobotSpecError,
                                                  InsufficientMemoryError)

# What to do about an OS error, by errno (the message names the path and the error).
_OS_FIXES = {
    errno.EACCES: "choose a folder you can write to (or fix its permissions)",
    errno.EPERM: "choose a folder you can write to (or fix its permissions)",
    errno.EROFS: "the file system is read-only: choose a folder on a writable one",
    errno.ENOSPC: "free some space or choose a folder on another disk",
    errno.EDQUOT: "free some space or choose a folder on another disk",
    errno.EFBIG: "the file exceeds the file-size limit (ulimit -f) or the file system's",
}


def error_line(cmd: Command, err: BaseException) -> str | None:
    """The one-line message of an error that means bad input or a bad environment.

    Such errors are the command's ``errors``, :data:`COMMON_ERRORS` and any
    :class:`OSError` (the line names the path and the fix); None for anything else (a
    bug: its traceback is kept).
    """
    if isinstance(err, OSError) and not isinstance(err, (*cmd.errors, *COMMON_ERRORS)):
        where = " -> ".join(str(f) for f in (err.filename, err.filename2) if f is not None)
        what = err.strerror or str(err)
        fix = _OS_FIXES.get(err.errno or 0)
        return (f"{where}: " if where else "") + what + (f"; {fix}" if fix else "")
    if isinstance(err, (*cmd.errors, *COMMON_ERRORS)):
        return str(err)
    return None
