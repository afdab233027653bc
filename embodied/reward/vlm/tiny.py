"""Tiny randomly initialised VLMs for tests and benchmarks, built offline from configs.

``build_tiny_vlm(path, family)`` writes a complete model folder (config, weights,
tokenizer, image processor, chat template) that ``load_vlm`` and the ``vlm`` reward
model load back through ``from_pretrained`` exactly as they load a real checkpoint.
The tokenizer is a small byte-level BPE trained here on a few sentences (any text
round-trips through it); the chat templates are written here and follow the turn
markup of each family. The weights are random, so answers are gibberish: these
models exercise loading, prompting, batching and parsing, not judgement.

    python -m embodied.reward.vlm.tiny OUT_DIR [--family qwen2_5_vl|qwen3_vl|smolvlm]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from embodied.reward.vlm.loading import without_video

FAMILIES = ("qwen2_5_vl", "qwen3_vl", "smolvlm")

_CORPUS = [
    "These are camera views of a robot. How much of the task is done?",
    "Answer with a percentage from 0% to 100%. Progress: 25% 50% 75% 100% 0.5 3/4",
    "Is the task complete? Answer yes or no. Which image shows more progress? 1 2 0",
    "move the gripper to the red ball. push the red cube into the green goal region.",
    "pick up the red cube and place it on the green target. walk forward.",
]

# Qwen-VL turn markup: <|im_start|>role\n ... <|im_end|>\n; an image is
# <|vision_start|><|image_pad|><|vision_end|> (the processor expands <|image_pad|>).
_QWEN_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
_QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]

# SmolVLM turn markup: <|im_start|>User: ...<end_of_utterance>\nAssistant: ; an image is
# <image> (the processor expands it to <fake_token_around_image><global-img><image>*n...).
_SMOL_TEMPLATE = (
    "<|im_start|>{% for m in messages %}{{ m['role'] | capitalize }}:"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>{% elif c['type'] == 'text' %}{{ c['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}")
_SMOL_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<end_of_utterance>", "<image>",
                  "<fake_token_around_image>", "<global-img>"]


def _tokenizer(specials: list[str], eos: str, pad: str, vocab_size: int = 320,
               **extra: Any) -> Any:
    """A byte-level BPE tokenizer trained on a few sentences, with ``specials`` as tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token=pad,
                                   padding_side="left", **extra)


def _tiny_text(vocab: int, ids: dict[str, int], eos: str, pad: str, **extra: Any) -> dict:
    return {"vocab_size": vocab, "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "max_position_embeddings": 1024, "eos_token_id": ids[eos],
            "pad_token_id": ids[pad], "bos_token_id": ids[pad], **extra}


def _qwen(family: str) -> tuple[Any, Any]:
    import transformers
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    tokenizer = _tokenizer(_QWEN_SPECIALS, eos="<|im_end|>", pad="<|endoftext|>")
    ids = {s: tokenizer.convert_tokens_to_ids(s) for s in _QWEN_SPECIALS}
    vocab = len(tokenizer)
    tokens = {"image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
              "vision_start_token_id": ids["<|vision_start|>"],
              "vision_end_token_id": ids["<|vision_end|>"]}
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
              "out_hidden_size": 32, "spatial_merge_size": 2, "temporal_patch_size": 2}
    if family == "qwen2_5_vl":
        patch = 14
        config = transformers.Qwen2_5_VLConfig(
            text_config=_tiny_text(vocab, ids, "<|im_end|>", "<|endoftext|>",
                                   rope_parameters=rope),
            vision_config={**vision, "patch_size": patch, "fullatt_block_indexes": [0],
                           "window_size": 4 * patch},
            **tokens)
        model = transformers.Qwen2_5_VLForConditionalGeneration(config)
        processor_cls = transformers.Qwen2_5_VLProcessor
    else:
        patch = 16
        config = transformers.Qwen3VLConfig(
            text_config=_tiny_text(vocab, ids, "<|im_end|>", "<|endoftext|>", head_dim=16,
                                   rope_parameters={**rope, "mrope_interleaved": True}),
            vision_config={**vision, "patch_size": patch, "num_position_embeddings": 64,
                           "deepstack_visual_indexes": [0]},
            **tokens)
        model = transformers.Qwen3VLForConditionalGeneration(config)
        processor_cls = transformers.Qwen3VLProcessor
    # 64x64 frames stay 64x64 (a multiple of patch * merge); at most 128x128 pixels.
    side = 2 * patch
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch, merge_size=2, temporal_patch_size=2,
        size={"shortest_edge": side * side, "longest_edge": 128 * 128})
    processor = without_video(processor_cls)(image_processor=image_processor,
                                             tokenizer=tokenizer, chat_template=_QWEN_TEMPLATE)
    return model, processor


def _smolvlm() -> tuple[Any, Any]:
    import transformers
    from transformers.models.smolvlm.image_processing_pil_smolvlm import (
        SmolVLMImageProcessorPil,
    )

    tokenizer = _tokenizer(_SMOL_SPECIALS, eos="<end_of_utterance>", pad="<|endoftext|>",
                           extra_special_tokens={"image_token": "<image>",
                                                 "fake_image_token": "<fake_token_around_image>",
                                                 "global_image_token": "<global-img>",
                                                 "end_of_utterance_token": "<end_of_utterance>"})
    ids = {s: tokenizer.convert_tokens_to_ids(s) for s in _SMOL_SPECIALS}
    image, patch, scale = 32, 8, 2
    config = transformers.SmolVLMConfig(
        text_config={**_tiny_text(len(tokenizer), ids, "<end_of_utterance>", "<|endoftext|>"),
                     "model_type": "llama"},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                       "num_attention_heads": 2, "image_size": image, "patch_size": patch},
        scale_factor=scale, image_token_id=ids["<image>"], pad_token_id=ids["<|endoftext|>"])
    model = transformers.SmolVLMForConditionalGeneration(config)
    image_processor = SmolVLMImageProcessorPil(
        do_image_splitting=False, size={"longest_edge": image},
        max_image_size={"longest_edge": image})
    seq_len = (image // patch) ** 2 // scale ** 2
    processor = without_video(transformers.SmolVLMProcessor)(
        image_processor=image_processor, tokenizer=tokenizer, image_seq_len=seq_len,
        chat_template=_SMOL_TEMPLATE)
    return model, processor


def build_tiny_vlm(path: str | Path, family: str = "qwen2_5_vl", seed: int = 0) -> Path:
    """Write a tiny random VLM of ``family`` (one of ``FAMILIES``) to folder ``path``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown tiny VLM family '{family}'; choose one of {FAMILIES}")
    torch.manual_seed(seed)
    model, processor = _smolvlm() if family == "smolvlm" else _qwen(family)
    model.generation_config.do_sample = False
    path = Path(path)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the model to")
    parser.add_argument("--family", choices=FAMILIES, default="qwen2_5_vl")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build_tiny_vlm(args.out, args.family, args.seed))


if __name__ == "__main__":
    main()


__all__ = ["FAMILIES", "build_tiny_vlm"]
