"""Visual randomisation (sim/visual.py): what it changes in frames, and what it never does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sim import make_env
from sim.visual import VisualRandomization, VisualSampler


def frames_and_obs(visual: VisualRandomization, seed: int = 0, steps: int = 3,
                   task: str = "panda_push") -> tuple[np.ndarray, torch.Tensor]:
    env = make_env(task, num_envs=2, seed=seed, visual=visual)
    try:
        env.reset(seed=seed)
        gen = torch.Generator().manual_seed(1)
        for _ in range(steps):
            obs = env.step(torch.rand(2, env.action_dim, generator=gen) * 2 - 1)[0]
        return env.render(width=32, height=32).numpy(), obs
    finally:
        env.close()


@pytest.fixture(autouse=True)
def _needs_gl(can_render):
    if not can_render:
        pytest.skip("no OpenGL backend")


PLAIN = VisualRandomization()


def test_each_kind_changes_the_frames_and_never_the_physics():
    plain, obs_plain = frames_and_obs(PLAIN)
    kinds = {"light": {"light_intensity": (0.4, 0.5)},
             "light_direction": {"light_tilt_deg": (40.0, 50.0)},
             "surfaces": {"surface_shift": (0.3, 0.4)},
             "robot": {"robot_shift": (0.2, 0.3)},
             "camera_shift": {"camera_shift_m": (0.05, 0.06)},
             "camera_tilt": {"camera_tilt_deg": (4.0, 5.0)},
             "noise": {"image_noise": (8.0, 8.0)}}
    for name, ranges in kinds.items():
        shifted, obs = frames_and_obs(VisualRandomization(enabled=True, **ranges))
        torch.testing.assert_close(obs, obs_plain, rtol=0, atol=0)  # same physics draws
        diff = np.abs(shifted.astype(int) - plain).mean()
        assert diff > 0.5, (name, diff)
    # a dimmer light darkens every view
    dim, _ = frames_and_obs(VisualRandomization(enabled=True, light_intensity=(0.4, 0.5)))
    assert (dim.reshape(2, 3, -1).mean(-1) < plain.reshape(2, 3, -1).mean(-1)).all()


def test_mounted_cameras_move_by_their_share_of_the_camera_jitter():
    plain, _ = frames_and_obs(PLAIN)
    views = make_env("panda_push", num_envs=1, seed=0).camera_names
    wrist = views.index("wrist")
    jitter = {"camera_shift_m": (0.05, 0.06), "camera_tilt_deg": (4.0, 5.0)}
    still, _ = frames_and_obs(VisualRandomization(enabled=True, mounted_camera_scale=0.0,
                                                  **jitter))
    np.testing.assert_array_equal(still[:, wrist], plain[:, wrist])  # the wrist mount holds
    scene = [v for v in range(len(views)) if v != wrist]
    assert np.abs(still[:, scene].astype(int) - plain[:, scene]).mean() > 0.5
    moved, _ = frames_and_obs(VisualRandomization(enabled=True, **jitter))
    np.testing.assert_array_equal(moved[:, scene], still[:, scene])  # same draws elsewhere
    assert np.abs(moved[:, wrist].astype(int) - plain[:, wrist]).mean() > 0.5


def test_enabled_with_empty_ranges_changes_nothing_and_seeds_reproduce():
    plain, _ = frames_and_obs(PLAIN)
    same, _ = frames_and_obs(VisualRandomization(enabled=True))
    np.testing.assert_array_equal(same, plain)
    rnd = VisualRandomization(enabled=True, light_intensity=(0.5, 1.5),
                              surface_shift=(0.0, 0.3), camera_shift_m=(0.0, 0.03),
                              image_noise=(0.0, 5.0))
    a, _ = frames_and_obs(rnd, seed=3)
    b, _ = frames_and_obs(rnd, seed=3)
    c, _ = frames_and_obs(rnd, seed=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a[:, :2], c[:, :2])


def test_instruction_objects_keep_their_colours():
    env = make_env("panda_push", num_envs=1, seed=0)
    try:
        model = env.model
        root = int(model.jnt_bodyid[model.actuator_trnid[0, 0]])
        cfg = VisualRandomization(enabled=True, surface_shift=(0.4, 0.6), robot_shift=(0.2, 0.3))
        sampler = VisualSampler(cfg, model, root, num_envs=64, seed=0)
    finally:
        env.close()
    names = {model.geom(g).name for g in sampler.geom_index}
    assert "floor" in names and not names & {"cube", "goal"}
    assert len(sampler.geom_index) > 5  # the robot's geoms too
    sampler.resample(np.arange(64))
    floor = sampler.geom_rgb[:, sampler.geom_index[model.geom("floor").id]]
    for obj in ("cube", "goal"):
        dist = np.linalg.norm(floor - model.geom_rgba[model.geom(obj).id][:3], axis=-1)
        assert dist.min() >= cfg.min_contrast


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="light_intensity"):
        VisualRandomization(light_intensity=(1.5, 0.5))
    with pytest.raises(ValueError, match="unknown visual"):
        VisualRandomization.from_mapping({"lights": [0, 1]})
    with pytest.raises(ValueError, match="table"):
        make_env("panda_reach", num_envs=1, seed=0,
                 visual=VisualRandomization(enabled=True, surfaces=("table",)))
