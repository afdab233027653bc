"""The learned PRM: data format, training beats a shuffled-label control, the reward model."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from embodied.reward import make_reward_model
from embodied.reward.prm.checkpoint import load_prm, save_prm
from embodied.reward.prm.data import DataConfig, load_frames, save_frames, simulate
from embodied.reward.prm.evaluate import evaluate
from embodied.reward.prm.network import MultiViewPRM, PRMConfig, view_dropout_mask
from embodied.reward.prm.train import TrainConfig, train_prm

SMALL = DataConfig(task="panda_reach", episodes=48, batch_envs=16, stride=6, width=48,
                   height=48, val_fraction=0.25, seed=1)
MODEL = PRMConfig(image_size=48, text="learned", dim=64)
TRAIN = TrainConfig(epochs=5, batch_size=48, learning_rate=2e-3)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("prm") / "data"
    save_frames(simulate(SMALL), folder)
    return load_frames(folder)


@pytest.fixture(scope="module")
def trained(dataset, tmp_path_factory):
    torch.set_num_threads(2)
    net, _ = train_prm(dataset, replace(MODEL, cameras=dataset.cameras), TRAIN, log=False)
    path = tmp_path_factory.mktemp("prm_run") / "prm.pt"
    save_prm(path, net, {"instruction": dataset.instruction, "task": "panda_reach",
                         "data": "unused"})
    return path


def test_dataset_format_and_split(dataset, tmp_path):
    meta = dataset.meta
    assert meta["format"] == "embodied-prm-frames" and meta["cameras"] == ["front", "side", "wrist"]
    assert dataset.frames.dtype == np.uint8 and dataset.frames.shape[1:] == (3, 48, 48, 3)
    n = len(dataset.frames)
    assert len(dataset.progress) == len(dataset.success) == len(dataset.episode) == n
    assert ((dataset.progress >= 0) & (dataset.progress <= 1)).all()
    # episodes are contiguous, in time order, and each in exactly one split
    for e in dataset.episodes:
        rows = np.arange(e["start"], e["start"] + e["length"])
        assert (dataset.episode[rows] == e["index"]).all()
        assert (np.diff(dataset.step[rows]) == SMALL.stride).all()
        assert e["split"] in ("train", "val")
    assert set(dataset.rows("train")).isdisjoint(dataset.rows("val"))
    assert len(dataset.rows("train")) + len(dataset.rows("val")) == n
    experts = [e for e in dataset.episodes if e["kind"] == "expert"]
    assert experts and all(e["success"] for e in experts)
    assert "move the gripper to the red ball" not in meta["counterfactual_instructions"]
    with pytest.raises(FileNotFoundError, match="not a PRM frame dataset"):
        load_frames(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="expected embodied-prm-frames"):
        load_frames(tmp_path)


def test_training_beats_shuffled_labels(dataset, trained):
    model = make_reward_model({"name": "prm", "checkpoint": str(trained)})
    m = evaluate(model, dataset, max_counterfactual=64)
    net, _ = train_prm(dataset, replace(MODEL, cameras=dataset.cameras),
                       replace(TRAIN, shuffle_labels=True), log=False)
    control = make_reward_model({"name": "prm", "checkpoint": str(
        save_prm(trained.parent / "shuffled.pt", net, {"instruction": dataset.instruction}))})
    c = evaluate(control, dataset, max_counterfactual=0)
    assert m["voc"] > 0.6, m
    assert m["voc"] > c["voc"] + 0.3, (m["voc"], c["voc"])
    assert m["progress_pearson"] > c["progress_pearson"] + 0.3
    assert m["voc_reversed"] == pytest.approx(-m["voc"])
    assert m["counterfactual_gap"] > 0.2


def test_frame_augmentation_reaches_training(dataset):
    cfg = replace(TRAIN, epochs=1)
    model = replace(MODEL, cameras=dataset.cameras)
    plain, _ = train_prm(dataset, model, cfg, log=False)
    again, _ = train_prm(dataset, model, cfg, log=False)
    relit, _ = train_prm(dataset, model, replace(cfg, brightness=[2.0, 2.0]), log=False)
    moved, _ = train_prm(dataset, model, replace(cfg, pixel_shift=3), log=False)
    first = next(plain.parameters())
    assert torch.equal(first, next(again.parameters()))  # same draws: same weights
    assert not torch.allclose(first, next(relit.parameters()))  # the relit frames trained it
    assert not torch.allclose(first, next(moved.parameters()))  # and the moved ones


def test_reward_model_interface(dataset, trained):
    model = make_reward_model({"name": "prm", "checkpoint": str(trained.parent)})
    frames = torch.from_numpy(np.ascontiguousarray(dataset.frames[:8]))
    out = model.score(frames, dataset.instruction, cameras=dataset.cameras)
    assert out.progress.shape == (8,) and out.success_prob.shape == (8,)
    assert ((out.progress >= 0) & (out.progress <= 1)).all()
    # views given in another order are matched by name
    perm = model.score(frames[:, [2, 0, 1]], dataset.instruction,
                       cameras=["wrist", "front", "side"])
    assert torch.allclose(perm.progress, out.progress, atol=1e-5)
    # a missing camera is left out of the fusion, not an error
    two = model.score(frames[:, :2], dataset.instruction, cameras=["front", "side"])
    assert two.progress.shape == (8,) and torch.isfinite(two.progress).all()
    # larger renders are resized to the model's image size
    big = torch.nn.functional.interpolate(frames.flatten(0, 1).permute(0, 3, 1, 2).float(),
                                          size=(96, 96)).round().to(torch.uint8)
    big = big.permute(0, 2, 3, 1).reshape(8, 3, 96, 96, 3)
    assert model.score(big, dataset.instruction, cameras=dataset.cameras).progress.shape == (8,)
    with pytest.raises(ValueError, match="none of the PRM's cameras"):
        model.score(frames[:, :1], dataset.instruction, cameras=["top"])
    with pytest.raises(ValueError, match="uint8"):
        model.score(frames.float(), dataset.instruction, cameras=dataset.cameras)
    with pytest.raises(ValueError, match="no view axis"):
        model.score(frames[:, 0], dataset.instruction)
    with pytest.raises(ValueError, match="expects the cameras"):
        model.score(frames[:, :2], dataset.instruction)


def test_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="embodied reward train"):
        load_prm(tmp_path)
    torch.save({"something": 1}, tmp_path / "prm.pt")
    with pytest.raises(ValueError, match="not a PRM checkpoint"):
        load_prm(tmp_path / "prm.pt")
    with pytest.raises(ValueError, match="needs a checkpoint"):
        make_reward_model({"name": "prm", "checkpoint": None})


def test_concatenated_views_keep_which_camera_saw_what():
    torch.manual_seed(0)
    net = MultiViewPRM(replace(MODEL, image_size=16, dim=16, channels=[4, 8, 8],
                               fusion="concat")).eval()
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (2, 3, 16, 16, 3), dtype=torch.uint8, generator=gen)
    swapped = x[:, [1, 0, 2]]
    keep = torch.tensor([[True, False, True]] * 2)
    noise = x.clone()
    noise[:, 1] = torch.randint(0, 256, (2, 16, 16, 3), dtype=torch.uint8, generator=gen)
    with torch.no_grad():
        logits = net(x, ["reach"] * 2)[0]
        # the same images from the other cameras are another scene, not the same blend
        assert (net(swapped, ["reach"] * 2)[0] - logits).abs().max() > 1e-4
        # an absent view counts for nothing, whatever its pixels
        torch.testing.assert_close(net(x, ["reach"] * 2, keep)[0],
                                   net(noise, ["reach"] * 2, keep)[0])
    with pytest.raises(ValueError, match="fusion must be 'mean' or 'concat'"):
        PRMConfig(fusion="sum")


def test_view_dropout_keeps_a_view():
    gen = torch.Generator().manual_seed(0)
    mask = view_dropout_mask(1000, 3, 0.9, gen)
    assert mask.any(1).all() and not mask.all()


def test_minilm_instruction_embedding():
    from embodied.reward.prm.text import SentenceEmbedder

    emb = SentenceEmbedder()
    v = emb(["move the gripper to the red ball", "move the gripper to the red ball",
             "open the top drawer"])
    assert v.shape == (3, 384)
    assert torch.allclose(v.norm(dim=1), torch.ones(3), atol=1e-5)
    assert torch.allclose(v[0], v[1]) and (v[0] @ v[2]) < 0.9


def test_pretrained_vision_tower(tmp_path):
    from transformers import CLIPVisionConfig, CLIPVisionModel

    cfg = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                           num_attention_heads=2, image_size=32, patch_size=8)
    CLIPVisionModel(cfg).save_pretrained(tmp_path / "tiny_clip")
    prm_cfg = PRMConfig(encoder="hf", vision_model=str(tmp_path / "tiny_clip"), text="learned",
                        dim=32)
    net = MultiViewPRM(prm_cfg)
    tower = [p for n, p in net.named_parameters() if n.startswith("encoder.tower.")]
    assert tower and not any(p.requires_grad for p in tower)  # frozen by default
    frames = torch.randint(0, 255, (2, 3, 40, 40, 3), dtype=torch.uint8)
    p, s = net.predict(frames, ["reach"] * 2)
    assert p.shape == (2,) and s.shape == (2,)
    save_prm(tmp_path / "prm.pt", net, {"instruction": "reach"})
    loaded, _ = load_prm(tmp_path / "prm.pt")
    assert torch.allclose(loaded.predict(frames, ["reach"] * 2)[0], p, atol=1e-5)
