"""`embodied train task=panda_pick_place` trains the shipped ee_delta variant at 20 Hz."""

from __future__ import annotations

import pytest

from embodied.config import load_config
from embodied.envs import make_train_env


def test_ppo_on_panda_pick_place_builds_the_20hz_ee_delta_env():
    cfg = load_config("train", ["task=panda_pick_place"])
    assert cfg.algo.name == "ppo" and cfg.num_envs == 512 and cfg.algo.gamma == 0.9
    env = make_train_env(cfg, 2, 0)
    try:
        assert env.control_dt == pytest.approx(0.05) and env.max_episode_steps == 100
        assert env.action_dim == 4  # tcp dx, dy, dz and the gripper
        assert env.action_map.metadata()["type"] == "ee_delta"
    finally:
        env.close()
    # Other commands keep the task's own action space (its scripted expert's).
    assert load_config("collect", ["task=panda_pick_place"]).task.action is None
