"""Learned PRM: held-out quality per Panda task, scoring speed, and its cost inside PPO.

Sections (``--only NAME`` reruns one and merges it into the result file):

- ``panda_reach``, ``panda_push``, ``panda_pick_place``: ``embodied reward train`` for the
  task (simulate labelled multi-view episodes, train the PRM) and its held-out metrics:
  VOC, reversed VOC, success F1/AUROC, correlation with the simulator's progress,
  pairwise accuracy, counterfactual separation. Targets: VOC >= 0.9, reversed VOC <=
  -0.8, success F1 >= 0.9.
- ``throughput``: PRM scoring of 256 observations x 3 views at 96x96 (target >= 2,000
  observations/s on the CPU), and at 64x64; in the same run, the plain
  ``MultiViewPRM.predict`` path (the "before" of the fast path) and rendering the same
  observations. The load average is recorded with the numbers (the machine is shared).
- ``visual_shift_<task>`` (reach, push): two PRMs trained alike, one on frames under
  visual randomisation (``visual=train``, the default) and one without (``visual=none``),
  then the visual-shift suite of ``embodied reward eval`` on the same fresh episodes for
  both (other light levels and directions, surface colours, moved cameras, pixel noise):
  success F1, AUROC, ECE and progress Pearson per kind, with the calibrated success head
  and with the raw one. Targets under shift: F1 >= 0.85, Pearson >= 0.85. With
  ``--policy-data RUN`` (a run folder of `embodied train` on the task) a third arm,
  ``randomised_policies``, adds rollouts of that run's checkpoints (``POLICY_DATA``) to
  the randomised arm's data. With ``--coverage-prm RUN`` (a PRM run folder, e.g. the
  one ``bench/reward_rl.py`` builds with the policy-coverage recipe under
  ``runs/bench/reward/prm_coverage/<task>``) that PRM is scored too, as arm ``coverage``
  of the section of the task it was built for (not trained here). ``--shift-arm NAME``
  (repeatable) runs only those arms; the section's other arms are kept from the result
  file with the date they ran.
- ``policy_states_panda_push``: the PRMs of ``visual_shift_panda_push`` on fresh
  rollouts of the checkpoints of ``--eval-policy RUN`` (another PPO run than the one the
  data came from) at 4 stages of training, 16 episodes each with action noise 0.2
  (``evaluate.policy_state_metrics``): Pearson with the simulator's progress, step-delta
  correlation, held-out paraphrases, near-miss instructions. Targets: Pearson >= 0.9,
  step-delta >= 0.6, paraphrases within 0.1, near misses <= 0.3.
- ``ppo_speed``: PPO on panda_push with the same envs and steps per iteration, without
  a frame reward (sparse) and with the PRM in the loop, distilled and direct; collection
  env steps/s and their ratio to sparse, and the time share of each part.

Run: ``python bench/reward_model.py`` (full: about 30 minutes with PRM training) or
``--quick``; ``--reuse-prm`` keeps the PRMs an earlier run trained under
``runs/bench/reward/prm/<task>`` (their metrics and training time are reported).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, kept_arms, merge_sections, parser, write_result
from embodied.config import load_config

TASKS = ("panda_reach", "panda_push", "panda_pick_place")
TASK_OVERRIDES = {  # settings of `embodied reward train` per task beyond its defaults
    # 6 epochs gave success F1 0.88 on pick_place (AUROC 0.99): more training, same data.
    "panda_pick_place": ["train.epochs=12"],
}
SPEED_TASK = "panda_push"
SHIFT_TASKS = ("panda_reach", "panda_push")
POLICY_TASK = "panda_push"
SECTIONS = [*TASKS, *(f"visual_shift_{t}" for t in SHIFT_TASKS),
            f"policy_states_{POLICY_TASK}", "throughput", "ppo_speed"]
# --policy-data: the given run's checkpoints at 4 stages, 32 episodes each with action
# noise 0.2, and 16 episodes of uniformly random actions
POLICY_DATA = {"stages": 4, "episodes": 32, "noise": 0.2}
# --eval-policy: 4 stages, 16 fresh episodes each (env seed 101), action noise 0.2
POLICY_EVAL = {"stages": 4, "episodes": 16, "noise": 0.2, "seed": 101}
SHIFT_ARMS = ("randomised", "plain", "randomised_policies", "coverage")
ROOT = Path("runs/bench/reward")
METRIC_KEYS = ("voc", "voc_reversed", "success_f1", "success_auroc", "progress_pearson",
               "progress_spearman", "pairwise_accuracy", "counterfactual_gap",
               "counterfactual_auroc", "kinds")


def bench_root(quick: bool) -> Path:
    """Where the runs of the reward benchmarks live (PRMs shared by both benchmarks)."""
    return Path(f"{ROOT}_quick") if quick else ROOT


def prm_dir(task: str, quick: bool) -> Path:
    """The PRM run folder of ``task`` that both reward benchmarks use."""
    return bench_root(quick) / "prm" / task


def reused_prm(run_dir: Path) -> dict:
    """Metrics and data + training time of a PRM trained by an earlier run."""
    from embodied.reward.prm.checkpoint import load_prm

    _, info = load_prm(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    data_seconds = info["data_seconds"]
    maker = Path(info["data"]).parent
    if maker != run_dir and (maker / "prm.pt").is_file():  # data simulated by another run
        data_seconds = load_prm(maker)[1]["data_seconds"]
    return {**{k: metrics[k] for k in METRIC_KEYS if k in metrics},
            "data_seconds": data_seconds,
            "train_seconds": info["train"]["train_seconds"],
            "data": info["data"], "run_dir": str(run_dir), "reused": True}


def prm_overrides(task: str, quick: bool, run_dir: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """The ``embodied reward train`` overrides of this benchmark's PRM of ``task``."""
    overrides = [f"task={task}", f"run_dir={run_dir}", *TASK_OVERRIDES.get(task, []), *extra]
    if quick:
        wander = load_config("reward_train", [f"task={task}"]).data.wander_episodes
        overrides += ["data.episodes=16", "data.batch_envs=8", "data.stride=10",
                      "train.epochs=1", f"data.wander_episodes={min(wander, 8)}"]
    return overrides


