"""The PRM's figures on policy states (`evaluate.policy_state_metrics`) and the env the
push PRM's episodes run in."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodied.commands.reward_train import task_env
from embodied.config import load_config
from embodied.reward.base import RewardModel, RewardOutput
from embodied.reward.prm.data import DataConfig, FrameDataset, simulate
from embodied.reward.prm.evaluate import policy_state_metrics

INSTRUCTION = "push the red cube into the green goal region"


class BrightnessModel(RewardModel):
    """Progress = mean brightness of the current views (the first half when start views
    follow them); a model whose score is known exactly, so the metrics can be checked."""

    start_context = True

    def _score(self, frames: torch.Tensor | None, instructions: list[str],
               state: Mapping[str, Any] | None) -> RewardOutput:
        assert frames is not None
        current = frames[:, :frames.shape[1] // 2]
        shift = torch.tensor([0.0 if t == INSTRUCTION else 0.5 for t in instructions])
        return RewardOutput((current.float().mean((1, 2, 3, 4)) / 255 - shift).clamp(0, 1))


def dataset(progress: list[np.ndarray], kinds: list[str]) -> FrameDataset:
    """Episodes whose frames are grey at their true progress, one view of 2x2 pixels."""
    frames, episodes, start = [], [], 0
    for i, (p, kind) in enumerate(zip(progress, kinds, strict=True)):
        frames.append(np.broadcast_to((p * 255).round().astype(np.uint8)[:, None, None, None, None],
                                      (len(p), 1, 2, 2, 3)))
        episodes.append({"index": i, "kind": kind, "start": start, "length": len(p),
                         "split": "val", "policy": f"ckpt/model_{i % 2}.pt"})
        start += len(p)
    rows = np.concatenate(progress).astype(np.float32)
    return FrameDataset(np.concatenate(frames), np.repeat(np.arange(len(progress)),
                                                          [len(p) for p in progress]),
                        np.zeros(len(rows), np.int32), rows, rows >= 1.0,
                        {"instruction": INSTRUCTION, "cameras": ["front"], "episodes": episodes})


def test_a_model_that_reads_progress_exactly_meets_every_target():
    rng = np.random.default_rng(0)
    progress = [np.clip(np.cumsum(rng.uniform(-0.05, 0.2, 12)), 0, 1) for _ in range(6)]
    progress[0] = np.linspace(0, 1, 12)
    data = dataset(progress, ["expert", "policy", "policy", "policy", "policy", "policy"])
    m = policy_state_metrics(BrightnessModel(), data, [INSTRUCTION, "nudge it home"])
    assert m["states"] == 5 * 12 and set(m["pearson_per_stage"]) == {"model_0", "model_1"}
    assert m["pearson"] > 0.999 and m["step_delta_pearson"] > 0.99 and m["mae"] < 0.01
    assert m["paraphrase_abs_change"][INSTRUCTION] == 0.0
    assert m["paraphrase_abs_change"]["nudge it home"] > 0.3  # scored 0.5 lower
    assert m["near_miss_max"] < m["true_instruction_on_them"] - 0.3
    # a reversed expert clip, its own first (finished) frame as start: progress read high
    assert m["reversed_mean_progress_with_context"] > 0.4
    assert m["targets"] == {"pearson>=0.9": True, "step_delta>=0.6": True,
                            "paraphrase<=0.1": False, "near_miss<=0.3": True}


def test_push_prm_episodes_run_in_the_pushers_env():
    cfg = load_config("reward_train", ["task=panda_push"])
    env = task_env(cfg.task)
    assert env["action"] == "ee_delta_yaw_closed" and cfg.data.episodes == 320
    assert load_config("reward_train", ["task=panda_reach"]).data.episodes == 160
    data = simulate(DataConfig(task="panda_push", episodes=2, batch_envs=2, stride=5,
                               width=16, height=16, expert_fraction=1.0, noisy_fraction=0.0,
                               **(env | {"episode_length_s": 1.0})))
    # 20 Hz for 1 s: 20 control steps, a state every 5th
    assert [e["length"] for e in data.episodes] == [4, 4]
    assert data.meta["config"]["action"] == "ee_delta_yaw_closed"


def test_policy_states_roll_out_the_pushers_checkpoints_in_the_prms_env(tmp_path):
    from embodied.cli import main
    from embodied.reward.prm.data import all_policies, policy_sources
    from embodied.reward.prm.evaluate import policy_state_config, shift_config
    from tests.embodied.conftest import TINY_PPO

    run = tmp_path / "pusher"
    threads = torch.get_num_threads()
    try:
        args = [a for a in TINY_PPO if not a.startswith("task=")]
        assert main(["train", "task=panda_push", *args, "max_iterations=1",
                     f"run_dir={run}"]) == 0
    finally:
        torch.set_num_threads(threads)
    ckpt = str(next((run / "checkpoints").glob("model_*.pt")))
    env = task_env(load_config("reward_train", ["task=panda_push"]).task)
    # a coverage PRM's data: the pusher's env, and a dense run's rollouts (policy_run)
    own = simulate(DataConfig(task="panda_push", episodes=2, batch_envs=2, stride=5, width=16,
                              height=16, expert_fraction=1.0, noisy_fraction=0.0,
                              **(env | {"episode_length_s": 0.5})))
    own.meta["config"]["policy_run"] = str(run)
    own.meta["config"]["wander_episodes"] = 3  # the PRM's data had wander episodes too
    # the shift suite keeps the data's share of them; policy states have none
    assert shift_config(own, {"enabled": False}, episodes=4, seed=0,
                        batch_envs=2).wander_episodes == 6
    cfg = policy_state_config(own, ckpt, stages=1, episodes=2, noise=0.2, seed=3)
    assert cfg.wander_episodes == 0
    # the given checkpoint alone: the PRM's own training policies are not rolled out again
    assert [s.checkpoint for s in policy_sources(all_policies(cfg))] == [ckpt]
    assert (cfg.action, cfg.decimation) == (env["action"], env["decimation"])
    data = simulate(replace(cfg, episodes=2, batch_envs=2))
    assert [e["kind"] for e in data.episodes] == ["expert", "expert", "policy", "policy"]
    assert all(e["length"] == 2 for e in data.episodes)  # 10 control steps, every 5th
    # a run folder's trained policy: its last checkpoint; the cached rollouts are redone
    # when the run has saved another checkpoint since (the settings alone are the same)
    from embodied.reward.prm.evaluate import shift_dataset
    folder = tmp_path / "policy_states"
    by_run = replace(cfg, episodes=2, batch_envs=2, policies=[
        {"checkpoint": str(run), "stages": 1, "episodes": 2, "noise": 0.2}])
    first = shift_dataset(by_run, folder)
    assert {e.get("policy") for e in first.episodes} - {None} == {ckpt}
    later = run / "checkpoints" / "model_999999.pt"
    later.write_bytes(Path(ckpt).read_bytes())
    again = shift_dataset(by_run, folder)
    assert {e.get("policy") for e in again.episodes} - {None} == {str(later)}
    saved = (folder / "meta.json").stat().st_mtime_ns
    assert len(shift_dataset(by_run, folder).episodes) == len(again.episodes)
    assert (folder / "meta.json").stat().st_mtime_ns == saved  # read back, not redone
    # rollouts saved before a setting existed count it at its default: still read back
    meta = json.loads((folder / "meta.json").read_text())
    del meta["config"]["wander_box"]
    (folder / "meta.json").write_text(json.dumps(meta))
    saved = (folder / "meta.json").stat().st_mtime_ns
    shift_dataset(by_run, folder)
    assert (folder / "meta.json").stat().st_mtime_ns == saved
    # the run trained again in the same folder: its checkpoint is newer than the rollouts
    os.utime(later, (time.time() + 60, time.time() + 60))
    shift_dataset(by_run, folder)
    assert (folder / "meta.json").stat().st_mtime_ns != saved
