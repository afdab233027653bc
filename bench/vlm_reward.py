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

3. Labelling through an inference server (``server``): the episodes of a small rendered
   panda_reach dataset scored with RoboReward's clip protocol and the GRM's hop
   protocol on tiny random models (Qwen3-VL and Qwen2.5-VL), the way ``embodied label``
   scores them (one backend call per episode), by the model loaded in this process and
   through ``transformers serve`` (a child process on 127.0.0.1, same model, same torch
   threads) at several bounds on requests in flight, in the same run: dataset frames
   labelled per second, requests per second, and the requests actually in flight
   (time-weighted mean while any were, and peak). On a CPU the server answers one
   request at a time per core, so this measures that the client keeps it busy and what
   the HTTP + PNG round trip costs, not a GPU server's throughput.

Run: ``python bench/vlm_reward.py`` (full, about 15 minutes on 2 cores) or ``--quick``;
``--only server`` reruns one section and merges it into the result file.
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

from bench.common import merge_sections, parse_args, rate, write_result
from embodied.config import load_config

BT_TASKS = ("panda_reach", "panda_push")
SECTIONS = ["vlm", "bradley_terry", "server"]
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


def label_episodes(model, ds) -> tuple[float, int]:
    """Seconds to score every episode of ``ds`` as ``embodied label`` does, and frames."""
    from embodied.reward.episodic import score_whole_episode

    start = time.perf_counter()
    for i in range(ds.num_episodes):
        score_whole_episode(model, ds.episode_views(i), ds.task_of(i), ds.cameras)
    return time.perf_counter() - start, sum(e.length for e in ds.episodes)


def server_labelling(quick: bool, root: Path) -> dict:
    """Labelling through ``transformers serve`` against the same model loaded locally."""
    from embodied.cli import main as cli
    from embodied.datasets import LeRobotDataset
    from embodied.reward import make_reward_model
    from embodied.reward.vlm.serve import ServedModel
    from embodied.reward.vlm.tiny import build_tiny_vlm

    data = root / "label_source"
    episodes, seconds = (2, 0.2) if quick else (4, 0.4)
    assert cli(["collect", "task=panda_reach", f"task.episode_length_s={seconds}",
                f"episodes={episodes}", "num_envs=2", "width=64", "height=64",
                "progress=false", f"out={data}"]) == 0
    ds = LeRobotDataset(data)
    torch.set_num_threads(1)
    protocols = {"roboreward": ("qwen3_vl", {"clip_frames": 4, "stride": 2}),
                 "grm": ("qwen2_5_vl", {"stride": 4})}
    goal = root / "goal.npy"
    np.save(goal, ds.episode_views(0)[-1, 0])
    bounds = (1, 4) if quick else (1, 2, 4, 8)
    out: dict = {"episodes": ds.num_episodes, "frames": sum(e.length for e in ds.episodes),
                 "views": len(ds.cameras), "size": 64, "torch_threads": 1, "protocols": {}}
    log = root / "serve.log"
    with ServedModel(None, log_path=log, env={"OMP_NUM_THREADS": "1"}) as server:
        for name, (family, kw) in protocols.items():
            path = str(build_tiny_vlm(root / family, family))
            kw = {"name": name, "model": path, "local_files_only": True, "max_new_tokens": 8,
                  **kw, **({"goal": str(goal)} if name == "grm" else {})}
            local = make_reward_model(kw)
            label_episodes(local, ds)  # warm-up
            t, frames = label_episodes(local, ds)
            row = {"family": family, "requests": local.num_answers // 2,
                   "local_frames_per_s": round(frames / t, 2),
                   "local_requests_per_s": round(local.num_answers / 2 / t, 2), "server": {}}
            for bound in bounds:
                model = make_reward_model({**kw, "server": {"url": server.url,
                                                            "max_in_flight": bound}})
                label_episodes(model, ds)  # warm-up: the server loads the model
                flight = model.chat.in_flight
                before = flight.requests
                t, frames = label_episodes(model, ds)
                row["server"][str(bound)] = {
                    "frames_per_s": round(frames / t, 2),
                    "requests_per_s": round((flight.requests - before) / t, 2),
                    "mean_in_flight": round(flight.mean, 2), "peak_in_flight": flight.peak,
                    "server_over_local": round(frames / t / row["local_frames_per_s"], 3)}
                model.chat.close()
            out["protocols"][name] = row
    return out


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], SECTIONS)
    only = set(args.only or SECTIONS)
    start = time.perf_counter()
    figures: dict = {}
    with tempfile.TemporaryDirectory(prefix="vlm_reward_") as tmp:
        root = Path(tmp)
        if "vlm" in only:
            figures["vlm"] = vlm_throughput(args.quick, root)
        if "bradley_terry" in only:
            figures["bradley_terry"] = bt_runs(args.quick, root)
        if "server" in only:
            figures["server"] = server_labelling(args.quick, root)
    figures["seconds"] = round(time.perf_counter() - start, 1)
    for name in SECTIONS:  # each section says when and by what it was measured
        if name in figures:
            figures[name] |= {"date": time.strftime("%Y-%m-%d %H:%M:%S"),
                              "command": " ".join(["python", *sys.argv])}
    np.set_printoptions(precision=3)
    if args.only:
        figures = merge_sections("vlm_reward", args.quick, figures, args.only)
    write_result("vlm_reward", args.quick, figures)


if __name__ == "__main__":
    main()
