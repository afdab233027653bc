"""bench/ppo.py's SB3 contender tuned to our settings: it gets the shipped panda_reach
PPO settings, the value-loss clip included (none when ours has none)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from ppo import sb3_tuned, train_cfg


def test_sb3_tuned_takes_our_shipped_reach_settings():
    cfg = train_cfg("panda_reach")
    a = cfg.algo
    hp = sb3_tuned(cfg)["hyperparams"]
    assert hp["n_steps"] == a.num_steps and hp["n_epochs"] == a.num_epochs
    assert hp["batch_size"] == cfg.num_envs * a.num_steps // a.num_mini_batches
    assert (hp["learning_rate"], hp["gamma"], hp["gae_lambda"], hp["clip_range"]) == (
        a.learning_rate, a.gamma, a.lam, a.clip)
    assert a.value_clip is None and hp["clip_range_vf"] is None  # shipped: unclipped values
    kwargs = sb3_tuned(cfg)["policy_kwargs"]
    assert kwargs["log_std_init"] == math.log(a.init_noise_std)


def test_sb3_tuned_clips_values_when_ours_does():
    hp = sb3_tuned(train_cfg("panda_reach", "algo.value_clip=0.3"))["hyperparams"]
    assert hp["clip_range_vf"] == 0.3
