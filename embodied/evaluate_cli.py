"""`embodied eval`: success rate, return and episode length of a trained or exported policy.

Evaluates a run folder's checkpoint (newest by default) or an exported policy
file (``policy=.../policy.pt`` or ``.onnx``, see :mod:`embodied.export`) on the
run's task with the env settings it was trained with (observation noise and
domain randomisation, unless overridden), and writes
``<run>/eval/eval_<timestamp>.json`` and an MP4 of a few envs from every camera.
The episode loop is :func:`embodied.rl.evaluate.evaluate`, as at the end of training.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from embodied.export import (
    ExportError,
    PolicyMismatchError,
    check_against_env,
    load_checkpoint_policy,
    load_policy,
    load_run_config,
    resolve_run,
    sha256_file,
)
from embodied.locomotion_eval import is_legged, tracking_summary
from embodied.rl.evaluate import evaluate_and_film, print_video_and_walking

EVAL_SEED_OFFSET = 10_000  # the end-of-training evaluation uses seed + 10000 too


def _policy_run_dir(policy_path: Path) -> Path | None:
    """The run folder an exported file belongs to (``<run>/export/policy.pt``), if it is one."""
    parent = policy_path.parent.parent if policy_path.parent.name == "export" \
        else policy_path.parent
    return parent if (parent / "config.yaml").is_file() else None


def _task_config(cfg: DictConfig, run_cfg: DictConfig | None,
                 meta: dict[str, Any] | None) -> dict[str, Any]:
    """The task config the policy was trained with, with eval's overrides applied."""
    if run_cfg is not None:
        task = OmegaConf.to_container(run_cfg.task, resolve=True)
    elif meta is not None and (meta.get("training") or {}).get("task_config"):
        task = dict(meta["training"]["task_config"])
    else:
        task = {"name": meta["task"] if meta else None, "episode_length_s": None,
                "obs_noise": True, "randomization": {"enabled": True}}
    if cfg.get("obs_noise") is not None:
        task["obs_noise"] = bool(cfg.obs_noise)
    if cfg.get("randomization") is not None:
        task["randomization"] = {**(task.get("randomization") or {}),
                                 "enabled": bool(cfg.randomization)}
    if cfg.get("episode_length_s") is not None:
        task["episode_length_s"] = float(cfg.episode_length_s)
    return task


