"""`embodied reward train`: simulate (or load) frames, train the learned PRM, evaluate it.

Under ``torchrun`` the PRM trains with DistributedDataParallel (one minibatch stream per
rank); rank 0 simulates the data, writes the run folder and evaluates.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from embodied import distributed
from embodied.commands.registry import command
from embodied.config import save_config
from embodied.envs import env_kwargs
from embodied.reward.prm.checkpoint import CHECKPOINT_NAME, save_prm
from embodied.reward.prm.data import DataConfig, all_policies, load_or_simulate, policy_sources
from embodied.reward.prm.evaluate import evaluate, fit_success_calibration, print_metrics
from embodied.reward.prm.model import LearnedPRM
from embodied.reward.prm.network import PRMConfig
from embodied.reward.prm.train import TrainConfig, train_prm

ENV_FIELDS = ("action", "decimation", "episode_length_s", "deploy_limits")


def task_env(task: DictConfig) -> dict[str, Any]:
    """The env settings the task group sets (``env_kwargs``), as :class:`DataConfig` fields.

    Settings the task leaves unset are left out, so they do not replace the data config's.
    """
    kwargs = env_kwargs(task)
    return {key: kwargs[key] for key in ENV_FIELDS if key in kwargs}


@command("reward train", "train the learned multi-view PRM on simulated episodes of a task",
         errors=(FileNotFoundError, ValueError))
def run_reward_train(cfg: DictConfig) -> dict[str, Any]:
    """Simulate (or load) a frame dataset, train the PRM, evaluate it; returns metrics."""
    torch.set_num_threads(int(cfg.torch_threads))
    distributed.init()
    run_dir = Path(distributed.broadcast_object(str(cfg.run_dir)))
    main = distributed.is_main()
    data_cfg = OmegaConf.to_container(cfg.data, resolve=True) | task_env(cfg.task)
    path = data_cfg.pop("path")
    model_kw = OmegaConf.to_container(cfg.model, resolve=True)
    PRMConfig(**model_kw)  # bad model and training settings fail before minutes of simulation
    train_cfg = TrainConfig(**OmegaConf.to_container(cfg.train, resolve=True))
    data_config = DataConfig(task=cfg.task.name, **data_cfg)
    policy_sources(all_policies(data_config))  # and so do missing policy checkpoints
    start = time.perf_counter()
    if main:
        save_config(OmegaConf.merge(cfg, {"run_dir": str(run_dir)}), run_dir)
        if path is None:
            wander = f" + {data_config.wander_episodes} wander" \
                if data_config.wander_episodes else ""
            print(f"simulating {data_config.episodes}{wander} episodes of {cfg.task.name} ...",
                  flush=True)
        data, path = load_or_simulate(path, data_config, run_dir / "data", progress_bar=True)
    path = distributed.broadcast_object(str(path) if main else None)  # after rank 0 saved it
    if not main:
        data, path = load_or_simulate(path, data_config, run_dir / "data")
    sim_s = time.perf_counter() - start
    print(f"dataset {path}: {len(data.progress)} states of {len(data.episodes)} episodes "
          f"({sim_s:.0f} s)", flush=True)
    model_cfg = PRMConfig(cameras=data.cameras, **model_kw)
    net, stats = train_prm(data, model_cfg, train_cfg)
    if not main:
        return {"rank": distributed.rank(), "train": stats}
    info = {"task": data.meta["task"], "instruction": data.instruction,
            "cameras": data.cameras, "data": str(path), "train": stats,
            "data_seconds": round(sim_s, 1),
            "success_calibration": fit_success_calibration(net, data)}  # held-out states
    ckpt = save_prm(run_dir / CHECKPOINT_NAME, net, info)
    metrics = evaluate(LearnedPRM(ckpt), data, plot=run_dir / "eval.png")
    info["metrics"] = metrics
    save_prm(ckpt, net, info)
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    if not cfg.keep_data and Path(path) == run_dir / "data":
        shutil.rmtree(path)
    print_metrics(metrics)
    print(f"  checkpoint          {ckpt}\n  use it              embodied train task="
          f"{cfg.task.name} reward=prm reward.checkpoint={run_dir}")
    return metrics
