"""Offline RL from a labelled dataset: IQL on PRM labels vs IQL on true rewards vs BC.

Every learner predicts chunks of ``CHUNK`` end-effector actions (``ee_delta_yaw``,
executed with temporal ensembling) and ignores its own last action (``LEARNER``);
success is the mean over ``--seeds`` training seeds, 64 evaluation episodes each. The
scripted experts choose their phase from the observed state alone (a cloner can copy
them) and command the tcp proportionally:

- BC on 100 clean scripted-expert ``panda_push`` episodes (state only);
- BC on 200 clean scripted-expert ``panda_pick_place`` episodes (state only);

and on a mixed-quality ``panda_push`` dataset collected here (250 episodes: the scripted
expert at noise 0.1 (two fifths), 0.3 and 0.6, and random-action failures; the front
cameras at 64x64), BC, RA-BC (progress-gain weights of the oracle labels) and:

- labelling throughput (frames/s, video decoding included) of the simulator-progress
  oracle and of the learned multi-view PRM (``embodied reward train task=panda_push``
  with ``PRM_RECIPE``; pass ``--prm`` or the newest trained one is used, else one is
  trained first), and the Pearson and Spearman correlation of the PRM's progress with
  the simulator's on the dataset's own frames;
- success in simulation of IQL on the PRM's labels, IQL on the true (simulator
  progress) labels, both ``prm+sparse`` shaped, and BC on the same frames;
- IQL gradient steps/s of this implementation against d3rlpy's IQL on the same
  transitions (batch 256, 256x256 networks, one torch thread), when ``--d3rlpy-python``
  names the Python of an environment with d3rlpy installed.

Usage: ``python bench/offline.py [--quick] [--seeds N] [--parts clean pick mixed]
[--prm PATH] [--prm2 PATH] [--d3rlpy-python PATH]``. A run of some ``--parts`` replaces those parts
in the results file and keeps the others (``part_dates`` says when each was measured).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import RESULTS, write_result

from embodied.commands.collect import run_collect
from embodied.commands.label import run_label
from embodied.commands.offline import run_offline
from embodied.config import load_config
from embodied.datasets import LeRobotDataset
from embodied.offline import OfflineConfig, OfflineLearner, load_transitions

OUT = Path("runs/bench/offline")
SOURCES = ("policy=[expert,expert,expert,expert,random]", "noise=[0.1,0.1,0.3,0.6,0]")
ACTIONS = "task.action=ee_delta_yaw"  # the experts succeed in it; the hand turns
CHUNK = 10
LEARNER = (f"algo.chunk={CHUNK}", "algo.ignore_obs=[last_action]")
IQL_BETA = 0.5  # advantage temperature of IQL's policy extraction on this data
CAMERAS = "cameras=[front,side,wrist]"  # the task's three views, all of which the PRM reads
# How a PRM for the labels is trained when none is given: the dataset's action space (its
# noisy and random episodes visit the states the dataset's do), plain frames (as recorded),
# twice the default episodes.
PRM_RECIPE = (ACTIONS, "visual=none", "data.episodes=320")

D3RLPY = r"""
import json, sys, time
import numpy as np, torch
torch.set_num_threads(1)
import d3rlpy
d = np.load(sys.argv[1])
ds = d3rlpy.dataset.MDPDataset(d["obs"], d["actions"], d["rewards"], d["terminals"],
                               timeouts=d["timeouts"])
iql = d3rlpy.algos.IQLConfig(batch_size=256).create(device="cpu:0")
steps, warmup, marks = int(sys.argv[2]), 50, {}
def callback(algo, epoch, total_step):
    if total_step in (warmup, warmup + steps):
        marks[total_step] = time.perf_counter()
iql.fit(ds, n_steps=warmup + steps, n_steps_per_epoch=warmup + steps, show_progress=False,
        save_interval=10**9, logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
        callback=callback)
print(json.dumps({"steps_per_s": steps / (marks[warmup + steps] - marks[warmup]),
                  "version": d3rlpy.__version__}))
