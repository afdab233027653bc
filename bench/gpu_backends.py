"""GPU-parallel backends on this machine's CPU: env steps/s against the number of envs.

For each backend (``mujoco_warp`` on Warp's CPU device, ``isaaclab`` when its
environment exists) and each number of envs: our env's control steps/s (zero actions on
MuJoCo Warp, random actions on Isaac Lab), the same engine's raw stepping of the same
model (our overhead on that engine: ``ratio_to_raw``), and C MuJoCo (``mujoco.batch``,
the default backend) on the same task and number of envs in the same run
(``ratio_to_c_mujoco``); ``panda_reach`` over the sizes, ``go2_walk`` at fewer. Start-up
time is the construction of the env (model transfer, kernel compilation or loading,
first reset); ``cold_start_s`` compiles into an empty kernel cache once.

``parity``: seeded identical random actions on C MuJoCo and on each backend (Isaac Lab
when its environment exists); the largest difference of any joint coordinate over the
horizon, per task.

Run: ``python bench/gpu_backends.py`` (about 25 minutes here) or ``--quick``;
``--only SECTION`` reruns one section into the existing JSON.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from bench.common import merge_sections, parse_args, rate, write_result
from sim import make_env

SECTIONS = ["mujoco_warp", "isaaclab", "parity"]
TASK = "panda_reach"
SETTLE_STEPS = 5


def _timed_env(task: str, num_envs: int, backend: str):
    start = time.perf_counter()
    extra = {} if backend == "mujoco" else {"device": "cpu"}
    env = make_env(task, num_envs=num_envs, backend=backend, **extra)
    return env, time.perf_counter() - start


def warp_raw_rate(env, seconds: float) -> float:
    """Control steps/s of bare ``mujoco_warp.step`` calls on the env's own model and data."""
    import mujoco_warp as mjw

    phys = env.physics

    def control_step():
        for _ in range(env.decimation):
            mjw.step(phys.wm, phys.wd)

    return rate(control_step, env.num_envs, seconds, warmup=1)


def throughput_row(backend: str, task: str, num_envs: int, seconds: float) -> dict:
    """Env steps/s of ``backend`` and of C MuJoCo for ``num_envs`` envs of ``task``."""
    env, startup = _timed_env(task, num_envs, backend)
    actions = torch.zeros(num_envs, env.action_dim)
    for _ in range(SETTLE_STEPS):
        env.step(actions)
    env_rate = rate(lambda: env.step(actions), num_envs, seconds, warmup=1)
    raw = warp_raw_rate(env, seconds) if backend == "mujoco_warp" else None
    env.close()
    ref, _ = _timed_env(task, num_envs, "mujoco")
    ref_rate = rate(lambda: ref.step(actions), num_envs, min(seconds, 1.0))
    ref.close()
    gc.collect()
    row = {"backend": backend, "task": task, "num_envs": num_envs,
           "env_steps_per_s": round(env_rate, 1), "startup_s": round(startup, 1),
           "c_mujoco_env_steps_per_s": round(ref_rate), "ratio_to_c_mujoco":
           round(env_rate / ref_rate, 4)}
    if raw is not None:
        row |= {"raw_steps_per_s": round(raw, 1), "ratio_to_raw": round(env_rate / raw, 3)}
    print(row, flush=True)
    return row


