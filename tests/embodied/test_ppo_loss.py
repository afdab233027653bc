"""PPO's losses on four hand-made samples, computed by hand: the clipped surrogate, the
clipped value loss and the diagnostics, in milliseconds instead of a learning run."""

from __future__ import annotations

import math

import pytest
import torch

from embodied.rl import PPO, ActorCritic, PPOConfig, RolloutStorage

CLIP = 0.2
# Per sample: advantage (before normalisation), probability ratio new/old, old value, return.
ADVANTAGES = [1.0, -1.0, 1.0, -1.0]
RATIOS = [1.5, 1.5, 0.5, 0.5]
OLD_VALUES = [0.5, 0.5, 1.5, 1.0]
RETURNS = [2.0, 0.0, 1.0, 3.0]
VALUE = 1.0  # the critic's output for every sample


def _one_update(value_clip: float | None = CLIP) -> dict[str, float]:
    """One PPO update (one epoch, one minibatch) over the four samples; its statistics."""
    cfg = PPOConfig(num_steps=4, num_epochs=1, num_mini_batches=1, clip=CLIP,
                    value_clip=value_clip, schedule="fixed", actor_hidden=[4], critic_hidden=[4],
                    normalize_obs=False)
    policy = ActorCritic(2, 1, cfg.actor_hidden, cfg.critic_hidden, normalize_obs=False)
    with torch.no_grad():  # actor mean 0 and std 1, critic VALUE, at every observation
        policy.actor[-1].weight.zero_()
        policy.actor[-1].bias.zero_()
        policy.log_std.zero_()
        policy.critic[-1].weight.zero_()
        policy.critic[-1].bias.fill_(VALUE)
    storage = RolloutStorage(4, 1, obs_dim=2, action_dim=1)
    for t, (ratio, old_value) in enumerate(zip(RATIOS, OLD_VALUES, strict=True)):
        action = torch.tensor([[0.3 * t]])
        new_log_prob = -0.5 * action.square().sum(-1) - 0.5 * math.log(2 * math.pi)
        storage.add(torch.randn(1, 2), action, torch.zeros(1, 1), torch.ones(1, 1),
                    new_log_prob - math.log(ratio), torch.tensor([old_value]),
                    torch.zeros(1), torch.zeros(1, dtype=torch.bool))
    storage.advantages.copy_(torch.tensor(ADVANTAGES).reshape(4, 1))
    storage.returns.copy_(torch.tensor(RETURNS).reshape(4, 1))
    return PPO(policy, cfg).update(storage)


def test_clipped_surrogate_takes_the_pessimistic_term():
    stats = _one_update()
    # Advantages are normalised to mean 0, std 1 (unbiased): +-a with a = 1 / sqrt(4/3).
    a = 1.0 / math.sqrt(4.0 / 3.0)
    # loss_i = max(-A r, -A clip(r, 0.8, 1.2)):
    #   A=+a, r=1.5: max(-1.5a, -1.2a) = -1.2a   (no credit beyond the clip)
    #   A=-a, r=1.5: max(+1.5a, +1.2a) = +1.5a   (the full penalty)
    #   A=+a, r=0.5: max(-0.5a, -0.8a) = -0.5a
    #   A=-a, r=0.5: max(+0.5a, +0.8a) = +0.8a
    expected = (-1.2 * a + 1.5 * a - 0.5 * a + 0.8 * a) / 4  # = +0.15a; min() would give -0.15a
    assert stats["loss/policy"] == pytest.approx(expected, rel=1e-5)


def test_clipped_value_loss_takes_the_larger_error():
    stats = _one_update()
    # V = 1 everywhere; the clipped prediction is old + clip(V - old, -0.2, 0.2):
    #   old 0.5, R 2: max((1-2)^2, (0.7-2)^2) = 1.69
    #   old 0.5, R 0: max((1-0)^2, (0.7-0)^2) = 1.0
    #   old 1.5, R 1: max((1-1)^2, (1.3-1)^2) = 0.09
    #   old 1.0, R 3: max((1-3)^2, (1-3)^2)   = 4.0
    assert stats["loss/value"] == pytest.approx((1.69 + 1.0 + 0.09 + 4.0) / 4, rel=1e-5)


def test_value_loss_without_a_clip_is_the_plain_squared_error():
    stats = _one_update(value_clip=None)
    # V = 1 everywhere, returns 2, 0, 1, 3: (1 + 1 + 0 + 4) / 4, the old values play no part
    assert stats["loss/value"] == pytest.approx(6.0 / 4, rel=1e-5)


def test_diagnostics_of_the_update():
    stats = _one_update()
    assert stats["loss/entropy"] == pytest.approx(0.5 + 0.5 * math.log(2 * math.pi), rel=1e-6)
    assert stats["clip_fraction"] == pytest.approx(1.0)  # every |r - 1| exceeds 0.2
    kl = sum((r - 1) - math.log(r) for r in RATIOS) / len(RATIOS)
    assert stats["approx_kl"] == pytest.approx(kl, rel=1e-5)
