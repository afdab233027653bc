"""The policy: a Gaussian MLP actor with a learned log-std and a separate MLP critic."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.distributions import Normal

from embodied.rl.normalizer import EmpiricalNormalization

ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh}


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int, activation: str = "elu") -> nn.Sequential:
    """``in -> hidden... -> out`` with ``activation`` between layers (none after the last)."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), ACTIVATIONS[activation]()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """Actor ``pi(a | s) = N(mu(s), exp(log_std))`` and critic ``V(s)``.

    The observation normaliser is a submodule, so one ``state_dict`` holds the
    whole policy. ``act``/``evaluate``/``distribution`` take *normalised*
    observations (the rollout stores them normalised); ``forward`` takes raw
    observations and returns the deterministic action: the exported policy.
    """

    def __init__(self, obs_dim: int, action_dim: int,
                 actor_hidden: Sequence[int] = (256, 128, 64),
                 critic_hidden: Sequence[int] = (256, 128, 64),
                 activation: str = "elu", init_noise_std: float = 1.0,
                 normalize_obs: bool = True):
        super().__init__()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.obs_normalizer = EmpiricalNormalization(obs_dim) if normalize_obs else nn.Identity()
        self.actor = mlp(obs_dim, actor_hidden, action_dim, activation)
        self.critic = mlp(obs_dim, critic_hidden, 1, activation)
        self.log_std = nn.Parameter(torch.full((action_dim,), math.log(init_noise_std)))

    def normalize(self, obs: torch.Tensor, update: bool = True) -> torch.Tensor:
        """Normalise raw observations; with ``update``, statistics move in training mode only."""
        norm = self.obs_normalizer
        if not isinstance(norm, EmpiricalNormalization):
            return obs
        return norm(obs) if update else norm.normalize(obs)

    def distribution(self, obs: torch.Tensor) -> Normal:
        """The action distribution at normalised observations [N, obs_dim]."""
        mean = self.actor(obs)
        return Normal(mean, self.log_std.exp().expand_as(mean))

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Normal]:
        """Sample actions; returns (actions, log-prob summed over dims, the distribution)."""
        dist = self.distribution(obs)
        actions = dist.sample()
        return actions, dist.log_prob(actions).sum(-1), dist

    def evaluate(self, obs: torch.Tensor) -> torch.Tensor:
        """State values [N] at normalised observations."""
        return self.critic(obs).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action (the mean) from *raw* observations; for evaluation and export."""
        return self.actor(self.normalize(obs, update=False))