"""


def ours_steps_per_s(data, steps: int) -> float:
    """Gradient steps/s of our IQL update (batch 256, 256x256 networks, one thread)."""
    torch.manual_seed(0)
    learner = OfflineLearner(data.obs.shape[1], data.actions.shape[1], OfflineConfig())
    learner.set_obs_statistics(data.obs)
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        learner.update(*data.sample(256, gen))
    start = time.perf_counter()
    for _ in range(steps):
        learner.update(*data.sample(256, gen))
    return steps / (time.perf_counter() - start)


def d3rlpy_steps_per_s(python: str, data, steps: int) -> dict:
    """d3rlpy's IQL on the same transitions, in the other environment's Python."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "transitions.npz"
        # d3rlpy wants episodes in order with a terminal or a time-out at each end
        ends, terminals = data.episode_end.numpy(), data.terminal.numpy() > 0
        np.savez(path, obs=data.obs.numpy(), actions=data.actions.numpy(),
                 rewards=data.rewards.numpy(), terminals=terminals,
                 timeouts=ends & ~terminals)
        out = subprocess.run([python, "-c", D3RLPY, str(path), str(steps)], capture_output=True,
                             text=True, timeout=1800)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def find_prm(args, quick: bool) -> tuple[str | None, str]:
    """A panda_push PRM checkpoint: --prm, the newest trained, or train one now."""
    from embodied.reward.prm.checkpoint import newest_prm_checkpoint

    if args.prm:
        return args.prm, "given"
    for runs in (OUT, Path("runs/reward/prm")):
        try:
            return str(newest_prm_checkpoint("panda_push", runs)), f"newest under {runs}"
        except FileNotFoundError:
            pass
    run = OUT / "panda_push" / ("quick" if quick else "full")
    extra = ["data.episodes=32", "train.epochs=1"] if quick else []
    cmd = [sys.executable, "-m", "embodied.cli", "reward", "train", "task=panda_push",
           *PRM_RECIPE, f"run_dir={run}", *extra]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, f"training failed: {done.stderr.strip()[-300:]}"
    return str(run / "prm.pt"), f"trained here in {time.perf_counter() - start:.0f} s"


def label(dataset: Path, out: Path, *overrides: str) -> dict:
    cfg = load_config("label", [f"dataset={dataset}", f"out={out}", "progress=false",
                                "reward.mode=prm+sparse", *overrides])
    start = time.perf_counter()
    summary = run_label(cfg)
    summary["seconds"] = time.perf_counter() - start
    summary["end_to_end_frames_per_s"] = summary["frames"] / summary["seconds"]
    return summary


def progress_agreement(oracle: Path, model: Path) -> dict:
    """Pearson and Spearman of a model's ``progress`` column with the oracle's, every frame."""
    from scipy.stats import pearsonr, spearmanr

    def column(root: Path) -> np.ndarray:
        ds = LeRobotDataset(root)
        return np.concatenate([ds.episode_data(i, ["progress"])["progress"].reshape(-1)
                               for i in range(ds.num_episodes)])

    true, pred = column(oracle), column(model)
    return {"pearson": float(pearsonr(true, pred)[0]),
            "spearman": float(spearmanr(true, pred)[0]), "frames": len(true)}


def prm_quality(checkpoint: str | None) -> dict | None:
    """The PRM run's own held-out metrics (metrics.json beside prm.pt), if any."""
    if checkpoint is None:
        return None
    path = Path(checkpoint)
    metrics = (path if path.is_dir() else path.parent) / "metrics.json"
    if not metrics.exists():
        return None
    m = json.loads(metrics.read_text())
    return {k: m.get(k) for k in ("progress_pearson", "progress_spearman", "success_f1",
                                  "voc", "pairwise_accuracy", "states")}


def train(dataset: Path, run: Path, algo: str, steps: int, episodes: int,
          seeds: int = 1) -> dict:
    """``algo`` on ``dataset`` for each seed; success and return as mean, std and per seed."""
    per_seed = []
    for seed in range(seeds):
        cfg = load_config("offline", [
            f"dataset={dataset}", f"run_dir={run}/seed{seed}", f"algo={algo}", *LEARNER,
            *([f"algo.beta={IQL_BETA}"] if algo == "iql" else []),
            f"steps={steps}", f"seed={seed}", "eval_episodes=0", "progress=false",
            f"eval.num_envs={episodes}", "eval.video_envs=2",
            f"log_interval={max(1, steps // 10)}"])
        summary = run_offline(cfg)
        ev = summary["eval"]
        per_seed.append({"success_rate": ev["success_rate"],
                         "episode_return": ev["episode_return"], "episodes": ev["episodes"],
                         "train_seconds": summary["train_seconds"],
                         "run_dir": summary["run_dir"]})
    rates = np.array([r["success_rate"] for r in per_seed])
    return {"success_rate": float(rates.mean()), "success_rate_std": float(rates.std()),
            "episode_return": float(np.mean([r["episode_return"] for r in per_seed])),
            "episodes": per_seed[0]["episodes"], "gradient_steps": steps, "seeds": seeds,
            "per_seed": per_seed}