def cold_start_seconds(task: str) -> float:
    """Construction time of a 16-world MuJoCo Warp env with an empty kernel cache."""
    with tempfile.TemporaryDirectory() as cache:
        code = (f"import time, warp as wp; wp.config.kernel_cache_dir = {cache!r}; "
                "t = time.time(); from sim import make_env; "
                f"make_env({task!r}, num_envs=16, backend='mujoco_warp', device='cpu'); "
                "print(time.time() - t)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, cwd=Path(__file__).resolve().parent.parent)
    return round(float(out.stdout.split()[-1]), 1)


def _qpos(env) -> torch.Tensor:
    """qpos [B, nq] of a backend's env (the Isaac Lab proxy asks its worker)."""
    state = env.state
    return (state("qpos")["qpos"] if callable(state) else state.qpos).double()


def parity(backend: str, task: str, steps: int, action_scale: float) -> dict:
    """Largest |qpos| difference to C MuJoCo under the same seeded actions."""
    envs = [make_env(task, num_envs=4, seed=3), make_env(task, num_envs=4, seed=3,
                                                         backend=backend, device="cpu")]
    gen = torch.Generator().manual_seed(0)
    worst, at = 0.0, []
    for step in range(steps):
        actions = action_scale * (2 * torch.rand(4, envs[0].action_dim, generator=gen) - 1)
        for env in envs:
            env.step(actions)
        diff = float((envs[0].state.qpos - _qpos(envs[1])).abs().max())
        worst = max(worst, diff)
        if step + 1 in (1, 10, steps):
            at.append({"step": step + 1, "max_abs_qpos_diff": diff})
    for env in envs:
        env.close()
    return {"backend": backend, "task": task, "steps": steps, "action_scale": action_scale,
            "max_abs_qpos_diff": worst, "by_step": at}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], SECTIONS)
    quick, only = args.quick, args.only or SECTIONS
    sizes = [16, 64] if quick else [16, 64, 256, 1024, 4096]
    seconds = 0.5 if quick else 3.0
    figures: dict = {}
    if "mujoco_warp" in only:
        load = os.getloadavg()[0]
        rows = [throughput_row("mujoco_warp", TASK, n, seconds) for n in sizes]
        if not quick:
            rows.append(throughput_row("mujoco_warp", "go2_walk", 1024, seconds))
        figures["mujoco_warp"] = {"device": "cpu", "throughput": rows,
                                  "cold_start_s": None if quick else cold_start_seconds(TASK),
                                  **_provenance(load)}
    if "isaaclab" in only:
        load = os.getloadavg()[0]
        figures["isaaclab"] = isaaclab_section(sizes, seconds) | _provenance(load)
    if "parity" in only:
        steps = 10 if quick else 50
        cases = (("panda_reach", 1.0), ("panda_push", 1.0), ("go2_walk", 0.1),
                 ("go2_walk", 1.0))
        backends = ["mujoco_warp"] + (["isaaclab"] if isaaclab_installed() else [])
        figures["parity"] = [parity(backend, task, steps, scale)
                             for backend in backends for task, scale in cases]
        for row in figures["parity"]:
            print(row, flush=True)
    figures["note"] = ("CPU only (no GPU here): Warp runs its kernels on the CPU device, one "
                       "launch per kernel per physics step, so small batches are bound by "
                       "launch overhead; GPU figures are not measured here")
    if args.only:
        figures = merge_sections("gpu_backends", quick, figures, args.only)
    write_result("gpu_backends", quick, figures)


def _provenance(load: float) -> dict:
    """When a section ran and how busy the machine was (sections are rerun with --only)."""
    return {"load_average_at_start": round(load, 2), "date": time.strftime("%Y-%m-%d %H:%M")}


def isaaclab_installed() -> bool:
    """Whether the Isaac Lab environment exists (``scripts/isaaclab_env.sh``)."""
    from sim.backends import BackendUnavailable
    from sim.backends.isaaclab import isaaclab_python

    try:
        isaaclab_python()
    except BackendUnavailable:
        return False
    return True


def isaaclab_section(sizes: list[int], seconds: float) -> dict:
    """Throughput of the Isaac Lab backend, or why it was not measured."""
    try:
        from sim.backends.isaaclab import isaaclab_throughput
    except ImportError as e:
        return {"skipped": f"Isaac Lab backend not importable: {e}"}
    # go2_walk: contacts on every foot, an elliptic cone and impratio 100 make Newton's
    # MuJoCo-Warp solver far slower per env than the Panda; fewer sizes keep the run short.
    go2_sizes = sizes[:1] if len(sizes) < 3 else sizes[:3]
    try:
        rows = [isaaclab_throughput(TASK, n, seconds=seconds) for n in sizes]
        rows += [isaaclab_throughput("go2_walk", n, seconds=seconds) for n in go2_sizes]
    except RuntimeError as e:  # BackendUnavailable: the environment is not installed
        return {"skipped": str(e)}
    for row in rows:
        print(row, flush=True)
    return {"device": "cpu", "throughput": rows}


if __name__ == "__main__":
    main()
