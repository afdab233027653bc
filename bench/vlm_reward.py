"""VLM reward backends: generative-VLM scoring speed and the Bradley-Terry preference model.

1. Generative VLM progress (``reward=vlm``) on tiny random Qwen2.5-VL, Qwen3-VL and SmolVLM
   models built offline (``embodied.reward.vlm.tiny``): observations/s and frames/s for
   batches of rendered panda_push three-view observations at 64x64, with and without the
   yes/no success question, batched (one generate call per batch) against one env per
   call, and against rendering the same observations (same run). Random weights answer
   gibberish, so the share of unreadable answers is reported, not a quality figure.
   Real checkpoints are much larger: these numbers bound the overhead of the plumbing
   (processor, chat template, generate), not the speed of a real VLM.
2. Bradley-Terry reward model (``embodied reward bt``) per task: preference labels from
   the simulator's progress on simulated frames, training, then held-out pairwise
   accuracy (pairs of held-out episodes judged by the simulator) and the PRM metrics
   (VOC, ...); its scoring speed on 256 three-view observations against rendering; and
   the preference-labelling speed of a tiny SmolVLM judge (both orders) on those frames.

Run: ``python bench/vlm_reward.py`` (full, about 15 minutes on 2 cores) or ``--quick``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import parse_args, rate, write_result
from embodied.config import load_config

BT_TASKS = ("panda_reach", "panda_push")
EVAL_KEYS = ("voc", "voc_reversed", "progress_pearson", "progress_spearman",
             "pairwise_accuracy")


def push_frames(num_envs: int, size: int = 64) -> tuple[torch.Tensor, list[str], str, float]:
    """Rendered panda_push observations after some expert steps, and the render rate (obs/s)."""
    from sim import make_env
    from sim.experts import make_expert

    env = make_env("panda_push", num_envs=num_envs, seed=0)
    try:
        env.reset(seed=0)
        expert = make_expert(env)
        for _ in range(20):
            env.step(expert())
        frames = env.render(width=size, height=size)
        render = rate(lambda: env.render(width=size, height=size), num_envs, 2.0, warmup=1)
        return frames, list(env.camera_names), env.instruction, render
    finally:
        env.close()


def vlm_throughput(quick: bool, root: Path) -> dict:
    from embodied.reward import make_reward_model
    from embodied.reward.vlm.tiny import FAMILIES, build_tiny_vlm

    batch = 4 if quick else 16
    seconds = 1.0 if quick else 5.0
    frames, cams, instruction, render = push_frames(batch)
    torch.set_num_threads(1)  # the steadiest on a shared 2-core machine; as for rendering
    out: dict = {"batch": batch, "views": frames.shape[1], "size": frames.shape[2],
                 "torch_threads": 1, "render_obs_per_s": round(render, 1), "models": {}}
    for family in FAMILIES:
        path = build_tiny_vlm(root / family, family)
        params = None
        row = {}
        for name, kw in (("batched", {"batch_size": batch}),
                         ("one_per_call", {"batch_size": 1}),
                         ("batched_with_success", {"batch_size": batch,
                                                   "success_prompt": "Is the task done: "
                                                   "{instruction}? Yes or no."})):
            model = make_reward_model({"name": "vlm", "model": str(path),
                                       "local_files_only": True, **kw})
            params = sum(p.numel() for p in model.chat.model.parameters())
            obs = rate(lambda m=model: m.score(frames, instruction, cameras=cams), batch,
                       seconds, warmup=1)
            row[f"{name}_obs_per_s"] = round(obs, 2)
            row[f"{name}_frames_per_s"] = round(obs * frames.shape[1], 1)
            row[f"{name}_unreadable_share"] = round(model.num_unparsed / model.num_answers, 3)
        row["parameters"] = params
        row["batching_speedup"] = round(row["batched_obs_per_s"] / row["one_per_call_obs_per_s"],
                                        2)
        row["score_over_render"] = round(row["batched_obs_per_s"] / render, 4)
        out["models"][family] = row
    return out


def vlm_labelling(root: Path, quick: bool) -> dict:
    """Preference-labelling speed of a tiny SmolVLM judge (both orders) on the BT frames."""
    from embodied.reward.preferences import VlmPreferenceLabeller, label_pairs, sample_pairs
    from embodied.reward.prm.data import load_frames
    from embodied.reward.vlm.tiny import build_tiny_vlm

    data = load_frames(root / "bt" / BT_TASKS[0] / "frames")
    judge = VlmPreferenceLabeller(str(build_tiny_vlm(root / "judge", "smolvlm")),
                                  both_orders=True, batch_size=8, local_files_only=True)
    n = 16 if quick else 64
    a, b = sample_pairs(data.episode_rows("train"), n, np.random.default_rng(0))
    start = time.perf_counter()
    labels = label_pairs(judge, data.frames, a, b, data.instruction, batch_size=8)
    seconds = time.perf_counter() - start
    return {"family": "smolvlm", "pairs": n, "both_orders": True,
            "pairs_per_s": round(n / seconds, 2),
            "unreadable_share": round(judge.num_unparsed / judge.counter.num_answers, 3),
            "labels": {"first": int((labels == 1).sum()), "second": int((labels == 0).sum()),
                       "no_preference": int((labels == 0.5).sum()),
                       "unlabelled": int(np.isnan(labels).sum())}}


def bt_runs(quick: bool, root: Path) -> dict:
    from embodied.commands.reward_bt import run_bt
    from embodied.reward import make_reward_model

    size = 32 if quick else 64
    common = [f"simulate.width={size}", f"simulate.height={size}", f"bt.image_size={size}",
              "progress=false"]
    if quick:
        common += ["simulate.episodes=16", "simulate.stride=8", "pairs=300", "val_pairs=300",
                   "bt.epochs=2", "bt.channels=[8,16]"]
    else:
        common += ["simulate.episodes=64", "pairs=3000", "val_pairs=2000", "bt.epochs=15"]
    out: dict = {}
    for task in BT_TASKS[:1] if quick else BT_TASKS:
        run_dir = root / "bt" / task
        metrics = run_bt(load_config("reward_bt", [f"task={task}", f"run_dir={run_dir}",
                                                   *common]))
        row = {k: metrics[k] for k in ("pairs", "labels", "labeller_accuracy",
                                       "train_pairs_used", "train_accuracy",
                                       "val_pairwise_accuracy", "val_pairs")}
        row["seconds"] = {k: round(v, 1) for k, v in metrics["seconds"].items()}
        row["eval"] = {k: metrics["eval"][k] for k in EVAL_KEYS if k in metrics["eval"]}
        out[task] = row
    out["tiny_vlm_judge"] = vlm_labelling(root, quick)
    # scoring speed of the first model against rendering the same observations
    first = root / "bt" / BT_TASKS[0]
    model = make_reward_model({"name": "bt", "checkpoint": str(first)})
    batch = 32 if quick else 256
    frames = torch.randint(0, 256, (batch, 3, size, size, 3), dtype=torch.uint8)
    seconds = 1.0 if quick else 5.0
    torch.set_num_threads(1)
    score = rate(lambda: model.score(frames, "x"), batch, seconds, warmup=1)
    render = push_frames(16, size)[3]
    out["scoring"] = {"batch": batch, "size": size, "torch_threads": 1,
                      "score_obs_per_s": round(score, 1), "render_obs_per_s": round(render, 1),
                      "score_over_render": round(score / render, 2)}
    return out


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vlm_reward_") as tmp:
        root = Path(tmp)
        figures = {"vlm": vlm_throughput(args.quick, root)}
        figures["bradley_terry"] = bt_runs(args.quick, root)
    figures["seconds"] = round(time.perf_counter() - start, 1)
    np.set_printoptions(precision=3)
    write_result("vlm_reward", args.quick, figures)


if __name__ == "__main__":
    main()
