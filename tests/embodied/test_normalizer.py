"""EmpiricalNormalization: running statistics, frozen in eval mode, saved as buffers."""

from __future__ import annotations

import torch

from embodied.rl import ActorCritic, EmpiricalNormalization


def test_running_statistics_match_the_data_and_normalise():
    gen = torch.Generator().manual_seed(0)
    data = torch.randn(3, 500, 4, generator=gen) * torch.tensor([1.0, 2.0, 0.5, 3.0]) + 5.0
    norm = EmpiricalNormalization(4, eps=0.0)
    for batch in data:  # three updates, merged
        norm(batch)
    flat = data.reshape(-1, 4)
    assert norm.count.item() == 1500
    torch.testing.assert_close(norm.mean, flat.mean(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(norm.var, flat.var(0, unbiased=False), rtol=1e-4, atol=1e-4)
    out = norm.normalize(flat)
    torch.testing.assert_close(out.mean(0), torch.zeros(4), rtol=0, atol=1e-4)
    torch.testing.assert_close(out.std(0, unbiased=False), torch.ones(4), rtol=0, atol=1e-4)


def test_eval_mode_and_normalize_do_not_update():
    norm = EmpiricalNormalization(2)
    norm(torch.randn(10, 2))
    before = {k: v.clone() for k, v in norm.state_dict().items()}
    norm.eval()
    norm(torch.randn(10, 2) + 100.0)
    norm.normalize(torch.randn(10, 2) + 100.0)
    for key, value in norm.state_dict().items():
        assert torch.equal(value, before[key]), key
    norm.train()
    norm(torch.randn(10, 2) + 100.0)
    assert norm.count.item() == 20 and norm.mean.min() > 10.0


def test_statistics_are_saved_and_restored_with_the_policy():
    policy = ActorCritic(3, 2, [8], [8])
    policy.normalize(torch.randn(64, 3) * 4 + 2)
    state = policy.state_dict()
    assert {"obs_normalizer.mean", "obs_normalizer.var", "obs_normalizer.count"} <= set(state)
    other = ActorCritic(3, 2, [8], [8])
    other.load_state_dict(state)
    obs = torch.randn(5, 3)
    torch.testing.assert_close(other(obs), policy(obs))
    assert other.obs_normalizer.count.item() == 64
