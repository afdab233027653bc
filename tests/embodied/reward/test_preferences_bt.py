"""Preference labels and the Bradley-Terry reward model on rendered simulator frames.

The network must learn progress from labels that the simulator's true progress gives
(ScoreLabeller over sim_progress): held-out episodes' pairs are ordered well above
chance. The VLM labelling path runs end to end on a tiny random VLM (gibberish answers:
labels are checked for form, not sense).
"""

from __future__ import annotations

import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers/huggingface_hub are imported

import numpy as np
import pytest
import torch

from embodied.config import load_config
from embodied.reward import make_reward_model
from embodied.reward.bradley_terry import (
    BTConfig,
    bradley_terry_loss,
    fit_normaliser,
    preference_accuracy,
    rewards,
    save_bt,
    train_bradley_terry,
    usable_pairs,
)
from embodied.reward.oracle import SimProgressReward
from embodied.reward.preferences import ScoreLabeller, label_pairs, sample_pairs
from embodied.reward.prm.data import DataConfig, simulate


@pytest.fixture(scope="module")
def reach_data():
    threads = torch.get_num_threads()
    try:
        data = simulate(DataConfig(task="panda_reach", episodes=16, batch_envs=16, stride=6,
                                   width=32, height=32, expert_fraction=0.5,
                                   noisy_fraction=0.25, val_fraction=0.25, seed=0))
    except RuntimeError as err:  # no OpenGL backend on this machine
        pytest.skip(f"cannot render: {err}")
    finally:
        torch.set_num_threads(threads)
    return data


def sim_labels(data, a, b, margin=0.05):
    labeller = ScoreLabeller(SimProgressReward(), margin=margin, cameras=data.cameras)
    return label_pairs(labeller, data.frames, a, b, data.instruction,
                       state={"progress": data.progress, "success": data.success})


def test_bradley_terry_loss_by_hand():
    r_a, r_b = torch.tensor([2.0, 0.0, 1.0]), torch.tensor([0.0, 0.0, 1.0])
    p = torch.sigmoid(torch.tensor(2.0))
    expected = -(torch.log(p) + torch.log(torch.tensor(0.5)) + torch.log(torch.tensor(0.5))) / 3
    torch.testing.assert_close(bradley_terry_loss(r_a, r_b, torch.tensor([1.0, 0.5, 0.0])),
                               expected)


def test_usable_pairs_drops_unlabelled_and_by_option_ties():
    a, b = np.arange(4), np.arange(4) + 10
    labels = np.array([1.0, 0.5, np.nan, 0.0], np.float32)
    assert usable_pairs(a, b, labels, "drop")[0].tolist() == [0, 3]
    ka, kb, ky = usable_pairs(a, b, labels, "tie")
    assert ka.tolist() == [0, 1, 3] and kb.tolist() == [10, 11, 13]
    assert ky.tolist() == [1.0, 0.5, 0.0]
    with pytest.raises(ValueError, match="no_preference"):
        usable_pairs(a, b, labels, "ignore")


def test_sample_pairs_and_score_labeller(reach_data):
    rng = np.random.default_rng(0)
    eps = reach_data.episode_rows("train")
    a, b = sample_pairs(eps, 200, rng, within_episode=1.0)
    assert (a != b).all()
    assert (reach_data.episode[a] == reach_data.episode[b]).all()
    labels = sim_labels(reach_data, a, b, margin=0.05)
    diff = reach_data.progress[a] - reach_data.progress[b]
    np.testing.assert_array_equal(labels, np.where(diff > 0.05, 1.0, np.where(
        diff < -0.05, 0.0, 0.5)).astype(np.float32))
    assert preference_accuracy(reach_data.progress, a, b, labels) == (
        1.0, int((labels != 0.5).sum()))


