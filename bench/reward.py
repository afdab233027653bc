"""Reward models: PRM quality on held-out episodes, scoring speed, and the sparse-reward test.

1. For each task in ``TASKS``: ``embodied reward train`` (simulate labelled episodes, train
   the learned PRM) and its held-out metrics (VOC, reversed VOC, success F1/AUROC,
   correlation with simulator progress, pairwise accuracy, counterfactual separation).
2. Scoring throughput of the PRM on 256 three-view observations at 96x96 against the
   rendering rate of the same observations, measured in the same run.
3. PPO on panda_reach with the same seed and env-step budget under four rewards: the
   sparse success reward alone, sparse + PRM shaping (distilled), sparse + shaping by the
   simulator's own progress, and the task's dense reward ("oracle"). Success against env
   steps as PNG + JSON. A short run with direct scoring (every env rendered and scored
   every step) measures where the time goes without distillation.

Run: ``python bench/reward.py`` (full, about 35 minutes on 2 busy cores) or ``--quick``;
``--reuse-prm`` keeps the PRMs an earlier run trained (and reports their metrics and
training time) and redoes the rest.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, parse_args, rate, write_result
from embodied.config import load_config

TASKS = ("panda_reach", "panda_push")
RL_TASK = "panda_reach"
ARMS = {  # name -> overrides of `embodied train`
    "sparse": ["reward=sparse"],
    "prm_shaped": ["reward=prm"],
    "sim_progress_shaped": ["reward=oracle", "reward.mode=prm+sparse",
                            "reward.model.name=sim_progress"],
    "oracle_dense": ["reward=oracle"],
}
METRIC_KEYS = ("voc", "voc_reversed", "success_f1", "success_auroc", "progress_pearson",
               "progress_spearman", "pairwise_accuracy", "counterfactual_gap",
               "counterfactual_auroc", "kinds")


def reused_prm(run_dir: Path) -> dict:
    """Metrics and data + training time of a PRM an earlier run of this benchmark trained."""
    import json

    from embodied.reward.prm.checkpoint import load_prm

    _, info = load_prm(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    out = {k: metrics[k] for k in METRIC_KEYS if k in metrics}
    out["seconds"] = round(info["data_seconds"] + info["train"]["train_seconds"], 1)
    return out | {"run_dir": str(run_dir), "reused": True}


def train_prms(quick: bool, root: Path, reuse: bool = False) -> dict:
    """`embodied reward train` per task; held-out metrics and the run folders."""
    from embodied.reward.prm.run import run_reward_train

    out = {}
    for task in TASKS[:1] if quick else TASKS:
        if reuse and (root / "prm" / task / "metrics.json").is_file():
            out[task] = reused_prm(root / "prm" / task)
            continue
        overrides = [f"task={task}", f"run_dir={root / 'prm' / task}"]
        if quick:
            overrides += ["data.episodes=16", "data.batch_envs=8", "data.stride=10",
                          "train.epochs=1"]
        start = time.perf_counter()
        metrics = run_reward_train(load_config("reward_train", overrides))
        out[task] = {k: metrics[k] for k in METRIC_KEYS if k in metrics}
        out[task]["seconds"] = round(time.perf_counter() - start, 1)
        out[task]["run_dir"] = str(root / "prm" / task)
    return out


def throughput(ckpt: Path, quick: bool) -> dict:
    """PRM observations/s on 256 x 3 views at 96x96 vs. rendering them (same run)."""
    from embodied.reward import make_reward_model
    from sim import make_env

    model = make_reward_model({"name": "prm", "checkpoint": str(ckpt)})
    batch = 32 if quick else 256
    frames = torch.randint(0, 256, (batch, 3, 96, 96, 3), dtype=torch.uint8)
    cams = list(model.model_cameras)
    seconds = 1.0 if quick else 5.0
    out = {"batch": batch, "views": 3}
    out["score_obs_per_s_96"] = round(rate(lambda: model.score(frames, "x", cameras=cams),
                                           batch, seconds, warmup=1), 1)
    small = frames[:, :, :64, :64].contiguous()
    out["score_obs_per_s_64"] = round(rate(lambda: model.score(small, "x", cameras=cams),
                                           batch, seconds, warmup=1), 1)
    env = make_env(RL_TASK, num_envs=16, seed=0)
    try:
        for size in (96, 64):
            out[f"render_obs_per_s_{size}"] = round(rate(
                lambda s=size: env.render(cams, width=s, height=s), 16, seconds, warmup=1), 1)
    finally:
        env.close()
    out["score_over_render_96"] = round(out["score_obs_per_s_96"] / out["render_obs_per_s_96"], 2)
    out["score_over_render_64"] = round(out["score_obs_per_s_64"] / out["render_obs_per_s_64"], 2)
    return out


def train_arm(name: str, overrides: list[str], budget: int, prm_dir: Path, root: Path,
              quick: bool) -> dict:
    """One PPO run of the sparse-reward experiment; its curve and summary."""
    from embodied.rl.logger import read_metrics
    from embodied.train import run_train

    run_dir = root / "rl" / name
    args = [f"task={RL_TASK}", *overrides, f"total_env_steps={budget}", "seed=0",
            "save_interval=0", "progress=false", "eval.video_envs=0", f"run_dir={run_dir}"]
    if "reward=prm" in overrides:
        args.append(f"reward.checkpoint={prm_dir}")
    if quick:
        args += ["num_envs=16", "eval.num_envs=8"]
    summary = run_train(load_config("train", args))
    m = read_metrics(run_dir / "metrics.csv")
    steps, success = np.array(m["env_steps"]), np.nan_to_num(np.array(m["success_rate"]))
    reached = np.flatnonzero(success >= 0.8)
    return {"env_steps": steps.tolist(), "success_rate": [round(float(s), 4) for s in success],
            "final_train_success": round(float(success[-1]), 4),
            "eval_success": summary["eval"]["success_rate"] if summary["eval"] else None,
            "env_steps_to_80": int(steps[reached[0]]) if len(reached) else None,
            "train_seconds": summary["train_seconds"],
            "collection_fps": round(float(summary["collection_fps"]), 1),
            "reward_timing": summary["reward_timing"]}


def plot(arms: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, arm in arms.items():
        ev = arm["eval_success"]
        ax.plot(arm["env_steps"], arm["success_rate"],
                label=f"{name} (final eval {ev:.0%})" if ev is not None else name)
    ax.set_xlabel("env steps")
    ax.set_ylabel("training success rate (last 100+ episodes)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"{RL_TASK}: PPO, same seed and budget")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    reuse = "--reuse-prm" in sys.argv  # keep the PRMs (and their metrics) of an earlier run
    if reuse:
        sys.argv.remove("--reuse-prm")
    args = parse_args(__doc__.splitlines()[0])
    quick = args.quick
    torch.set_num_threads(2)
    root = Path("runs/bench/reward" + ("_quick" if quick else ""))
    start = time.perf_counter()
    prm = train_prms(quick, root, reuse)
    prm_dir = Path(prm[RL_TASK]["run_dir"])
    speed = throughput(prm_dir, quick)
    budget = 2 * 16 * 32 if quick else 400_000
    arms = {name: train_arm(name, ov, budget, prm_dir, root, quick)
            for name, ov in ARMS.items()}
    # Direct scoring (no distillation): every env rendered and scored every step.
    direct = train_arm("prm_direct", ["reward=prm", "reward.loop.scoring=direct"],
                       2 * 16 * 32 if quick else 4 * 16 * 32, prm_dir, root, quick=True)
    if reuse:
        sys.argv.append("--reuse-prm")  # the command line recorded in the result
    suffix = ".quick" if quick else ""
    png = RESULTS / f"reward_rl{suffix}.png"
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(arms, png)
    sparse_fps = arms["sparse"]["collection_fps"]
    write_result("reward", quick, {
        "prm": prm,
        "throughput": speed,
        "rl": {"task": RL_TASK, "budget_env_steps": budget, "arms": arms,
               "prm_direct_short_run": direct,
               "collection_fps_ratio_vs_sparse": {
                   name: round(a["collection_fps"] / sparse_fps, 3) for name, a in arms.items()},
               "direct_collection_fps_ratio_vs_sparse": round(
                   direct["collection_fps"] / sparse_fps, 3),
               "plot": str(png.relative_to(RESULTS.parent.parent))},
        "targets": {"voc>=0.9": prm[RL_TASK]["voc"] >= 0.9,
                    "voc_reversed<=-0.8": prm[RL_TASK]["voc_reversed"] <= -0.8,
                    "success_f1>=0.9": prm[RL_TASK]["success_f1"] >= 0.9,
                    "score_obs_per_s_96>=2000": speed["score_obs_per_s_96"] >= 2000},
        "wall_seconds": round(time.perf_counter() - start, 1),
    })


if __name__ == "__main__":
    main()
