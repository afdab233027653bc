"""Action chunks with temporal ensembling, RA-BC weights, ignored inputs, action spaces."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embodied.datasets import DatasetWriter
from embodied.datasets.rabc import rabc_weights
from embodied.offline import OfflineConfig, OfflineLearner, load_transitions
from embodied.offline.data import with_last_action
from embodied.policy_io import ChunkedPolicy


def test_temporal_ensembling_averages_every_prediction_for_the_step_and_resets():
    calls = []

    def fn(obs: torch.Tensor) -> torch.Tensor:  # chunk of 3 one-dim actions: 10t, 10t+1, ...
        t = len(calls)
        calls.append(t)
        return torch.tensor([[10.0 * t, 10.0 * t + 1, 10.0 * t + 2]]).expand(obs.shape[0], -1)

    count = torch.zeros(2, dtype=torch.long)
    policy = ChunkedPolicy(fn, chunk=3, action_dim=1, decay=0.5,
                           episode_count=lambda: count)
    obs = torch.zeros(2, 4)
    assert policy(obs)[:, 0].tolist() == [0.0, 0.0]
    w = np.exp(-0.5 * np.arange(3))
    # step 1: the new chunk's first action (10) and the first chunk's second (1)
    assert policy(obs)[0, 0].item() == pytest.approx((w[0] * 10 + w[1] * 1) / w[:2].sum())
    count[1] += 1  # env 1 starts a new episode: only the newest prediction counts
    out = policy(obs)
    expected = (w[0] * 20 + w[1] * 11 + w[2] * 2) / w.sum()
    assert out[0, 0].item() == pytest.approx(expected)
    assert out[1, 0].item() == pytest.approx(20.0)


def test_rabc_weights_are_the_clipped_progress_gain_over_the_window():
    progress = np.array([0.0, 0.1, 0.1, 0.05, 0.3])
    w = rabc_weights(progress, window=1, kappa=0.2)
    np.testing.assert_allclose(w, [0.5, 0.0, 0.0, 1.0, 0.0])  # last: no gain past the end
    np.testing.assert_allclose(rabc_weights(progress, window=2, kappa=1.0), [0.1, 0, 0.2, 0.25, 0])


def test_transitions_hold_chunks_weights_and_the_chosen_spaces_last_action(tmp_path):
    def f(dtype: str, names: list[str] | None = None) -> dict:
        return {"dtype": dtype, "shape": [len(names) if names else 1], "names": names}

    names = ["x", "last_action.0", "last_action.1", "y"]
    features = {"observation.state": f("float32", names), "action": f("float32", ["a", "g"]),
                "action.other": f("float32", ["b", "c", "g"]), "next.reward": f("float32"),
                "next.done": f("bool"), "next.truncated": f("bool"),
                "rabc.weight": f("float32")}
    writer = DatasetWriter(tmp_path / "ds", 10, features)
    t = np.arange(4, dtype=np.float32)
    obs = np.stack([t, t * 0, t * 0 + 1, -t], 1)
    other = np.stack([t, 2 * t, t * 0 - 1], 1)
    done = t == 3
    writer.add_episode({"observation.state": obs, "action": np.stack([t, t], 1),
                        "action.other": other, "next.reward": t, "next.done": done,
                        "next.truncated": done, "rabc.weight": t / 10}, "task")
    writer.close()
    data = load_transitions(tmp_path / "ds", chunk=3, action_key="action.other",
                            weight_key="rabc.weight")
    assert data.obs_names == ["x", "last_action.0", "last_action.1", "last_action.2", "y"]
    # the last action in the chosen space: zeros and the recorded gripper value first
    np.testing.assert_array_equal(data.obs[:, 1:4].numpy(), [[0, 0, 1], other[0], other[1]])
    np.testing.assert_array_equal(data.obs[:, 4].numpy(), -t[:3])
    # chunks of 3 actions; past the episode's end the last action repeats
    np.testing.assert_array_equal(data.actions[1].numpy(), other[[1, 2, 3]].reshape(-1))
    np.testing.assert_array_equal(data.actions[2].numpy(), other[[2, 3, 3]].reshape(-1))
    np.testing.assert_allclose(data.weights.numpy(), t[:3] / 10)
    assert with_last_action(obs, None, other) is obs


def test_ignored_inputs_never_move_the_policy_and_rabc_weights_its_loss():
    torch.manual_seed(0)
    cfg = OfflineConfig(name="rabc", chunk=2, actor_hidden=[16], critic_hidden=[16])
    learner = OfflineLearner(3, 1, cfg, ignored=torch.tensor([False, True, False]))
    obs, act = torch.randn(64, 3), torch.randn(64, 2)
    learner.set_obs_statistics(obs)
    zeros, ones = torch.zeros(64), torch.ones(64)
    before = [p.clone() for p in learner.policy.actor.parameters()]
    learner.update(obs, act, zeros, obs, zeros, zeros)  # weight 0 everywhere: no step
    after = learner.policy.actor.parameters()
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    for _ in range(20):
        learner.update(obs, act, zeros, obs, zeros, ones)
    probe = torch.randn(5, 3)
    moved = probe.clone()
    moved[:, 1] += 100.0
    with torch.no_grad():
        assert torch.equal(learner.policy(probe), learner.policy(moved))
        assert learner.policy(probe).shape == (5, 2)


def test_a_chunking_run_exports_and_loads_as_a_temporally_ensembled_policy(tmp_path):
    from embodied.commands.collect import run_collect
    from embodied.commands.offline import run_offline
    from embodied.config import load_config
    from embodied.export import export_run
    from embodied.policy_io import load_policy

    data = tmp_path / "push"
    run_collect(load_config("collect", [
        "task=panda_push", "task.action=ee_delta_yaw", "policy=expert", "episodes=2",
        "num_envs=2", "cameras=[]", "progress=false", f"out={data}"]))
    run = tmp_path / "run"
    run_offline(load_config("offline", [
        f"dataset={data}", "algo=bc", "algo.chunk=4", "algo.actor_hidden=[16]",
        "algo.critic_hidden=[16]", "steps=10", "eval_episodes=0", "eval.num_envs=0",
        "progress=false", f"run_dir={run}"]))
    export_run(run, fmt="torchscript")
    policy, meta = load_policy(run / "export" / "policy.pt")
    assert isinstance(policy, ChunkedPolicy) and meta["chunk"]["size"] == 4
    assert meta["action_dim"] == 5 and meta["output"]["shape"] == ["batch", 20]
    assert policy(torch.zeros(3, meta["obs_dim"])).shape == (3, 5)
