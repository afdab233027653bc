"""IQL and BC: the losses, transitions from a dataset, and IQL beating BC where reward matters."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from embodied.commands.collect import run_collect
from embodied.commands.offline import run_offline
from embodied.config import load_config
from embodied.datasets import DatasetWriter
from embodied.offline import load_transitions
from embodied.offline.iql import expectile_loss

SMALL_NETS = ["algo.actor_hidden=[128,128]", "algo.critic_hidden=[128,128]",
              "algo.learning_rate=1e-3"]


def test_expectile_loss_by_hand():
    diff = torch.tensor([1.0, -2.0])
    # 0.7 * 1 + 0.3 * 4, averaged
    assert expectile_loss(diff, 0.7).item() == pytest.approx((0.7 + 1.2) / 2)
    assert expectile_loss(diff, 0.5).item() == pytest.approx((0.5 + 2.0) / 2)


def test_transitions_bootstrap_within_episodes_and_drop_time_outs(tmp_path):
    def f(dtype: str, dim: int = 1) -> dict:
        return {"dtype": dtype, "shape": [dim], "names": None}

    features = {"observation.state": f("float32", 2), "action": f("float32"),
                "next.reward": f("float32"), "next.done": f("bool"),
                "next.truncated": f("bool"), "next.success": f("bool"),
                "sim.progress": f("float32"), "sim.success": f("bool")}
    writer = DatasetWriter(tmp_path / "ds", 10, features)
    for length, truncated in ((4, True), (3, False)):
        obs = np.arange(length * 2, dtype=np.float32).reshape(length, 2) + 100 * length
        done = np.arange(length) == length - 1
        writer.add_episode({"observation.state": obs, "action": obs[:, :1] / 10,
                            "next.reward": np.arange(length, dtype=np.float32),
                            "next.done": done, "next.truncated": done & truncated,
                            "next.success": np.zeros(length, bool),
                            "sim.progress": np.zeros(length, np.float32),
                            "sim.success": np.zeros(length, bool)}, "t")
    writer.close()
    data = load_transitions(tmp_path / "ds")
    # episode 0 (time-out): 3 of 4 transitions; episode 1 (terminated): all 3
    assert len(data) == 6
    np.testing.assert_array_equal(data.terminal.numpy(), [0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(data.next_obs[0].numpy(), data.obs[1].numpy())
    np.testing.assert_array_equal(data.rewards.numpy(), [0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(data.episode_returns, [6, 3])


@pytest.fixture(scope="module")
def mixed_reach(tmp_path_factory):
    """Half noisy-expert episodes, half random ones: the reward tells them apart."""
    out = tmp_path_factory.mktemp("offline") / "reach_mixed"
    run_collect(load_config("collect", [
        "task=panda_reach", "policy=[expert,random]", "noise=[0.1,0]", "episodes=32",
        "num_envs=16", "cameras=[]", "progress=false", f"out={out}"]))
    return out


def offline(dataset, run_dir, *extra):
    return run_offline(load_config("offline", [
        f"dataset={dataset}", f"run_dir={run_dir}", "steps=1500", "log_interval=500",
        "eval_episodes=0", "eval.num_envs=32", "eval.video_envs=0", "progress=false",
        *SMALL_NETS, *extra]))


def test_iql_beats_bc_on_mixed_quality_data(mixed_reach, tmp_path):
    bc = offline(mixed_reach, tmp_path / "bc", "algo=bc")
    iql = offline(mixed_reach, tmp_path / "iql", "algo=iql")
    bc_return, iql_return = bc["eval"]["episode_return"], iql["eval"]["episode_return"]
    # random actions drag BC's imitation towards the middle of the action range; IQL's
    # advantage weights follow the reward to the expert's actions
    assert iql_return > bc_return + 5.0, (iql_return, bc_return)
    run = tmp_path / "iql"
    for name in ("config.yaml", "metrics.csv", "eval.json", "summary.json",
                 "checkpoints/model_001500.pt"):
        assert (run / name).is_file(), name
    assert json.loads((run / "summary.json").read_text())["transitions"] == 32 * 149


def test_offline_runs_resume_exactly_and_evaluate_like_ppo_runs(mixed_reach, tmp_path):
    from embodied.cli import main

    args = ["algo=iql", "log_interval=50", "save_interval=50", "eval.num_envs=0"]
    whole = offline(mixed_reach, tmp_path / "whole", *args, "steps=100")
    offline(mixed_reach, tmp_path / "part", *args, "steps=50")
    resumed = offline(mixed_reach, tmp_path / "ignored", *args, "steps=100",
                      f"resume={tmp_path / 'part'}")
    assert resumed["run_dir"] == str(tmp_path / "part") and whole["gradient_steps"] == 100
    a = torch.load(tmp_path / "whole/checkpoints/model_000100.pt", weights_only=True)
    b = torch.load(tmp_path / "part/checkpoints/model_000100.pt", weights_only=True)
    for key, value in a["policy"].items():
        torch.testing.assert_close(b["policy"][key], value, rtol=0, atol=0)
    assert main(["eval", f"run={tmp_path / 'whole'}", "episodes=4", "video=false",
                 "progress=false"]) == 0
    # a trained run collects data like the expert does
    summary = run_collect(load_config("collect", [
        "task=panda_reach", f"policy={tmp_path / 'whole'}", "noise=0.1", "episodes=2",
        "num_envs=2", "cameras=[]", "task.episode_length_s=0.2", "progress=false",
        f"out={tmp_path / 'from_policy'}"]))
    assert summary["episodes"] == 2 and summary["frames"] == 20
