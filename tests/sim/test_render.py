"""Tests for sim.render (multi-view renderer), sim.gl (GL backend choice) and sim.video."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import cv2
import mujoco
import numpy as np
import pytest

import sim.gl as simgl
from sim.render import MultiViewRenderer, tile_batch, tile_views
from sim.video import write_mp4

REPO = Path(__file__).resolve().parents[2]

XML = """
<mujoco>
  <visual><global offwidth="256" offheight="256"/></visual>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="2 2 .1" rgba=".4 .45 .5 1"/>
    <body name="red" pos="0.2 0 0.1"><freejoint/>
      <geom type="box" size=".1 .1 .1" rgba="1 0 0 1"/></body>
    <body name="blue" pos="-0.2 0 0.1"><freejoint/>
      <geom type="box" size=".08 .08 .08" rgba="0 0 1 1"/></body>
    <camera name="front" pos="0 -1.2 0.6" xyaxes="1 0 0 0 0.45 0.9"/>
    <camera name="side" pos="1.2 0 0.6" xyaxes="0 1 0 -0.45 0 0.9"/>
  </worldbody>
</mujoco>
"""
B, H, W = 3, 64, 64
CAMS = ["front", "side"]


def make_scene(nenv: int = B) -> tuple[mujoco.MjModel, list[mujoco.MjData]]:
    """The test model and one MjData per env with the boxes in different places."""
    model = mujoco.MjModel.from_xml_string(XML)
    datas = []
    for b in range(nenv):
        data = mujoco.MjData(model)
        data.qpos[0:3] = [0.2 - 0.15 * b, 0.1 * b, 0.1]
        data.qpos[7:10] = [-0.2, 0.1 - 0.1 * b, 0.1]
        mujoco.mj_forward(model, data)
        datas.append(data)
    return model, datas


@pytest.fixture(scope="module")
def scene() -> tuple[mujoco.MjModel, list[mujoco.MjData]]:
    return make_scene()


@pytest.fixture(scope="module")
def frames2(scene) -> np.ndarray:
    """[B, V, H, W, 3] rendered with two worker threads."""
    model, datas = scene
    with MultiViewRenderer(model, CAMS, W, H, nthread=2) as r:
        return r.render(datas)


def test_render_shape_and_content(frames2: np.ndarray) -> None:
    assert frames2.dtype == np.uint8
    assert frames2.shape == (B, len(CAMS), H, W, 3)
    for b in range(B):
        for v in range(len(CAMS)):
            assert frames2[b, v].std() > 10, (b, v)
    # The two cameras see different images; each env looks different.
    assert np.abs(frames2[0, 0].astype(int) - frames2[0, 1]).mean() > 5
    for v in range(len(CAMS)):
        assert np.abs(frames2[0, v].astype(int) - frames2[1, v]).mean() > 1
        assert np.abs(frames2[1, v].astype(int) - frames2[2, v]).mean() > 1
    # Upright: the floor (grey) fills the bottom rows, the black background the top.
    assert frames2[0, 0, -4:].mean() > frames2[0, 0, :4].mean()
    # The red box is in the front view: some pixels are strongly red.
    img = frames2[0, 0].astype(int)
    assert ((img[..., 0] > 120) & (img[..., 1] < 60) & (img[..., 2] < 60)).sum() > 20


def test_one_thread_matches_two_and_writes_into_out(scene, frames2: np.ndarray) -> None:
    model, datas = scene
    with MultiViewRenderer(model, CAMS, W, H, nthread=1) as r:
        assert r.nthread == 1
        # A strided view as `out`: every other env slot of a bigger buffer.
        big = np.zeros((2 * B, len(CAMS), H, W, 3), np.uint8)
        out = big[::2]
        res = r.render(datas, out=out)
        assert res is out
        assert np.array_equal(out, frames2)
        assert not big[1::2].any()
        with pytest.raises(ValueError, match="shape"):
            r.render(datas, out=np.zeros((B, 1, H, W, 3), np.uint8))
        assert r.render([]).shape == (0, len(CAMS), H, W, 3)
    with pytest.raises(RuntimeError, match="close"):
        r.render(datas)


def test_unknown_camera_lists_cameras(scene) -> None:
    model, _ = scene
    with pytest.raises(ValueError, match=r"'nope'.*\['front', 'side'\]"):
        MultiViewRenderer(model, ["front", "nope"], W, H, nthread=1)


def test_large_image_uses_private_copy_and_leaves_model_alone(scene) -> None:
    model, datas = scene
    before = (model.vis.global_.offwidth, model.vis.global_.offheight,
              model.vis.quality.offsamples, model.vis.quality.shadowsize)
    # 300x260 exceeds offwidth/offheight=256: the renderer enlarges its private copy.
    with MultiViewRenderer(model, ["side"], 300, 260, nthread=1) as r:
        big = r.render(datas[:1])
    assert big.shape == (1, 1, 260, 300, 3)
    assert big.std() > 10
    after = (model.vis.global_.offwidth, model.vis.global_.offheight,
             model.vis.quality.offsamples, model.vis.quality.shadowsize)
    assert after == before


def test_tessellation_option(scene, frames2: np.ndarray) -> None:
    model, datas = scene
    with MultiViewRenderer(model, CAMS, W, H, nthread=1, tessellation=(12, 6)) as r:
        low = r.render(datas)
    # Boxes and planes are not tessellated: this scene looks the same.
    assert np.abs(low.astype(int) - frames2).mean() < 1
    assert model.vis.quality.numslices == 28
    with pytest.raises(ValueError, match="tessellation"):
        MultiViewRenderer(model, CAMS, W, H, nthread=1, tessellation=(2, 1))


def test_per_env_model_copies_render_their_own_colours(scene) -> None:
    model, _ = scene
    green = mujoco.MjModel.from_xml_string(XML)
    green.geom_rgba[1] = [0, 1, 0, 1]  # the red box turns green in this env only
    d_red, d_green = mujoco.MjData(model), mujoco.MjData(green)
    mujoco.mj_forward(model, d_red)
    mujoco.mj_forward(green, d_green)
    with MultiViewRenderer(model, ["front"], W, H, nthread=1) as r:
        f = r.render([d_red, d_green]).astype(int)
    assert f[0, 0, ..., 0].sum() > f[1, 0, ..., 0].sum()
    assert f[1, 0, ..., 1].sum() > f[0, 0, ..., 1].sum()
    other = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='1'/>"
                                           "</worldbody></mujoco>")
    with MultiViewRenderer(model, ["front"], W, H, nthread=1) as r, \
            pytest.raises(ValueError, match="structure"):
        r.render([mujoco.MjData(other)])


def test_tiling(frames2: np.ndarray) -> None:
    row = tile_views(frames2[1])
    assert row.shape == (H, len(CAMS) * W, 3)
    assert np.array_equal(row[:, W:], frames2[1, 1])
    grid = tile_batch(frames2, max_envs=2)
    assert grid.shape == (2 * H, len(CAMS) * W, 3)
    assert np.array_equal(grid[H:, :W], frames2[1, 0])
    assert np.array_equal(grid[:H, W:], frames2[0, 1])
    assert tile_batch(frames2, max_envs=10).shape == (B * H, len(CAMS) * W, 3)


def test_write_mp4_roundtrip(tmp_path: Path, frames2: np.ndarray) -> None:
    video = [tile_batch(frames2, B)] * 6  # 192 x 128 RGB
    path = write_mp4(tmp_path / "sub" / "clip.mp4", video, fps=10)
    assert path.is_file() and path.stat().st_size > 0
    cap = cv2.VideoCapture(str(path))
    n = 0
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        n += 1
        assert frame.shape == (B * H, len(CAMS) * W, 3)
    cap.release()
    assert n == 6
    # Odd size: padded to even; a [T, H, W, 3] array works as well.
    odd = np.full((3, 33, 35, 3), 200, np.uint8)
    cap = cv2.VideoCapture(str(write_mp4(tmp_path / "odd.mp4", odd, fps=5)))
    ok, frame = cap.read()
    cap.release()
    assert ok and frame.shape == (34, 36, 3)
    with pytest.raises(ValueError):
        write_mp4(tmp_path / "none.mp4", [], fps=5)


def test_select_gl_backend_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Explicit MUJOCO_GL wins without probing; no working backend names the packages."""
    monkeypatch.setattr(simgl, "_selected", None)
    monkeypatch.setattr(simgl, "_failure", None)
    monkeypatch.setattr(simgl, "_rebind_mujoco_default", lambda backend: None)
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)

    def no_probe(backend: str, timeout: float = 0) -> tuple[bool, str]:
        raise AssertionError("explicit MUJOCO_GL must not be probed")

    monkeypatch.setattr(simgl, "probe_gl_backend", no_probe)
    monkeypatch.setenv("MUJOCO_GL", "OSMesa")
    assert simgl.select_gl_backend() == "osmesa"
    assert os.environ["PYOPENGL_PLATFORM"] == "osmesa"
    assert simgl.select_gl_backend() == "osmesa"  # cached

    monkeypatch.setattr(simgl, "_selected", None)
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.delenv("PYOPENGL_PLATFORM")
    tried = []

    def failing_probe(backend: str, timeout: float = 0) -> tuple[bool, str]:
        tried.append(backend)
        return False, f"{backend} is broken"

    monkeypatch.setattr(simgl, "probe_gl_backend", failing_probe)
    with pytest.raises(RuntimeError, match=r"libegl1.*libosmesa6"):
        simgl.select_gl_backend()
    assert tried == ["egl", "osmesa"]
    assert "MUJOCO_GL" not in os.environ


