"""Running mean/variance normalisation of observations, as a module.

The statistics are buffers, so they live in the policy's ``state_dict``: they are
checkpointed, resumed and exported with the networks (a normaliser lost on resume
is a classic bug of rsl_rl / SB3 VecNormalize set-ups).
"""

from __future__ import annotations

import torch
from torch import nn


class EmpiricalNormalization(nn.Module):
    """``(x - mean) / (std + eps)`` with statistics over every sample seen in training.

    Calling the module in training mode (``.train()``) first folds the batch into
    the statistics; in eval mode (``.eval()``) the statistics are frozen.
    ``normalize`` never updates (used e.g. for bootstrap values of final observations).
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, shape: int | tuple[int, ...], eps: float = 1e-2):
        super().__init__()
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = eps
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    @property
    def std(self) -> torch.Tensor:
        """Standard deviation of the samples seen so far."""
        return self.var.sqrt()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x`` [..., *shape]; in training mode update the statistics first."""
        if self.training:
            self.update(x)
        return self.normalize(x)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise with the current statistics, without updating them."""
        return (x - self.mean) / (self.std + self.eps)

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge a batch ``x`` [N, *shape] into the statistics (Chan et al. parallel update)."""
        x = x.reshape(-1, *self.mean.shape).to(self.mean.dtype)
        n = x.shape[0]
        if n == 0:
            return
        batch_mean = x.mean(0)
        batch_var = x.var(0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        frac = n / total
        self.mean += delta * frac
        self.var.copy_(self.var * (1 - frac) + batch_var * frac
                       + delta.square() * frac * (1 - frac))
        self.count.copy_(total)
