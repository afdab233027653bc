"""Data parallelism on one machine: 1 against 2 torchrun processes (gloo, 1 thread each).

Sections:

* ``train``: `embodied train task=panda_reach` with the task's shipped PPO settings,
  one process with 2E envs against two processes with E envs each (the same env steps
  per iteration and the same iterations). Env steps/s (the mean over the iterations of
  metrics.csv's ``fps``: env steps of all ranks per second of collection + learning),
  training wall-clock and env steps until the training success rate (stochastic
  policy, recent episodes) first reaches 80% and 95%, the final deterministic success
  on 64 episodes, and the scaling efficiency ``steps/s(2) / (2 * steps/s(1))``.
* ``label``: `embodied label` of a collected panda_reach dataset with a small learned
  PRM (trained here by `embodied reward train`), 1 against 2 processes: frames/s of the
  scoring loop (frames of all ranks over rank 0's labelling time) and of the whole
  command, and whether the two outputs are byte-identical.

Every process is launched through torchrun with a rendezvous on 127.0.0.1, so both
counts pay the same start-up. On a 2-core machine the two ranks share the cores with
each other (and with whatever else runs), so the efficiency measures the mechanism's
overhead and the contention, not what a second GPU or node would add.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import parse_args, write_result

from embodied.distributed import launch_local
from embodied.rl.logger import read_metrics

ROOT = Path(__file__).resolve().parent.parent
TARGETS = (0.8, 0.95)  # training success rates whose first crossing is timed
# quick: a smoke run; full: panda_reach's shipped settings (128 envs in total)
SETTINGS = {
    True: {"envs": 16, "iterations": 6, "episodes": 8, "prm_episodes": 8, "timeout": 600},
    False: {"envs": 128, "iterations": 100, "episodes": 48, "prm_episodes": 32,
            "timeout": 3600},
}


def cli(nproc: int, args: list[str], timeout: float) -> float:
    """Run ``embodied <args>`` under torchrun with ``nproc`` processes; returns seconds."""
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    result = launch_local(nproc, ["-m", "embodied.cli", *args], timeout, cwd=ROOT, env=env)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"embodied {' '.join(args)} with {nproc} process(es) failed:\n"
                         f"{result.stderr[-3000:]}")
    return seconds


def train(nproc: int, s: dict, folder: Path) -> dict:
    """One panda_reach training with ``s['envs'] / nproc`` envs per process."""
    run = folder / f"train_{nproc}"
    per_rank = s["envs"] // nproc
    seconds = cli(nproc, ["train", "task=panda_reach", f"num_envs={per_rank}",
                          f"max_iterations={s['iterations']}", "save_interval=1000",
                          "torch_threads=1", "physics_threads=1", "progress=false",
                          "eval.num_envs=64", "eval.video_envs=0", f"run_dir={run}"],
                  s["timeout"])
    m = read_metrics(run / "metrics.csv")
    summary = json.loads((run / "summary.json").read_text())
    return {
        "processes": nproc, "envs_per_process": per_rank,
        "env_steps": int(m["env_steps"][-1]),
        "env_steps_per_s": round(sum(m["fps"]) / len(m["fps"]), 1),
        "collection_steps_per_s": round(sum(m["collection_fps"]) / len(m["fps"]), 1),
        "learning_steps_per_s": round(sum(m["learning_fps"]) / len(m["fps"]), 1),
        "train_wall_s": round(m["wall_time"][-1], 1),
        "command_wall_s": round(seconds, 1),
        **{f"{key}_to_{round(100 * target)}": value for target in TARGETS
           for key, value in zip(("wall_s", "env_steps"), first_crossing(m, target),
                                 strict=True)},
        "final_train_success": round(m["success_rate"][-1], 4),
        "eval_success": (summary.get("eval") or {}).get("success_rate"),
    }


def first_crossing(m: dict[str, list[float]], target: float) -> tuple[float | None,
                                                                       int | None]:
    """Training seconds and env steps when the training success first reaches ``target``."""
    hit = next((i for i, v in enumerate(m["success_rate"]) if v >= target), None)
    return (None, None) if hit is None else (round(m["wall_time"][hit], 1),
                                             int(m["env_steps"][hit]))


def digest(root: Path) -> str:
    """sha256 over the data parquet files and the metadata that do not name the folder."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "labelling.json":
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def label(s: dict, folder: Path) -> dict:
    """A collected dataset labelled by a small PRM with 1 and 2 processes."""
    data, prm = folder / "reach", folder / "prm"
    cli(1, ["collect", "task=panda_reach", f"episodes={s['episodes']}", "num_envs=8",
            "noise=[0,0.6]", "width=64", "height=64", "episodes_per_file=8",
            "progress=false", f"out={data}"], s["timeout"])
    cli(1, ["reward", "train", "task=panda_reach", f"data.episodes={s['prm_episodes']}",
            "data.batch_envs=8", "data.width=64", "data.height=64", "train.epochs=1",
            "torch_threads=1", f"run_dir={prm}"], s["timeout"])
    rows, digests = {}, {}
    for nproc in (1, 2):
        out = folder / f"labelled_{nproc}"
        seconds = cli(nproc, ["label", f"dataset={data}", f"out={out}", "reward=prm",
                              f"reward.checkpoint={prm}", "progress=false",
                              "torch_threads=1"], s["timeout"])
        summary = json.loads((out / "meta" / "labelling.json").read_text())["summary"]
        digests[nproc] = digest(out)
        rows[str(nproc)] = {"processes": nproc, "frames": summary["frames"],
                            "frames_per_s": summary["frames_per_second"],
                            "command_wall_s": round(seconds, 1),
                            "command_frames_per_s": round(summary["frames"] / seconds, 1)}
    return {"runs": rows, "identical_output": digests[1] == digests[2],
            "scaling_efficiency": round(rows["2"]["frames_per_s"]
                                        / (2 * rows["1"]["frames_per_s"]), 3)}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    s = SETTINGS[args.quick]
    start = time.perf_counter()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs = {str(n): train(n, s, folder) for n in (1, 2)}
        one, two = runs["1"], runs["2"]
        training = {
            "runs": runs,
            "scaling_efficiency": round(two["env_steps_per_s"] / (2 * one["env_steps_per_s"]),
                                        3),
            "speedup": round(two["env_steps_per_s"] / one["env_steps_per_s"], 3),
            **{f"wall_to_{round(100 * t)}_ratio": (
                round(two[f"wall_s_to_{round(100 * t)}"] / one[f"wall_s_to_{round(100 * t)}"], 3)
                if one[f"wall_s_to_{round(100 * t)}"] and two[f"wall_s_to_{round(100 * t)}"]
                else None) for t in TARGETS},
        }
        labelling = label(s, folder)
    write_result("distributed", args.quick, {
        "settings": {"total_envs": s["envs"], "iterations": s["iterations"],
                     "train_success_targets": list(TARGETS), "label_episodes": s["episodes"],
                     "backend": "gloo", "threads_per_process": 1},
        "train": training, "label": labelling,
        "load_average_at_start": round(load, 2), "cores": os.cpu_count(),
        "seconds": round(time.perf_counter() - start, 1),
        "note": "CPU ranks share the machine's cores; GPU/NCCL not measured (no GPU here)",
    })


if __name__ == "__main__":
    main()
