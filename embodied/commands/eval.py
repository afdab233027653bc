"""`embodied eval`: success rate, return and episode length of a trained or exported policy.

Writes ``<run>/eval/eval_<timestamp>.json`` and an MP4 of a few envs from every
camera (see :mod:`embodied.evaluation`).
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from embodied.commands.registry import command
from embodied.envs import make_task_env, sim_kwargs
from embodied.evaluation import (
    check_policy_fits,
    eval_stamp,
    eval_target,
    eval_task_config,
    load_eval_policy,
    print_eval_record,
)
from embodied.export import load_run_config
from embodied.policy_io import ExportError
from embodied.rl.checkpoint import CheckpointError
from embodied.rl.evaluate import evaluate_and_track
from embodied.run_folder import EVAL_SEED_OFFSET
from sim import BackendError


@command("eval", "evaluate a run's checkpoint or an exported policy (success, return, video)",
         errors=(CheckpointError, ExportError, BackendError))
def run_evaluation(cfg: DictConfig) -> dict[str, Any]:
    """Evaluate per ``cfg`` (configs/commands/eval.yaml); writes and returns the eval record."""
    torch.set_num_threads(int(cfg.torch_threads))
    run_dir, policy_file = eval_target(cfg)
    run_cfg = load_run_config(run_dir) if run_dir is not None else None
    policy, meta, source = load_eval_policy(cfg, run_dir, run_cfg, policy_file)
    task = eval_task_config(cfg, run_cfg, meta)
    seed = int(cfg.seed) if cfg.get("seed") is not None else \
        int((run_cfg or {}).get("seed", 0) or 0) + EVAL_SEED_OFFSET
    episodes = int(cfg.episodes)
    num_envs = int(cfg.num_envs) if cfg.get("num_envs") else min(episodes, 64)
    env = make_task_env(OmegaConf.create(task), cfg, num_envs, seed)
    try:
        check_policy_fits(policy, meta, source, env, task["name"])
        bind_env = getattr(policy, "bind_env", None)  # a stateful policy, reset per episode
        if bind_env is not None:
            bind_env(env)
    except Exception:
        env.close()
        raise
    torch.manual_seed(seed)

    out_dir = Path(cfg.out) if cfg.get("out") else \
        (run_dir if run_dir is not None else policy_file.parent) / "eval"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = eval_stamp(out_dir)
    video_path = out_dir / f"eval_{stamp}.mp4" if bool(cfg.video) else None
    start = time.perf_counter()
    with torch.inference_mode():
        result = evaluate_and_track(policy, env, video_path, seed,
                                    video_envs=int(cfg.video_envs), cameras=cfg.get("cameras"),
                                    width=int(cfg.width), height=int(cfg.height),
                                    fps=int(cfg.fps), episodes=episodes,
                                    progress=bool(cfg.progress))
    record = {
        "task": task["name"], "robot": env.robot.name, "sim": sim_kwargs(cfg)["backend"],
        "run_dir": str(run_dir) if run_dir is not None else None, "policy": source, **result,
        "requested_episodes": episodes, "num_envs": num_envs, "seed": seed,
        "deterministic": bool(cfg.deterministic),
        "obs_noise": bool(task.get("obs_noise", True)),
        "randomization": bool((task.get("randomization") or {}).get("enabled", True)),
        "seconds": round(time.perf_counter() - start, 2),
        "time": _dt.datetime.now().isoformat(timespec="seconds"),
    }
    path = out_dir / f"eval_{stamp}.json"
    path.write_text(json.dumps(record, indent=2))
    record["json"] = str(path)
    print_eval_record(record, path)
    return record
