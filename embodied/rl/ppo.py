"""PPO's update: clipped surrogate, clipped value loss, entropy bonus, lr schedules."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import nn

from embodied import distributed
from embodied.config import ConfigError
from embodied.rl.actor_critic import ActorCritic
from embodied.rl.storage import RolloutStorage

FUSED_ADAM_DEVICES = ("cpu", "cuda")
SCHEDULES = ("adaptive", "fixed", "linear")


@dataclass
class PPOConfig:
    """PPO hyperparameters (configs/algo/ppo.yaml; per-task overrides in configs/algo/ppo/)."""

    num_steps: int = 32  # steps per env per iteration (rollout length T)
    num_epochs: int = 5
    num_mini_batches: int = 4
    gamma: float = 0.99
    lam: float = 0.95
    clip: float = 0.2
    value_clip: float | None = 0.2  # None: an unclipped value loss
    value_loss_coef: float = 1.0
    entropy_coef: float = 0.005
    learning_rate: float = 1e-3
    schedule: str = "adaptive"  # "adaptive" (KL-driven, rsl_rl), "fixed" or "linear"
    desired_kl: float = 0.01
    min_lr: float = 1e-5
    max_lr: float = 1e-2
    decay_updates: int = 0  # "linear": updates over which the lr falls to min_lr
    max_grad_norm: float = 1.0
    actor_hidden: list[int] = field(default_factory=lambda: [256, 128, 64])
    critic_hidden: list[int] = field(default_factory=lambda: [256, 128, 64])
    activation: str = "elu"
    init_noise_std: float = 1.0
    normalize_obs: bool = True

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PPOConfig:
        """Build from a (Hydra) mapping; unknown keys are an error naming them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known - {"name"})
        if unknown:
            raise ValueError(f"unknown PPO settings {unknown}; known: {sorted(known)}")
        return cls(**{k: v for k, v in values.items() if k in known})

    def __post_init__(self) -> None:
        """Reject (:class:`ConfigError`) an unknown schedule and a linear one without a length."""
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"algo.schedule={self.schedule}: unknown; use one of "
                              f"{', '.join(SCHEDULES)}")
        if self.schedule == "linear" and self.decay_updates <= 0:
            raise ConfigError(f"algo.schedule=linear with algo.decay_updates="
                              f"{self.decay_updates}: set the updates over which the learning "
                              "rate falls, e.g. algo.decay_updates=${max_iterations}")


def make_adam(params: Iterable[nn.Parameter], lr: float, device: torch.device) -> torch.optim.Adam:
    """Adam, fused (one kernel for all parameters) on the devices torch fuses it for.

    The update rule is Adam's either way; fusing removes the per-parameter Python loop
    that dominates the optimiser step for small MLPs on a CPU.
    """
    return torch.optim.Adam(params, lr=lr, fused=device.type in FUSED_ADAM_DEVICES)


class PPO:
    """Proximal policy optimisation (Schulman et al. 2017) over a :class:`RolloutStorage`."""

    def __init__(self, policy: ActorCritic, cfg: PPOConfig):
        self.policy, self.cfg = policy, cfg
        self.learning_rate = cfg.learning_rate
        self.updates = 0  # calls of :meth:`update` so far (the linear schedule's clock)
        device = next(policy.parameters()).device
        self.optimizer = make_adam(policy.parameters(), cfg.learning_rate, device)

    def _set_learning_rate(self, lr: float) -> None:
        """Use ``lr`` from the next optimiser step on."""
        self.learning_rate = lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _decay_learning_rate(self) -> None:
        """The linear schedule's rate for the coming update.

        ``learning_rate`` at the first update, falling linearly to ``min_lr`` at update
        ``decay_updates`` and held there after it.
        """
        cfg = self.cfg
        left = max(0.0, 1.0 - self.updates / cfg.decay_updates)
        self._set_learning_rate(max(cfg.min_lr, cfg.learning_rate * left))

    def _adapt_learning_rate(self, kl: float) -> None:
        """rsl_rl's rule: divide by 1.5 above 2x the target KL, multiply below half of it."""
        cfg = self.cfg
        if kl > 2.0 * cfg.desired_kl:
            self._set_learning_rate(max(cfg.min_lr, self.learning_rate / 1.5))
        elif 0.0 < kl < 0.5 * cfg.desired_kl:
            self._set_learning_rate(min(cfg.max_lr, self.learning_rate * 1.5))

    def update(self, storage: RolloutStorage) -> dict[str, float]:
        """Several epochs of minibatch updates; returns mean losses and diagnostics.

        The linear schedule sets this update's learning rate before it starts (the
        reported ``learning_rate`` is the one the update used).
        """
        cfg, policy = self.cfg, self.policy
        if cfg.schedule == "linear":
            self._decay_learning_rate()
        sums = {"loss/policy": 0.0, "loss/value": 0.0, "loss/entropy": 0.0,
                "approx_kl": 0.0, "clip_fraction": 0.0}
        count = 0
        for mb in storage.minibatches(cfg.num_mini_batches, cfg.num_epochs):
            dist = policy.distribution(mb["obs"])
            log_probs = dist.log_prob(mb["actions"]).sum(-1)
            entropy = dist.entropy().sum(-1).mean()
            values = policy.evaluate(mb["obs"])

            if cfg.schedule == "adaptive":  # KL(old || new) of the two diagonal Gaussians
                with torch.no_grad():
                    old_mu, old_sigma = mb["action_mean"], mb["action_std"]
                    mu, sigma = dist.mean, dist.stddev
                    kl = (torch.log(sigma / old_sigma)
                          + (old_sigma.square() + (old_mu - mu).square()) / (2 * sigma.square())
                          - 0.5).sum(-1).mean().item()
                self._adapt_learning_rate(distributed.mean_over_ranks(kl))

            # clipped surrogate objective
            ratio = torch.exp(log_probs - mb["log_probs"])
            adv = mb["advantages"]
            surrogate = torch.max(-adv * ratio,
                                  -adv * ratio.clamp(1 - cfg.clip, 1 + cfg.clip)).mean()
            # value loss, clipped around the old values unless value_clip is None
            value_loss = (values - mb["returns"]).square()
            if cfg.value_clip is not None:
                old_values = mb["values"]
                clipped = old_values + (values - old_values).clamp(-cfg.value_clip,
                                                                   cfg.value_clip)
                value_loss = torch.max(value_loss, (clipped - mb["returns"]).square())
            value_loss = value_loss.mean()
            loss = surrogate + cfg.value_loss_coef * value_loss - cfg.entropy_coef * entropy

            self.optimizer.zero_grad()
            loss.backward()
            distributed.average_gradients(policy.parameters())  # no-op in one process
            nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            self.optimizer.step()

            with torch.no_grad():
                sums["loss/policy"] += surrogate.item()
                sums["loss/value"] += value_loss.item()
                sums["loss/entropy"] += entropy.item()
                sums["approx_kl"] += ((ratio - 1) - ratio.log()).mean().item()
                sums["clip_fraction"] += ((ratio - 1).abs() > cfg.clip).float().mean().item()
            count += 1
        stats = {key: value / max(count, 1) for key, value in sums.items()}
        stats["learning_rate"] = self.learning_rate
        self.updates += 1
        return stats

    def state_dict(self) -> dict[str, Any]:
        """Optimiser state, the learning rate and the number of updates made."""
        return {"optimizer": self.optimizer.state_dict(), "learning_rate": self.learning_rate,
                "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state.get("updates", 0))  # checkpoints before the count: 0
        self._set_learning_rate(float(state["learning_rate"]))
