"""Multi-view frames from the task envs: shape, content, views and envs differ."""

from __future__ import annotations

import pytest
import torch

from sim import make_env


@pytest.mark.parametrize("task, views", [("panda_pick_place", 3), ("go2_walk", 2)])
def test_env_render_views_are_nonempty_and_distinct(task, views):
    env = make_env(task, num_envs=3, seed=0)
    env.reset(seed=0)
    for _ in range(5):
        env.step(torch.zeros(3, env.action_dim))
    frames = env.render(width=64, height=48)
    assert frames.shape == (3, views, 48, 64, 3) and frames.dtype == torch.uint8
    f = frames.float()
    assert (f.flatten(2).std(dim=2) > 10).all(), "a view is (nearly) blank"
    for v in range(1, views):
        assert (f[:, 0] - f[:, v]).abs().mean() > 10, "two cameras show the same image"
    # Randomised starts (targets, cubes, yaw) make envs look different.
    assert (f[0] - f[1]).abs().mean() > 0.5
    subset = env.render(env_ids=torch.tensor([2]), width=64, height=48)
    torch.testing.assert_close(subset[0], frames[2])
    env.close()


def test_unknown_camera_is_a_clear_error():
    env = make_env("panda_reach", num_envs=1)
    with pytest.raises(KeyError, match="no camera 'top' in task 'panda_reach'"):
        env.render(["top"])
    env.close()
