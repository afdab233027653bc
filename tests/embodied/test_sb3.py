"""`embodied train algo=sb3_ppo|sb3_sac`: the run folder, checkpoints and resume."""

from __future__ import annotations

import json
import pickle

import pytest
import torch

from embodied.commands.train import run_train
from embodied.config import load_config
from embodied.rl.logger import read_metrics

pytest.importorskip("stable_baselines3")

EVAL = ["eval.num_envs=4", "eval.video_envs=1", "eval.width=32", "eval.height=32",
        "progress=false"]
PPO_TINY = ["task=panda_reach", "algo=sb3_ppo", "num_envs=4", "algo.hyperparams.n_steps=64",
            "algo.hyperparams.batch_size=64", "algo.hyperparams.n_epochs=2",
            "algo.policy_kwargs.net_arch=[16]", "algo.save_every_env_steps=256"]
SAC_TINY = ["task=panda_reach", "algo=sb3_sac", "num_envs=4",
            "algo.hyperparams.learning_starts=40", "algo.hyperparams.batch_size=32",
            "algo.hyperparams.buffer_size=2000", "algo.hyperparams.gradient_steps=1",
            "algo.policy_kwargs.net_arch=[16]", "algo.log_every_env_steps=100",
            "algo.save_every_env_steps=200"]


@pytest.fixture(autouse=True)
def _keep_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _obs_count(path) -> float:
    with path.open("rb") as f:
        return float(pickle.load(f).obs_rms.count)


def _check_run_folder(run, summary, steps: int) -> None:
    for name in ("config.yaml", "metrics.csv", "learning_curve.png", "eval.json",
                 "summary.json"):
        assert (run / name).stat().st_size > 0, name
    ev = summary["eval"]
    assert ev["episodes"] == 4 and 0.0 <= ev["success_rate"] <= 1.0
    assert ev["video"] or ev["render_error"]
    assert json.loads((run / "eval.json").read_text())["success_rate"] == ev["success_rate"]
    metrics = read_metrics(run / "metrics.csv")
    for key in ("env_steps", "episode_return", "success_rate", "fps", "collection_fps",
                "learning_fps"):
        assert key in metrics, key
    assert metrics["env_steps"][-1] == steps == summary["env_steps"]
    assert (run / "checkpoints" / f"model_{steps:09d}.zip").exists()
    assert (run / "checkpoints" / f"vecnormalize_{steps:09d}.pkl").exists()
    assert not list((run / "checkpoints").glob("*.tmp"))


def test_sb3_ppo_run_folder_and_resume(tmp_path, capsys):
    run = tmp_path / "run"
    first = run_train(load_config("train", [*PPO_TINY, *EVAL, "total_env_steps=512",
                                            f"run_dir={run}"]))
    _check_run_folder(run, first, 512)
    assert (run / "checkpoints" / "model_000000256.zip").exists()  # periodic checkpoint
    assert read_metrics(run / "metrics.csv")["iteration"] == [1, 2]
    count = _obs_count(run / "checkpoints" / "vecnormalize_000000512.pkl")

    # resume from the run folder alone: algo, num_envs and seed come from its config.yaml
    more = run_train(load_config("train", ["total_env_steps=1024", *EVAL, f"resume={run}"]))
    assert "resumed from" in capsys.readouterr().out
    _check_run_folder(run, more, 1024)
    assert more["run_dir"] == str(run) and more["algo"] == "sb3_ppo"
    assert read_metrics(run / "metrics.csv")["iteration"] == [1, 2, 3, 4]
    # the normaliser continued from the checkpoint's statistics (fresh ones would count ~516)
    assert _obs_count(run / "checkpoints" / "vecnormalize_000001024.pkl") >= count + 512


def test_sb3_sac_run_folder_and_resume(tmp_path):
    run = tmp_path / "run"
    first = run_train(load_config("train", [*SAC_TINY, *EVAL, "total_env_steps=400",
                                            f"run_dir={run}"]))
    _check_run_folder(run, first, 400)
    assert (run / "checkpoints" / "replay_buffer.pkl").exists()
    count = _obs_count(run / "checkpoints" / "vecnormalize_000000400.pkl")

    more = run_train(load_config("train", [*SAC_TINY, *EVAL, "total_env_steps=600",
                                           f"resume={run / 'checkpoints'}"]))
    _check_run_folder(run, more, 600)
    assert _obs_count(run / "checkpoints" / "vecnormalize_000000600.pkl") >= count + 200
    with (run / "checkpoints" / "replay_buffer.pkl").open("rb") as f:
        buffer = pickle.load(f)
    assert buffer.pos == 600 // 4  # the buffer continued: 150 vec steps, not 50


def test_resume_of_a_missing_sb3_checkpoint_is_a_clear_error(tmp_path):
    from embodied.rl import CheckpointError

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("algo:\n  name: sb3_ppo\n")
    with pytest.raises(CheckpointError, match="no SB3 checkpoint"):
        run_train(load_config("train", [f"resume={run}"]))
