"""Domain randomisation settings applied per env at reset by the backends."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class DomainRandomization:
    """Ranges sampled uniformly per env at every reset; ``enabled=False`` turns all off.

    Object poses are the task's business; these are the physical parameters
    every task shares.
    """

    enabled: bool = True
    friction_scale: tuple[float, float] = (0.7, 1.3)
    mass_scale: tuple[float, float] = (0.8, 1.2)
    pd_gain_scale: tuple[float, float] = (0.85, 1.15)
    action_latency_steps: tuple[int, int] = (0, 2)  # control steps, inclusive

    def sample(self, low_high: tuple[float, float], n: int, gen: torch.Generator) -> torch.Tensor:
        """``n`` uniform samples in the range (ones when randomisation is off)."""
        if not self.enabled:
            return torch.ones(n, dtype=torch.float64)
        low, high = low_high
        return low + (high - low) * torch.rand(n, generator=gen, dtype=torch.float64)

    def sample_latency(self, n: int, gen: torch.Generator) -> torch.Tensor:
        """Per-env action delay in control steps."""
        if not self.enabled:
            return torch.zeros(n, dtype=torch.long)
        low, high = self.action_latency_steps
        return torch.randint(low, high + 1, (n,), generator=gen)
