"""The cropped floor: the square of the plane's grid a camera sees, and the same pixels."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sim import make_env
from sim.plane_crop import crop_sizes, visible_square
from sim.render import MultiViewRenderer

CELL = 0.5
FULL = 40
IDENTITY = [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]


def down_camera(height: float, fovy_deg: float = 60.0, x: float = 0.0, y: float = 0.0):
    """A camera at (x, y, height) looking straight down, MuJoCo's frustum at near 0.01."""
    near = 0.01
    top = near * math.tan(math.radians(fovy_deg) / 2)
    return dict(cam_pos=(x, y, height), forward=(0.0, 0.0, -1.0), up=(0.0, 1.0, 0.0),
                frustum=(near, -top, top, 0.0, 0.0), aspect=1.0)


def test_crop_sizes_are_powers_of_two_below_the_full_square():
    assert crop_sizes(50) == [2, 4, 8, 16, 32]
    assert crop_sizes(2) == []


def test_a_camera_looking_down_gets_the_square_under_it():
    # 2 m up, 60 degrees: it sees +-1.15 m, i.e. cells -3..3 with the margin (6 wide)
    n, cx, cy = visible_square([0, 0, 0], IDENTITY, **down_camera(2.0), cell=CELL,
                               full=FULL, sizes=crop_sizes(FULL))
    assert (n, cx, cy) == (4, 0, 0)
    # a viewport twice as wide sees +-2.31 m across: cells -6..6 with the margin
    wide = down_camera(2.0)
    wide["aspect"] = 2.0
    assert visible_square([0, 0, 0], IDENTITY, **wide, cell=CELL, full=FULL,
                          sizes=crop_sizes(FULL)) == (8, 0, 0)
    # moved 5.2 m along x: the same size, centred on the cells under it
    n, cx, cy = visible_square([0, 0, 0], IDENTITY, **down_camera(2.0, x=5.2), cell=CELL,
                               full=FULL, sizes=crop_sizes(FULL))
    assert (n, cy) == (4, 0) and cx - n <= math.floor((5.2 - 1.155) / CELL) - 1
    assert cx + n >= math.ceil((5.2 + 1.155) / CELL) + 1
    # the plane itself moved: cells count from its position
    moved = visible_square([5.0, 0, 0], IDENTITY, **down_camera(2.0, x=5.2), cell=CELL,
                           full=FULL, sizes=crop_sizes(FULL))
    assert moved[1] == 0 and moved[2] == 0


def test_the_square_stays_inside_the_full_one_and_high_cameras_draw_it_all():
    n, cx, _ = visible_square([0, 0, 0], IDENTITY, **down_camera(2.0, x=19.5), cell=CELL,
                               full=FULL, sizes=crop_sizes(FULL))
    assert cx + n <= FULL and cx - n <= math.floor((19.5 - 1.155) / CELL) - 1
    assert visible_square([0, 0, 0], IDENTITY, **down_camera(40.0), cell=CELL, full=FULL,
                          sizes=crop_sizes(FULL)) is None  # sees more than 32 cells across
    below = down_camera(2.0)
    below["cam_pos"] = (0.0, 0.0, -1.0)
    assert visible_square([0, 0, 0], IDENTITY, **below, cell=CELL, full=FULL,
                          sizes=crop_sizes(FULL)) is None


def test_a_camera_looking_at_the_horizon_needs_the_far_cells():
    near, t = 0.01, 0.01 * math.tan(math.radians(30))
    out = visible_square([0, 0, 0], IDENTITY, cam_pos=(0.0, 0.0, 1.0), forward=(1.0, 0.0, 0.0),
                         up=(0.0, 0.0, 1.0), frustum=(near, -t, t, 0.0, 0.0), aspect=1.0,
                         cell=CELL, full=FULL, sizes=crop_sizes(FULL))
    assert out is not None
    n, cx, _ = out
    assert cx + n == FULL  # out to the far edge of the floor in +x


@pytest.fixture(scope="module")
def reach_frames():
    """panda_reach frames of random states, floor to 32 m, with and without the crop."""
    torch.manual_seed(0)
    env = make_env("panda_reach", num_envs=16, seed=0)
    env.reset()
    cams = ["front", "side", "wrist"]
    full = MultiViewRenderer(env.model, cams, 64, 64, nthread=2, tessellation=(12, 6),
                             plane_extent=32.0, crop_plane=False)
    crop = MultiViewRenderer(env.model, cams, 64, 64, nthread=2, tessellation=(12, 6),
                             plane_extent=32.0)
    used: set[int] = set()
    for worker in crop._workers:  # which floor squares the frames drew
        draw = worker._floor_context

        def spy(c, scene, draw=draw, worker=worker):
            con = draw(c, scene)
            used.add(next((n for n, k in worker._crop_cons.items() if k is con), FULL))
            return con
        worker._floor_context = spy
    a, b = [], []
    for _ in range(6):
        env.step(torch.rand(16, env.action_dim) * 0.6 - 0.3)
        datas = env.physics.mjdata(list(range(16)))
        a.append(full.render(datas))
        b.append(crop.render(datas))
    full.close()
    crop.close()
    env.close()
    return np.stack(a), np.stack(b), used


def test_cropped_floor_gives_the_pixels_of_the_whole_extent(reach_frames):
    full, crop, used = reach_frames
    assert min(used) < 16  # smaller squares were drawn
    diff = np.abs(full.astype(int) - crop).max(-1)
    # the same quads, placed by a whole-cell offset: vertex rounding moves a pixel's
    # value by 1 level here and there, nothing more
    assert (diff > 0).mean() < 1e-3
    assert (diff > 1).mean() < 1e-5
