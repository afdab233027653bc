"""Env steps/s of every task against raw `mujoco.batch` stepping of the same model.

For each task, batch size (1, 64, 256) and physics thread count (1, 2): our
env's control steps/s with zero actions (physics, action mapping, latency,
observation/reward/progress terms, auto-reset), and raw ``Batch.step`` of the
same compiled model from the same states with the same substeps per control
step, in the same run.
``ratio`` = env / raw. Also multi-view render frames/s and peak memory.
"""

from __future__ import annotations

import gc
import resource
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mujoco
import numpy as np
import torch
from common import parse_args, rate, write_result
from mujoco import batch as mjbatch

from sim import make_env, task_names

SETTLE_STEPS = 50  # 1 s of simulated time


def env_vs_raw(task: str, num_envs: int, nthread: int, seconds: float) -> dict:
    env = make_env(task, num_envs=num_envs, nthread=nthread)
    actions = torch.zeros(num_envs, env.action_dim)
    for _ in range(SETTLE_STEPS):  # past the drop onto the floor after reset
        env.step(actions)
    # Raw stepping starts from the same states, so both step the same contacts.
    raw = mjbatch.Batch(env.model, num_envs, nthread, persistent=True)
    raw.reset()
    for field in ("qpos", "qvel", "ctrl", "mocap_pos"):
        raw.bind(field)[:] = getattr(env.state, field).numpy()
    raw.forward()
    env_rate = rate(lambda: env.step(actions), num_envs, seconds)
    stage = int(mujoco.mjtStage.mjSTAGE_VEL)
    raw_rate = rate(lambda: raw.step(nstep=env.decimation, stage=stage), num_envs, seconds)
    env.close()
    return {"task": task, "num_envs": num_envs, "nthread": nthread,
            "env_steps_per_s": round(env_rate), "raw_steps_per_s": round(raw_rate),
            "ratio": round(env_rate / raw_rate, 3)}


def render_rate(size: int, num_envs: int, seconds: float) -> dict:
    env = make_env("panda_reach", num_envs=num_envs)
    views = len(env.camera_names)
    fps = rate(lambda: env.render(width=size, height=size), num_envs * views, seconds)
    env.close()
    return {"task": "panda_reach", "size": size, "views": views, "num_envs": num_envs,
            "frames_per_s": round(fps), "multiview_obs_per_s": round(fps / views, 1)}


def peak_rss_mib(task: str, num_envs: int, steps: int) -> float:
    """Peak RSS of a fresh process that builds and steps ``num_envs`` envs (no rendering)."""
    # VmHWM, not ru_maxrss: the latter survives exec and would include this process's peak.
    code = (
        "import re, torch; from pathlib import Path; from sim import make_env\n"
        f"env = make_env('{task}', num_envs={num_envs})\n"
        f"a = torch.zeros({num_envs}, env.action_dim)\n"
        f"for _ in range({steps}): env.step(a)\n"
        "print(re.search(r'VmHWM:\\s+(\\d+)', Path('/proc/self/status').read_text())[1])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return round(int(out.stdout.split()[-1]) / 1024, 1)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    quick = args.quick
    sizes = [1, 64] if quick else [1, 64, 256]
    seconds = 0.3 if quick else 2.0
    rows = []
    for task in task_names():
        for num_envs in sizes:
            for nthread in (1, 2):
                row = env_vs_raw(task, num_envs, nthread, seconds)
                print(row, flush=True)
                rows.append(row)
                gc.collect()
    renders = [render_rate(size, 4 if quick else 16, seconds) for size in (96, 224)]
    for r in renders:
        print(r, flush=True)
    big = [r for r in rows if r["num_envs"] == max(sizes)]
    figures = {
        "throughput": rows,
        "render": renders,
        "min_ratio_at_max_envs": min(r["ratio"] for r in big),
        "peak_rss_mib_panda_256_envs": peak_rss_mib("panda_pick_place", 256, 20),
        "bench_process_peak_rss_mib": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "note": "ratio = env control steps/s over raw mujoco.batch steps/s of the same model "
                "with the same substeps; render frames are single-camera frames",
    }
    np.set_printoptions(precision=3)
    write_result("sim_throughput", quick, figures)


if __name__ == "__main__":
    main()