def expert_bc(task: str, episodes: int, root: Path, steps: int, eval_eps: int,
              seeds: int) -> dict:
    """BC on ``episodes`` clean scripted-expert episodes of ``task`` (state only)."""
    start = time.perf_counter()
    run_collect(load_config("collect", [
        f"task={task}", ACTIONS, "policy=expert", "noise=0", f"episodes={episodes}",
        "num_envs=50", "cameras=[]", "progress=false", f"out={root / task}"]))
    ds = LeRobotDataset(root / task)
    expert = float(np.mean([e.meta["success"] for e in ds.episodes]))
    collect_s = time.perf_counter() - start
    return {"episodes": episodes, "expert_success": expert, "collect_seconds": round(collect_s),
            "bc": train(root / task, root / f"runs/{task}_bc", "bc", steps, eval_eps, seeds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (< 1 minute of "
                        "training; small dataset)")
    parser.add_argument("--prm", help="a panda_push PRM run folder or prm.pt")
    parser.add_argument("--prm2", help="a second panda_push PRM of the same recipe (another "
                        "seed): IQL on its labels as well")
    parser.add_argument("--d3rlpy-python", help="the Python of an environment with d3rlpy")
    parser.add_argument("--no-prm", action="store_true", help="no PRM labels (never train "
                        "one): BC, RA-BC and IQL on the true labels only")
    parser.add_argument("--seeds", type=int, help="training seeds per learner (3; quick 1)")
    parser.add_argument("--parts", nargs="+", choices=["clean", "pick", "mixed"],
                        default=["clean", "pick", "mixed"], help="what to measure")
    args = parser.parse_args()
    quick = args.quick
    torch.set_num_threads(1)
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    root = OUT / ("quick" if quick else "full") / stamp
    episodes, steps, eval_eps = (5, 100, 4) if quick else (250, 10000, 64)
    seeds = args.seeds or (1 if quick else 3)
    start = time.perf_counter()
    figures: dict = {"task": "panda_push", "chunk": CHUNK, "action_space": "ee_delta_yaw",
                     "seeds": seeds, "gradient_steps": steps, "iql_beta": IQL_BETA}
    if "clean" in args.parts:
        figures["push_expert_bc"] = expert_bc("panda_push", 5 if quick else 100, root, steps,
                                              eval_eps, seeds)
    if "pick" in args.parts:
        figures["pick_place_expert_bc"] = expert_bc("panda_pick_place", 5 if quick else 200,
                                                    root, steps, eval_eps, seeds)
    if "mixed" in args.parts:
        figures |= mixed(args, root, quick, episodes, steps, eval_eps, seeds)
    figures["seconds"] = round(time.perf_counter() - start, 1)
    figures = with_earlier_parts(figures, args.parts, quick)
    if args.d3rlpy_python:  # the result names no path of this machine outside the repository
        sys.argv = [a.replace(args.d3rlpy_python, "<d3rlpy env>/bin/python") for a in sys.argv]
    write_result("offline", quick, figures)


PART_KEYS = {"clean": ("push_expert_bc",), "pick": ("pick_place_expert_bc",)}
RUN_KEYS = ("benchmark", "quick", "machine", "command", "date", "seconds", "part_dates",
            "part_seconds")


def with_earlier_parts(figures: dict, parts: list[str], quick: bool) -> dict:
    """``figures`` of ``parts`` plus the other parts' figures from the results file.

    ``part_dates`` and ``part_seconds`` record when and how long each part was measured;
    figures of a file without them (an older layout) are not kept.
    """
    path = RESULTS / f"offline{'.quick' if quick else ''}.json"
    earlier = json.loads(path.read_text()) if path.exists() else {}
    dates = dict(earlier.get("part_dates") or {})
    seconds = dict(earlier.get("part_seconds") or {})
    own = {k for part in parts for k in PART_KEYS.get(part, ())}
    single = {k for keys in PART_KEYS.values() for k in keys}
    kept = {k: v for k, v in earlier.items() if dates and k not in RUN_KEYS and k not in own
            and (k in single or "mixed" not in parts)}
    today = time.strftime("%Y-%m-%d %H:%M:%S")
    for part in parts:
        dates[part], seconds[part] = today, figures["seconds"]
    return {**kept, **{k: v for k, v in figures.items() if k != "seconds"},
            "part_dates": dates, "part_seconds": seconds}


def mixed(args: argparse.Namespace, root: Path, quick: bool, episodes: int, steps: int,
          eval_eps: int, seeds: int) -> dict:
    """The mixed-quality dataset: labelling speed, BC, RA-BC, IQL on true and PRM labels."""
    start = time.perf_counter()
    run_collect(load_config("collect", [
        "task=panda_push", ACTIONS, *SOURCES, CAMERAS, f"episodes={episodes}", "num_envs=25",
        "width=64", "height=64", "progress=false", f"out={root / 'data'}",
        *(["task.episode_length_s=1.0"] if quick else [])]))
    collect_s = time.perf_counter() - start
    ds = LeRobotDataset(root / "data")
    per_source: dict[str, list[bool]] = {}
    for e in ds.episodes:
        per_source.setdefault(e.meta["policy"], []).append(bool(e.meta["success"]))

    oracle = label(root / "data", root / "oracle", "reward=oracle")
    prm_path, prm_note = (None, "not run (--no-prm)") if args.no_prm else find_prm(args, quick)
    prm = None
    if prm_path is not None:
        prm = label(root / "data", root / "prm", "reward=prm", f"reward.checkpoint={prm_path}")

    results = {name: train(root / data, root / f"runs/{name}", algo, steps, eval_eps, seeds)
               for name, data, algo in (("bc", "data", "bc"), ("rabc", "oracle", "rabc"),
                                        ("iql_true", "oracle", "iql"))}
    if prm is not None:
        results["rabc_prm"] = train(root / "prm", root / "runs/rabc_prm", "rabc", steps,
                                    eval_eps, seeds)
        results["iql_prm"] = train(root / "prm", root / "runs/iql_prm", "iql", steps, eval_eps,
                                   seeds)
    prm2 = None
    if args.prm2:
        prm2 = label(root / "data", root / "prm2", "reward=prm", f"reward.checkpoint={args.prm2}")
        results["iql_prm2"] = train(root / "prm2", root / "runs/iql_prm2", "iql", steps,
                                    eval_eps, seeds)

    data = load_transitions(root / "oracle")
    speed_steps = 50 if quick else 500
    ours = ours_steps_per_s(data, speed_steps)
    peer = d3rlpy_steps_per_s(args.d3rlpy_python, data, speed_steps) \
        if args.d3rlpy_python else {"error": "not measured: pass --d3rlpy-python"}

    true_ok = results["iql_true"]["success_rate"]
    prm_ok = results["iql_prm"]["success_rate"] if prm is not None else None
    return {
        "dataset": {"episodes": ds.num_episodes, "frames": ds.num_frames,
                    "cameras": ds.cameras, "image_size": [64, 64],
                    "success_by_source": {k: float(np.mean(v)) for k, v in per_source.items()},
                    "collect_seconds": round(collect_s, 1),
                    "collect_frames_per_s": round(ds.num_frames / collect_s, 1)},
        "labelling": {
            # scoring loop (video decoding + model) / whole command (model loading, metadata)
            "oracle_frames_per_s": oracle["frames_per_second"],
            "oracle_end_to_end_frames_per_s": round(oracle["end_to_end_frames_per_s"], 1),
            "prm_frames_per_s": prm["frames_per_second"] if prm else None,
            "prm_end_to_end_frames_per_s": round(prm["end_to_end_frames_per_s"], 1)
            if prm else None,
            "prm_checkpoint": prm_path, "prm_source": prm_note,
            "prm_final_progress_success": prm and prm["mean_final_progress_success"],
            "prm_final_progress_failure": prm and prm["mean_final_progress_failure"],
            "prm_held_out": prm_quality(prm_path),
            "prm_on_dataset": progress_agreement(root / "oracle", root / "prm") if prm else None,
            "prm2_checkpoint": args.prm2,
            "prm2_held_out": prm_quality(args.prm2),
            "prm2_on_dataset": progress_agreement(root / "oracle", root / "prm2")
            if prm2 else None,
        },
        "offline": results,
        "iql_prm_over_iql_true": (prm_ok / true_ok) if prm_ok is not None and true_ok else None,
        "iql_true_minus_bc": true_ok - results["bc"]["success_rate"],
        "iql_prm_minus_bc": (prm_ok - results["bc"]["success_rate"]) if prm_ok is not None
        else None,
        "iql_steps_per_s": round(ours, 1),
        "d3rlpy_iql": peer,
        "iql_steps_per_s_ratio_to_d3rlpy": round(ours / peer["steps_per_s"], 2)
        if "steps_per_s" in peer else None,
        "iql_true_over_bc": true_ok / results["bc"]["success_rate"]
        if results["bc"]["success_rate"] else None,
        **{f"{key}_over_bc": results[key]["success_rate"] / results["bc"]["success_rate"]
           for key in ("iql_prm", "iql_prm2") if key in results and results["bc"]["success_rate"]},
        "iql_prm2_over_iql_true": results["iql_prm2"]["success_rate"] / true_ok
        if "iql_prm2" in results and true_ok else None,
        "rabc_minus_bc": results["rabc"]["success_rate"] - results["bc"]["success_rate"],
    }


if __name__ == "__main__":
    main()
