"""PPO: our learner against rsl_rl and stable-baselines3, time to 95% success, in one run.

Sections (one function per task; each returns a JSON-ready dict):

* ``panda_reach``, each contender over ``seeds`` (mean, per-seed values, spread):
  (a) ours, embodied PPO with the shipped panda_reach settings
  (configs/algo/ppo/panda_reach.yaml); (r) rsl_rl (rsl-rl-lib, the PPO Isaac Lab and
  mjlab train with) with the same settings, through bench/peers/rsl_rl_adapter.py in its
  own venv (``scripts/peer_env.sh rsl_rl``; left out, with the reason recorded, when that
  venv does not exist); (b) SB3 PPO with its documented defaults
  (n_steps 2048 per env, batch 64, 10 epochs, lr 3e-4, 64-64 tanh) on 8 envs, the
  peers' setting in DESIGN.md; (c) SB3 PPO tuned to our settings (same num_envs,
  rollout length, minibatch size, epochs, lr, gamma, lambda, clips, loss weights,
  networks, initial action std). All run through the same batched env (SB3 through
  ``SB3VecEnv`` + ``VecNormalize`` for observations, as ours normalises them) and
  are evaluated the same way: the deterministic policy on the same fixed
  ``EVAL_EPISODES`` episodes (one per env, reseeded each time), every
  ``EVAL_EVERY_STEPS`` env steps (at the next update boundary). Training wall-clock
  excludes evaluation time (reported separately). Ours trains until 95% or its
  budget, and so does rsl_rl; each SB3 contender gets ``SB3_FACTOR`` x ours' time to 95%
  of the same seed (capped by ``sb3_cap_s``). ``ratio_vs_ours`` = a contender's mean time
  to 95% / ours' (targets in ``RATIO_TARGETS``); if it missed 95% in a seed,
  ``ratio_vs_ours_lower_bound`` uses its budget for that seed. Also the throughput split of
  ours (collection vs learning steps/s) against raw env stepping in the same run,
  and a PNG of success against wall-clock (bench/results/ppo_panda_reach.png).
* ``panda_push``: the shipped settings (configs/algo/ppo/panda_push.yaml) with the
  task's dense (oracle) reward, ``push_seeds`` seeds for each action space of
  ``push_action_spaces`` (``--push-actions`` picks some; the others train the shipped
  settings with ``task.action`` overridden, at the same control rate and horizon):
  deterministic success on the fixed evaluation episodes against env steps, its mean
  over seeds.
* ``panda_pick_place``: the shipped settings (configs/algo/ppo/panda_pick_place.yaml)
  with the task's dense (oracle) reward over ``PICK["seeds"]`` seeds (``--pick-seeds``),
  each until its config's env steps (``--pick-env-steps`` overrides) or
  ``PICK["budget_s"]`` of training (``--pick-budget-s``): deterministic success on the
  fixed evaluation episodes against env steps, its mean over seeds.
* ``go2_walk``: a hook for the per-task settings (configs/algo/ppo/go2_walk.yaml;
  skipped with the reason recorded when that file does not exist): velocity tracking
  error and distance walked under a constant 0.5 m/s forward command
  (embodied.locomotion_eval.evaluate_velocity_tracking).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch
from common import RESULTS, merge_sections, parser, rate, write_result
from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger

from embodied.config import config_dir, load_config
from embodied.envs import make_train_env
from embodied.learners.sb3 import build_model, sb3_policy, wrap_env
from embodied.rl import OnPolicyRunner, PPOConfig
from embodied.rl.evaluate import evaluate
from robots.actions import ENV_ACTION_KINDS
from sim.adapters.sb3_vec import SB3VecEnv

TARGET = 0.95
EVAL_SEED = 12_345
SB3_FACTOR = 10.0  # SB3 contenders get this many times ours' time to 95% ...
# budget_s: ours' training budget; sb3_cap_s: the cap on each SB3 contender's budget;
# hook_*: the panda_push/go2_walk sections (quick: fewer envs); hook_budget_s per task
# caps each training's wall-clock (panda_push stops at its 3M env steps first on an idle
# 2-core machine); go2_walk gets the 30 minutes. push_*: the panda_push section's
# seeds and action spaces. A full run takes about 75 minutes on 2 cores plus the push
# section's trainings.
FULL = {"seeds": [0, 1, 2], "budget_s": 600.0, "sb3_cap_s": 480.0, "eval_episodes": 64,
        "eval_every_iterations": 5,
        "hook_budget_s": {"panda_push": 1800.0, "go2_walk": 1800.0}, "hook_eval_episodes": 64,
        "hook_overrides": [], "go2_eval_seconds": 10.0, "raw_seconds": 3.0,
        "push_seeds": 3,
        "push_action_spaces": ["ee_delta_yaw_closed", "ee_delta", "joint_delta", "joint_position"]}
QUICK = {"seeds": [0], "budget_s": 5.0, "sb3_cap_s": 5.0, "eval_episodes": 16,
         "eval_every_iterations": 2,
         "hook_budget_s": {"panda_push": 1.0, "go2_walk": 1.0}, "hook_eval_episodes": 4,
         "hook_overrides": ["num_envs=32"], "go2_eval_seconds": 1.5, "raw_seconds": 0.3,
         "push_seeds": 1, "push_action_spaces": ["ee_delta_yaw_closed"]}
# panda_pick_place section: seeds, wall-clock cap per training, evaluation episodes and
# the number of evaluations over a training; quick: a few iterations on 32 envs.
PICK = {"seeds": 3, "budget_s": 3600.0, "eval_episodes": 64, "evaluations": 20,
        "env_steps": None, "overrides": []}
PICK_QUICK = {"seeds": 1, "budget_s": 5.0, "eval_episodes": 4, "evaluations": 2,
              "env_steps": 2048, "overrides": ["num_envs=32"]}
Policy = Callable[[torch.Tensor], torch.Tensor]
RSL_RL_PYTHON = Path(__file__).resolve().parent.parent / ".venv-rsl_rl" / "bin" / "python"
CONTENDERS = ("ours", "rsl_rl", "sb3_default", "sb3_tuned")
RATIO_TARGETS = {"rsl_rl": 1.0, "sb3_tuned": 3.0}  # contender's time to 95% / ours, at least


# ------------------------------------------------------------------ helpers
def train_cfg(task: str, *overrides: str) -> DictConfig:
    """``embodied train task=<task>``'s composed config (per-task PPO settings included)."""
    return load_config("train", [f"task={task}", "progress=false", *overrides])


