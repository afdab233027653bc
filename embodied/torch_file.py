"""Read a file written with ``torch.save`` safely (tensors and plain containers only).

A file that cannot be read that way (corrupt, truncated, empty, or pickling code
objects) is reported as not being a valid file of its kind; torch's own message,
which suggests the unsafe ``weights_only=False``, is not passed on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


class InvalidTorchFileError(ValueError):
    """A file that is not a valid ``torch.save`` file of the expected kind (names it)."""


def load_weights(path: str | Path, what: str = "checkpoint",
                 map_location: str | torch.device = "cpu") -> Any:
    """``torch.load(path, weights_only=True)``, or an error that names the file.

    An :class:`InvalidTorchFileError` names ``path`` and ``what`` it should have been if
    it cannot be read.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidTorchFileError(f"{what} {path} does not exist")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception:  # truncated zip, pickle garbage, foreign objects, ...
        raise InvalidTorchFileError(
            f"{path} is not a valid {what} (corrupt or truncated, or a foreign file); it was "
            "not loaded") from None