def _start_script(code: str, env_updates: dict[str, str | None]) -> subprocess.Popen:
    env = dict(os.environ)
    for key, value in env_updates.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> str:
    try:
        stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stdout + stderr
    return stdout


# The subprocesses load sim.gl and sim.render without sim/__init__.py, which imports
# torch and the env stack (seconds per process) and is not under test here.
_RENDER_ONE = f"""
    import sys, types
    _sim = types.ModuleType("sim")
    _sim.__path__ = [{str(REPO / "sim")!r}]
    sys.modules["sim"] = _sim
    import mujoco
    from sim.render import MultiViewRenderer
    model = mujoco.MjModel.from_xml_string({XML!r})
    datas = [mujoco.MjData(model) for _ in range(2)]
    for d in datas:
        mujoco.mj_forward(model, d)
    with MultiViewRenderer(model, ["front", "side"], 32, 32, nthread=2) as r:
        f = r.render(datas)
    assert f.shape == (2, 2, 32, 32, 3) and f.std() > 10, f.std()
"""

# MUJOCO_GL=osmesa given explicitly.
_OSMESA_EXPLICIT = (_RENDER_ONE + """
    import os
    print(r.backend, os.environ["PYOPENGL_PLATFORM"], mujoco.GLContext.__module__)
""", {"MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": None})