class Probe:
    """Deterministic success on a fixed set of episodes; accumulates its own wall-clock."""

    def __init__(self, cfg: DictConfig, episodes: int):
        self.env = make_train_env(cfg, episodes, EVAL_SEED)
        self.seconds = 0.0

    def __call__(self, policy: Policy) -> float:
        start = time.perf_counter()
        self.env.reset(seed=EVAL_SEED)  # the same episodes every time (evaluate resets again)
        success = evaluate(policy, self.env)["success_rate"]
        self.seconds += time.perf_counter() - start
        return float(success)

    def close(self) -> None:
        self.env.close()


class CpuClock:
    """Process CPU time (every thread: the physics pool too) spent in wrapped calls, and
    the machine's load average sampled at each evaluation.

    CPU seconds depend much less on other processes than wall-clock does, so they show
    the contenders' costs beside the wall-clock figures on a shared machine; the load
    samples say what the wall-clock figures were measured under.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.curve: list[float] = []  # CPU seconds at each evaluation
        self.loads: list[float] = []  # 1-minute load average at each evaluation

    def timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with its process CPU time added to :attr:`seconds`."""
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - start
        return wrapper

    def mark(self) -> None:
        """Record the CPU seconds and the load at an evaluation."""
        self.curve.append(self.seconds)
        self.loads.append(os.getloadavg()[0])

    def result(self, curve: list[tuple[float, int, float]]) -> dict[str, Any]:
        """The contender's CPU figures: CPU seconds to 95% (None if not reached), in all,
        and the mean load over its evaluations."""
        hit = next((i for i, c in enumerate(curve) if c[2] >= TARGET), None)
        return {"cpu_s_to_95": round(self.curve[hit], 2) if hit is not None else None,
                "train_cpu_s": round(self.seconds, 2), "cpu_s_curve": [round(c, 2) for c in
                                                                       self.curve],
                "load_avg_mean": round(sum(self.loads) / len(self.loads), 2)
                if self.loads else None}


def contender_result(curve: list[tuple[float, int, float]], budget_s: float, train_s: float,
                     env_steps: int, eval_s: float, **extra: Any) -> dict[str, Any]:
    """The per-contender JSON: time/steps to 95% (None if not reached), best, the curve."""
    hit = next((c for c in curve if c[2] >= TARGET), None)
    return {
        "wall_s_to_95": round(hit[0], 2) if hit else None,
        "env_steps_to_95": hit[1] if hit else None,
        "best_success": max((c[2] for c in curve), default=None),
        "success_curve": [(round(w, 2), s, round(ok, 4)) for w, s, ok in curve],
        "budget_s": round(budget_s, 1),
        "train_wall_s": round(train_s, 2),
        "env_steps": env_steps,
        "eval_wall_s": round(eval_s, 2),
        **extra,
    }


