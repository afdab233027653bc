"""The PPO runner logs each reward term's per-episode mean as `reward/<term>`."""

from __future__ import annotations

import math

import torch

from embodied.rl import OnPolicyRunner, PPOConfig
from embodied.rl.logger import MetricsLogger, RewardTermStats, read_metrics
from sim import make_env
from sim.tasks import get_task

SMALL = PPOConfig(num_steps=8, num_epochs=1, num_mini_batches=2, actor_hidden=[16],
                  critic_hidden=[16])


def test_reward_term_stats_sum_per_episode():
    stats = RewardTermStats(window=10)
    assert stats.means() == {}
    one = torch.ones(3)
    stats.step({"a": one, "b": -2 * one}, None)
    assert all(math.isnan(v) for v in stats.means().values())
    stats.step({"a": one, "b": -2 * one}, torch.tensor([0, 2]))
    stats.step({"a": one, "b": -2 * one}, torch.tensor([1]))
    assert stats.means() == {"reward/a": (2 + 2 + 3) / 3, "reward/b": (-4 - 4 - 6) / 3}
    stats.reset()  # the envs were reset: the episodes in flight are dropped
    stats.step({"a": one, "b": -2 * one}, torch.tensor([0]))
    assert stats.means()["reward/a"] == (2 + 2 + 3 + 1) / 4


def test_runner_logs_every_reward_term(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        env = make_env("panda_reach", num_envs=4, seed=0, nthread=1, episode_length_s=0.2)
        runner = OnPolicyRunner(env, SMALL, tmp_path, save_interval=0, progress=False)
        logger = MetricsLogger(tmp_path)
        row = runner.learn(3, logger)
        logger.close()
    finally:
        torch.set_num_threads(threads)
    names = [f"reward/{t}" for t in get_task("panda_reach").default_config().rewards]
    metrics = read_metrics(tmp_path / "metrics.csv")
    assert set(names) <= set(metrics)
    # every episode finished within the window: the term means add up to the mean return
    total = sum(row[name] for name in names)
    assert math.isclose(total, row["episode_return"], rel_tol=1e-4, abs_tol=1e-4)
