"""The sparse-reward experiment: PPO with sparse success alone, PRM shaping, or dense reward.

For each task (``--task NAME``, repeatable; default panda_reach and panda_push), PPO runs
with the same seeds (``--seeds N``: 0..N-1), settings and env-step budget under five
rewards:

- ``sparse``: the success reward alone (``reward=sparse``);
- ``prm_shaped``: sparse + potential-based shaping by the learned PRM's progress,
  distilled into an MLP on the policy's observations (``reward=prm``);
- ``sim_progress_shaped``: sparse + the same shaping by the simulator's own progress (a
  control: what a perfect progress model would give);
- ``sim_progress_distilled``: the simulator's progress through the PRM arm's own
  distillation (the control that tells PRM error from distillation error);
- ``oracle_dense``: the task's hand-written dense reward (``reward=oracle``).

Every run saves a checkpoint every ``--save-interval`` PPO iterations (default
:data:`SAVE_INTERVAL`; every 32,768 env steps on reach), and each checkpoint is evaluated
as `embodied eval` does: the deterministic policy on 64 episodes of the env seed the
end-of-training evaluation uses (the run's seed + 10000, never one PPO trained on). The
mean over seeds of these evaluations is the arm's eval curve; its env steps to 80% and to
95% are the first checkpoint at which the mean reaches them. Training success (the
stochastic policy's episodes) is kept beside it. Both curves go to
``bench/results/reward_rl_<task>.png`` and the JSON. PPO restarts its envs after each
checkpoint, so the interval is a setting of the runs (measured not to change learning in
docs/experiments/2026-11-25-prm-reach-budget.md).
The PRM (unless ``--prm``) is built here and cached under the benchmark's run folder with
the recipe a user follows (docs/reward-models.md): a dense-reward PPO run of the task
(seed 0, the task's default budget, a checkpoint every 10 iterations; ``<runs>/prm_policy/
<task>``), then ``embodied reward train`` with ``data.policy_run`` set to it (its rollouts
at several stages, noisy, and random actions beside the scripted episodes; ``<runs>/
prm_coverage/<task>``). A PRM of scripted episodes alone failed on the policy's own states.
``--prm-seed N`` builds (and uses) another PRM of the same recipe, with seed N for the
dense run, the data and the training (``<task>_seedN``): the spread between builds.
Target (issue): PRM-shaped >= 80% deterministic success where sparse alone stays under
20%, in no more than 2x the env steps of the oracle: the oracle's env steps to 80% on its
eval curve, doubled, is the budget the PRM arm is judged at (``oracle_budget_2x``; the
arms' eval at that point, ``eval_at_2x_oracle``); run every arm with
``--budget`` at least that. The PPO settings are the task's shipped ones
(configs/algo/ppo/<task>.yaml) with those reward=prm adds (configs/reward_algo/ppo/
prm.yaml), the same for every arm; a rerun with ``--task panda_push`` replaces only that
task's section of the result file.

``--policy-states`` measures instead how well PRMs (``--prm`` run folders) hold on the
states of PPO policies (``--eval-policy``: run folders of `embodied train`, whose
checkpoints at ``--stages`` stages of training are rolled out with action noise on
fresh seeds; default PRM: the benchmark's): Pearson with the simulator's progress
(over all states and per stage), the correlation of the step-to-step change (what
shaping pays), held-out paraphrases (mean absolute change of the score), near-miss
instructions (mean score on states whose true progress is >= 0.5) and, for PRMs with
temporal context, VOC of reversed expert episodes and their mean score (a reversed clip
has made no progress). Targets (issue): Pearson >= 0.9, step-delta >= 0.6, paraphrase
within 0.1, near miss <= 0.3. The section ``<task>_policy_states`` (one entry per
``--eval-policy``, under ``policies``) is merged into the result file.

Run: ``python bench/reward_rl.py`` (full, reach: about 25 minutes a seed on 2 shared cores
and about 6 to build the PRM; push longer) or ``--quick``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, kept_arms, merge_sections, parser, write_result
from bench.reward_model import (
    TASKS,
    bench_root,
    changed_settings,
    ppo_run,
    prm_overrides,
    reused_prm,
    train_prm,
)
from embodied.config import load_config

RL_TASKS = ("panda_reach", "panda_push")
BUDGETS = {"panda_reach": 400_000, "panda_push": 3_000_000, "panda_pick_place": 1_000_000}
ARMS = {  # name -> overrides of `embodied train`
    "sparse": ["reward=sparse"],
    "prm_shaped": ["reward=prm"],
    "sim_progress_shaped": ["reward=oracle", "reward.mode=prm+sparse",
                            "reward.model.name=sim_progress"],
    # the control: the simulator's progress through the PRM arm's own distillation
    "sim_progress_distilled": ["reward=prm", "~reward.model", "+reward.model={name:sim_progress}"],
    "oracle_dense": ["reward=oracle"],
}
ALL_ARMS = tuple(ARMS)
# Every arm trains with the PPO settings reward=prm ships (configs/reward_algo/ppo/prm.yaml:
# a clipped value loss, which shaping needs), so the arms differ in their reward alone.
SHARED_PPO = ["algo.value_clip=0.2"]
SHAPED_ARMS = ("prm_shaped", "sim_progress_shaped", "sim_progress_distilled")
SAVE_INTERVAL = 8  # PPO iterations between checkpoints (each one a point of the eval curve)
EVAL_EPISODES = 64  # deterministic episodes per checkpoint
LEVELS = (0.8, 0.95)  # eval success levels whose env steps are reported


def default_budget(task: str, quick: bool) -> int:
    """Env steps per arm of ``task`` when ``--budget`` is not given (a smoke run's with quick)."""
    return 2 * 16 * 32 if quick else BUDGETS[task]


def build_name(task: str, seed: int) -> str:
    """The cache folder name of the PRM build of ``seed`` (seed 0: the task's name)."""
    return task if seed == 0 else f"{task}_seed{seed}"


def policy_run_dir(task: str, quick: bool, seed: int = 0) -> Path:
    """Where :func:`policy_run` keeps the dense-reward run of ``seed``."""
    return bench_root(quick) / "prm_policy" / build_name(task, seed)


def policy_run(task: str, quick: bool, seed: int = 0) -> Path:
    """The dense-reward PPO run (of ``seed``) whose checkpoints cover the policy's states."""
    from embodied.commands.train import run_train

    run_dir = policy_run_dir(task, quick, seed)
    if not (run_dir / "summary.json").is_file():
        budget = default_budget(task, quick)
        run_train(load_config("train", [
            f"task={task}", "reward=oracle", f"total_env_steps={budget}", f"seed={seed}",
            f"save_interval={1 if quick else 10}", "progress=false", "eval.video_envs=0",
            f"run_dir={run_dir}", *(["num_envs=16", "eval.num_envs=8"] if quick else [])]))
    return run_dir


def coverage_prm(task: str, quick: bool, seed: int = 0) -> tuple[Path, dict]:
    """The benchmark's PRM of ``task`` (built if missing) and its held-out metrics.

    ``seed``: of the build (its dense run, the data simulation and the PRM's training);
    another seed is another build of the same recipe, cached beside the first.
    """
    run_dir = bench_root(quick) / "prm_coverage" / build_name(task, seed)
    run = policy_run_dir(task, quick, seed)
    data = (f"data.policies=[{{checkpoint: {run}, stages: 1, episodes: 8}}]" if quick  # smoke
            else f"data.policy_run={run}")
    seeds = () if seed == 0 else (f"data.seed={seed}", f"train.seed={seed}")
    extra = (data, "torch_threads=1", *seeds)
    if (run_dir / "metrics.json").is_file() and not changed_settings(
            run_dir, prm_overrides(task, quick, run_dir, extra)):
        return run_dir, reused_prm(run_dir)
    policy_run(task, quick, seed)
    return run_dir, train_prm(task, quick, reuse=False, run_dir=run_dir, extra=extra)


def eval_curve(run_dir: Path, quick: bool) -> dict:
    """Deterministic success of every checkpoint of the run in ``run_dir`` (cached).

    Each checkpoint is evaluated by `embodied eval` (``run_evaluation``): deterministic
    actions, :data:`EVAL_EPISODES` episodes (8 with ``quick``) on the env seed of the
    end-of-training evaluation (the run's seed + 10000), so the last point repeats the
    run's own final evaluation. Returns ``{"env_steps": [...], "success": [...],
    "episode_return": [...], "save_interval": N, ...}`` (env steps of each checkpoint read
    from metrics.csv), also written to ``<run_dir>/eval_curve.json``. A checkpoint already
    in that cache with the same file (size and modification time) and episode count is
    not evaluated again, so a curve can be followed while its run trains.
    """
    from omegaconf import OmegaConf

    from embodied.commands.eval import run_evaluation
    from embodied.rl.logger import read_metrics

    files = sorted((run_dir / "checkpoints").glob("model_*.pt"))
    iterations = [int(f.stem.split("_")[1]) for f in files]
    stamps = [f"{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
    episodes = 8 if quick else EVAL_EPISODES
    cache = run_dir / "eval_curve.json"
    cached = json.loads(cache.read_text()) if cache.is_file() else {}
    if cached.get("iterations") == iterations and cached.get("checkpoints") in (None, stamps):
        return cached
    known = {}  # checkpoint stamp -> (success, return) of an evaluation already made
    if cached.get("episodes") == episodes and cached.get("checkpoints"):
        known = dict(zip(cached["checkpoints"],
                         zip(cached["success"], cached["episode_return"], strict=True),
                         strict=True))
    m = read_metrics(run_dir / "metrics.csv")
    steps = dict(zip(m["iteration"], m["env_steps"], strict=True))
    records = []
    for f, stamp in zip(files, stamps, strict=True):
        if stamp not in known:
            r = run_evaluation(load_config("eval", [
                f"run={run_dir}", f"checkpoint={f}", f"episodes={episodes}", "video=false",
                "progress=false", f"out={run_dir / 'eval_curve'}"]))
            known[stamp] = (float(r["success_rate"]), float(r["episode_return"]))
        records.append(known[stamp])
    curve = {"iterations": iterations, "env_steps": [int(steps[i]) for i in iterations],
             "success": [r[0] for r in records], "episode_return": [r[1] for r in records],
             "episodes": episodes, "checkpoints": stamps,
             "save_interval": int(OmegaConf.load(run_dir / "config.yaml").save_interval)}
    cache.write_text(json.dumps(curve, indent=2) + "\n")
    return curve


def steps_to(steps: list[int], curve: list[float], level: float) -> int | None:
    """The first of ``steps`` at which ``curve`` reaches ``level`` (None: never)."""
    reached = np.flatnonzero(np.asarray(curve) >= level)
    return int(steps[reached[0]]) if len(reached) else None


def plot(task: str, arms: dict, budget: int, path: Path, oracle_2x: int | None) -> None:
    """Training success and deterministic eval success against env steps, one line per arm.

    ``oracle_2x``: twice the oracle's env steps to 80% eval success, drawn as a line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (train, ev) = plt.subplots(1, 2, figsize=(11.0, 4.2), sharey=True)
    for name, arm in arms.items():
        final = arm["eval_success"]
        seeds = "/".join(f"{e:.1%}" for e in arm["eval_success_per_seed"] if e is not None)
        label = name if final is None else f"{name} (final eval {final:.1%}" + (
            f"; seeds {seeds})" if arm["seeds"] > 1 else ")")
        line, = train.plot(arm["env_steps"], arm["success_rate"], label=label)
        if arm.get("eval_curve"):
            ev.plot(arm["eval_env_steps"], arm["eval_curve"], marker="o", markersize=3,
                    color=line.get_color(), label=name)
    if oracle_2x is not None:
        ev.axvline(oracle_2x, color="grey", linestyle=":", label="2x oracle's steps to 80%")
    ev.axhline(0.8, color="grey", linewidth=0.6)
    train.set_ylabel("success (mean over seeds)")
    train.set_title("training success (stochastic policy)", fontsize=10)
    ev.set_title("deterministic eval of the checkpoints", fontsize=10)
    for ax in (train, ev):
        ax.set_xlabel("env steps")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7)
    fig.suptitle(f"{task}: PPO, same seeds and budget ({budget:,} env steps)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def over_seeds(runs: list[dict]) -> dict:
    """One arm's runs (one per seed) summarised: mean curves and means, per-seed evals."""
    n = min(len(r["env_steps"]) for r in runs)
    steps = runs[0]["env_steps"][:n]
    curve = np.mean([r["success_rate"][:n] for r in runs], axis=0)
    evals = [r["eval_success"] for r in runs]
    k = min(len(r["eval_curve"]["env_steps"]) for r in runs)
    eval_steps = runs[0]["eval_curve"]["env_steps"][:k]
    per_seed = [[round(s, 4) for s in r["eval_curve"]["success"][:k]] for r in runs]
    eval_mean = [round(float(c), 4) for c in np.mean(per_seed, axis=0)]
    return {"seeds": len(runs), "env_steps": steps,
            "success_rate": [round(float(c), 4) for c in curve],
            "final_train_success": round(float(curve[-1]), 4),
            "eval_success": None if None in evals else round(float(np.mean(evals)), 4),
            "eval_success_per_seed": evals,
            "eval_env_steps": eval_steps, "eval_curve": eval_mean,
            "eval_curve_per_seed": per_seed,
            "eval_episodes": runs[0]["eval_curve"]["episodes"],
            "save_interval": [r["eval_curve"]["save_interval"] for r in runs],
            # the first checkpoint at which the mean over seeds reaches the level
            **{f"env_steps_to_{round(100 * q)}": steps_to(eval_steps, eval_mean, q)
               for q in LEVELS},
            "env_steps_to_80_per_seed": [steps_to(eval_steps, s, 0.8) for s in per_seed],
            "train_env_steps_to_80": steps_to(steps, curve, 0.8),
            "train_seconds": round(float(np.mean([r["train_seconds"] for r in runs])), 1),
            "collection_fps": round(float(np.mean([r["collection_fps"] for r in runs])), 1),
            "collection_fps_per_seed": [r["collection_fps"] for r in runs],
            # on the states each run labelled: the model's and the distilled potential's
            # Pearson correlation with the simulator's progress
            "potential_vs_sim_pearson_per_seed": [
                (r["reward_timing"] or {}).get("potential_vs_sim_pearson") for r in runs],
            "reward_timing": runs[0]["reward_timing"]}


def arm_runs(task: str, name: str, overrides: list[str], budget: int, prm: Path,
             root: Path, extra: list[str], seeds: int, reuse: bool, quick: bool) -> dict:
    """``seeds`` runs of one arm, each with its checkpoints' eval curve, summarised."""
    runs = []
    for seed in range(seeds):
        run = ppo_run(task, name, overrides, budget, prm, root, extra, seed, reuse)
        run_dir = root / task / (name if seed == 0 else f"{name}_seed{seed}")
        runs.append(run | {"eval_curve": eval_curve(run_dir, quick)})
    return over_seeds(runs)


def at_most(arm: dict, steps: int | None) -> float | None:
    """The arm's mean eval success at its last checkpoint within ``steps`` env steps."""
    within = [c for s, c in zip(arm["eval_env_steps"], arm["eval_curve"], strict=True)
              if steps is not None and s <= steps]
    return within[-1] if within else None


def experiment(task: str, quick: bool, budget: int | None = None, seeds: int = 1,
               reuse: bool = False, prm: Path | None = None, label: str = "",
               kept: dict | None = None, save_interval: int = SAVE_INTERVAL,
               prm_seed: int = 0) -> dict:
    """All arms on ``task`` over ``seeds`` seeds; curves, summaries, plot and the targets.

    ``kept``: arms of an earlier run of the same budget and seeds that this run does not
    rerun (``--arm``); they are reported beside the new ones with the date they ran.
    ``save_interval``: PPO iterations between checkpoints (0: the final one alone);
    ``prm_seed``: the seed of the benchmark's PRM build (unless ``prm`` is given).
    """
    built = None
    if prm is None:
        prm, built = coverage_prm(task, quick, prm_seed)
    budget = budget or default_budget(task, quick)
    extra = [*SHARED_PPO, f"save_interval={1 if quick else save_interval}",
             *(["num_envs=16", "eval.num_envs=8"] if quick else [])]
    load_before = round(os.getloadavg()[0], 2)
    root = bench_root(quick) / ("rl" if not label else f"rl_{label}")
    arms = {name: arm_runs(task, name, overrides, budget, prm, root, extra, seeds, reuse,
                           quick) for name, overrides in ARMS.items()}
    arms = {name: arms[name] if name in arms else kept[name] for name in ALL_ARMS
            if name in arms or name in (kept or {})}
    folder = root if label else RESULTS  # a labelled run keeps its files beside its runs
    png = folder / f"reward_rl_{task}{'.quick' if quick else ''}.png"
    folder.mkdir(parents=True, exist_ok=True)
    oracle = arms.get("oracle_dense") or {}
    oracle_2x = {f"to_{round(100 * q)}": None if oracle.get(f"env_steps_to_{round(100 * q)}")
                 is None else 2 * oracle[f"env_steps_to_{round(100 * q)}"] for q in LEVELS}
    plot(task, arms, budget, png, oracle_2x["to_80"])
    out = {"budget_env_steps": budget, "seeds": seeds, "prm": str(prm),
           **({"prm_build": built} if built else {}), "arms": arms,
           "oracle_budget_2x": oracle_2x,
           # each arm's mean eval at its last checkpoint within twice the oracle's steps
           "eval_at_2x_oracle": {name: {key: at_most(a, steps) for key, steps in
                                        oracle_2x.items()} for name, a in arms.items()},
           "shaping": {name: (a["reward_timing"] or {}).get("shaping")
                       for name, a in arms.items()},
           "load_avg_1min": [load_before, round(os.getloadavg()[0], 2)],
           "plot": str(png if label else png.relative_to(RESULTS.parent.parent)),
           "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    if "sparse" in arms:  # speed only against a sparse arm of the same run (kept: None)
        sparse = arms["sparse"]
        out["collection_fps_ratio_vs_sparse"] = {
            name: round(a["collection_fps"] / sparse["collection_fps"], 3)
            if a.get("ran") == sparse.get("ran") else None for name, a in arms.items()}
    targets = {}
    if "prm_shaped" in arms:
        targets["prm_shaped_eval>=0.8"] = (arms["prm_shaped"]["eval_success"] or 0) >= 0.8
    if "sparse" in arms:
        targets["sparse_eval<0.2"] = (arms["sparse"]["eval_success"] or 0) < 0.2
    if "prm_shaped" in arms and "oracle_dense" in arms:  # on the eval curves
        prm_steps = arms["prm_shaped"]["env_steps_to_80"]
        targets["prm_steps_to_80<=2x_oracle"] = (prm_steps is not None and oracle_2x["to_80"]
                                                 is not None and prm_steps <= oracle_2x["to_80"])
        if "sparse" in arms and oracle_2x["to_80"] is not None:
            targets["sparse_eval_at_2x_oracle<0.2"] = (
                out["eval_at_2x_oracle"]["sparse"]["to_80"] or 0) < 0.2
    out["targets"] = targets
    return out


def prm_names(prms: list[Path]) -> dict[str, Path]:
    """A distinct name for each PRM folder of ``prms``: its own name, or with its parent's
    where two share one (the refreshed ``<run>/prm`` of several runs)."""
    counts = Counter(p.name for p in prms)
    return {p.name if counts[p.name] == 1 else f"{p.parent.name}/{p.name}": p for p in prms}


def policy_states(task: str, prms: list[Path], policy: Path, stages: int, episodes: int,
                  noise: float, seed: int, quick: bool) -> dict:
    """Fresh rollouts of ``policy``'s checkpoints scored by every PRM of ``prms``.

    The rollouts run in the env and look of the first PRM's own data (its action space,
    control rate and cameras: the pusher's on push), so ``policy`` must come from PPO in
    that env.
    """
    from embodied.reward import make_reward_model
    from embodied.reward.prm.data import load_frames
    from embodied.reward.prm.evaluate import (
        policy_state_config,
        policy_state_metrics,
        shift_dataset,
    )
    from embodied.reward.prm.text import paraphrase

    models = {p: make_reward_model({"name": "prm", "checkpoint": str(p)}) for p in prms}
    own = load_frames(models[prms[0]].info["data"], mmap=True)
    cfg = policy_state_config(own, str(policy), stages, episodes, noise, seed)
    folder = bench_root(quick) / "policy_states" / f"{task}_{policy.name}_seed{seed}"
    data = shift_dataset(cfg, folder)
    rng = np.random.default_rng(seed)
    paraphrases = list(dict.fromkeys(paraphrase(data.instruction, rng, held_out=True)
                                     for _ in range(4)))
    return {"policy": str(policy), "stages": stages, "episodes_per_stage": episodes,
            "action_noise": noise, "seed": seed, "data": str(folder),
            "prms": {name: {"prm": str(p)} | policy_state_metrics(models[p], data, paraphrases)
                     for name, p in prm_names(prms).items()},
            "load_avg_1min": round(os.getloadavg()[0], 2),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


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
    p.add_argument("--save-interval", type=int, default=SAVE_INTERVAL,
                   help="PPO iterations between checkpoints, each evaluated for the eval "
                        "curve (0: the final checkpoint alone)")
    p.add_argument("--prm-seed", type=int, default=0,
                   help="seed of the benchmark's PRM build (its dense run, data and training;"
                        " another seed: another build of the recipe, cached beside it)")
    p.add_argument("--shaping-scale", type=float, default=None,
                   help="reward.prm_weight of the shaped arms, in the configs' "
                        "reward.prm_weight_unit (default: the config's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an override of `embodied train` for every arm that shapes with a "
                        "progress model (repeatable), e.g. reward.loop.refresh.enabled=true")
    p.add_argument("--arm", action="append", choices=list(ARMS), default=None,
                   help="run only these arms (repeatable)")
    p.add_argument("--policy-states", action="store_true",
                   help="measure PRMs on PPO policy states instead (see the module doc)")
    p.add_argument("--prm", action="append", type=Path, default=None,
                   help="--policy-states: a PRM run folder (repeatable)")
    p.add_argument("--eval-policy", action="append", type=Path, default=None,
                   help="--policy-states: a run folder of `embodied train` to roll out "
                        "(repeatable, e.g. the PRM arm's run of each seed)")
    p.add_argument("--stages", type=int, default=4)
    p.add_argument("--episodes", type=int, default=16, help="episodes per stage")
    p.add_argument("--noise", type=float, default=0.2, help="action noise std")
    p.add_argument("--eval-seed", type=int, default=101)
    p.add_argument("--label", default="", help="an exploratory run: runs, plot and JSON "
                   "under <runs>/rl_<label>/, the benchmark's result file untouched")
    args = p.parse_args()
    if args.policy_states:
        task = (args.task or [RL_TASKS[0]])[0]
        name = f"{task}_policy_states"
        if not args.eval_policy:
            p.error("--policy-states needs --eval-policy RUN (a run folder of `embodied train`)")
        prms = args.prm or [coverage_prm(task, args.quick)[0]]
        figures = {name: {"policies": [
            policy_states(task, prms, policy, args.stages, args.episodes, args.noise,
                          args.eval_seed, args.quick) for policy in args.eval_policy]}}
        if args.label:  # an exploratory measurement: beside its runs, results untouched
            path = bench_root(args.quick) / f"rl_{args.label}" / "policy_states.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(figures, indent=2) + "\n")
            print(f"results: {path}")
            return
        write_result("reward_rl", args.quick,
                     merge_sections("reward_rl", args.quick, figures, [name]))
        return
    for arm in SHAPED_ARMS:
        scale = [] if args.shaping_scale is None else [f"reward.prm_weight={args.shaping_scale}"]
        ARMS[arm] = [*ARMS[arm], *scale, *args.set]
    if args.arm:
        for arm in set(ARMS) - set(args.arm):
            del ARMS[arm]
    tasks = args.task or ([RL_TASKS[0]] if args.quick else list(RL_TASKS))
    prm = args.prm[0] if args.prm else None
    previous = RESULTS / f"reward_rl{'.quick' if args.quick else ''}.json"
    earlier = json.loads(previous.read_text()) if previous.is_file() else {}
    figures = {}
    for task in tasks:
        kept = None
        budget = args.budget or default_budget(task, args.quick)
        same = task in earlier and (earlier[task].get("budget_env_steps"),
                                    earlier[task].get("seeds")) == (budget, args.seeds)
        if args.arm and not args.label and same:  # the arms not rerun stay (same budget)
            date = earlier[task].get("date", earlier.get("date", ""))
            kept = kept_arms(earlier[task]["arms"], ARMS, date)
        figures[task] = experiment(task, args.quick, args.budget, args.seeds,
                                   args.reuse_runs, prm, args.label, kept, args.save_interval,
                                   args.prm_seed)
    if args.label:
        path = bench_root(args.quick) / f"rl_{args.label}" / "reward_rl.json"
        path.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"results: {path}")
        return
    if args.task:
        figures = merge_sections("reward_rl", args.quick, figures, tasks)
    write_result("reward_rl", args.quick, figures)


if __name__ == "__main__":
    main()
