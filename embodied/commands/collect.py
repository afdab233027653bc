"""`embodied collect`: rollouts (expert, random or a trained policy) as a LeRobot dataset.

Every camera view is recorded (see :mod:`embodied.datasets.collect` for the format).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from embodied.commands.registry import command
from embodied.datasets import DatasetError
from embodied.datasets.actions import action_kind
from embodied.datasets.collect import frame_features, record_sources, sources, split_episodes
from embodied.datasets.video import CODECS
from embodied.datasets.writer import DatasetWriter
from embodied.envs import make_train_env
from embodied.policy_io import ExportError
from embodied.rl.checkpoint import CheckpointError


@command("collect", "record rollouts (expert, random or a trained policy) as a LeRobot "
         "dataset with every camera view (resumable)",
         errors=(DatasetError, CheckpointError, ExportError))
def run_collect(cfg: DictConfig) -> dict[str, Any]:
    """Record ``cfg.episodes`` episodes into a new dataset at ``cfg.out``.

    An interrupted collection at ``cfg.out`` is continued (same settings), as if it
    never stopped.
    """
    torch.set_num_threads(int(cfg.get("torch_threads") or 1))
    pairs = sources(cfg.policy, cfg.noise)
    total = int(cfg.episodes)
    counts = split_episodes(total, pairs)
    num_envs = max(1, min(int(cfg.num_envs), max(counts)))
    env = make_train_env(cfg, num_envs, int(cfg.seed))
    cameras = list(env.camera_names if cfg.cameras is None else cfg.cameras)
    fps = round(1.0 / env.control_dt)
    width, height = int(cfg.width), int(cfg.height)
    codecs = cfg.get("video_codecs") or CODECS  # video_codecs=h264 on the command line
    codecs = [codecs] if isinstance(codecs, str) else list(codecs)
    writer = DatasetWriter(
        cfg.out, fps, frame_features(env), cameras, (height, width),
        robot_type=env.robot.name, episodes_per_file=int(cfg.episodes_per_file),
        extra_info={"embodied": {
            "task": cfg.task.name, "instruction": env.instruction, "robot": env.robot.name,
            "control_dt": env.control_dt, "cameras": cameras,
            "action_space": action_kind(env.action_map),
            "task_config": OmegaConf.to_container(cfg.task, resolve=True),
            "collection": {"sources": [list(p) for p in pairs], "seed": int(cfg.seed),
                           "episodes": total, "num_envs": num_envs}}},
        resume=True, video_codecs=codecs)
    if writer.episodes:
        print(f"resuming {writer.root}: {len(writer.episodes)} of {total} episodes recorded")
    start = time.perf_counter()
    bar = tqdm(total=total, unit="episode", desc=f"collect {cfg.task.name}",
               disable=not cfg.get("progress", True))
    try:
        outcomes = record_sources(env, writer, pairs, counts, cameras, width, height,
                                  int(cfg.seed), on_episode=lambda: bar.update(1))
    finally:
        bar.close()
        env.close()
    root = writer.close()
    seconds = time.perf_counter() - start
    summary = {"dataset": str(root), "episodes": len(writer.episodes),
               "frames": writer._frames, "cameras": cameras, "fps": fps,
               "success_rate": {k: float(np.mean(v)) for k, v in outcomes.items()},
               "seconds": round(seconds, 1)}
    views = f"views {', '.join(cameras)} at {width}x{height}" if cameras else "no camera"
    print(f"\n{cfg.task.name}: {summary['episodes']} episodes, {summary['frames']} frames, "
          f"{views}, {fps} fps, in {seconds:.0f} s")
    for name, rate in summary["success_rate"].items():
        print(f"  {name:<28} success {rate:.0%} of {len(outcomes[name])} episodes")
    print(f"  dataset: {root}")
    return summary
