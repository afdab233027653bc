"""The reward-model seam: input checks, camera selection and the registry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from embodied.config import load_config
from embodied.reward import (
    RewardMixer,
    RewardModel,
    RewardOutput,
    get_reward_model_class,
    make_reward_model,
    register_reward_model,
    reward_model_names,
)
from embodied.reward.oracle import SimProgressReward

CONFIGS = Path(__file__).resolve().parents[3] / "embodied" / "configs" / "reward"


class MeanPixel(RewardModel):
    """Progress = mean pixel value of each env's views / 255 (a checkable fake)."""

    def __init__(self, camera_names=None, device="cpu"):
        self.camera_names = tuple(camera_names) if camera_names else None
        self.device = torch.device(device)

    def _score(self, frames, instructions, state):
        return RewardOutput(progress=frames.float().mean((1, 2, 3, 4)) / 255.0)


def frames(b=2, v=3, h=4, w=5, fill=None):
    x = torch.arange(b * v * h * w * 3).reshape(b, v, h, w, 3) % 256
    x = x.to(torch.uint8)
    if fill is not None:  # view i of every env filled with fill[i]
        x = torch.stack([torch.full((b, h, w, 3), f, dtype=torch.uint8) for f in fill], 1)
    return x


def test_score_accepts_torch_and_numpy_and_broadcasts_the_instruction():
    model = MeanPixel()
    x = frames()
    a = model.score(x, "reach")
    b = model(x.numpy(), ["reach", "reach"])
    assert a.progress.shape == (2,)
    torch.testing.assert_close(a.progress, b.progress)


@pytest.mark.parametrize(("bad", "words"), [
    (torch.zeros(2, 3, 4, 5, 3), ["uint8", "float32", "255"]),
    (torch.zeros(2, 4, 5, 3, dtype=torch.uint8), ["no view axis", "frames[:, None]"]),
    (torch.zeros(2, 3, 3, 4, 5, dtype=torch.uint8), ["channels first", "permute"]),
    (np.zeros((2, 3, 4, 5, 4), np.uint8), ["RGB last"]),
    (None, ["env.render"]),
])
def test_bad_frames_raise_a_value_error_naming_the_fix(bad, words):
    with pytest.raises(ValueError) as err:
        MeanPixel().score(bad, "reach")
    for word in words:
        assert word in str(err.value)


def test_instruction_count_must_match_the_batch():
    with pytest.raises(ValueError, match="3 instructions for a batch of 2"):
        MeanPixel().score(frames(), ["a", "b", "c"])


def test_model_cameras_are_picked_by_name_and_a_missing_one_is_named():
    model = MeanPixel(camera_names=["wrist", "front"])
    x = frames(fill=[0, 100, 200])  # front, side, wrist
    out = model.score(x, "reach", cameras=["front", "side", "wrist"])
    torch.testing.assert_close(out.progress, torch.full((2,), 100 / 255))  # (200 + 0) / 2
    with pytest.raises(ValueError, match=r"camera\(s\) \['wrist'\].*render with cameras"):
        model.score(x, "reach", cameras=["front", "side", "top"])
    with pytest.raises(ValueError, match="3 unnamed views"):
        model.score(x, "reach")
    assert MeanPixel(camera_names=["a", "b", "c"]).score(x, "r").progress.shape == (2,)


def test_registry_builds_by_name_and_lists_names_on_error():
    @register_reward_model("test_mean_pixel")
    class Registered(MeanPixel):
        pass

    model = make_reward_model({"name": "test_mean_pixel", "camera_names": ["front"]})
    assert isinstance(model, Registered) and model.camera_names == ("front",)
    assert model.registry_name == "test_mean_pixel"
    assert {"clip", "sim_progress", "test_mean_pixel"} <= set(reward_model_names())
    with pytest.raises(ValueError, match=r"unknown reward model 'nope'; available: \["):
        make_reward_model({"name": "nope"})
    with pytest.raises(ValueError, match="already registered"):
        register_reward_model("test_mean_pixel")(MeanPixel)
    with pytest.raises(TypeError):
        register_reward_model("not_a_model")(dict)


def test_target_instantiation_for_models_outside_the_package():
    target = f"{SimProgressReward.__module__}.SimProgressReward"
    model = make_reward_model({"_target_": target, "success_key": None})
    assert isinstance(model, SimProgressReward) and model.success_key is None
    with pytest.raises(ValueError, match=r"not an embodied\.reward\.RewardModel"):
        make_reward_model({"_target_": "collections.OrderedDict"})


def test_reward_group_configs_compose_and_build():
    for name in ("sparse", "oracle", "clip"):
        cfg = OmegaConf.load(CONFIGS / f"{name}.yaml")
        mixer = RewardMixer.from_config(cfg, gamma=0.97)
        assert mixer.shaping.gamma == 0.97
        assert mixer.needs_progress == (name == "clip")
    assert make_reward_model(OmegaConf.load(CONFIGS / "sparse.yaml")) is None
    assert isinstance(make_reward_model(OmegaConf.load(CONFIGS / "oracle.yaml")),
                      SimProgressReward)
    assert get_reward_model_class("clip").__name__ == "ClipZeroShotReward"
    cfg = load_config("train", ["reward=oracle", "reward.mode=prm+sparse"])
    assert cfg.reward.model.name == "sim_progress"
    assert RewardMixer.from_config(cfg.reward, cfg.algo.gamma).mode == "prm+sparse"
    with pytest.raises(ValueError, match=r"algo\.gamma"):
        RewardMixer.from_config(cfg.reward)
