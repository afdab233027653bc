"""CLIP zero-shot reward: the VLM-RM math, and a tiny random CLIP scoring real sim frames.

The model is built from configs (random weights, a 20-word WordLevel tokenizer), saved,
and loaded back through ``make_reward_model`` -> ``from_pretrained`` offline.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers/huggingface_hub are imported

import pytest
import torch

transformers = pytest.importorskip("transformers")

from embodied.reward import make_reward_model  # noqa: E402
from embodied.reward.clip_zero_shot import (  # noqa: E402
    goal_baseline_reward,
    projection_matrix,
)

WORDS = ["a", "robot", "arm", "move", "the", "gripper", "to", "red", "ball", "push", "cube",
         "goal", "pick", "place", "walk", "forward", "blue", "green"]


def test_goal_baseline_reward_by_hand():
    g, bl = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    # d = (1, -1); alpha = 0.5: P = 0.5 * [[.5, -.5], [-.5, .5]] + 0.5 * I
    torch.testing.assert_close(projection_matrix(g, bl, 0.5),
                               torch.tensor([[0.75, -0.25], [-0.25, 0.75]]))
    x = torch.tensor([[0.6, 0.8], [1.0, 0.0], [0.0, 1.0], [3.0, 4.0]])  # last: not unit
    # x = (.6, .8): x - g = (-.4, .8); (x - g) P = (-.5, .7); R = 1 - .5 * .74 = .63
    torch.testing.assert_close(goal_baseline_reward(x, g, bl, 0.5),
                               torch.tensor([0.63, 1.0, 0.0, 0.63]))
    # alpha = 0: the cosine x . g;  alpha = 1: (x - g) P = (-.6, .6), R = 1 - .36
    torch.testing.assert_close(goal_baseline_reward(x[:1], g, bl, 0.0), torch.tensor([0.6]))
    torch.testing.assert_close(goal_baseline_reward(x[:1], g, bl, 1.0), torch.tensor([0.64]))
    with pytest.raises(ValueError, match="alpha"):
        goal_baseline_reward(x, g, bl, 1.5)


def test_goal_baseline_reward_matches_the_explicit_projection():
    gen = torch.Generator().manual_seed(0)
    x, g, bl = (torch.randn(n, 16, generator=gen, dtype=torch.float64) for n in (5, 1, 1))
    unit = [v / v.norm(dim=-1, keepdim=True) for v in (x, g, bl)]
    p = projection_matrix(g[0], bl[0], 0.3)
    expected = 1 - 0.5 * ((unit[0] - unit[1]) @ p).square().sum(-1)
    torch.testing.assert_close(goal_baseline_reward(x, g[0], bl[0], 0.3), expected)
    r = goal_baseline_reward(torch.randn(200, 16, generator=gen), g[0].float(), bl[0].float(),
                             0.7)
    assert r.min() >= -1 and r.max() <= 1


def build_tiny_clip(path):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import (
        CLIPConfig,
        CLIPImageProcessor,
        CLIPModel,
        CLIPProcessor,
        PreTrainedTokenizerFast,
    )

    vocab = {"[PAD]": 0, "[UNK]": 1, "<|startoftext|>": 2, "<|endoftext|>": 3}
    vocab.update({w: i + 4 for i, w in enumerate(WORDS)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A <|endoftext|>",
        special_tokens=[("<|startoftext|>", 2), ("<|endoftext|>", 3)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
        bos_token="<|startoftext|>", eos_token="<|endoftext|>", model_max_length=16)
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32},
                                         crop_size={"height": 32, "width": 32})
    tiny = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
            "num_attention_heads": 2}
    config = CLIPConfig(
        text_config={**tiny, "vocab_size": len(vocab), "max_position_embeddings": 16,
                     "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3},
        vision_config={**tiny, "image_size": 32, "patch_size": 8}, projection_dim=8)
    torch.manual_seed(0)
    CLIPModel(config).save_pretrained(path)
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    return str(build_tiny_clip(tmp_path_factory.mktemp("tiny_clip")))


@pytest.fixture(scope="module")
def reach_frames(render_frames):
    return render_frames("panda_reach", num_envs=2, steps=5)


def clip(path, **kw):
    return make_reward_model({"name": "clip", "model": path, "baseline": "a robot arm", **kw})


def test_clip_scores_rendered_frames(tiny_clip, reach_frames):
    frames, cameras, instruction = reach_frames
    assert frames.shape == (2, 3, 64, 64, 3) and frames.dtype == torch.uint8
    model = clip(tiny_clip)
    assert model.image_size == (32, 32) and model.camera_names is None
    out = model.score(frames, instruction, cameras=cameras)
    assert out.progress.shape == (2,) and out.progress.dtype == torch.float32
    assert ((out.progress >= 0) & (out.progress <= 1)).all()
    assert out.success_prob is None
    # one by one == batched
    single = torch.cat([model.score(frames[i:i + 1], instruction).progress for i in range(2)])
    torch.testing.assert_close(single, out.progress, atol=1e-5, rtol=0)
    # per-env instructions; a different instruction is a different goal text
    other = model.score(frames, [instruction, "push the blue cube to the goal"]).progress
    torch.testing.assert_close(other[0], out.progress[0])
    assert other[1] != out.progress[1]


def test_clip_mean_fusion_averages_the_single_view_scores(tiny_clip, reach_frames):
    frames, cameras, instruction = reach_frames
    fused = clip(tiny_clip).score(frames, instruction, cameras=cameras).progress
    per_view = torch.stack([
        clip(tiny_clip, camera_names=[c]).score(frames, instruction, cameras=cameras).progress
        for c in cameras], 1)
    # reward_range (-1, 1) is R's exact range: no clamping, so the affine map commutes
    torch.testing.assert_close(fused, per_view.mean(1), atol=1e-5, rtol=0)
    lo = clip(tiny_clip, fusion="min").score(frames, instruction).progress
    torch.testing.assert_close(lo, per_view.min(1).values, atol=1e-5, rtol=0)
    emb = clip(tiny_clip, fusion="embedding").score(frames, instruction).progress
    assert emb.shape == (2,) and ((emb >= 0) & (emb <= 1)).all()


def test_clip_missing_camera_and_bad_options(tiny_clip, reach_frames):
    frames, cameras, instruction = reach_frames
    with pytest.raises(ValueError, match=r"camera\(s\) \['top'\]"):
        clip(tiny_clip, camera_names=["top"]).score(frames, instruction, cameras=cameras)
    with pytest.raises(ValueError, match="fusion"):
        clip(tiny_clip, fusion="vote")
    with pytest.raises(ValueError, match="reward_range"):
        clip(tiny_clip, reward_range=[0.3, 0.2])
