"""Fixtures shared by the simulation tests."""

from __future__ import annotations

import pytest
import torch

from sim import make_env


@pytest.fixture(scope="module")
def can_render() -> bool:
    """Whether camera rendering works here (sim/render.py present, a GL backend)."""
    env = make_env("panda_reach", num_envs=1, seed=0)
    try:
        env.render(env_ids=torch.tensor([0]), width=16, height=16)
        return True
    except (ImportError, RuntimeError):
        return False
    finally:
        env.close()