class _Rows:
    """A MetricsLogger stand-in that keeps the runner's rows in memory."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def log(self, row: dict[str, Any]) -> None:
        self.rows.append(row)


def run_ours(cfg: DictConfig, budget_s: float, eval_every: int, probe: Probe,
             target: float | None = TARGET) -> tuple[dict[str, Any], OnPolicyRunner]:
    """Our PPO until ``target`` deterministic success (None: the config's iterations) or budget."""
    torch.set_num_threads(int(cfg.torch_threads))
    env = make_train_env(cfg, int(cfg.num_envs), int(cfg.seed))
    algo = PPOConfig.from_dict(OmegaConf.to_container(cfg.algo, resolve=True))
    sink, curve, cpu = _Rows(), [], CpuClock()
    with tempfile.TemporaryDirectory() as tmp:
        runner = OnPolicyRunner(env, algo, tmp, seed=int(cfg.seed), save_interval=0,
                                progress=False)
        # the CPU clock sees what the wall clock (runner.wall_time) sees
        runner.collect = cpu.timed(runner.collect)  # type: ignore[method-assign]
        runner.alg.update = cpu.timed(runner.alg.update)  # type: ignore[method-assign]
        while True:  # one iteration at a time, so the budget stops within an iteration
            runner.learn(runner.iteration + 1, sink)
            over = (runner.wall_time >= budget_s
                    or runner.iteration >= int(cfg.max_iterations))
            if runner.iteration % eval_every == 0 or over:
                cpu.mark()
                curve.append((runner.wall_time, runner.global_step, probe(runner.policy)))
                print(f"  ours: {curve[-1]}", flush=True)
                if target is not None and curve[-1][2] >= target:
                    break
            if over:
                break
    env.close()
    rows = sink.rows
    collect_s = sum(r["collection_s"] for r in rows)
    learn_s = sum(r["learning_s"] for r in rows)
    steps = runner.global_step
    result = contender_result(
        curve, budget_s, runner.wall_time, steps, probe.seconds, num_envs=int(cfg.num_envs),
        iterations=runner.iteration, **cpu.result(curve),
        collection_steps_per_s=round(steps / collect_s) if collect_s else None,
        learning_steps_per_s=round(steps / learn_s) if learn_s else None,
        learning_time_fraction=round(learn_s / (collect_s + learn_s), 3) if rows else None)
    return result, runner


class _SB3Probe(BaseCallback):
    """Evaluates at update boundaries every ``every`` env steps; stops at 95% or the budget.

    SB3 calls ``_on_rollout_start`` after each update; the clock pauses for evaluations.
    Collection (rollout start to end) and learning (the rest) are timed separately.
    """

    def __init__(self, probe: Probe, budget_s: float, every: int):
        super().__init__()
        self.probe, self.budget_s, self.every = probe, budget_s, every
        self.curve: list[tuple[float, int, float]] = []
        self.collect_s = self.learn_s = 0.0
        self._mark = 0.0
        self.cpu = CpuClock()  # the same spans as the wall clock
        self._cpu_mark = 0.0
        self._stop = False
        self._last_eval = 0

    def _on_training_start(self) -> None:
        self._mark, self._cpu_mark = time.perf_counter(), time.process_time()

    @property
    def train_s(self) -> float:
        return self.collect_s + self.learn_s

    def _on_rollout_start(self) -> None:
        now = time.perf_counter()
        if self.num_timesteps:  # after an update
            self.learn_s += now - self._mark
            self.cpu.seconds += time.process_time() - self._cpu_mark
            if self.num_timesteps - self._last_eval >= self.every:
                self._last_eval = self.num_timesteps
                self.cpu.mark()
                success = self.probe(sb3_policy(self.model, self.model.get_env()))
                self.curve.append((self.train_s, self.num_timesteps, success))
                print(f"  sb3: {self.curve[-1]}", flush=True)
                self._stop = success >= TARGET
            self._stop = self._stop or self.train_s >= self.budget_s
        self._mark, self._cpu_mark = time.perf_counter(), time.process_time()

    def _on_rollout_end(self) -> None:
        now, cpu_now = time.perf_counter(), time.process_time()
        self.collect_s += now - self._mark
        self.cpu.seconds += cpu_now - self._cpu_mark
        self._mark, self._cpu_mark = now, cpu_now

    def _on_step(self) -> bool:
        return not self._stop


def sb3_ppo_config(hyperparams: dict[str, Any], policy_kwargs: dict[str, Any]
                   ) -> dict[str, Any]:
    """An ``algo`` dict for :func:`embodied.learners.sb3.build_model` (SB3 PPO)."""
    return {"name": "sb3_ppo", "normalize_obs": True, "normalize_reward": False,
            "clip_obs": 10.0, "hyperparams": hyperparams, "policy_kwargs": policy_kwargs}


def sb3_defaults(quick: bool) -> dict[str, Any]:
    """SB3 PPO's documented defaults (quick: n_steps 256, so a rollout fits the smoke run)."""
    base = load_config("train", ["algo=sb3_ppo"]).algo
    algo = OmegaConf.to_container(base, resolve=True)
    if quick:
        algo["hyperparams"]["n_steps"] = 256
    return algo


def sb3_tuned(cfg: DictConfig) -> dict[str, Any]:
    """SB3 PPO with our settings: rollout, minibatches, epochs, lr, losses, networks, std."""
    a = cfg.algo
    batch = int(cfg.num_envs) * int(a.num_steps)
    if a.schedule != "fixed":
        print(f"note: our lr schedule is {a.schedule!r}; SB3 has no KL-adaptive lr: fixed lr")
    return sb3_ppo_config(
        {"learning_rate": float(a.learning_rate), "n_steps": int(a.num_steps),
         "batch_size": batch // int(a.num_mini_batches), "n_epochs": int(a.num_epochs),
         "gamma": float(a.gamma), "gae_lambda": float(a.lam), "clip_range": float(a.clip),
         "clip_range_vf": None if a.value_clip is None else float(a.value_clip),
         "ent_coef": float(a.entropy_coef),
         "vf_coef": float(a.value_loss_coef), "max_grad_norm": float(a.max_grad_norm),
         "normalize_advantage": True},
        {"net_arch": {"pi": list(a.actor_hidden), "vf": list(a.critic_hidden)},
         "activation_fn": str(a.activation), "log_std_init": math.log(float(a.init_noise_std))})


def run_sb3(cfg: DictConfig, algo: dict[str, Any], num_envs: int, budget_s: float,
            every: int, probe: Probe) -> dict[str, Any]:
    """One SB3 PPO contender on ``num_envs`` envs of the task, evaluated like ours."""
    torch.set_num_threads(int(cfg.torch_threads))
    env = wrap_env(SB3VecEnv(make_train_env(cfg, num_envs, int(cfg.seed))), algo)
    model = build_model(algo, env, int(cfg.seed))
    model.set_logger(Logger(folder=None, output_formats=[]))
    callback = _SB3Probe(probe, budget_s, every)
    model.learn(total_timesteps=10**12, callback=callback)
    env.close()
    steps = int(model.num_timesteps)
    c, learn = callback.collect_s, callback.learn_s
    return contender_result(
        callback.curve, budget_s, callback.train_s, steps, probe.seconds, num_envs=num_envs,
        **callback.cpu.result(callback.curve),
        hyperparams={k: v for k, v in algo["hyperparams"].items() if v is not None},
        policy_kwargs={k: v for k, v in (algo.get("policy_kwargs") or {}).items()
                       if v is not None},
        collection_steps_per_s=round(steps / c) if c else None,
        learning_steps_per_s=round(steps / learn) if learn else None,
        learning_time_fraction=round(learn / (c + learn), 3) if c + learn else None)


def raw_env_rate(cfg: DictConfig, num_envs: int, seconds: float) -> float:
    """Env steps/s of the task's batched env, zero actions (as bench/sim_throughput.py)."""
    env = make_train_env(cfg, num_envs, int(cfg.seed))
    env.reset()
    actions = torch.zeros(num_envs, env.action_dim)
    value = rate(lambda: env.step(actions), num_envs, seconds)
    env.close()
    return value


def plot_contenders(results: dict[str, dict[str, Any]], path: Path, title: str) -> Path:
    """Deterministic success against training wall-clock, one line per contender."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.6), dpi=120)
    for i, (name, res) in enumerate(results.items()):
        label = f"{name} ({res['num_envs']} envs)"
        for run in res.get("runs", [res]):  # one line per seed, one colour per contender
            if curve := run["success_curve"]:
                ax.plot([c[0] for c in curve], [c[2] for c in curve], marker=".", lw=1.2,
                        color=f"C{i}", alpha=0.8, label=label)
                label = None
    ax.axhline(TARGET, color="gray", ls="--", lw=1, label=f"{TARGET:.0%}")
    ax.set_xscale("log")  # every point is after at least one iteration: wall > 0
    ax.set_xlabel("training wall-clock [s] (evaluation excluded)")
    ax.set_ylabel("deterministic success")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


# ----------------------------------------------------------------- sections
def run_rsl_rl(task: str, seed: int, budget_s: float, s: dict[str, Any]) -> dict[str, Any]:
    """The rsl_rl contender (bench/peers/rsl_rl_adapter.py) in the peer venv, one seed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        subprocess.run([str(RSL_RL_PYTHON), str(Path(__file__).parent / "peers" /
                                                "rsl_rl_adapter.py"),
                        "--task", task, "--seed", str(seed), "--budget-s", str(budget_s),
                        "--eval-episodes", str(s["eval_episodes"]),
                        "--eval-every", str(s["eval_every_iterations"]), "--out", str(out)],
                       check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def across_seeds(runs: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """One contender over seeds: means (time/steps to 95% only if every seed reached it),
    the per-seed values and their spread, and each run's full result under ``runs``."""
    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    walls = [r["wall_s_to_95"] for r in runs]
    steps = [r["env_steps_to_95"] for r in runs]
    cpus = [r.get("cpu_s_to_95") for r in runs]
    loads = [r["load_avg_mean"] for r in runs if r.get("load_avg_mean") is not None]
    reached = [w for w in walls if w is not None]
    rates = {k: [r[k] for r in runs if r.get(k)] for k in ("collection_steps_per_s",
                                                            "learning_steps_per_s")}
    return {
        "wall_s_to_95": round(mean(walls), 2) if len(reached) == len(runs) else None,
        "env_steps_to_95": round(mean(steps)) if len(reached) == len(runs) else None,
        "reached_95": f"{len(reached)}/{len(runs)}",
        "seeds": seeds,
        "wall_s_to_95_per_seed": walls,
        "wall_s_to_95_spread": [min(reached), max(reached)] if reached else None,
        "env_steps_to_95_per_seed": steps,
        "cpu_s_to_95": round(mean([c for c in cpus if c is not None]), 2)
        if all(c is not None for c in cpus) else None,
        "cpu_s_to_95_per_seed": cpus,
        "load_avg_mean": round(mean(loads), 2) if loads else None,
        "wall_s_or_budget_mean": round(mean([w if w is not None else r["train_wall_s"]
                                             for w, r in zip(walls, runs, strict=True)]), 2),
        "best_success": round(mean([r["best_success"] or 0.0 for r in runs]), 4),
        "num_envs": runs[0]["num_envs"],
        "collection_steps_per_s": round(mean(rates["collection_steps_per_s"]))
        if rates["collection_steps_per_s"] else None,
        "learning_steps_per_s": round(mean(rates["learning_steps_per_s"]))
        if rates["learning_steps_per_s"] else None,
        "runs": runs,
    }


def panda_reach(quick: bool, s: dict[str, Any]) -> dict[str, Any]:
    """Ours vs rsl_rl vs SB3 defaults vs SB3 tuned: time and env steps to 95% deterministic
    success over ``s["seeds"]``. Seed by seed, every contender runs in turn (ours, rsl_rl,
    SB3 tuned, SB3 defaults: about the same load on the shared machine for each seed);
    after every seed the section so far is merged into the result file
    (``seeds_completed`` says how far it got)."""
    cfg = train_cfg("panda_reach")
    n = int(cfg.num_envs)
    raw = {n: round(raw_env_rate(cfg, n, s["raw_seconds"])), 8: None}
    raw_before = raw[n]
    raw[8] = round(raw_env_rate(cfg, 8, s["raw_seconds"]))
    print(f"raw env steps/s: {raw}", flush=True)

    seeds = list(s["seeds"])
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CONTENDERS}
    sb3_budgets: list[float] = []
    raw_after = None
    probe = Probe(cfg, s["eval_episodes"])

    def summary() -> dict[str, Any]:
        return reach_summary(quick, s, cfg, runs, sb3_budgets, (raw_before, raw_after), raw)

    every = s["eval_every_iterations"] * n * int(cfg.algo.num_steps)
    for seed in seeds:  # every contender's run of a seed in one stretch of the machine's load
        seed_cfg = train_cfg("panda_reach", f"seed={seed}")
        print(f"ours, seed {seed}", flush=True)
        probe.seconds = 0.0
        ours = run_ours(seed_cfg, s["budget_s"], s["eval_every_iterations"], probe)[0]
        runs["ours"].append(ours)
        if raw_after is None:
            # Raw stepping again right after ours' first training: the machine is shared,
            # so the ratio uses the mean of the two measurements around it (both reported).
            raw_after = round(raw_env_rate(cfg, n, s["raw_seconds"]))
            raw[n] = round((raw_before + raw_after) / 2)
        if RSL_RL_PYTHON.exists():
            print(f"rsl_rl, seed {seed}", flush=True)
            runs["rsl_rl"].append(run_rsl_rl("panda_reach", seed, s["budget_s"], s))
        ours_s = ours["wall_s_to_95"] or ours["train_wall_s"]
        sb3_budget = min(SB3_FACTOR * ours_s, s["sb3_cap_s"])
        sb3_budgets.append(round(sb3_budget, 1))
        for name, algo, num_envs in (  # tuned first: the contender with a ratio target
                ("sb3_tuned", sb3_tuned(seed_cfg), n),
                ("sb3_default", sb3_defaults(quick), 8)):
            print(f"{name}, seed {seed}", flush=True)
            probe.seconds = 0.0
            runs[name].append(run_sb3(seed_cfg, algo, num_envs, sb3_budget, every, probe))
        write_partial(quick, "panda_reach", summary())
    probe.close()
    return summary()


def write_partial(quick: bool, name: str, section: dict[str, Any]) -> None:
    """Merge a section in progress into the result file (a later write replaces it)."""
    figures = {"settings": QUICK if quick else FULL, "target_success": TARGET,
               "sb3_factor": SB3_FACTOR, name: {**section, "partial": True,
                                                "date": time.strftime("%Y-%m-%d %H:%M:%S")}}
    write_result("ppo", quick, merge_sections("ppo", quick, figures, [name]), echo=False)


def reach_summary(quick: bool, s: dict[str, Any], cfg: DictConfig,
                  runs: dict[str, list[dict[str, Any]]], sb3_budgets: list[float],
                  raw_before_after: tuple[int, int | None], raw: dict[int, int | None]
                  ) -> dict[str, Any]:
    """The panda_reach section from the runs so far: per-contender means over seeds,
    ratios to ours against ``RATIO_TARGETS``, the throughput split and the plot."""
    n = int(cfg.num_envs)
    every = s["eval_every_iterations"] * n * int(cfg.algo.num_steps)
    seeds = list(s["seeds"])
    contenders = {name: across_seeds(r, seeds[:len(r)]) for name, r in runs.items() if r}
    ours = contenders["ours"]
    ratio, lower = {}, {}
    for name, res in contenders.items():
        if name == "ours" or ours["wall_s_to_95"] is None:  # no ratio without ours' time
            continue
        if res["wall_s_to_95"] is not None:
            ratio[name] = round(res["wall_s_to_95"] / ours["wall_s_to_95"], 2)
        else:
            ratio[name] = None
            lower[name] = round(res["wall_s_or_budget_mean"] / ours["wall_s_to_95"], 2)
    cpu_ratio = {name: round(res["cpu_s_to_95"] / ours["cpu_s_to_95"], 2)
                 for name, res in contenders.items() if name != "ours"
                 and res.get("cpu_s_to_95") is not None and ours.get("cpu_s_to_95")}
    per_seed = {name: [round(t / o, 2) if t is not None and o is not None else None
                       for t, o in zip(res["wall_s_to_95_per_seed"],
                                       ours["wall_s_to_95_per_seed"], strict=False)]
                for name, res in contenders.items() if name != "ours"}
    met = {}  # a lower bound at or above the target meets it too; None: no number
    for name, target in RATIO_TARGETS.items():
        value = ratio[name] if ratio.get(name) is not None else lower.get(name)
        met[name] = None if value is None else value >= target
    ours_collect = ours["collection_steps_per_s"]
    plot = plot_contenders(contenders, RESULTS / f"ppo_panda_reach{'.quick' if quick else ''}.png",
                           f"panda_reach: deterministic success ({s['eval_episodes']} episodes) "
                           f"vs training wall-clock, {len(seeds)} seeds")
    return {
        "contenders": contenders,
        "seeds_completed": {name: len(r) for name, r in runs.items()},
        "ratio_vs_ours": ratio,
        "ratio_vs_ours_lower_bound": lower,
        "ratio_vs_ours_per_seed": per_seed,
        "ratio_targets": RATIO_TARGETS,
        "ratio_vs_ours_cpu": cpu_ratio,
        "cpu_note": "process CPU seconds (all threads: the physics pool too) over the same "
                    "spans as the training wall-clock; a figure beside the wall-clock "
                    "targets that depends much less on the other processes of a shared "
                    "machine; load_avg_mean: the 1-minute load average at the evaluations",
        "ratio_targets_met": met,
        "ratio_note": "contender's mean time to 95% over seeds / ours' mean; where a contender "
                      "missed 95% in some seed, ratio_vs_ours_lower_bound uses its training "
                      "time (its budget) for that seed (the true ratio is at least that)",
        "rsl_rl": "rsl-rl-lib in .venv-rsl_rl (scripts/peer_env.sh rsl_rl)"
                  if RSL_RL_PYTHON.exists() else
                  "skipped: no .venv-rsl_rl (make it with scripts/peer_env.sh rsl_rl)",
        "sb3_budget_s_per_seed": sb3_budgets,
        "eval": {"episodes": s["eval_episodes"], "every_env_steps": every,
                 "policy": "deterministic (mean action)", "seed": EVAL_SEED},
        "throughput": {
            "ours_collection_steps_per_s": ours_collect,
            "ours_learning_steps_per_s": ours["learning_steps_per_s"],
            "raw_env_steps_per_s": raw,
            "raw_env_steps_per_s_before_after": list(raw_before_after),
            "collection_vs_raw_env": round(ours_collect / raw[n], 3) if ours_collect else None,
            "learning_vs_collection": round(ours["learning_steps_per_s"] / ours_collect, 3)
            if ours_collect else None,
            "note": f"raw: the same batched env stepped with zero actions, no policy ({n} envs: "
                    "mean of a measurement before and after ours' first training; 8 envs: "
                    "before); collection adds policy inference, observation normalisation and "
                    "GAE; ours' rates are means over seeds",
        },
        "plot": str(plot.relative_to(RESULTS.parent.parent)),
    }


def _per_task_config(task: str) -> Path:
    return config_dir() / "algo" / "ppo" / f"{task}.yaml"


def _skipped(task: str) -> dict[str, Any] | None:
    path = _per_task_config(task)
    if not path.exists():
        return {"skipped": f"{path.relative_to(config_dir().parent)} does not exist (the "
                           f"per-task PPO settings are not shipped yet): no numbers"}
    return None


def _train_fixed_budget(task: str, s: dict[str, Any]) -> tuple[dict[str, Any], OnPolicyRunner,
                                                                DictConfig]:
    """Our PPO with the task's shipped settings: its max_iterations, capped by the budget."""
    cfg = train_cfg(task, *s["hook_overrides"])
    probe = Probe(cfg, s["hook_eval_episodes"])
    iters = max(1, int(cfg.max_iterations) // 10)  # ~10 evaluations over the config's budget
    result, runner = run_ours(cfg, s["hook_budget_s"][task], iters, probe, target=None)
    probe.close()
    result.update(config=str(_per_task_config(task).relative_to(config_dir().parent)),
                  config_iterations=int(cfg.max_iterations),
                  stopped_by="time budget" if runner.iteration < int(cfg.max_iterations)
                  else "config iterations")
    return result, runner, cfg


def _push_run(action: str | None, seed: int, s: dict[str, Any]) -> dict[str, Any]:
    """One panda_push training with the shipped settings (``action``: another action
    space at the same rate and horizon; None: the shipped one), its evaluation curve."""
    extra = [f"seed={seed}"] + ([f"task.action={action}"] if action else [])
    cfg = train_cfg("panda_push", *s["hook_overrides"], *extra)
    probe = Probe(cfg, s["hook_eval_episodes"])
    iters = max(1, int(cfg.max_iterations) // 10)  # ~10 evaluations over the config's budget
    result, runner = run_ours(cfg, s["hook_budget_s"]["panda_push"], iters, probe, target=None)
    probe.close()
    result.update(seed=seed, action=str(cfg.task.action), control_dt=runner.env.control_dt,
                  config_iterations=int(cfg.max_iterations),
                  final_success=result["success_curve"][-1][2],
                  stopped_by="time budget" if runner.iteration < int(cfg.max_iterations)
                  else "config iterations")
    return result


def push_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean over seeds: final and best success, training wall-clock, the mean curve
    (success against env steps, at the evaluations every run shares)."""
    curves = [{steps: ok for _, steps, ok in r["success_curve"]} for r in runs]
    shared = sorted(set.intersection(*(set(c) for c in curves)))
    return {
        "seeds": [r["seed"] for r in runs],
        "mean_final_success": round(float(np.mean([r["final_success"] for r in runs])), 4),
        "mean_best_success": round(float(np.mean([r["best_success"] for r in runs])), 4),
        "mean_train_wall_s": round(float(np.mean([r["train_wall_s"] for r in runs])), 1),
        "env_steps": runs[0]["env_steps"],
        "mean_curve": [(steps, round(float(np.mean([c[steps] for c in curves])), 4))
                       for steps in shared],
        "runs": runs,
    }


def _previous_push_rows(quick: bool) -> dict[str, Any]:
    """The panda_push rows (action space -> row) of the last result file; {} if none.

    A row written before rows carried their own ``date`` gets its section's date.
    """
    path = RESULTS / f"ppo{'.quick' if quick else ''}.json"
    if not path.exists():
        return {}
    section = json.loads(path.read_text()).get("panda_push") or {}
    rows = dict(section.get("action_spaces") or {})
    for row in rows.values():
        if "date" not in row and "date" in section:
            row["date"] = section["date"]
    return rows


def push_row_settings(action: str | None, s: dict[str, Any]) -> dict[str, Any]:
    """What a panda_push row was trained with: the overrides, PPO settings, task config
    (action space, rate, horizon, reward weights), wall-clock cap and evaluation size."""
    overrides = [*s["hook_overrides"], *([f"task.action={action}"] if action else [])]
    cfg = train_cfg("panda_push", *overrides)
    return {"overrides": overrides, "num_envs": int(cfg.num_envs),
            "max_iterations": int(cfg.max_iterations),
            "algo": OmegaConf.to_container(cfg.algo, resolve=True),
            "task": OmegaConf.to_container(cfg.task, resolve=True),
            "budget_s": s["hook_budget_s"]["panda_push"],
            "eval_episodes": s["hook_eval_episodes"]}


def panda_push(quick: bool, s: dict[str, Any]) -> dict[str, Any]:
    """Deterministic success after the shipped budget, the task's dense (oracle) reward,
    ``push_seeds`` seeds per action space of ``push_action_spaces``.

    Rows are independent: a run replaces only the rows of the action spaces it trains and
    keeps the others from the last result file; each row records its own ``date`` and
    ``settings`` (``partial`` while its seeds are not all done). After every training the
    section so far is merged into the result file.
    """
    if skipped := _skipped("panda_push"):
        return skipped
    shipped = str(train_cfg("panda_push").task.action)
    spaces = _previous_push_rows(quick)

    def section() -> dict[str, Any]:
        return {"reward": "the task's dense (oracle) reward", "shipped_action": shipped,
                "config": str(_per_task_config("panda_push").relative_to(config_dir().parent)),
                "action_spaces": spaces}

    for action in s["push_action_spaces"]:
        override = None if action == shipped else action
        settings = push_row_settings(override, s)
        runs: list[dict[str, Any]] = []
        for seed in range(s["push_seeds"]):
            runs.append(_push_run(override, seed, s))
            spaces[action] = {**push_summary(runs), "settings": settings,
                              "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                              **({"partial": True} if len(runs) < s["push_seeds"] else {})}
            write_partial(quick, "panda_push", section())  # the seeds so far survive a stop
        print(f"  {action}: {spaces[action]['mean_curve']}", flush=True)
    return section()


def _pick_run(seed: int, p: dict[str, Any]) -> dict[str, Any]:
    """One panda_pick_place training with the shipped settings, its evaluation curve."""
    cfg = train_cfg("panda_pick_place", *p["overrides"], f"seed={seed}")
    if p["env_steps"]:
        per_iteration = int(cfg.num_envs) * int(cfg.algo.num_steps)
        iterations = max(1, math.ceil(int(p["env_steps"]) / per_iteration))
        cfg = train_cfg("panda_pick_place", *p["overrides"], f"seed={seed}",
                        f"max_iterations={iterations}")
    probe = Probe(cfg, p["eval_episodes"])
    every = max(1, int(cfg.max_iterations) // int(p["evaluations"]))
    result, runner = run_ours(cfg, p["budget_s"], every, probe, target=None)
    probe.close()
    finished = runner.iteration >= int(cfg.max_iterations)
    return {**result, "seed": seed, "action": str(cfg.task.action),
            "control_dt": runner.env.control_dt, "config_iterations": int(cfg.max_iterations),
            "final_success": result["success_curve"][-1][2],
            "stopped_by": "config iterations" if finished else "time budget"}


def panda_pick_place(quick: bool, s: dict[str, Any]) -> dict[str, Any]:
    """Deterministic success against env steps with the shipped settings and the dense
    (oracle) reward, ``s["pick"]["seeds"]`` seeds; the section so far is merged into the
    result file after every seed."""
    if skipped := _skipped("panda_pick_place"):
        return skipped
    p = s.get("pick") or (PICK_QUICK if quick else PICK)
    runs: list[dict[str, Any]] = []
    section: dict[str, Any] = {}
    for seed in range(int(p["seeds"])):
        print(f"panda_pick_place, seed {seed}", flush=True)
        runs.append(_pick_run(seed, p))
        section = {"reward": "the task's dense (oracle) reward", "target_success": 0.8,
                   "config": str(_per_task_config("panda_pick_place")
                                 .relative_to(config_dir().parent)),
                   "settings": p, **push_summary(runs)}
        print(f"  mean curve: {section['mean_curve']}", flush=True)
        write_partial(quick, "panda_pick_place", section)
    return section


def go2_walk(quick: bool, s: dict[str, Any]) -> dict[str, Any]:
    """Hook: tracking error and distance walked under a 0.5 m/s forward command."""
    if skipped := _skipped("go2_walk"):
        return skipped
    try:
        from embodied.locomotion_eval import evaluate_velocity_tracking
    except ImportError as err:
        return {"skipped": f"embodied.locomotion_eval not available ({err}): no numbers"}
    result, runner, cfg = _train_fixed_budget("go2_walk", s)
    env = make_train_env(cfg, s["hook_eval_episodes"], EVAL_SEED)
    try:
        tracking = evaluate_velocity_tracking(runner.policy, env, command=(0.5, 0.0, 0.0),
                                              seconds=s["go2_eval_seconds"], seed=EVAL_SEED)
    except (AttributeError, TypeError, ValueError) as err:  # the eval's or task's API moved
        tracking = {"skipped": f"velocity-tracking eval failed: {type(err).__name__}: {err}"}
    finally:
        env.close()
    tracking.pop("per_env", None)
    result["tracking"] = tracking
    return result


SECTIONS: dict[str, Callable[[bool, dict[str, Any]], dict[str, Any]]] = {
    "panda_reach": panda_reach,
    "panda_push": panda_push,
    "panda_pick_place": panda_pick_place,
    "go2_walk": go2_walk,
}


def add_pick_arguments(cli: argparse.ArgumentParser) -> None:
    """The panda_pick_place section's flags."""
    cli.add_argument("--pick-seeds", type=int, default=None,
                     help="panda_pick_place: seeds (default: 3)")
    cli.add_argument("--pick-env-steps", type=int, default=None,
                     help="panda_pick_place: env steps per training (default: the config's)")
    cli.add_argument("--pick-budget-s", type=float, default=None,
                     help="panda_pick_place: training wall-clock cap per seed (default: 3600)")


def pick_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The panda_pick_place section's settings: PICK (PICK_QUICK) and the flags over it."""
    pick = dict(PICK_QUICK if args.quick else PICK)
    for key in ("seeds", "env_steps", "budget_s"):
        if (value := getattr(args, f"pick_{key}")) is not None:
            pick[key] = value
    return pick


def main() -> None:
    cli = parser(__doc__.splitlines()[0], sections=list(SECTIONS))
    cli.add_argument("--push-actions", nargs="+", choices=list(ENV_ACTION_KINDS), default=None,
                     help="panda_push: only these action spaces (default: the full list)")
    cli.add_argument("--push-seeds", type=int, default=None,
                     help="panda_push: seeds per action space (default: 3)")
    add_pick_arguments(cli)
    args = cli.parse_args()
    settings = dict(QUICK if args.quick else FULL)
    settings["pick"] = pick_settings(args)
    if args.push_actions:
        settings["push_action_spaces"] = args.push_actions
    if args.push_seeds:
        settings["push_seeds"] = args.push_seeds
    figures: dict[str, Any] = {"settings": settings, "target_success": TARGET,
                               "sb3_factor": SB3_FACTOR}
    start = time.perf_counter()
    for name in args.only or SECTIONS:
        print(f"== {name}", flush=True)
        t = time.perf_counter()
        figures[name] = SECTIONS[name](args.quick, settings)
        figures[name]["section_wall_s"] = round(time.perf_counter() - t, 1)
        figures[name]["date"] = time.strftime("%Y-%m-%d %H:%M:%S")
    if args.only:
        figures = merge_sections("ppo", args.quick, figures, args.only)
    else:
        figures["total_wall_s"] = round(time.perf_counter() - start, 1)
    np.set_printoptions(precision=3)
    write_result("ppo", args.quick, figures)


if __name__ == "__main__":
    main()
