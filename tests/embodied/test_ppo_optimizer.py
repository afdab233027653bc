"""PPO's optimiser: fused Adam on the CPU, with the same updates as the reference Adam."""

from __future__ import annotations

import torch

from embodied.rl import PPO, ActorCritic, PPOConfig, RolloutStorage


def _storage(seed: int) -> RolloutStorage:
    gen = torch.Generator().manual_seed(seed)
    storage = RolloutStorage(8, 16, obs_dim=5, action_dim=2)
    for _ in range(8):
        storage.add(torch.randn(16, 5, generator=gen), torch.randn(16, 2, generator=gen),
                    torch.zeros(16, 2), torch.ones(16, 2), torch.randn(16, generator=gen),
                    torch.randn(16, generator=gen), torch.randn(16, generator=gen),
                    torch.zeros(16, dtype=torch.bool))
    storage.compute_returns(torch.zeros(16), gamma=0.99, lam=0.95)
    return storage


def _trained(fused: bool, schedule: str) -> ActorCritic:
    cfg = PPOConfig(num_steps=8, num_epochs=3, num_mini_batches=4, schedule=schedule,
                    actor_hidden=[32, 16], critic_hidden=[32, 16])
    torch.manual_seed(0)
    policy = ActorCritic(5, 2, cfg.actor_hidden, cfg.critic_hidden, cfg.activation,
                         cfg.init_noise_std, normalize_obs=False)
    ppo = PPO(policy, cfg)
    assert ppo.optimizer.param_groups[0]["fused"] is True  # the default on the CPU
    if not fused:
        ppo.optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate,
                                         foreach=False)
    for seed in range(3):
        torch.manual_seed(100 + seed)  # the same minibatch shuffles for both
        ppo.update(_storage(seed))
    return policy


def test_fused_adam_updates_like_the_reference_adam():
    for schedule in ("fixed", "adaptive"):
        fused, reference = _trained(True, schedule), _trained(False, schedule)
        for (name, a), b in zip(fused.state_dict().items(), reference.state_dict().values(),
                                strict=True):
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), (schedule, name)
        changed = _trained(True, schedule).actor[0].weight
        torch.manual_seed(0)
        initial = ActorCritic(5, 2, [32, 16], [32, 16], normalize_obs=False).actor[0].weight
        assert not torch.allclose(changed, initial)  # the updates did move the weights
