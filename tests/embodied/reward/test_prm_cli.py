"""`embodied reward train`, `embodied reward eval` and `embodied train reward=prm` end to end."""

from __future__ import annotations

import json

import numpy as np
import torch

from embodied.cli import main
from embodied.reward.prm.data import load_frames


def test_reward_train_eval_and_rl_with_prm(tmp_path, capsys):
    """The issue's command, `embodied train task=panda_push reward=prm`, with a PRM that
    `embodied reward train` wrote (small scale)."""
    run = tmp_path / "prm_run"
    assert main(["reward", "train", "task=panda_push", "data.episodes=16", "data.batch_envs=8",
                 "data.wander_episodes=8", "data.stride=10", "data.width=32", "data.height=32",
                 "model.image_size=32", "model.text=learned", "model.dim=32", "train.epochs=1",
                 "train.batch_size=16", f"run_dir={run}"]) == 0
    assert (run / "prm.pt").is_file() and (run / "eval.png").is_file()
    assert (run / "data" / "meta.json").is_file() and (run / "config.yaml").is_file()
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"voc", "voc_reversed", "success_f1", "success_auroc", "progress_pearson",
            "pairwise_accuracy", "counterfactual_gap"} <= set(metrics)

    info = torch.load(run / "prm.pt", weights_only=False)["info"]
    assert {"scale", "bias", "states"} <= set(info["success_calibration"])
    config = load_frames(run / "data").meta["config"]
    assert config["visual"]["enabled"]  # the default
    assert config["action"] == "ee_delta_yaw_closed"  # the env PPO on panda_push trains in

    cache = tmp_path / "shift"
    assert main(["reward", "eval", f"reward.checkpoint={run}", "shift.episodes=4",
                 "shift.batch_envs=4", f"shift.cache={cache}"]) == 0
    evaluated = json.loads((run / "eval_metrics.json").read_text())
    kinds = evaluated["shift"]["kinds"]
    assert {"none", "light_dim", "surface_colour", "camera", "noise"} <= set(kinds)
    for figures in kinds.values():
        assert {"success_f1", "success_auroc", "progress_pearson", "states"} <= set(figures)
    assert (run / "eval_shift.png").is_file()
    # every kind replays the same episodes; only how they look differs
    plain, dim = load_frames(cache / "none"), load_frames(cache / "light_dim")
    np.testing.assert_array_equal(plain.progress, dim.progress)
    assert plain.frames.mean() > dim.frames.mean()

    train_dir = tmp_path / "ppo"
    assert main(["train", "task=panda_push", "reward=prm", f"reward.checkpoint={run}",
                 "reward.loop.distill.label_envs=2", "num_envs=4", "max_iterations=2",
                 "algo.num_steps=8", "reward.loop.refresh.every=1",
                 "reward.loop.refresh.steps=2", "reward.loop.refresh.batch_size=8",
                 "eval.num_envs=0", "progress=false", f"run_dir={train_dir}"]) == 0
    summary = json.loads((train_dir / "summary.json").read_text())
    assert summary["reward"] == "prm+sparse"
    assert summary["reward_timing"]["scoring"] == "distilled"
    assert summary["reward_timing"]["frames_scored"] > 0
    out = capsys.readouterr().out
    assert "time share" in out
    # the run keeps the PRM as its refresh left it, and `embodied reward eval` reads it
    refreshed = train_dir / "prm" / "prm.pt"
    assert summary["reward_timing"]["refreshed_prm"] == str(refreshed)
    saved = torch.load(refreshed, weights_only=False)
    original = torch.load(run / "prm.pt", weights_only=False)
    assert saved["info"]["refreshed"]["refreshes"] == 1
    assert saved["info"]["success_calibration"] == original["info"]["success_calibration"]
    assert any(not torch.equal(saved["state_dict"][k], v)
               for k, v in original["state_dict"].items())
    assert main(["reward", "eval", "task=panda_push", f"reward.checkpoint={train_dir / 'prm'}",
                 "shift.episodes=1", "shift.batch_envs=1"]) == 0
    assert (train_dir / "prm" / "eval_metrics.json").is_file()


def test_reward_train_errors_are_clear(tmp_path, capsys):
    assert main(["reward", "train", f"data.path={tmp_path}", f"run_dir={tmp_path / 'r'}"]) == 2
    assert "not a PRM frame dataset" in capsys.readouterr().err
    assert main(["train", "task=panda_reach", "reward=prm",
                 f"reward.checkpoint={tmp_path / 'nothing'}", f"run_dir={tmp_path / 't'}"]) == 2
    assert "embodied reward train" in capsys.readouterr().err
    assert main(["reward", "train", f"run_dir={tmp_path / 'p'}",
                 f"data.policies=[{{checkpoint: {tmp_path / 'none.pt'}, episodes: 4}}]"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "no checkpoint at" in err and "Traceback" not in err
    assert main(["reward", "train", f"run_dir={tmp_path / 'c'}",
                 f"data.policy_run={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data.policy_run: no checkpoints in") and "Traceback" not in err
    assert main(["reward", "train", f"run_dir={tmp_path / 'q'}",
                 "model.context=later"]) == 2
    assert "model.context must be 'none' or 'start'" in capsys.readouterr().err
    for setting, name in (("train.brightness=[1.5,0.7]", "train.brightness"),
                          ("train.colour_std=-0.1", "train.colour_std"),
                          ("train.pixel_shift=-1", "train.pixel_shift")):
        assert main(["reward", "train", f"run_dir={tmp_path / 'a'}", "data.episodes=2",
                     "data.batch_envs=2", setting]) == 2
        out, err = capsys.readouterr()
        assert err.startswith(f"error: {name}") and ": off)" in err
        assert "simulating" not in out and "Traceback" not in err  # before any data
