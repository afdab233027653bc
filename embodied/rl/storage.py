"""Rollout storage shaped [T, B, ...] and generalised advantage estimation.

Time limits are not terminal states. For an env that was truncated (its
episode ran out of time) the value of the state it was in, ``V(final_obs)``,
is folded into the last reward, ``r += gamma * V(final_obs)``, and the GAE
recursion then stops at the episode boundary as for any finished episode. A
genuinely terminated env gets no bootstrap, and neither does one whose
simulation diverged (its final observation is meaningless).

Advantage-level shaping: a reward wrapper may hand a shaping term per step
(``add(..., shaping=F)``, a potential's ``gamma * phi(s') - phi(s)``) that is not part
of the reward. Its GAE with no critic (values 0) is added to the advantages; the
returns the critic learns stay those of the reward alone. As GAE is linear in the
rewards and the values, this equals GAE of ``reward + F`` under the critic ``V + phi``
(the potential as a fixed part of the baseline, which the critic cannot learn away).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


def bootstrap_time_outs(rewards: torch.Tensor, final_values: torch.Tensor,
                        truncated: torch.Tensor, terminated: torch.Tensor,
                        diverged: torch.Tensor, gamma: float) -> torch.Tensor:
    """Rewards [B] with ``gamma * V(final_obs)`` added where the episode timed out.

    Only envs that are truncated, not terminated and not diverged bootstrap.
    """
    mask = truncated & ~terminated & ~diverged
    return rewards + gamma * final_values * mask.to(rewards.dtype)


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
                last_values: torch.Tensor, gamma: float, lam: float
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns [T, B] by GAE(gamma, lambda).

    ``dones[t]`` marks that the episode ended at step t (terminated or truncated;
    truncations are expected to be bootstrapped into ``rewards`` already), so
    nothing flows back across it. ``last_values`` [B] is V of the observation
    after the last step.
    """
    steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(last_values)
    next_value = last_values
    for t in reversed(range(steps)):
        not_done = 1.0 - dones[t].to(rewards.dtype)
        delta = rewards[t] + gamma * next_value * not_done - values[t]
        next_advantage = delta + gamma * lam * not_done * next_advantage
        advantages[t] = next_advantage
        next_value = values[t]
    return advantages, advantages + values


class RolloutStorage:
    """One iteration's transitions of every env: tensors [T, B, ...]."""

    def __init__(self, num_steps: int, num_envs: int, obs_dim: int, action_dim: int,
                 device: torch.device | str = "cpu"):
        self.num_steps, self.num_envs = num_steps, num_envs
        shape = (num_steps, num_envs)
        self.obs = torch.zeros(*shape, obs_dim, device=device)  # normalised
        self.actions = torch.zeros(*shape, action_dim, device=device)
        self.action_mean = torch.zeros(*shape, action_dim, device=device)
        self.action_std = torch.zeros(*shape, action_dim, device=device)
        self.log_probs = torch.zeros(shape, device=device)
        self.values = torch.zeros(shape, device=device)
        self.rewards = torch.zeros(shape, device=device)
        self.dones = torch.zeros(shape, dtype=torch.bool, device=device)
        self.advantages = torch.zeros(shape, device=device)
        self.returns = torch.zeros(shape, device=device)
        self.shaping = torch.zeros(shape, device=device)
        self.has_shaping = False  # any step of this rollout carried a shaping term
        self.step = 0

    def add(self, obs: torch.Tensor, actions: torch.Tensor, action_mean: torch.Tensor,
            action_std: torch.Tensor, log_probs: torch.Tensor, values: torch.Tensor,
            rewards: torch.Tensor, dones: torch.Tensor,
            shaping: torch.Tensor | None = None) -> None:
        """Store one step of every env (rewards already time-out bootstrapped).

        ``shaping`` [B]: an advantage-level shaping term of this step (module doc), or None.
        """
        if self.step >= self.num_steps:
            raise IndexError("rollout storage is full; call clear() first")
        t = self.step
        self.obs[t] = obs
        self.actions[t] = actions
        self.action_mean[t] = action_mean
        self.action_std[t] = action_std
        self.log_probs[t] = log_probs
        self.values[t] = values
        self.rewards[t] = rewards
        self.dones[t] = dones
        if shaping is not None:
            self.shaping[t] = shaping
            self.has_shaping = True
        else:
            self.shaping[t] = 0.0
        self.step += 1

    def clear(self) -> None:
        """Start the next rollout."""
        self.step = 0
        self.has_shaping = False

    def compute_returns(self, last_values: torch.Tensor, gamma: float, lam: float) -> None:
        """Fill ``advantages`` and ``returns`` by GAE (in place: usable outside inference mode).

        A rollout with shaping terms gets their critic-free GAE added to the advantages
        only (module doc).
        """
        advantages, returns = compute_gae(self.rewards, self.values, self.dones, last_values,
                                          gamma, lam)
        if self.has_shaping:
            zeros = torch.zeros_like(self.shaping)
            advantages = advantages + compute_gae(self.shaping, zeros, self.dones,
                                                  zeros[0], gamma, lam)[0]
        self.advantages.copy_(advantages)
        self.returns.copy_(returns)

    def minibatches(self, num_mini_batches: int, num_epochs: int
                    ) -> Iterator[dict[str, torch.Tensor]]:
        """Shuffled minibatches over all T*B transitions, ``num_epochs`` passes.

        Advantages are normalised over the whole rollout once. Shuffling uses the
        global torch RNG (seeded and checkpointed by the runner).
        """
        n = self.num_steps * self.num_envs
        adv = self.advantages.flatten()
        flat = {
            "obs": self.obs.flatten(0, 1),
            "actions": self.actions.flatten(0, 1),
            "action_mean": self.action_mean.flatten(0, 1),
            "action_std": self.action_std.flatten(0, 1),
            "log_probs": self.log_probs.flatten(),
            "values": self.values.flatten(),
            "returns": self.returns.flatten(),
            "advantages": (adv - adv.mean()) / (adv.std() + 1e-8),
        }
        size = n // num_mini_batches
        for _ in range(num_epochs):
            perm = torch.randperm(n, device=self.obs.device)
            for i in range(num_mini_batches):
                idx = perm[i * size:(i + 1) * size]
                yield {key: value[idx] for key, value in flat.items()}
