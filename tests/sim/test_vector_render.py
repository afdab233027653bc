"""Vector rendering as gymnasium 1.x defines it: ``VectorEnv.render()`` returns one frame
per sub-env, which gymnasium's own vector ``RecordVideo`` tiles into a video."""

from __future__ import annotations

import importlib.util
import sys
import types

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.wrappers.vector import RecordVideo

from sim.adapters import gym_id
from sim.video import write_mp4

N, W, H = 3, 32, 24


@pytest.fixture
def moviepy(monkeypatch):
    """MoviePy if installed; else a stand-in for the one class ``RecordVideo`` uses, writing
    the frames it is given with the project's mp4 writer."""
    if importlib.util.find_spec("moviepy") is not None:
        return

    class ImageSequenceClip:
        def __init__(self, frames, fps: int):
            self.frames, self.fps = np.stack(frames), fps

        def write_videofile(self, path: str, logger=None) -> None:
            write_mp4(path, self.frames, self.fps)

    module = types.ModuleType("moviepy")
    clip_module = types.ModuleType("moviepy.video.io.ImageSequenceClip")
    clip_module.ImageSequenceClip = ImageSequenceClip
    for name, mod in (("moviepy", module), ("moviepy.video", types.ModuleType("x")),
                      ("moviepy.video.io", types.ModuleType("x")),
                      ("moviepy.video.io.ImageSequenceClip", clip_module)):
        monkeypatch.setitem(sys.modules, name, mod)


def make_vec(render_mode: str | None = "rgb_array"):
    return gymnasium.make_vec(gym_id("panda_reach"), num_envs=N, seed=0, render_mode=render_mode,
                              cameras=["front"], width=W, height=H, episode_length_s=0.1)


def test_render_returns_one_frame_per_sub_env(can_render):
    if not can_render:
        pytest.skip("no OpenGL backend for camera rendering")
    envs = make_vec()
    try:
        envs.reset(seed=0)
        frames = envs.render()
        assert isinstance(frames, tuple) and len(frames) == N
        for frame in frames:
            assert frame.shape == (H, W, 3) and frame.dtype == np.uint8
        # Each frame is its own env's: env i's view equals the batched env's frame of env i.
        batched = envs.unwrapped.batched.render(["front"], torch.tensor([1]), W, H)
        np.testing.assert_array_equal(frames[1], batched[0, 0].numpy())
    finally:
        envs.close()


def test_render_without_a_mode_is_none():
    envs = make_vec(render_mode=None)
    try:
        envs.reset(seed=0)
        with pytest.warns(UserWarning, match="render_mode"):
            assert envs.render() is None
    finally:
        envs.close()


def test_gymnasium_vector_record_video_writes_the_episodes(can_render, moviepy, tmp_path):
    if not can_render:
        pytest.skip("no OpenGL backend for camera rendering")
    envs = RecordVideo(make_vec(), str(tmp_path), episode_trigger=lambda episode: True)
    envs.reset(seed=0)
    for _ in range(12):  # episodes of 5 steps
        envs.step(np.zeros((N, 8), np.float32))
    envs.close()
    videos = sorted(tmp_path.glob("*.mp4"))
    assert videos and all(v.stat().st_size > 0 for v in videos)
