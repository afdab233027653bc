"""The PPO training log counts the env steps whose action held a NaN (the env replaced it
by 0), so a policy that emits NaN shows in the log instead of training on silently."""

from __future__ import annotations

from typing import Any

import torch

from embodied.rl import OnPolicyRunner, PPOConfig
from sim import make_env

NUM_STEPS = 4


class Rows:
    """A logger that keeps the rows."""

    def __init__(self):
        self.rows: list[dict[str, Any]] = []

    def log(self, row: dict[str, Any]) -> None:
        self.rows.append(row)


def test_training_log_has_a_nan_action_column(tmp_path, monkeypatch):
    env = make_env("panda_reach", num_envs=2, seed=0, nthread=1)
    step = env.step
    sent = []

    def step_with_nan(actions: torch.Tensor):
        actions = actions.clone()
        if len(sent) % 2 == 0:  # every other step, env 1's gripper action is NaN
            actions[1, -1] = torch.nan
        sent.append(actions)
        return step(actions)

    monkeypatch.setattr(env, "step", step_with_nan)
    try:
        cfg = PPOConfig(num_steps=NUM_STEPS, actor_hidden=[8], critic_hidden=[8])
        runner = OnPolicyRunner(env, cfg, tmp_path, progress=False, save_interval=0)
        logger = Rows()
        runner.learn(2, logger=logger)
        assert [row["nan_actions"] for row in logger.rows] == [NUM_STEPS / 2] * 2
        assert env.nan_action_total == NUM_STEPS
    finally:
        env.close()
