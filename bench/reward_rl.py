"""The sparse-reward experiment: PPO with sparse success alone, PRM shaping, or dense reward.

For each task (``--task NAME``, repeatable; default panda_reach and panda_push), PPO runs
with the same seeds (``--seeds N``: 0..N-1), settings and env-step budget under four
rewards:

- ``sparse``: the success reward alone (``reward=sparse``);
- ``prm_shaped``: sparse + potential-based shaping by the learned PRM's progress,
  distilled into an MLP on the policy's observations (``reward=prm``);
- ``sim_progress_shaped``: sparse + the same shaping by the simulator's own progress (a
  control: what a perfect progress model would give);
- ``oracle_dense``: the task's hand-written dense reward (``reward=oracle``).

Success against env steps goes to ``bench/results/reward_rl_<task>.png`` and the JSON.
The PRM of a task is the one ``bench/reward_model.py`` trained (trained here if missing).
Target (issue): PRM-shaped >= 80% success where sparse alone stays under 20%, in no more
than 2x the env steps of the oracle. The PPO settings are the task's shipped ones
(configs/algo/ppo/<task>.yaml); a rerun with ``--task panda_push`` replaces only that
task's section of the result file.

Run: ``python bench/reward_rl.py`` (full: about 25 minutes on 2 shared cores) or ``--quick``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, merge_sections, parser, write_result
from bench.reward_model import TASKS, bench_root, ppo_run, prm_dir, train_prm

RL_TASKS = ("panda_reach", "panda_push")
BUDGETS = {"panda_reach": 400_000, "panda_push": 1_000_000, "panda_pick_place": 1_000_000}
ARMS = {  # name -> overrides of `embodied train`
    "sparse": ["reward=sparse"],
    "prm_shaped": ["reward=prm"],
    "sim_progress_shaped": ["reward=oracle", "reward.mode=prm+sparse",
                            "reward.model.name=sim_progress"],
    "oracle_dense": ["reward=oracle"],
}


def plot(task: str, arms: dict, budget: int, path: Path) -> None:
    """Training success against env steps, one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, arm in arms.items():
        ev = arm["eval_success"]
        seeds = "/".join(f"{e:.0%}" for e in arm["eval_success_per_seed"] if e is not None)
        label = name if ev is None else f"{name} (final eval {ev:.0%}" + (
            f"; seeds {seeds})" if arm["seeds"] > 1 else ")")
        ax.plot(arm["env_steps"], arm["success_rate"], label=label)
    ax.set_xlabel("env steps")
    ax.set_ylabel("training success (mean over seeds)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"{task}: PPO, same seeds and budget ({budget:,} env steps)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def over_seeds(runs: list[dict]) -> dict:
    """One arm's runs (one per seed) summarised: mean curve and means, per-seed evals."""
    n = min(len(r["env_steps"]) for r in runs)
    steps = runs[0]["env_steps"][:n]
    curve = np.mean([r["success_rate"][:n] for r in runs], axis=0)
    reached = np.flatnonzero(curve >= 0.8)
    evals = [r["eval_success"] for r in runs]
    return {"seeds": len(runs), "env_steps": steps,
            "success_rate": [round(float(c), 4) for c in curve],
            "final_train_success": round(float(curve[-1]), 4),
            "eval_success": None if None in evals else round(float(np.mean(evals)), 4),
            "eval_success_per_seed": evals,
            "env_steps_to_80": int(steps[reached[0]]) if len(reached) else None,
            "train_seconds": round(float(np.mean([r["train_seconds"] for r in runs])), 1),
            "collection_fps": round(float(np.mean([r["collection_fps"] for r in runs])), 1),
            "reward_timing": runs[0]["reward_timing"]}


def experiment(task: str, quick: bool, budget: int | None = None, seeds: int = 1,
               reuse: bool = False) -> dict:
    """All arms on ``task`` over ``seeds`` seeds; curves, summaries, plot and the targets."""
    prm = prm_dir(task, quick)
    if not (prm / "prm.pt").is_file():
        train_prm(task, quick, reuse=True)
    budget = budget or (2 * 16 * 32 if quick else BUDGETS[task])
    extra = ["num_envs=16", "eval.num_envs=8"] if quick else []
    load_before = round(os.getloadavg()[0], 2)
    arms = {name: over_seeds([ppo_run(task, name, overrides, budget, prm,
                                      bench_root(quick) / "rl", extra, seed, reuse)
                              for seed in range(seeds)])
            for name, overrides in ARMS.items()}
    png = RESULTS / f"reward_rl_{task}{'.quick' if quick else ''}.png"
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot(task, arms, budget, png)
    sparse_fps = arms["sparse"]["collection_fps"]
    prm_arm, sparse, oracle = arms["prm_shaped"], arms["sparse"], arms["oracle_dense"]
    oracle_steps, prm_steps = oracle["env_steps_to_80"], prm_arm["env_steps_to_80"]
    return {
        "budget_env_steps": budget, "seeds": seeds, "arms": arms,
        "collection_fps_ratio_vs_sparse": {
            name: round(a["collection_fps"] / sparse_fps, 3) for name, a in arms.items()},
        "targets": {
            "prm_shaped_eval>=0.8": (prm_arm["eval_success"] or 0) >= 0.8,
            "sparse_eval<0.2": (sparse["eval_success"] or 0) < 0.2,
            "prm_steps_to_80<=2x_oracle": (prm_steps is not None and oracle_steps is not None
                                           and prm_steps <= 2 * oracle_steps)},
        "load_avg_1min": [load_before, round(os.getloadavg()[0], 2)],
        "plot": str(png.relative_to(RESULTS.parent.parent)),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--task", action="append", choices=TASKS, default=None,
                   help="run this task's experiment (repeatable) and merge it into the "
                        f"existing JSON; default: {', '.join(RL_TASKS)}")
    p.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per arm (curves and "
                   "success are their means)")
    p.add_argument("--reuse-runs", action="store_true", help="read finished runs of the "
                   "budget from the run folders instead of training them again")
    p.add_argument("--budget", type=int, default=None,
                   help=f"env steps per arm (default per task: {BUDGETS})")
    args = p.parse_args()
    tasks = args.task or ([RL_TASKS[0]] if args.quick else list(RL_TASKS))
    figures = {task: experiment(task, args.quick, args.budget, args.seeds, args.reuse_runs)
               for task in tasks}
    if args.task:
        figures = merge_sections("reward_rl", args.quick, figures, tasks)
    write_result("reward_rl", args.quick, figures)


if __name__ == "__main__":
    main()