def run_evaluation(cfg: DictConfig) -> dict[str, Any]:
    """Evaluate per ``cfg`` (configs/eval.yaml); writes and returns the eval record."""
    from embodied.demo import env_kwargs, sim_kwargs
    from sim import make_env

    torch.set_num_threads(int(cfg.torch_threads))
    policy_file = Path(str(cfg.policy)).expanduser() if cfg.get("policy") else None
    if cfg.get("run"):
        run_dir: Path | None = resolve_run(cfg.run)
    elif policy_file is not None:
        if not policy_file.is_file():
            raise ExportError(f"exported policy {policy_file} does not exist")
        run_dir = _policy_run_dir(policy_file)
    else:
        raise ExportError("nothing to evaluate: pass run=PATH (a run folder) and/or "
                          "policy=FILE (an exported policy.pt / policy.onnx)")
    run_cfg = load_run_config(run_dir) if run_dir is not None else None

    meta: dict[str, Any] | None = None
    source: dict[str, Any]
    policy: Callable[[torch.Tensor], torch.Tensor]
    if policy_file is not None:
        if not bool(cfg.deterministic):
            raise ExportError("an exported policy is deterministic (the mean action); "
                              "use deterministic=true or evaluate the checkpoint")
        policy, meta = load_policy(policy_file)
        if run_cfg is not None and meta.get("task") != run_cfg.task.name:
            raise PolicyMismatchError(
                f"{policy_file} was exported for task '{meta.get('task')}' (robot "
                f"'{meta.get('robot')}'), the run {run_dir} is task '{run_cfg.task.name}'")
        source = {"kind": policy.kind, "path": str(policy_file), "sha256": sha256_file(policy_file),
                  "checkpoint": (meta.get("training") or {}).get("checkpoint")}
    else:
        actor_critic, state, ckpt = load_checkpoint_policy(cfg.get("checkpoint") or run_dir)
        if bool(cfg.deterministic):
            policy = actor_critic
        else:
            def policy(obs: torch.Tensor) -> torch.Tensor:
                return actor_critic.act(actor_critic.normalize(obs, update=False))[0]
        source = {"kind": "checkpoint", "path": str(ckpt),
                  "iteration": int(state.get("iteration", 0)),
                  "env_steps": int(state.get("global_step", 0))}

    task = _task_config(cfg, run_cfg, meta)
    if not task.get("name"):
        raise ExportError("cannot tell the task: no run folder and no task in the metadata")
    seed = int(cfg.seed) if cfg.get("seed") is not None else \
        int((run_cfg or {}).get("seed", 0) or 0) + EVAL_SEED_OFFSET
    episodes = int(cfg.episodes)
    num_envs = int(cfg.num_envs) if cfg.get("num_envs") else min(episodes, 64)
    extra = {} if cfg.get("physics_threads") is None else {"nthread": int(cfg.physics_threads)}
    env = make_env(task["name"], num_envs=num_envs, seed=seed,
                   **env_kwargs(OmegaConf.create(task)), **sim_kwargs(cfg), **extra)
    try:
        if meta is not None:
            check_against_env(meta, env)
        elif getattr(policy, "obs_dim", env.obs_dim) != env.obs_dim:
            raise PolicyMismatchError(f"{source['path']} takes {policy.obs_dim} observations, "
                                      f"task '{task['name']}' has {env.obs_dim}")
    except Exception:
        env.close()
        raise
    torch.manual_seed(seed)

    out_dir = Path(cfg.out) if cfg.get("out") else \
        (run_dir if run_dir is not None else policy_file.parent) / "eval"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    for i in range(1, 1000):  # two evaluations within a second keep both results
        if not (out_dir / f"eval_{stamp}.json").exists():
            break
        stamp = f"{stamp.split('.')[0]}.{i}"
    video_path = out_dir / f"eval_{stamp}.mp4" if bool(cfg.video) else None
    start = time.perf_counter()
    with torch.inference_mode():
        tracking = tracking_summary(policy, env, seed=seed) if is_legged(env) else None
        result = evaluate_and_film(policy, env, video_path, video_envs=int(cfg.video_envs),
                                   cameras=cfg.get("cameras"), width=int(cfg.width),
                                   height=int(cfg.height), fps=int(cfg.fps), episodes=episodes,
                                   progress=bool(cfg.progress))
    if tracking is not None:
        result["velocity_tracking"] = tracking
    record = {
        "task": task["name"],
        "robot": env.robot.name,
        "sim": sim_kwargs(cfg)["backend"],
        "run_dir": str(run_dir) if run_dir is not None else None,
        "policy": source,
        **result,
        "requested_episodes": episodes,
        "num_envs": num_envs,
        "seed": seed,
        "deterministic": bool(cfg.deterministic),
        "obs_noise": bool(task.get("obs_noise", True)),
        "randomization": bool((task.get("randomization") or {}).get("enabled", True)),
        "seconds": round(time.perf_counter() - start, 2),
        "time": _dt.datetime.now().isoformat(timespec="seconds"),
    }
    path = out_dir / f"eval_{stamp}.json"
    path.write_text(json.dumps(record, indent=2))
    record["json"] = str(path)

    print(f"\n{record['task']} ({record['robot']}, sim={record['sim']}): {source['kind']} "
          f"{source['path']}")
    print(f"  success rate        {record['success_rate']:.1%} of {record['episodes']} episodes "
          f"({'deterministic' if record['deterministic'] else 'stochastic'} policy, "
          f"{num_envs} envs, seed {seed})")
    print(f"  mean return         {record['episode_return']:.2f}")
    print(f"  mean length         {record['episode_length']:.1f} steps")
    print_video_and_walking(record)
    print(f"  results             {path}")
    return record