def changed_settings(run_dir: Path, overrides: list[str]) -> list[str]:
    """The config sections in which the PRM in ``run_dir`` differs from a build today.

    ``model`` and ``train`` as they are; ``data`` without ``path`` (a build that read its
    frames back from a folder made them with the same settings). A default changed since
    the PRM was trained (say ``model.fusion``) makes its cached copy stale; a setting added
    since, which its config lacks, counts at the command's own default (the behaviour
    before the setting existed), so only a task that changes it makes the copy stale.
    """
    from omegaconf import OmegaConf

    saved = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)
    today = OmegaConf.to_container(load_config("reward_train", overrides), resolve=True)
    base = OmegaConf.to_container(load_config("reward_train", []), resolve=True)
    for key in ("data", "model", "train"):
        for name, value in base[key].items():
            saved.setdefault(key, {}).setdefault(name, value)
    for cfg in (saved, today):
        cfg.get("data", {}).pop("path", None)
    return [key for key in ("data", "model", "train") if saved.get(key) != today.get(key)]


def train_prm(task: str, quick: bool, reuse: bool, run_dir: Path | None = None,
              extra: tuple[str, ...] = ()) -> dict:
    """``embodied reward train`` for ``task`` (or the earlier run's PRM); held-out metrics.

    ``run_dir``: where (default :func:`prm_dir`); ``extra``: further overrides. With
    ``reuse``, a PRM already there is read back if it was built with today's settings;
    one whose model or training settings changed is trained again on the frames it kept
    (simulated again if the data settings changed too).
    """
    from embodied.commands.reward_train import run_reward_train

    run_dir = run_dir or prm_dir(task, quick)
    overrides = prm_overrides(task, quick, run_dir, extra)
    if (run_dir / "metrics.json").is_file():
        stale = changed_settings(run_dir, overrides)
        if reuse and not stale:
            return reused_prm(run_dir)
        if stale:
            print(f"{run_dir}: built with other {', '.join(stale)} settings than today's; "
                  "building it again", flush=True)
        if "data" not in stale and (run_dir / "data" / "meta.json").is_file():
            overrides.append(f"data.path={run_dir / 'data'}")
    run_reward_train(load_config("reward_train", overrides))
    return reused_prm(run_dir) | {"reused": False}


