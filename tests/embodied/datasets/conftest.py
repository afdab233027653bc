"""The rendered panda_reach dataset the labelling tests share (12 episodes in 3 data files)."""

from __future__ import annotations

import pytest

from embodied.commands.collect import run_collect
from embodied.config import load_config


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """12 episodes of 0.6 s, 3 camera views at 32x32, 5 episodes per data file."""
    out = tmp_path_factory.mktemp("collect") / "reach"
    cfg = load_config("collect", ["task=panda_reach", "task.episode_length_s=0.6",
                                  "episodes=12", "num_envs=6", "noise=[0,0.6]",
                                  "width=32", "height=32", "episodes_per_file=5",
                                  "progress=false", f"out={out}"])
    try:
        run_collect(cfg)
    except RuntimeError as err:  # no OpenGL on this machine
        pytest.skip(f"cannot render: {err}")
    return out
