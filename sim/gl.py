"""Choose the OpenGL backend for headless MuJoCo rendering.

How MuJoCo 4.0's Python bindings pick their GL context (read from the installed
``mujoco`` package; this is what the code here works with):

* ``import mujoco`` itself imports ``mujoco.rendering.classic.gl_context``, which
  reads ``MUJOCO_GL`` **once, at import time** and binds ``mujoco.GLContext`` to
  ``mujoco.egl.GLContext`` (``egl``), ``mujoco.osmesa.GLContext`` (``osmesa``) or
  ``mujoco.glfw.GLContext`` (unset, or ``glfw``/``glx``). ``mujoco.Renderer``
  uses that binding. With ``MUJOCO_GL`` unset on a headless machine it is GLFW,
  which cannot open a window, and the first ``MjrContext`` dies with
  "an OpenGL platform library has not been loaded into this process".
* ``mujoco.egl`` and ``mujoco.osmesa`` import PyOpenGL, whose platform is fixed
  process-wide by ``PYOPENGL_PLATFORM`` the first time ``OpenGL`` is imported;
  each refuses to import when ``PYOPENGL_PLATFORM`` names the other one. So only
  one of EGL and OSMesa can ever be used in one process.
* A broken EGL (no vendor library, no device platform) is only noticed when the
  first ``GLContext`` is created, not at import, and by then PyOpenGL is locked
  to EGL. That is why the EGL check runs in a short subprocess here, before
  anything in this process touches OpenGL.

:func:`select_gl_backend` therefore has to run before ``import mujoco`` for
``mujoco.Renderer`` to pick up its choice. :mod:`sim.render` calls it before it
imports ``mujoco``; for code that imported ``mujoco`` earlier with ``MUJOCO_GL``
unset (GLFW default), it rebinds ``mujoco.GLContext`` to the chosen backend, and
:class:`sim.render.MultiViewRenderer` uses :func:`gl_context_class` directly, so
it works regardless of import order as long as PyOpenGL was not yet locked to a
different platform.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

__all__ = ["HEADLESS_BACKENDS", "gl_context_class", "probe_gl_backend", "select_gl_backend"]

log = logging.getLogger(__name__)

#: Backends tried, in order, when ``MUJOCO_GL`` is not set.
HEADLESS_BACKENDS: tuple[str, ...] = ("egl", "osmesa")

_PROBE_TIMEOUT_S = 60.0

# Renders one frame of a one-geom model with the backend named in MUJOCO_GL. Run with
# `python -P -c` so that nothing from the current directory shadows `mujoco`.
_PROBE_CODE = """
import mujoco, numpy as np
m = mujoco.MjModel.from_xml_string(
    '<mujoco><visual><global offwidth="8" offheight="8"/><quality shadowsize="0"/>'
    '</visual><worldbody><light pos="0 0 1"/><geom size=".1"/>'
    '<camera name="c" pos="0 0 1"/></worldbody></mujoco>')
