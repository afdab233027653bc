"""Shared fixtures of the reward-model tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

import sim
from sim.experts import make_expert


def _render(task: str, num_envs: int, steps: int, actions: str = "random",
            size: int = 64) -> tuple[torch.Tensor, list[str], str]:
    """``(frames uint8 [B, V, size, size, 3], camera names, instruction)`` of ``task``
    after ``steps`` steps of ``actions`` ("random" in [-1, 1], or "expert")."""
    threads = torch.get_num_threads()  # the env sets torch to 1 thread; give it back after
    env = sim.make_env(task, num_envs=num_envs)
    try:
        env.reset(seed=0)
        expert = make_expert(env) if actions == "expert" else None
        for _ in range(steps):
            env.step(expert() if expert else torch.rand(num_envs, env.action_dim) * 2 - 1)
        frames = env.render(width=size, height=size)
    except RuntimeError as err:  # no OpenGL backend on this machine
        pytest.skip(f"cannot render: {err}")
    finally:
        env.close()
        torch.set_num_threads(threads)
    return frames, list(env.camera_names), env.instruction


@pytest.fixture(scope="session")
def render_frames() -> Callable[..., tuple[torch.Tensor, list[str], str]]:
    """Renders a task's cameras after a few steps: ``render_frames(task, num_envs, steps)``."""
    return _render


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, str]:
    """Folders of tiny random VLMs by family (``embodied.reward.vlm.tiny.FAMILIES``)."""
    pytest.importorskip("transformers")
    from embodied.reward.vlm.tiny import FAMILIES, build_tiny_vlm

    root = tmp_path_factory.mktemp("tiny_models")
    return {family: str(build_tiny_vlm(root / family, family)) for family in FAMILIES}


@pytest.fixture(scope="session")
def goal_image(tmp_path_factory) -> str:
    """A GRM goal image: a white 32x32 frame in a ``.npy`` file."""
    path = tmp_path_factory.mktemp("goal") / "goal.npy"
    np.save(path, np.full((32, 32, 3), 255, np.uint8))
    return str(path)
