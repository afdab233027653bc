"""PPO's linear learning-rate schedule: the rate each update uses, across a resume, and
the settings it refuses."""

from __future__ import annotations

import pytest
import torch

from embodied.config import ConfigError, load_config
from embodied.learners.ppo import PPOLearner
from embodied.rl import PPO, ActorCritic, PPOConfig, RolloutStorage

LR, MIN_LR, DECAY = 1e-3, 1e-5, 4


def _storage() -> RolloutStorage:
    """Two steps of four envs; the schedule does not depend on what they hold."""
    storage, zeros = RolloutStorage(2, 4, obs_dim=3, action_dim=2), torch.zeros(4)
    for step in range(2):
        storage.add(torch.full((4, 3), float(step)), torch.randn(4, 2), torch.zeros(4, 2),
                    torch.ones(4, 2), zeros - 2.0, zeros, torch.arange(4.0), zeros.bool())
    storage.compute_returns(zeros, gamma=0.9, lam=0.95)
    return storage


def _ppo() -> PPO:
    cfg = PPOConfig(num_steps=2, num_epochs=2, num_mini_batches=2, schedule="linear",
                    learning_rate=LR, min_lr=MIN_LR, decay_updates=DECAY,
                    actor_hidden=[8], critic_hidden=[8], normalize_obs=False)
    return PPO(ActorCritic(3, 2, cfg.actor_hidden, cfg.critic_hidden, normalize_obs=False), cfg)


def _rates(ppo: PPO, updates: int) -> list[tuple[float, float]]:
    """(reported rate, the optimiser's rate) of each of ``updates`` updates."""
    storage, rates = _storage(), []
    for _ in range(updates):
        stats = ppo.update(storage)
        rates.append((stats["learning_rate"], ppo.optimizer.param_groups[0]["lr"]))
    return rates


def test_linear_schedule_falls_to_min_lr_and_stays():
    expected = [LR, 0.75 * LR, 0.5 * LR, 0.25 * LR, MIN_LR, MIN_LR]
    for (reported, used), want in zip(_rates(_ppo(), 6), expected, strict=True):
        assert reported == pytest.approx(want) and used == pytest.approx(want)


def test_a_resumed_linear_schedule_continues_where_it_stopped():
    first = _ppo()
    _rates(first, 2)
    resumed = _ppo()
    resumed.load_state_dict(first.state_dict())
    assert _rates(resumed, 1)[0][1] == pytest.approx(0.5 * LR)


@pytest.mark.parametrize("settings, fragment", [
    ({"schedule": "cosine"}, "algo.schedule=cosine: unknown"),
    ({"schedule": "linear"}, "algo.decay_updates=0"),
])
def test_bad_schedule_settings_are_refused(settings, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        PPOConfig(**settings)


@pytest.mark.parametrize("overrides, iterations", [
    ([], 366),                                      # the task's max_iterations
    (["max_iterations=100"], 100),
    (["total_env_steps=5079040"], 620),             # 512 envs x 16 steps per iteration
    (["total_env_steps=3000000", "num_envs=256"], 733),
])
def test_push_lr_decays_over_the_whole_run_however_its_length_is_given(overrides, iterations):
    cfg = load_config("train", ["task=panda_push", *overrides])
    assert cfg.algo.schedule == "linear"
    assert cfg.algo.decay_updates == iterations == PPOLearner.budget(cfg)