def data_policies(run: Path) -> str:
    """The ``data.policies`` override of :data:`POLICY_DATA` for the run folder ``run``."""
    p = POLICY_DATA
    return (f"data.policies=[{{checkpoint: {run}, stages: {p['stages']}, episodes: "
            f"{p['episodes']}, noise: {p['noise']}}}, {{checkpoint: random, episodes: 16}}]")


def visual_shift(task: str, quick: bool, reuse: bool, policy_data: Path | None = None,
                 coverage: Path | None = None, only: list[str] | None = None) -> dict:
    """PRMs with and without visual randomisation, scored by the visual-shift suite.

    ``coverage``: a PRM run folder scored as arm ``coverage`` (not trained here);
    ``only``: the arms to run (default: all).
    """
    from omegaconf import OmegaConf

    from embodied.commands.reward_train import run_reward_train
    from embodied.reward import make_reward_model
    from embodied.reward.prm.calibration import SuccessCalibration
    from embodied.reward.prm.data import load_frames
    from embodied.reward.prm.evaluate import shift_suite
    from embodied.reward.prm.inference import make_scorer

    root = bench_root(quick) / "visual_shift" / task
    shift = load_config("reward_eval", [f"task={task}"]).shift
    kinds = OmegaConf.to_container(shift.kinds, resolve=True)
    episodes = 8 if quick else int(shift.episodes)
    out: dict = {"task": task, "episodes_per_kind": episodes, "shift_seed": int(shift.seed),
                 "train_ranges": OmegaConf.to_container(
                     load_config("reward_train", []).visual, resolve=True),
                 "load_avg_1min_before": round(os.getloadavg()[0], 2)}
    arms = [("randomised", "train", []), ("plain", "none", [])]
    if policy_data is not None:
        arms.append(("randomised_policies", "train", [data_policies(policy_data)]))
        out["policy_data"] = {"run": str(policy_data), **POLICY_DATA}
    if coverage is not None:
        arms.append(("coverage", "", []))
        out["coverage_prm"] = str(coverage)
    for arm, visual, extra in arms:
        if only and arm not in only:
            continue
        run_dir = coverage if arm == "coverage" else root / arm
        start = time.perf_counter()
        if arm != "coverage" and not (reuse and (run_dir / "metrics.json").is_file()):
            overrides = [f"task={task}", f"run_dir={run_dir}", f"visual={visual}",
                         "torch_threads=1", *TASK_OVERRIDES.get(task, []), *extra]
            if quick:
                overrides += ["data.episodes=16", "data.batch_envs=8", "data.stride=10",
                              "train.epochs=1"]
            run_reward_train(load_config("reward_train", overrides))
        model = make_reward_model({"name": "prm", "checkpoint": str(run_dir)})
        data = load_frames(model.info["data"])
        held_out = json.loads((run_dir / "metrics.json").read_text())
        figures = {"held_out": {k: held_out[k] for k in (*METRIC_KEYS, "success_ece")
                                if k in held_out},
                   "success_calibration": model.info.get("success_calibration"),
                   "data_seconds": model.info["data_seconds"],
                   "train_seconds": model.info["train"]["train_seconds"],
                   "train_states": model.info["train"]["train_states"]}
        suite = shift_suite(model, data, kinds, episodes, int(shift.seed), int(shift.batch_envs),
                            cache=root / "shift_data", plot=run_dir / "eval_shift.png")
        figures["shift"] = suite["kinds"]
        figures["plot"] = suite["plot"]
        model.predict = make_scorer(model.net, SuccessCalibration())  # the raw success head
        raw = shift_suite(model, data, kinds, episodes, int(shift.seed), int(shift.batch_envs),
                          cache=root / "shift_data")
        figures["shift_raw_head"] = {k: {m: v[m] for m in ("success_f1", "success_ece")}
                                     for k, v in raw["kinds"].items()}
        figures["wall_seconds"] = round(time.perf_counter() - start, 1)
        out[arm] = figures
    out["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    return out


def policy_states(task: str, quick: bool, eval_policy: Path, coverage: Path | None = None,
                  only: list[str] | None = None) -> dict:
    """The PRMs of the ``visual_shift_<task>`` section on rollouts of ``eval_policy``.

    ``coverage``: a further PRM run folder, arm ``coverage``; ``only``: the arms to run.
    """
    from embodied.reward import make_reward_model
    from embodied.reward.prm.data import load_frames
    from embodied.reward.prm.evaluate import (
        policy_state_config,
        policy_state_metrics,
        shift_dataset,
    )
    from embodied.reward.prm.text import paraphrase

    root = bench_root(quick) / "visual_shift" / task
    arms = {d.name: d for d in sorted(root.glob("*")) if (d / "prm.pt").is_file()}
    if coverage is not None:
        arms["coverage"] = coverage
    arms = {name: d for name, d in arms.items() if not only or name in only}
    if not arms:
        raise SystemExit(f"error: no PRMs under {root}; run --only visual_shift_{task} first")
    ev = POLICY_EVAL | ({"stages": 2, "episodes": 8} if quick else {})
    out: dict = {"task": task, "policy": str(eval_policy), **ev,
                 "load_avg_1min_before": round(os.getloadavg()[0], 2), "arms": {}}
    for name, run_dir in arms.items():
        model = make_reward_model({"name": "prm", "checkpoint": str(run_dir)})
        own = load_frames(model.info["data"], mmap=True)
        cfg = policy_state_config(own, str(eval_policy), ev["stages"], ev["episodes"],
                                  ev["noise"], ev["seed"])
        size = f"{own.meta['width']}x{own.meta['height']}"
        data = shift_dataset(cfg, root / f"policy_states_{eval_policy.name}_{size}")
        rng = np.random.default_rng(ev["seed"])
        paraphrases = list(dict.fromkeys(paraphrase(data.instruction, rng, held_out=True)
                                         for _ in range(4)))
        out["arms"][name] = policy_state_metrics(model, data, paraphrases)
    out["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    return out


def with_kept_arms(name: str, section: dict, quick: bool) -> dict:
    """``section`` (``name``) with the arms of the result file's section it did not run.

    Kept arms carry ``ran``: the date of the run that measured them. A policy-state
    section keeps none when it rolled out another policy than the file's: their figures
    are of other states.
    """
    path = RESULTS / f"reward_model{'.quick' if quick else ''}.json"
    old = json.loads(path.read_text()).get(name) if path.is_file() else None
    nested = "arms" in section  # policy_states: under "arms"; visual_shift: top level
    if not old or (nested and old.get("policy") != section.get("policy")):
        return section
    new_arms, old_arms = (section["arms"], old["arms"]) if nested else (section, old)
    new_arms.update(kept_arms({a: old_arms[a] for a in SHIFT_ARMS if a in old_arms},
                              new_arms, old.get("date")))
    if not nested and "policy_data" in old and "randomised_policies" in new_arms:
        section.setdefault("policy_data", old["policy_data"])
    return section


def timed(fn, units: int, seconds: float) -> dict:
    """Mean and best units/s of ``fn`` over at least ``seconds``, and CPU s per call."""
    fn()
    walls, cpus, start = [], [], time.perf_counter()
    while time.perf_counter() - start < seconds or len(walls) < 3:
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {"per_s": round(units * len(walls) / sum(walls), 1),
            "best_per_s": round(units / min(walls), 1),
            "cpu_s_per_call": round(float(np.median(cpus)), 4)}


def throughput(ckpt: Path, quick: bool) -> dict:
    """Scoring 256 x 3 views (96x96 and 64x64): fast path, plain predict, rendering."""
    from embodied.reward import make_reward_model
    from sim import make_env

    torch.set_num_threads(2)
    model = make_reward_model({"name": "prm", "checkpoint": str(ckpt)})
    batch, seconds = (32, 1.0) if quick else (256, 5.0)
    gen = torch.Generator().manual_seed(0)
    cams = list(model.model_cameras)
    texts = [model.instruction or "x"] * batch
    out = {"batch": batch, "views": len(cams), "torch_threads": torch.get_num_threads(),
           "load_avg_1min_before": round(os.getloadavg()[0], 2)}
    for size in (96, 64):
        frames = torch.randint(0, 256, (batch, len(cams), size, size, 3), dtype=torch.uint8,
                               generator=gen)
        # one thread: what a core does; less hurt by other processes' load than two
        for threads, suffix in ((2, ""), (1, "_one_thread")):
            torch.set_num_threads(threads)
            out[f"score_{size}{suffix}"] = timed(
                lambda f=frames: model.score(f, texts, cameras=cams), batch, seconds)
            with torch.inference_mode():
                out[f"predict_{size}{suffix}"] = timed(
                    lambda f=frames: model.net.predict(f, texts), batch, seconds)
            out[f"fast_over_predict_{size}{suffix}"] = round(
                out[f"score_{size}{suffix}"]["per_s"] / out[f"predict_{size}{suffix}"]["per_s"],
                2)
    torch.set_num_threads(2)
    env = make_env(str(model.info.get("task") or SPEED_TASK), num_envs=16, seed=0)
    try:
        for size in (96, 64):
            out[f"render_{size}"] = timed(
                lambda s=size: env.render(cams, width=s, height=s), 16, seconds)
    finally:
        env.close()
    for size in (96, 64):
        out[f"score_over_render_{size}"] = round(
            out[f"score_{size}"]["per_s"] / out[f"render_{size}"]["per_s"], 2)
    out["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    return out


SETTINGS = ("task", "reward", "algo", "num_envs", "seed", "sim")  # what a reused run must share


def same_settings(run_dir: Path, cfg: Any) -> bool:
    """True if the run in ``run_dir`` was trained with ``cfg``'s ``SETTINGS`` sections.

    Prints the first difference otherwise (the run is then trained again): a run of the
    same name from other settings (another value clip, shaping, PRM) is never reused.
    """
    from omegaconf import OmegaConf

    saved = OmegaConf.load(run_dir / "config.yaml")
    for key in SETTINGS:
        want = OmegaConf.select(cfg, key)
        have = OmegaConf.select(saved, key)
        want = OmegaConf.to_container(want, resolve=True) if OmegaConf.is_config(want) else want
        have = OmegaConf.to_container(have, resolve=True) if OmegaConf.is_config(have) else have
        if want != have:
            print(f"reuse: {run_dir} was trained with other {key} settings; training it again")
            return False
    return True


def ppo_run(task: str, name: str, overrides: list[str], budget: int, prm: Path | None,
            root: Path, extra: list[str] = (), seed: int = 0, reuse: bool = False) -> dict:
    """One ``embodied train`` run; its success curve and summary figures.

    ``reuse``: a finished run of at least ``budget`` env steps already in the run folder is
    read instead of trained again.
    """
    from embodied.commands.train import run_train
    from embodied.rl.logger import read_metrics

    run_dir = root / task / (name if seed == 0 else f"{name}_seed{seed}")
    done = run_dir / "summary.json"
    args = [f"task={task}", *overrides, f"total_env_steps={budget}", f"seed={seed}",
            "save_interval=0", "progress=false", "eval.video_envs=0",
            f"run_dir={run_dir}", *extra]
    if "reward=prm" in overrides:
        args.append(f"reward.checkpoint={prm}")
    cfg = load_config("train", args)
    if (reuse and done.is_file() and json.loads(done.read_text())["env_steps"] >= budget
            and same_settings(run_dir, cfg)):
        summary = json.loads(done.read_text())
    else:
        summary = run_train(cfg)
    m = read_metrics(run_dir / "metrics.csv")
    steps, success = np.array(m["env_steps"]), np.nan_to_num(np.array(m["success_rate"]))
    reached = np.flatnonzero(success >= 0.8)
    return {"env_steps": steps.tolist(), "success_rate": [round(float(s), 4) for s in success],
            "final_train_success": round(float(success[-1]), 4),
            "eval_success": summary["eval"]["success_rate"] if summary["eval"] else None,
            "env_steps_to_80": int(steps[reached[0]]) if len(reached) else None,
            "train_seconds": summary["train_seconds"],
            # over the whole run (the summary's is the last iteration's, which an online
            # PRM refresh every few rollouts may or may not fall in)
            "collection_fps": round(float(steps[-1] / np.sum(m["collection_s"])), 1),
            "collection_fps_last_iteration": round(float(summary["collection_fps"]), 1),
            "reward_timing": summary["reward_timing"]}


def ppo_speed(task: str, ckpt: Path, quick: bool) -> dict:
    """PPO collection steps/s on ``task``: sparse vs the PRM distilled vs direct."""
    envs, steps = (8, 8) if quick else (64, 16)
    per_iter = envs * steps
    runs = {"sparse": (["reward=sparse"], 2 if quick else 8),
            "prm_distilled": (["reward=prm"], 2 if quick else 8),
            "prm_direct": (["reward=prm", "reward.loop.scoring=direct"], 1 if quick else 2)}
    extra = [f"num_envs={envs}", f"algo.num_steps={steps}", "eval.num_envs=0"]
    out = {"task": task, "num_envs": envs, "steps_per_iteration": per_iter,
           "load_avg_1min_before": round(os.getloadavg()[0], 2)}
    for name, (overrides, iters) in runs.items():
        r = ppo_run(task, name, overrides, iters * per_iter, ckpt,
                    bench_root(quick) / "ppo_speed", extra)
        out[name] = {"env_steps": iters * per_iter, "collection_fps": r["collection_fps"],
                     "train_seconds": r["train_seconds"], "reward_timing": r["reward_timing"]}
    for name in ("prm_distilled", "prm_direct"):
        out[f"{name}_over_sparse"] = round(
            out[name]["collection_fps"] / out["sparse"]["collection_fps"], 3)
    out["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    return out


def targets(result: dict) -> dict:
    """Which of the issue's targets the figures meet (sections not run are left out)."""
    out = {}
    for task in TASKS:
        if task in result:
            m = result[task]
            out[task] = {"voc>=0.9": m["voc"] >= 0.9, "voc_reversed<=-0.8":
                         m["voc_reversed"] <= -0.8, "success_f1>=0.9": m["success_f1"] >= 0.9}
    for task in SHIFT_TASKS:
        section = result.get(f"visual_shift_{task}")
        for arm, suffix in (("randomised", ""), ("coverage", "_coverage")):
            if section and arm in section:
                shifted = {k: v for k, v in section[arm]["shift"].items() if k != "none"}
                out[f"visual_shift_{task}{suffix}"] = {
                    "min_f1>=0.85": min(v["success_f1"] for v in shifted.values()) >= 0.85,
                    "min_pearson>=0.85": min(v["progress_pearson"]
                                             for v in shifted.values()) >= 0.85}
    section = result.get(f"policy_states_{POLICY_TASK}")
    if section:
        out[f"policy_states_{POLICY_TASK}"] = {arm: m["targets"]
                                               for arm, m in section["arms"].items()}
    if "throughput" in result:
        t = result["throughput"]
        out["score_obs_per_s_96>=2000"] = t["score_96"]["per_s"] >= 2000
        out["score_obs_per_s_96_one_thread>=2000"] = t["score_96_one_thread"]["per_s"] >= 2000
    return out


def main() -> None:
    p = parser(__doc__.splitlines()[0], SECTIONS)
    p.add_argument("--reuse-prm", action="store_true",
                   help="keep the PRMs an earlier run trained (report their metrics)")
    p.add_argument("--policy-data", type=Path, default=None,
                   help=f"visual_shift_{POLICY_TASK}: also train a PRM with rollouts of this "
                        "run folder's checkpoints (a PPO run of `embodied train`)")
    p.add_argument("--eval-policy", type=Path, default=None,
                   help=f"policy_states_{POLICY_TASK}: the run folder of `embodied train` "
                        "whose checkpoints are rolled out (another run than --policy-data)")
    p.add_argument("--coverage-prm", type=Path, default=None,
                   help="visual_shift_<its task> (and policy_states_<its task>): also "
                        "score this PRM run folder (arm coverage), e.g. runs/bench/reward/"
                        "prm_coverage/panda_push of bench/reward_rl.py")
    p.add_argument("--shift-arm", action="append", choices=SHIFT_ARMS, default=None,
                   help="run only these arms of those sections (repeatable); the others are "
                        "kept from the result file")
    args = p.parse_args()
    coverage_task = None
    if args.coverage_prm is not None:
        if not (args.coverage_prm / "prm.pt").is_file():
            p.error(f"--coverage-prm {args.coverage_prm}: no prm.pt there; pass a run folder "
                    "of `embodied reward train`")
        from embodied.reward.prm.checkpoint import load_prm

        coverage_task = load_prm(args.coverage_prm)[1].get("task")
        if coverage_task not in SHIFT_TASKS:
            p.error(f"--coverage-prm {args.coverage_prm}: a PRM of {coverage_task}; the "
                    f"visual-shift sections are of {', '.join(SHIFT_TASKS)}")
    for run in (args.policy_data, args.eval_policy):
        if run is not None and not (run / "checkpoints").is_dir():
            p.error(f"{run} has no checkpoints/ folder; pass a run folder of `embodied train`")
    if f"policy_states_{POLICY_TASK}" in (args.only or []) and args.eval_policy is None:
        p.error(f"--only policy_states_{POLICY_TASK} needs --eval-policy RUN (a run "
                f"folder of `embodied train task={POLICY_TASK}`)")
    reuse = args.reuse_prm
    quick = args.quick
    only = args.only or SECTIONS
    start = time.perf_counter()
    figures: dict = {}
    for task in TASKS[:1] if quick else TASKS:
        if task in only:
            figures[task] = train_prm(task, quick, reuse)
    for task in SHIFT_TASKS[:1] if quick else SHIFT_TASKS:
        if f"visual_shift_{task}" in only:
            figures[f"visual_shift_{task}"] = visual_shift(
                task, quick, reuse, args.policy_data if task == POLICY_TASK else None,
                args.coverage_prm if coverage_task == task else None, args.shift_arm)
    if f"policy_states_{POLICY_TASK}" in only and args.eval_policy is not None:
        figures[f"policy_states_{POLICY_TASK}"] = policy_states(
            POLICY_TASK, quick, args.eval_policy,
            args.coverage_prm if coverage_task == POLICY_TASK else None, args.shift_arm)
    if args.shift_arm:
        for name in [n for n in figures if n.startswith(("visual_shift_", "policy_states_"))]:
            figures[name] = with_kept_arms(name, figures[name], quick)
    speed_task = TASKS[0] if quick else SPEED_TASK
    ckpt = prm_dir(speed_task, quick)
    if not (ckpt / "prm.pt").is_file() and {"throughput", "ppo_speed"} & set(only):
        figures[speed_task] = train_prm(speed_task, quick, reuse=True)
    if "throughput" in only:
        figures["throughput"] = throughput(ckpt, quick)
    if "ppo_speed" in only:
        figures["ppo_speed"] = ppo_speed(speed_task, ckpt, quick)
    for section in figures.values():  # merged files keep each section's own date
        section["date"] = time.strftime("%Y-%m-%d %H:%M:%S")
    figures["wall_seconds"] = round(time.perf_counter() - start, 1)
    if args.only:
        figures = merge_sections("reward_model", quick, figures, [*args.only, "wall_seconds"])
    figures["targets"] = targets(figures)
    write_result("reward_model", quick, figures)


if __name__ == "__main__":
    main()
