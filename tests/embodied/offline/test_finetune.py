"""Online fine-tuning of an offline IQL policy (`embodied offline ... finetune.env_steps=N`)."""

from __future__ import annotations

import json

import pytest
import torch

from embodied.commands.collect import run_collect
from embodied.commands.label import run_label
from embodied.commands.offline import run_offline
from embodied.config import ConfigError, load_config
from embodied.datasets import LeRobotDataset
from embodied.offline.finetune import online_reward

STEPS = 40  # control steps per episode (task.episode_length_s=0.8 at 50 Hz)


@pytest.fixture(scope="module")
def labelled_reach(tmp_path_factory):
    """Short noisy-expert and random panda_reach episodes, labelled prm+sparse by the oracle."""
    root = tmp_path_factory.mktemp("finetune")
    run_collect(load_config("collect", [
        "task=panda_reach", "policy=[expert,random]", "noise=[0.3,0]", "episodes=8",
        "num_envs=8", "cameras=[]", "task.episode_length_s=0.8", "progress=false",
        f"out={root / 'data'}"]))
    run_label(load_config("label", [f"dataset={root / 'data'}", f"out={root / 'oracle'}",
                                    "reward=oracle", "reward.mode=prm+sparse",
                                    "progress=false"]))
    return root / "oracle"


def offline(dataset, run_dir, *extra):
    return run_offline(load_config("offline", [
        f"dataset={dataset}", f"run_dir={run_dir}", "algo=iql", "steps=30",
        "log_interval=10", "save_interval=0", "eval_episodes=0", "eval.num_envs=4",
        "eval.video_envs=0", "progress=false", "algo.actor_hidden=[64,64]",
        "algo.critic_hidden=[64,64]", *extra]))


def test_online_reward_is_the_labelling_reward_scored_every_step(labelled_reach):
    ds = LeRobotDataset(labelled_reach)
    reward = online_reward(ds, "next.reward")
    assert reward["mode"] == "prm+sparse" and reward["model"]["name"] == "sim_progress"
    assert reward["gamma"] == 0.99 and reward["loop"]["scoring"] == "direct"
    assert online_reward(ds, "source.next.reward") is None  # no online source: task reward


def test_finetuning_adds_online_episodes_and_changes_the_policy(labelled_reach, tmp_path):
    summary = offline(labelled_reach, tmp_path / "run", "finetune.env_steps=160",
                      "finetune.num_envs=4", "finetune.updates_per_env_step=0.25")
    tuned = summary["finetune"]
    # 160 env steps of 4 envs: 40 steps each, one whole time-limited episode per env,
    # whose last frame has no next state
    assert tuned["env_steps"] == 160 and tuned["episodes"] == 4
    assert tuned["transitions_added"] == 4 * (STEPS - 1)
    assert tuned["gradient_steps"] == 40 and summary["gradient_steps"] == 30 + 40
    assert "prm+sparse" in tuned["reward"] and tuned["eval_before"]["episodes"] == 4
    offline_ckpt = torch.load(tmp_path / "run/checkpoints/model_000030.pt", weights_only=True)
    tuned_ckpt = torch.load(tmp_path / "run/checkpoints/model_000070.pt", weights_only=True)
    assert tuned_ckpt["global_step"] == 160
    changed = [k for k, v in offline_ckpt["policy"].items()
               if not torch.equal(v, tuned_ckpt["policy"][k])]
    assert any(k.startswith("actor") for k in changed), changed
    saved = json.loads((tmp_path / "run/summary.json").read_text())
    assert saved["transitions"] == len(LeRobotDataset(labelled_reach).episodes) * (STEPS - 1)


def test_finetuning_needs_iql(labelled_reach, tmp_path):
    with pytest.raises(ConfigError, match="algo=iql"):
        offline(labelled_reach, tmp_path / "bc", "algo=bc", "finetune.env_steps=100")
