"""Shared fixtures of the library tests: one tiny PPO run, trained once per test run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from embodied.cli import main

# 3 iterations of 4 envs x 8 steps with small networks, a checkpoint after every iteration.
TINY_PPO = ["task=panda_reach", "num_envs=4", "algo.num_steps=8", "algo.actor_hidden=[32]",
            "algo.critic_hidden=[16]", "max_iterations=3", "save_interval=1",
            "progress=false", "eval.num_envs=0"]


@pytest.fixture(scope="session")
def tiny_ppo_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder of ``embodied train`` with :data:`TINY_PPO` (the CLI, in process).

    Shared by every test of the run: never write into it; :func:`tiny_ppo_run` gives a copy.
    """
    threads = torch.get_num_threads()  # training sets the process's torch threads
    run = tmp_path_factory.mktemp("tiny_ppo") / "run"
    try:
        assert main(["train", *TINY_PPO, f"run_dir={run}"]) == 0
    finally:
        torch.set_num_threads(threads)
    return run


@pytest.fixture(scope="module")
def tiny_ppo_run(tiny_ppo_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This test module's own copy of the tiny PPO run, free to export into or evaluate."""
    return Path(shutil.copytree(tiny_ppo_source, tmp_path_factory.mktemp("run") / "run"))