# MUJOCO_GL unset and no EGL vendor library: the EGL probe fails, OSMesa is chosen.
# mujoco is imported first (binding its GLFW default); select_gl_backend rebinds it,
# so a plain mujoco.Renderer works too.
_EGL_BROKEN = ("""
    import mujoco
""" + _RENDER_ONE + """
    import os
    from sim.gl import probe_gl_backend
    ok, why = probe_gl_backend("egl")
    assert not ok and "EGL" in why, why
    with mujoco.Renderer(model, 16, 16) as plain:
        plain.update_scene(datas[0], "front")
        assert plain.render().std() > 5
    print(r.backend, os.environ["MUJOCO_GL"], mujoco.GLContext.__module__)
""", {"MUJOCO_GL": None, "PYOPENGL_PLATFORM": None,
      "__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent"})


@pytest.fixture(scope="module")
def gl_subprocesses():
    """Both subprocess checks, started together so that they overlap."""
    procs = {"osmesa": _start_script(*_OSMESA_EXPLICIT),
             "egl_broken": _start_script(*_EGL_BROKEN)}
    yield procs
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_osmesa_explicit_in_subprocess(gl_subprocesses) -> None:
    out = _finish(gl_subprocesses["osmesa"])
    assert out.split() == ["osmesa", "osmesa", "mujoco.osmesa"]


def test_falls_back_to_osmesa_when_egl_is_broken(gl_subprocesses) -> None:
    out = _finish(gl_subprocesses["egl_broken"])
    assert out.split() == ["osmesa", "osmesa", "mujoco.osmesa"]


INFINITE_FLOOR_XML = XML.replace('size="2 2 .1"', 'size="0 0 .05"').replace(
    '<light pos="0 0 3" dir="0 0 -1"/>', '<light pos="0.5 -0.5 2" dir="-0.2 0.2 -1"/>')


def test_plane_extent_keeps_the_floor_pixels_inside_it() -> None:
    model = mujoco.MjModel.from_xml_string(INFINITE_FLOOR_XML)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    with MultiViewRenderer(model, CAMS, W, H, nthread=1) as r:
        full = r.render([data])
    # the cameras look down at the boxes: all the floor they see lies within about 10 m
    with MultiViewRenderer(model, CAMS, W, H, nthread=1, plane_extent=15.0,
                           crop_plane=False) as r:
        near = r.render([data])
    np.testing.assert_array_equal(near, full)
    assert model.geom_size[0].tolist() == [0.0, 0.0, 0.05]  # the caller's model untouched
    # a floor of 0.3 m leaves the background where the floor was
    with MultiViewRenderer(model, CAMS, W, H, nthread=1, plane_extent=0.3) as r:
        small = r.render([data])
    assert (np.abs(small.astype(int) - full).max(-1) > 0).mean() > 0.2
    with pytest.raises(ValueError, match="plane_extent"):
        MultiViewRenderer(model, CAMS, W, H, nthread=1, plane_extent=0.0)
