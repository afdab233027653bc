"""The distilled potential's fitting: the fused optimiser gives the plain Adam's fit."""

from __future__ import annotations

import copy

import pytest
import torch

from embodied.reward.rl_wrapper import DistillConfig, Distiller


def test_fused_fitting_matches_plain_adam_steps():
    torch.manual_seed(0)
    cfg = DistillConfig(hidden=[32, 32], updates=4, batch_size=16, buffer_size=64)
    d = Distiller(5, cfg, seed=3)
    ref = copy.deepcopy(d.mlp)
    opt = torch.optim.Adam(ref.parameters(), lr=cfg.learning_rate, foreach=False, fused=False)
    gen = torch.Generator().manual_seed(3)
    data = torch.Generator().manual_seed(1)
    for _ in range(20):
        obs, progress = torch.randn(8, 5, generator=data), torch.rand(8, generator=data)
        d.add(obs, progress)
        # the same steps by hand: the buffer, the normaliser, minibatches of the same draws
        ref.norm.update(obs)
        for _ in range(cfg.updates):
            pick = torch.randint(d.size, (min(cfg.batch_size, d.size),), generator=gen)
            loss = (ref(d.obs[pick]) - d.target[pick]).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    x = torch.randn(100, 5, generator=data)
    with torch.no_grad():
        torch.testing.assert_close(d.mlp(x), ref(x), rtol=1e-5, atol=1e-5)
        assert not torch.allclose(d.mlp(x), d.potential(x), atol=1e-3)  # it did learn


def test_relabel_replaces_the_buffer_or_rewrites_only_the_newest_labels():
    data = torch.Generator().manual_seed(0)
    obs, progress = torch.randn(10, 5, generator=data), torch.rand(10, generator=data)
    new = torch.rand(4, generator=data)
    dropping = Distiller(5, DistillConfig(hidden=[8], updates=1, buffer_size=8), seed=0)
    keeping = Distiller(5, DistillConfig(hidden=[8], updates=1, buffer_size=8,
                                         keep_older_labels=True), seed=0)
    for d in (dropping, keeping):
        d.add(obs[:6], progress[:6])
        d.add(obs[6:], progress[6:])  # 10 states into 8 places: the ring wrapped
    dropping.relabel(obs[6:], new)
    assert dropping.size == 4 and torch.equal(dropping.obs[:4], obs[6:])
    assert torch.equal(dropping.target[:4], new)
    keeping.relabel(obs[6:], new)
    assert keeping.size == 8
    by_state = {tuple(o.tolist()): float(t) for o, t in zip(keeping.obs, keeping.target,
                                                            strict=True)}
    assert by_state == {tuple(o.tolist()): float(t) for o, t in zip(
        obs[2:], torch.cat([progress[2:6], new]), strict=True)}
    with pytest.raises(ValueError, match="newest"):  # not the newest states
        keeping.relabel(obs[5:9], new)
