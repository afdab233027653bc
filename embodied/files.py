"""Writing files so that a killed process or a full disk never leaves half a file.

A failed write is an :class:`OSError` naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def atomic_path(path: Path) -> Path:
    """The temporary sibling a write goes to before it is renamed to ``path``."""
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


@contextmanager
def writing(path: str | Path) -> Iterator[Path]:
    """Yield the temporary sibling to write ``path`` through; renamed to ``path`` at the end.

    On failure the temporary is removed, and an :class:`OSError` that names no file (a
    full disk fails the ``write``, not the ``open``) is raised again naming ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic_path(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if err.filename is None or Path(err.filename) == tmp:
            raise OSError(err.errno, err.strerror or str(err), str(path)) from err
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
