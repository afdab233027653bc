"""`embodied train`: PPO learns panda_reach and leaves a complete run folder."""

from __future__ import annotations

import json

import torch
from omegaconf import OmegaConf

from embodied.commands.train import run_train
from embodied.config import load_config
from embodied.rl.logger import read_metrics

# Short but reliable on 2 cores: the task's own PPO settings (configs/algo/ppo/panda_reach.yaml),
# fewer iterations. Randomisation and observation noise stay on, as in `embodied train`.
ITERATIONS = 75  # x 128 envs x 32 steps = 307k env steps
THRESHOLD = 0.8  # deterministic-policy success over 32 eval episodes
# A run small enough to start, checkpoint and resume in a few seconds.
TINY = ["task=panda_reach", "num_envs=4", "algo.num_steps=4", "algo.actor_hidden=[16]",
        "algo.critic_hidden=[16]", "save_interval=2", "progress=false", "eval.num_envs=0"]


def test_ppo_learns_panda_reach_and_writes_the_run_folder(tmp_path):
    threads = torch.get_num_threads()
    cfg = load_config("train", ["task=panda_reach", f"max_iterations={ITERATIONS}",
                                "save_interval=25", "progress=false", "eval.num_envs=32",
                                "eval.video_envs=2", "eval.width=48", "eval.height=48",
                                f"run_dir={tmp_path / 'run'}"])
    try:
        summary = run_train(cfg)
    finally:
        torch.set_num_threads(threads)
    run = tmp_path / "run"
    for name in ("config.yaml", "metrics.csv", "learning_curve.png", "eval.json",
                 "summary.json", "checkpoints/model_000025.pt", "checkpoints/model_000075.pt"):
        assert (run / name).stat().st_size > 0, name
    metrics = read_metrics(run / "metrics.csv")
    assert metrics["iteration"] == list(range(1, ITERATIONS + 1))
    for key in ("collection_fps", "learning_fps", "approx_kl", "clip_fraction",
                "explained_variance", "entropy", "learning_rate", "success_rate"):
        assert key in metrics
    ev = summary["eval"]
    assert ev["episodes"] == 32
    assert ev["video"] or ev["render_error"]  # rendering may be unavailable; the run still ends
    assert json.loads((run / "eval.json").read_text())["success_rate"] == ev["success_rate"]
    returns = metrics["episode_return"]
    assert returns[-1] > returns[10] + 20.0  # the curve goes up
    assert ev["success_rate"] >= THRESHOLD, summary


def test_resume_a_run_folder_from_the_config(tmp_path, capsys):
    threads = torch.get_num_threads()
    run = tmp_path / "run"
    try:
        first = run_train(load_config("train", [*TINY, "max_iterations=2", f"run_dir={run}"]))
        assert first["iterations"] == 2
        # a different seed on the command line: the run's own seed is kept
        more = run_train(load_config("train", [*TINY, "max_iterations=3", "seed=5",
                                               f"resume={run}"]))
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "resumed from" in out and "using the run's own seed" in out
    assert more["run_dir"] == str(run) and more["iterations"] == 3
    assert more["env_steps"] == 3 * 4 * 4
    assert read_metrics(run / "metrics.csv")["iteration"] == [1, 2, 3]
    assert (run / "checkpoints" / "model_000003.pt").exists()


def test_resume_alone_trains_to_the_runs_own_budget(tmp_path):
    """`resume=<run>` without a budget on the command line ends where the run would have."""
    threads = torch.get_num_threads()
    run = tmp_path / "run"
    try:
        run_train(load_config("train", [*TINY, "max_iterations=2",
                                         f"run_dir={run}"]))
        # as if stopped after 2 of its 3 iterations
        (run / "config.yaml").write_text((run / "config.yaml").read_text().replace(
            "max_iterations: 2", "max_iterations: 3"))
        # no budget given: the command line's default (250) must not apply
        assert load_config("train", [f"resume={run}"]).max_iterations == 3
        more = run_train(load_config("train", ["progress=false", "eval.num_envs=0",
                                               f"resume={run}"]))
        # a budget on the command line replaces the run's whole budget
        given = load_config("train", ["max_iterations=5", f"resume={run}"])
        steps = load_config("train", ["total_env_steps=4096", f"resume={run / 'checkpoints'}"])
    finally:
        torch.set_num_threads(threads)
    assert more["iterations"] == 3 and more["env_steps"] == 3 * 4 * 4
    assert given.max_iterations == 5 and given.total_env_steps is None
    assert steps.total_env_steps == 4096


def test_resume_keeps_a_reward_section_of_another_mode_as_it_was(tmp_path):
    """A sparse run resumed without `reward=` gets no keys of the default reward's mode."""
    threads = torch.get_num_threads()
    run = tmp_path / "run"
    try:
        run_train(load_config("train", [*TINY, "reward=sparse", "max_iterations=1",
                                         f"run_dir={run}"]))
        before = OmegaConf.load(run / "config.yaml")
        run_train(load_config("train", ["progress=false", "eval.num_envs=0", "max_iterations=2",
                                         f"resume={run}"]))
    finally:
        torch.set_num_threads(threads)
    after = OmegaConf.load(run / "config.yaml")
    assert after.reward == before.reward and after.algo == before.algo
    assert after.max_iterations == 2


def test_resuming_with_another_algo_continues_the_runs_own_learner(tmp_path, capsys):
    threads = torch.get_num_threads()
    run = tmp_path / "run"
    try:
        run_train(load_config("train", [*TINY, "max_iterations=2", f"run_dir={run}"]))
        # an SB3 algo on the command line: its section's keys are not PPO's
        more = run_train(load_config("train", ["algo=sb3_ppo", "max_iterations=3",
                                               "progress=false", "eval.num_envs=0",
                                               f"resume={run}"]))
    finally:
        torch.set_num_threads(threads)
    assert "using the run's own algo" in capsys.readouterr().out
    assert more["algo"] == "ppo" and more["iterations"] == 3
    assert (run / "checkpoints" / "model_000003.pt").exists()
