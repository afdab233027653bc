"""bench/reward_rl.py's eval curves: every checkpoint evaluated deterministically, the
arm's env steps to 80% read off the mean over seeds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.reward_rl import at_most, eval_curve, over_seeds
from embodied.commands.train import run_train
from embodied.config import load_config


def run(seed: int, train: list[float], evals: list[float]) -> dict:
    """One seed's figures as bench.reward_model.ppo_run returns them, with its eval curve."""
    return {"env_steps": [100 * (i + 1) for i in range(len(train))], "success_rate": train,
            "eval_success": evals[-1], "train_seconds": 1.0, "collection_fps": 10.0 + seed,
            "reward_timing": None,
            "eval_curve": {"env_steps": [200 * (i + 1) for i in range(len(evals))],
                           "success": evals, "episodes": 64, "save_interval": 2}}


def test_steps_to_a_level_are_read_off_the_mean_over_seeds():
    arm = over_seeds([run(0, [0.0, 0.5, 0.9, 0.9], [0.9, 1.0, 1.0]),
                      run(1, [0.0, 0.1, 0.7, 0.8], [0.5, 0.7, 0.9])])
    assert arm["eval_env_steps"] == [200, 400, 600]
    assert arm["eval_curve"] == [0.7, 0.85, 0.95]
    # seed 0 alone is at 80% from the first checkpoint; the mean over seeds first at the second
    assert arm["env_steps_to_80"] == 400 and arm["env_steps_to_95"] == 600
    assert arm["env_steps_to_80_per_seed"] == [200, 600]
    assert arm["train_env_steps_to_80"] == 300  # training success: mean 0.8 at step 300
    assert arm["eval_success"] == 0.95
    # what the arm reached within a budget: its last checkpoint at or before it
    assert at_most(arm, 599) == 0.85 and at_most(arm, 600) == 0.95
    assert at_most(arm, 100) is None and at_most(arm, None) is None


def test_the_eval_curve_ends_on_the_runs_own_final_evaluation(tmp_path):
    run_dir = tmp_path / "run"
    summary = run_train(load_config("train", [
        "task=panda_reach", "num_envs=8", "algo.num_steps=16", "max_iterations=3",
        "save_interval=2", "eval.num_envs=8", "eval.video_envs=0", "progress=false",
        f"run_dir={run_dir}"]))
    curve = eval_curve(run_dir, quick=True)
    assert curve["iterations"] == [2, 3] and curve["env_steps"] == [256, 384]
    assert curve["save_interval"] == 2 and curve["episodes"] == 8
    # the same deterministic episodes as the end-of-training evaluation, so the same return
    assert curve["episode_return"][-1] == summary["eval"]["episode_return"]
    assert curve["success"][-1] == summary["eval"]["success_rate"]
    assert curve["episode_return"][0] != curve["episode_return"][-1]  # another checkpoint
    assert json.loads((run_dir / "eval_curve.json").read_text()) == curve  # cached


def test_the_eval_curve_evaluates_only_checkpoints_it_has_not_seen(tmp_path, monkeypatch):
    import embodied.commands.eval as eval_command

    run_dir = tmp_path / "run"
    args = ["task=panda_reach", "num_envs=8", "algo.num_steps=16", "save_interval=1",
            "eval.num_envs=8", "eval.video_envs=0", "progress=false", f"run_dir={run_dir}"]
    run_train(load_config("train", [*args, "max_iterations=2"]))
    first = eval_curve(run_dir, quick=True)
    evaluated = []
    real = eval_command.run_evaluation

    def counting(cfg):
        evaluated.append(Path(cfg.checkpoint).name)
        return real(cfg)

    monkeypatch.setattr(eval_command, "run_evaluation", counting)
    run_train(load_config("train", [*args, "max_iterations=3", f"resume={run_dir}"]))
    curve = eval_curve(run_dir, quick=True)
    assert curve["iterations"] == [1, 2, 3]
    assert evaluated == ["model_000003.pt"]  # the new checkpoint only
    assert curve["success"][:2] == first["success"]
    assert curve["episode_return"][:2] == first["episode_return"]
    # a checkpoint written again (another run in the same folder) is evaluated again
    ckpt = run_dir / "checkpoints" / "model_000001.pt"
    ckpt.write_bytes(ckpt.read_bytes())
    evaluated.clear()
    eval_curve(run_dir, quick=True)
    assert evaluated == ["model_000001.pt"]


def test_prms_of_the_same_folder_name_keep_their_own_figures():
    from bench.reward_rl import prm_names

    names = prm_names([Path("bench/prm/panda_push"), Path("rl/seed0/prm"), Path("rl/seed1/prm")])
    assert list(names) == ["panda_push", "seed0/prm", "seed1/prm"]
    assert names["seed1/prm"] == Path("rl/seed1/prm")
    assert list(prm_names([Path("a/prm")])) == ["prm"]