def test_bradley_terry_learns_progress_from_sim_preferences(reach_data, tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small convs: one thread is fastest on a shared machine
    try:
        rng = np.random.default_rng(0)
        a, b = sample_pairs(reach_data.episode_rows("train"), 800, rng)
        labels = sim_labels(reach_data, a, b)
        cfg = BTConfig(image_size=32, channels=[8, 16, 32], hidden=32, epochs=6, lr=2e-3)
        net, history = train_bradley_terry(reach_data.frames, a, b, labels, cfg)
        assert history["loss"][-1] < history["loss"][0]
        va, vb = sample_pairs(reach_data.episode_rows("val"), 400, rng)
        val_labels = sim_labels(reach_data, va, vb)
        r = rewards(net, reach_data.frames)
        acc, n = preference_accuracy(r, va, vb, val_labels)
        print(f"held-out pairwise accuracy {acc:.3f} on {n} pairs")
        assert n > 100 and acc > 0.75, (acc, n)  # chance: 0.5
        # ... and as a reward model, loaded from its checkpoint
        path = save_bt(tmp_path / "bt.pt", net, cfg, reach_data.cameras,
                       fit_normaliser(r[reach_data.rows("train")]))
        model = make_reward_model({"name": "bt", "checkpoint": str(tmp_path)})
        assert model.camera_names == tuple(reach_data.cameras)
        rows = reach_data.rows("val")[:50]
        frames = torch.from_numpy(reach_data.frames[rows][:, ::-1].copy())  # views reversed
        out = model.score(frames, reach_data.instruction, cameras=reach_data.cameras[::-1])
        assert out.progress.shape == (50,) and out.success_prob is None
        assert ((out.progress >= 0) & (out.progress <= 1)).all()
        lo, hi = model.lo, model.hi
        expected = np.clip((r[rows] - lo) / (hi - lo), 0, 1)
        np.testing.assert_allclose(out.progress.numpy(), expected, atol=1e-5)
        assert path.is_file()
    finally:
        torch.set_num_threads(threads)


def test_bt_checkpoint_errors(tmp_path):
    with pytest.raises(ValueError, match="needs a checkpoint"):
        make_reward_model({"name": "bt"})
    with pytest.raises(FileNotFoundError, match="embodied reward bt"):
        make_reward_model({"name": "bt", "checkpoint": str(tmp_path)})
    torch.save({"format": "other"}, tmp_path / "bt.pt")
    with pytest.raises(ValueError, match="expected embodied-bt"):
        make_reward_model({"name": "bt", "checkpoint": str(tmp_path / "bt.pt")})


def test_vlm_preference_labeller_runs_end_to_end(reach_data, tmp_path):
    pytest.importorskip("transformers")
    from embodied.reward.preferences import VlmPreferenceLabeller
    from embodied.reward.vlm.tiny import build_tiny_vlm

    path = build_tiny_vlm(tmp_path / "qwen", "qwen2_5_vl")
    labeller = VlmPreferenceLabeller(str(path), both_orders=True, batch_size=3,
                                     local_files_only=True)
    rng = np.random.default_rng(1)
    a, b = sample_pairs(reach_data.episode_rows("train"), 5, rng)
    labels = label_pairs(labeller, reach_data.frames, a, b, reach_data.instruction,
                         batch_size=4)
    assert labels.shape == (5,) and labels.dtype == np.float32
    assert all(np.isnan(v) or v in (0.0, 0.5, 1.0) for v in labels)
    assert labeller.counter.num_answers == 10  # both orders
    # the VLM's progress percentages as the judge (ScoreLabeller over reward=vlm)
    from embodied.reward.preferences import make_labeller

    scorer = make_labeller({"kind": "model", "margin": 0.05, "model": {
        "name": "vlm", "model": str(path), "local_files_only": True}}, reach_data.cameras)
    labels = label_pairs(scorer, reach_data.frames, a, b, reach_data.instruction)
    assert labels.shape == (5,) and set(labels.tolist()) <= {0.0, 0.5, 1.0}
    with pytest.raises(ValueError, match="instruction"):
        VlmPreferenceLabeller(str(path), prompt="Which one?", local_files_only=True)


def test_reward_bt_command_writes_a_usable_model(tmp_path):
    from embodied.cli import main

    run = tmp_path / "run"
    code = main(["reward", "bt", "task=panda_reach", "simulate.episodes=16", "simulate.stride=8",
                 "simulate.width=32", "simulate.height=32", "pairs=300", "val_pairs=200",
                 "bt.image_size=32", "bt.channels=[8,16]", "bt.hidden=16", "bt.epochs=2",
                 "progress=false", f"run_dir={run}"])
    assert code == 0
    for name in ("bt.pt", "pairs.npz", "metrics.json", "progress.png", "config.yaml"):
        assert (run / name).is_file(), name
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["pairs"] == 300 and metrics["labeller_accuracy"] == 1.0
    assert 0.0 <= metrics["val_pairwise_accuracy"] <= 1.0 and "voc" in str(metrics["eval"])
    model = make_reward_model(load_config("train", ["reward=bt",
                                                    f"reward.model.checkpoint={run}"]).reward)
    assert model.registry_name == "bt"
    assert main(["reward", "bt", "labeller.kind=oracle", f"run_dir={tmp_path / 'bad'}",
                 "simulate.episodes=16", "simulate.stride=20", "progress=false"]) == 2
