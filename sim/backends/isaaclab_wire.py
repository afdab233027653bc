"""The messages between the Isaac Lab worker process and its proxy.

The two processes run different Pythons, torch and numpy versions (Isaac Lab
pins its own), so nothing version-specific crosses the pipe: tensors travel as
(dtype name, shape, raw bytes) inside pickles of builtin types only, over a
``multiprocessing.connection.Connection`` on a socket pair.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import torch

_TENSOR = "__tensor__"
_DTYPES = {torch.float32: "<f4", torch.float64: "<f8", torch.int64: "<i8", torch.int32: "<i4",
           torch.bool: "|b1", torch.uint8: "|u1"}
_TORCH = {v: k for k, v in _DTYPES.items()}


def _pack(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        array = value.detach().cpu().contiguous()
        if array.dtype not in _DTYPES:
            raise TypeError(f"cannot send a tensor of dtype {array.dtype}")
        return (_TENSOR, _DTYPES[array.dtype], tuple(array.shape), array.numpy().tobytes())
    if isinstance(value, dict):
        return {k: _pack(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_pack(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.device):
        return str(value)
    return value


def _unpack(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 4 and value[0] == _TENSOR:
        _, dtype, shape, data = value
        array = np.frombuffer(bytearray(data), dtype=np.dtype(dtype)).reshape(shape)
        return torch.from_numpy(array)
    if isinstance(value, dict):
        return {k: _unpack(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_unpack(v) for v in value)
    return value


def encode(message: Any) -> bytes:
    """Bytes of a message of builtins, tensors and nested dicts/lists/tuples of them."""
    return pickle.dumps(_pack(message), protocol=4)


def decode(data: bytes) -> Any:
    """The message of :func:`encode` (tensors come back as CPU torch tensors)."""
    return _unpack(pickle.loads(data))