m.vis.quality.offsamples = 0
d = mujoco.MjData(m)
mujoco.mj_forward(m, d)
ctx = mujoco.GLContext(8, 8)
ctx.make_current()
con = mujoco.MjrContext(m, mujoco.mjtFontScale.mjFONTSCALE_100)
mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, con)
scn = mujoco.MjvScene(m, maxgeom=10)
cam = mujoco.MjvCamera()
cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
cam.fixedcamid = 0
mujoco.mjv_updateScene(m, d, mujoco.MjvOption(), None, cam, mujoco.mjtCatBit.mjCAT_ALL, scn)
rect = mujoco.MjrRect(0, 0, 8, 8)
mujoco.mjr_render(rect, scn, con)
rgb = np.zeros((8, 8, 3), np.uint8)
mujoco.mjr_readPixels(rgb, None, rect, con)
con.free()
ctx.free()
print("GL_PROBE_OK", mujoco.GLContext.__module__)
"""

_lock = threading.Lock()
_selected: str | None = None
_failure: str | None = None
_probe_cache: dict[str, tuple[bool, str]] = {}


def probe_gl_backend(backend: str, timeout: float = _PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """Check in a subprocess whether MuJoCo can create a context and render with ``backend``.

    The subprocess gets ``MUJOCO_GL=backend`` and ``PYOPENGL_PLATFORM=backend``, creates a
    GL context, an ``MjrContext`` and renders one 8x8 frame. Results are cached per
    backend for the life of this process.

    Args:
        backend: ``"egl"`` or ``"osmesa"``.
        timeout: Seconds before the probe counts as failed.

    Returns:
        ``(ok, detail)``; ``detail`` is the last line of the subprocess's error output
        when the probe failed.
    """
    if backend in _probe_cache:
        return _probe_cache[backend]
    env = dict(os.environ)
    env["MUJOCO_GL"] = backend
    env["PYOPENGL_PLATFORM"] = backend
    try:
        proc = subprocess.run(
            [sys.executable, "-P", "-c", _PROBE_CODE],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        result = (False, f"probe timed out after {timeout:.0f} s")
    except OSError as exc:
        result = (False, f"could not start the probe: {exc}")
    else:
        if proc.returncode == 0 and "GL_PROBE_OK" in proc.stdout:
            result = (True, "")
        else:
            lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
            detail = lines[-1].strip() if lines else f"exit code {proc.returncode}"
            result = (False, detail)
    _probe_cache[backend] = result
    return result


def _rebind_mujoco_default(backend: str) -> None:
    """Point an already-imported ``mujoco`` at ``backend`` if it bound the GLFW default.

    Only done when ``mujoco`` was imported with ``MUJOCO_GL`` unset (so nobody chose
    GLFW on purpose); then ``mujoco.Renderer`` uses the chosen headless context too.
    """
    glmod = sys.modules.get("mujoco.rendering.classic.gl_context")
    if glmod is None or getattr(glmod, "_MUJOCO_GL", None) != "":
        return
    try:
        cls = gl_context_class(backend)
    except ImportError as exc:  # PyOpenGL already locked to another platform
        log.warning("mujoco was imported before select_gl_backend() and %s is unusable "
                    "in this process: %s", backend, exc)
        return
    vars(glmod)["GLContext"] = cls
    mj = sys.modules.get("mujoco")
    if mj is not None and hasattr(mj, "GLContext"):
        vars(mj)["GLContext"] = cls
    log.info("mujoco was imported with MUJOCO_GL unset; rebound mujoco.GLContext to %s", backend)


def select_gl_backend() -> str:
    """Pick the OpenGL backend for headless rendering and export it in the environment.

    Call this before ``import mujoco`` (``sim.render`` does). The rules:

    1. An explicit, non-empty ``MUJOCO_GL`` is honoured as is (no probe, no fallback).
    2. Otherwise EGL is tried, then OSMesa, each by rendering one frame in a short
       subprocess (:func:`probe_gl_backend`); if ``PYOPENGL_PLATFORM`` is already
       ``egl`` or ``osmesa``, only that one is tried, because PyOpenGL cannot switch.
    3. The answer is written to ``MUJOCO_GL`` (and ``PYOPENGL_PLATFORM`` for
       EGL/OSMesa, unless already set), so child processes inherit it without
       probing again, and cached for this process.

    Returns:
        The backend name in lower case, e.g. ``"egl"`` or ``"osmesa"``.

    Raises:
        RuntimeError: If neither EGL nor OSMesa can render; the message names the
            Debian packages to install.
    """
    global _selected, _failure
    with _lock:
        if _selected is not None:
            return _selected
        if _failure is not None:
            raise RuntimeError(_failure)
        explicit = os.environ.get("MUJOCO_GL", "").strip().lower()
        if explicit:
            backend = explicit
        else:
            pyopengl = os.environ.get("PYOPENGL_PLATFORM", "").strip().lower()
            candidates = (pyopengl,) if pyopengl in HEADLESS_BACKENDS else HEADLESS_BACKENDS
            failures: list[str] = []
            for candidate in candidates:
                ok, detail = probe_gl_backend(candidate)
                if ok:
                    backend = candidate
                    break
                log.info("GL backend %s unusable: %s", candidate, detail)
                failures.append(f"{candidate}: {detail}")
            else:
                _failure = (
                    "No headless OpenGL backend works for MuJoCo ("
                    + "; ".join(failures)
                    + "). On Debian/Ubuntu install EGL with `apt-get install libegl1 "
                    "libegl-mesa0` or OSMesa with `apt-get install libosmesa6` (software "
                    "rendering), or set MUJOCO_GL explicitly (egl, osmesa, glfw)."
                )
                raise RuntimeError(_failure)
        os.environ["MUJOCO_GL"] = backend
        if backend in HEADLESS_BACKENDS:
            os.environ.setdefault("PYOPENGL_PLATFORM", backend)
            _rebind_mujoco_default(backend)
        _selected = backend
        log.debug("MuJoCo GL backend: %s", backend)
        return backend


def gl_context_class(backend: str | None = None) -> type:
    """The MuJoCo ``GLContext`` class for ``backend`` (default: :func:`select_gl_backend`).

    Imported from ``mujoco.egl``, ``mujoco.osmesa`` or ``mujoco.glfw`` directly, so the
    result does not depend on what ``MUJOCO_GL`` was when ``mujoco`` was imported.

    Raises:
        ValueError: For a backend that has no context class (e.g. ``disable``).
        ImportError: If the backend cannot be loaded in this process (missing PyOpenGL,
            or PyOpenGL already initialised for another platform).
    """
    backend = (backend or select_gl_backend()).lower()
    if backend == "egl":
        from mujoco.egl import GLContext
    elif backend == "osmesa":
        from mujoco.osmesa import GLContext
    elif backend in ("glfw", "glx", "enable", "enabled", "on", "true", "1"):
        from mujoco.glfw import GLContext
    else:
        raise ValueError(f"MUJOCO_GL={backend!r} has no OpenGL context to render with")
    return GLContext
