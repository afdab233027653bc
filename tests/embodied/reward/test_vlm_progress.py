"""Generative-VLM progress reward on tiny random Qwen2.5-VL, Qwen3-VL and SmolVLM models.

Each model is built from configs (random weights, a byte-level BPE tokenizer trained
here, a hand-written chat template), saved with its processor, and loaded back through
``make_reward_model`` -> ``from_pretrained`` offline, then scores frames rendered by
the simulator. Random weights answer gibberish, so these tests check the plumbing
(shapes, ranges, batching, fallback accounting); parsing of real answers is tested in
test_vlm_parsing.py.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers/huggingface_hub are imported

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("num2words")  # the SmolVLM processor imports it

from embodied.config import load_config  # noqa: E402
from embodied.reward import RewardMixer, make_reward_model  # noqa: E402
from embodied.reward.vlm.loading import load_vlm, processor_class  # noqa: E402
from embodied.reward.vlm.parsing import parse_progress  # noqa: E402
from embodied.reward.vlm.tiny import FAMILIES, build_tiny_vlm  # noqa: E402


@pytest.fixture(scope="module")
def tiny_vlms(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_vlm")
    return {family: str(build_tiny_vlm(root / family, family)) for family in FAMILIES}


@pytest.fixture(scope="module")
def push_frames(render_frames):
    """Three envs of panda_push after a few expert steps: uint8 [3, 3, 64, 64, 3]."""
    return render_frames("panda_push", num_envs=3, steps=10, actions="expert")


def vlm(path, **kw):
    return make_reward_model({"name": "vlm", "model": path, "local_files_only": True, **kw})


@pytest.mark.parametrize("family", FAMILIES)
def test_processor_loads_without_a_video_processor(tiny_vlms, family):
    cls = processor_class(tiny_vlms[family], local_files_only=True)
    assert "video_processor" not in cls.get_attributes()
    assert {"image_processor", "tokenizer"} <= set(cls.get_attributes())
    model, processor = load_vlm(tiny_vlms[family], local_files_only=True)
    assert isinstance(model, transformers.PreTrainedModel) and not model.training
    assert processor.tokenizer.padding_side == "left" and processor.chat_template
    if family == "smolvlm":  # a processor option survives the save/load round trip
        assert processor.image_seq_len == 4


@pytest.mark.parametrize("family", FAMILIES)
def test_vlm_scores_rendered_frames(tiny_vlms, push_frames, family, caplog):
    frames, cameras, instruction = push_frames
    model = vlm(tiny_vlms[family], success_prompt="Is the task done: {instruction}? Yes or no.",
                fallback=0.25)
    with caplog.at_level("WARNING", logger="embodied.reward.vlm.chat"):
        out = model.score(frames, instruction, cameras=cameras)
    assert out.progress.shape == (3,) and out.progress.dtype == torch.float32
    assert ((out.progress >= 0) & (out.progress <= 1)).all()
    assert out.success_prob is not None and out.success_prob.shape == (3,)
    assert ((out.success_prob > 0) & (out.success_prob < 1)).all()
    # every progress value is the parsed answer, or the fallback for an unreadable one
    assert len(model.last_answers) == 3 and model.num_answers == 3
    expected = [parse_progress(a) for a in model.last_answers]
    assert model.num_unparsed == sum(e is None for e in expected)
    torch.testing.assert_close(out.progress, torch.tensor(
        [0.25 if e is None else e for e in expected]))
    warned = [r.getMessage() for r in caplog.records if "unreadable" in r.getMessage()]
    if model.num_unparsed:  # the first unreadable answer is always reported, with the count
        assert warned and warned[0].startswith("1 of ") and "using progress 0.25" in warned[0]
    else:
        assert not warned


@pytest.mark.parametrize("family", ["qwen2_5_vl", "smolvlm"])
def test_batched_scoring_matches_one_by_one(tiny_vlms, push_frames, family):
    """Left padding: rows of different prompt lengths answer as they do alone."""
    frames, cameras, _ = push_frames
    instructions = ["push the red cube into the green goal region", "push",
                    "move the gripper to the red ball and then push the cube to the goal"]
    model = vlm(tiny_vlms[family], batch_size=3, success_prompt="Done? {instruction}")
    batched = model.score(frames, instructions, cameras=cameras)
    answers = list(model.last_answers)
    single, single_answers = [], []
    for i in range(3):
        single.append(model.score(frames[i:i + 1], instructions[i], cameras=cameras))
        single_answers += model.last_answers
    assert single_answers == answers
    torch.testing.assert_close(batched.success_prob,
                               torch.cat([s.success_prob for s in single]), atol=1e-4, rtol=0)
    model.chat.batch_size = 2  # uneven chunks give the same answers
    assert model.score(frames, instructions, cameras=cameras).progress.shape == (3,)
    assert model.last_answers == answers


def test_vlm_camera_selection_and_bad_config(tiny_vlms, push_frames):
    frames, cameras, instruction = push_frames
    one_view = vlm(tiny_vlms["qwen2_5_vl"], camera_names=[cameras[-1]])
    assert one_view.score(frames, instruction, cameras=cameras).progress.shape == (3,)
    with pytest.raises(ValueError, match=r"camera\(s\) \['top'\]"):
        vlm(tiny_vlms["qwen2_5_vl"], camera_names=["top"]).score(frames, instruction,
                                                                  cameras=cameras)
    with pytest.raises(ValueError, match=r"must contain '\{instruction\}'"):
        vlm(tiny_vlms["qwen2_5_vl"], prompt="How far along is it?")
    with pytest.raises(ValueError, match="fallback"):
        vlm(tiny_vlms["qwen2_5_vl"], fallback=2.0)
    with pytest.raises(OSError, match="cannot load the VLM"):
        vlm(str(tiny_vlms["qwen2_5_vl"]) + "_missing")


def test_vlm_reward_config_composes_and_builds(tiny_vlms):
    cfg = load_config("train", ["reward=vlm", f"reward.model.model={tiny_vlms['smolvlm']}",
                                "reward.model.local_files_only=true"])
    assert RewardMixer.from_config(cfg.reward, cfg.algo.gamma).needs_progress
    model = make_reward_model(cfg.reward)
    assert model.registry_name == "vlm" and model.chat.batch_size == 8
