"""Evaluating a trained or exported policy outside training: what `embodied eval` runs.

A run folder's checkpoint (newest by default) or an exported policy file
(``policy.pt`` / ``policy.onnx``, see :mod:`embodied.export`) is evaluated on the
run's task with the env settings it was trained with (observation noise and domain
randomisation, unless overridden); results go to ``<run>/eval/eval_<timestamp>.json``
(+ an MP4 of a few envs from every camera). The episode loop is
:func:`embodied.rl.evaluate.evaluate`, as at the end of training.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from embodied.export import load_checkpoint_policy, resolve_run
from embodied.policy_io import (
    ExportError,
    PolicyMismatchError,
    check_against_env,
    chunk_settings,
    load_policy,
    sha256_file,
    with_chunking,
)
from embodied.rl.evaluate import print_video_and_walking

Policy = Callable[[torch.Tensor], torch.Tensor]


def policy_run_dir(policy_path: Path) -> Path | None:
    """The run folder an exported file belongs to (``<run>/export/policy.pt``), if it is one."""
    parent = policy_path.parent.parent if policy_path.parent.name == "export" \
        else policy_path.parent
    return parent if (parent / "config.yaml").is_file() else None


def eval_target(cfg: DictConfig) -> tuple[Path | None, Path | None]:
    """(run folder, exported policy file) named by ``run=`` / ``policy=``; one at least."""
    policy_file = Path(str(cfg.policy)).expanduser() if cfg.get("policy") else None
    if cfg.get("run"):
        return resolve_run(cfg.run), policy_file
    if policy_file is None:
        raise ExportError("nothing to evaluate: pass run=PATH (a run folder) and/or "
                          "policy=FILE (an exported policy.pt / policy.onnx)")
    if not policy_file.is_file():
        raise ExportError(f"exported policy {policy_file} does not exist")
    return policy_run_dir(policy_file), policy_file


def load_eval_policy(cfg: DictConfig, run_dir: Path | None, run_cfg: DictConfig | None,
                     policy_file: Path | None
                     ) -> tuple[Policy, dict[str, Any] | None, dict[str, Any]]:
    """(policy, exported metadata or None, what was loaded) for ``cfg.deterministic``."""
    if policy_file is not None:
        if not bool(cfg.deterministic):
            raise ExportError("an exported policy is deterministic (the mean action); "
                              "use deterministic=true or evaluate the checkpoint")
        policy, meta = load_policy(policy_file)
        if run_cfg is not None and meta.get("task") != run_cfg.task.name:
            raise PolicyMismatchError(
                f"{policy_file} was exported for task '{meta.get('task')}' (robot "
                f"'{meta.get('robot')}'), the run {run_dir} is task '{run_cfg.task.name}'")
        return policy, meta, {"kind": policy.kind, "path": str(policy_file),
                              "sha256": sha256_file(policy_file),
                              "checkpoint": (meta.get("training") or {}).get("checkpoint")}
    actor_critic, state, ckpt = load_checkpoint_policy(cfg.get("checkpoint") or run_dir)
    source = {"kind": "checkpoint", "path": str(ckpt),
              "iteration": int(state.get("iteration", 0)),
              "env_steps": int(state.get("global_step", 0))}
    if bool(cfg.deterministic):  # an action-chunking policy runs temporally ensembled
        config = state.get("config")
        return with_chunking(actor_critic, config, actor_critic.action_dim
                             // chunk_settings(config)[0]), None, source

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return actor_critic.act(actor_critic.normalize(obs, update=False))[0]

    return policy, None, source


def eval_task_config(cfg: DictConfig, run_cfg: DictConfig | None,
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
    if not task.get("name"):
        raise ExportError("cannot tell the task: no run folder and no task in the metadata")
    return task


def check_policy_fits(policy: Policy, meta: dict[str, Any] | None, source: dict[str, Any],
                      env: Any, task: str) -> None:
    """Refuse a policy whose metadata or observation size does not fit ``env``."""
    if meta is not None:
        check_against_env(meta, env)
    elif getattr(policy, "obs_dim", env.obs_dim) != env.obs_dim:
        raise PolicyMismatchError(f"{source['path']} takes {policy.obs_dim} observations, "
                                  f"task '{task}' has {env.obs_dim}")


def eval_stamp(out_dir: Path) -> str:
    """A timestamp for ``eval_<stamp>.json`` that no earlier evaluation in ``out_dir`` used."""
    stamp = _dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    for i in range(1, 1000):  # two evaluations within a second keep both results
        if not (out_dir / f"eval_{stamp}.json").exists():
            break
        stamp = f"{stamp.split('.')[0]}.{i}"
    return stamp


def print_eval_record(record: dict[str, Any], path: Path) -> None:
    """The evaluation's result, one quantity per line."""
    source = record["policy"]
    print(f"\n{record['task']} ({record['robot']}, sim={record['sim']}): {source['kind']} "
          f"{source['path']}")
    print(f"  success rate        {record['success_rate']:.1%} of {record['episodes']} episodes "
          f"({'deterministic' if record['deterministic'] else 'stochastic'} policy, "
          f"{record['num_envs']} envs, seed {record['seed']})")
    print(f"  mean return         {record['episode_return']:.2f}")
    print(f"  mean length         {record['episode_length']:.1f} steps")
    print_video_and_walking(record)
    print(f"  results             {path}")
