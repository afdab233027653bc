"""Multi-view camera rendering for batched MuJoCo simulation.

:class:`MultiViewRenderer` renders the named cameras of a model for a batch of
``MjData`` (one per environment) into one uint8 array ``[B, V, H, W, 3]``.

* Each worker thread owns one GL context (EGL or OSMesa, see :mod:`sim.gl`), one
  ``MjrContext`` and one ``MjvScene``; they are created, used and freed on that
  thread only, because GL contexts are bound to the thread that made them current.
  ``mjr_render``/``mjr_readPixels`` release the GIL, so two workers do overlap.
* The batch is split into contiguous runs of environments, one run per worker, so
  no ``MjData`` is touched by two threads at once (``mjv_updateScene`` may use the
  data's scratch stack).
* Speed settings: shadows, reflections, skybox, fog and haze are switched off in
  each scene's render flags, and the GL context is made from a private copy of the
  model with ``vis.quality.offsamples = 0`` (no MSAA) and ``shadowsize = 0`` (no
  64 MB shadow map per context). The caller's model is never modified.
* Infinite planes (the floor) are drawn by MuJoCo as a 200 x 200 grid of quads out to
  twice the far clipping distance, on every frame; with software GL that grid is most
  of a frame's time. ``plane_extent`` (opt-in) draws them instead out to that many
  metres only, on MuJoCo's own vertex lattice, so every pixel where the floor lies
  inside the extent is unchanged; beyond it the background shows. With one such plane,
  each frame then draws only the square of that grid its camera can see
  (:mod:`sim.plane_crop`: a few prepared sizes, one ``MjrContext`` each, placed on whole
  cells), the same quads where they are in view: the same pixels, a fraction of the
  floor's vertex work.
* If ``width``/``height`` exceed ``model.vis.global_.offwidth/offheight`` the
  offscreen buffer is enlarged **on that private copy**; no error is raised.
* Frames are read into a per-worker scratch buffer and copied once, flipped
  upright, straight into the output array.
* Visual randomisation (:mod:`sim.visual`) edits each scene after
  ``mjv_updateScene`` (lights, geom colours, camera pose) and adds pixel noise to the
  output; the models and datas stay untouched.

The GL backend is chosen (:func:`sim.gl.select_gl_backend`) before ``mujoco`` is
imported by this module.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import copy
import os
import queue
import threading
import weakref
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from sim.gl import gl_context_class, select_gl_backend
from sim.plane_crop import crop_sizes, visible_square
from sim.visual import VisualBatch

# Before `import mujoco`, which reads MUJOCO_GL. With no working backend the error is
# raised again, with its advice, by MultiViewRenderer().
with contextlib.suppress(RuntimeError):
    select_gl_backend()

import mujoco
import numpy as np

__all__ = ["FAST_RENDER_FLAGS_OFF", "MultiViewRenderer", "tile_batch", "tile_views"]

#: Scene render flags switched off by :class:`MultiViewRenderer`.
FAST_RENDER_FLAGS_OFF: tuple[mujoco.mjtRndFlag, ...] = (
    mujoco.mjtRndFlag.mjRND_SHADOW,
    mujoco.mjtRndFlag.mjRND_REFLECTION,
    mujoco.mjtRndFlag.mjRND_SKYBOX,
    mujoco.mjtRndFlag.mjRND_FOG,
    mujoco.mjtRndFlag.mjRND_HAZE,
)

# Model sizes an MjData's model must share with the renderer's model.
_STRUCTURE_FIELDS = ("nbody", "ngeom", "ncam", "nlight", "nskin", "nflex", "nmesh", "nmat",
                     "ntex", "nsite", "ntendon")


def _camera_names(model: mujoco.MjModel) -> list[str]:
    return [model.camera(i).name for i in range(model.ncam)]


def _plane_cell(model: mujoco.MjModel) -> float:
    """Quad size (m) of MuJoCo's grid for an infinite plane without a texture repeat."""
    zfar = model.vis.map.zfar * model.stat.extent
    grid = 200  # mjMAXPLANEGRID
    step = 2.1 * zfar / (grid - 2)
    return (2.1 * zfar + 2 * step) / grid


def _set_plane_size(ctx_model: mujoco.MjModel, geoms: Sequence[int], k: int,
                    cell: float) -> None:
    """Give the planes ``geoms`` of ``ctx_model`` a half-size of ``k`` cells on the lattice.

    A plane of half-size ``k * cell`` and grid spacing ``cell / 2`` is drawn by MuJoCo
    with lines at the multiples of ``cell`` from its centre, where the infinite plane's
    lines are.
    """
    for i in geoms:
        ctx_model.geom_size[i] = (k * cell * (1 + 1e-9), k * cell * (1 + 1e-9), cell / 2)


def _finite_planes(ctx_model: mujoco.MjModel, extent: float) -> tuple[list[int], int, float]:
    """Make the untextured infinite planes of ``ctx_model`` finite, on MuJoCo's lattice.

    The quads (and the pixels) inside the extent are those of the infinite plane
    (``_set_plane_size``). Returns the planes made finite, their half-size in cells and
    the cell size (no planes if the extent would not draw fewer quads).
    """
    cell = _plane_cell(ctx_model)
    k = max(1, int(np.ceil(extent / cell)))
    if k >= 99:  # no fewer quads than the infinite grid
        return [], k, cell
    planes = []
    for i in range(ctx_model.ngeom):
        if ctx_model.geom_type[i] != mujoco.mjtGeom.mjGEOM_PLANE:
            continue
        matid = ctx_model.geom_matid[i]
        if matid >= 0 and (ctx_model.mat_texrepeat[matid] > 0).any():
            continue  # a textured plane's lattice follows its texture: left as it is
        size = ctx_model.geom_size[i]
        if size[0] <= 0 and size[1] <= 0:
            planes.append(i)
    _set_plane_size(ctx_model, planes, k, cell)
    return planes, k, cell


class _PlaneCrop:
    """The cropped floor of one renderer: the plane, its grid and the prepared squares.

    ``models[n]``: a copy of the context model whose plane is a square of half-size
    ``n`` cells (one ``MjrContext`` each per worker).
    """

    def __init__(self, ctx_model: mujoco.MjModel, geom: int, full: int, cell: float) -> None:
        self.geom, self.full, self.cell = geom, full, cell
        self.sizes = crop_sizes(full)
        self.models: dict[int, mujoco.MjModel] = {}
        for n in self.sizes:
            model = copy.copy(ctx_model)
            _set_plane_size(model, [geom], n, cell)
            self.models[n] = model

    def scene_index(self, scene: mujoco.MjvScene, hint: int) -> int:
        """Index of the plane among ``scene``'s geoms (``hint`` first), -1 if absent."""
        geom_type = int(mujoco.mjtObj.mjOBJ_GEOM)
        if hint < scene.ngeom:
            g = scene.geoms[hint]
            if g.objtype == geom_type and g.objid == self.geom:
                return hint
        for i in range(scene.ngeom):
            g = scene.geoms[i]
            if g.objtype == geom_type and g.objid == self.geom:
                return i
        return -1

    def place(self, scene: mujoco.MjvScene, index: int, aspect: float) -> int | None:
        """Move the plane of ``scene`` onto the square its camera sees; that square's size.

        None: draw the full square (nothing is moved).
        """
        g = scene.geoms[index]
        cam = mujoco.mjv_averageCamera(scene.camera[0], scene.camera[1])
        if cam.orthographic or scene.enabletransform:
            return None
        pos, mat = g.pos.tolist(), g.mat.ravel().tolist()
        frustum = (cam.frustum_near, cam.frustum_bottom, cam.frustum_top,
                   cam.frustum_center, cam.frustum_width)
        found = visible_square(pos, mat, tuple(cam.pos.tolist()), tuple(cam.forward.tolist()),
                               tuple(cam.up.tolist()), frustum, aspect, self.cell, self.full,
                               self.sizes)
        if found is None:
            return None
        n, cx, cy = found
        dx, dy = cx * self.cell, cy * self.cell  # along the plane's x and y axes
        g.pos[:] = (pos[0] + mat[0] * dx + mat[1] * dy, pos[1] + mat[3] * dx + mat[4] * dy,
                    pos[2] + mat[6] * dx + mat[7] * dy)
        return n


class _GLWorker:
    """One daemon thread that owns one GL context, ``MjrContext`` and ``MjvScene``.

    A daemon thread (not a ThreadPoolExecutor, whose threads are stopped before
    ``atexit`` runs) so that a renderer still open at interpreter exit can free its GL
    resources on the owning thread from its ``weakref.finalize`` hook.
    """

    def __init__(self, index: int, ctx_model: mujoco.MjModel, model: mujoco.MjModel,
                 cam_ids: Sequence[int], width: int, height: int, max_geom: int,
                 crop: _PlaneCrop | None = None) -> None:
        self._gl = None
        self._con: mujoco.MjrContext | None = None
        self._crop_cons: dict[int, mujoco.MjrContext] = {}
        self._crop = crop
        self._plane_index = 0
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = threading.Thread(
            target=self._loop, name=f"MultiViewRenderer-gl{index}", daemon=True)
        self._thread.start()
        try:
            self._call(self._init, ctx_model, model, cam_ids, width, height,
                       max_geom).result()
        except BaseException:
            self.close()
            raise

    def _call(self, fn: Callable[..., Any], *args: Any) -> cf.Future:
        future: cf.Future = cf.Future()
        self._jobs.put((future, fn, args))
        return future

    # -- runs on the worker thread -------------------------------------------------
    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)

    def _init(self, ctx_model: mujoco.MjModel, model: mujoco.MjModel, cam_ids: Sequence[int],
              width: int, height: int, max_geom: int) -> None:
        gl = gl_context_class()(width, height)
        gl.make_current()
        self._gl = gl
        if self._crop is not None:  # the smaller floor squares first, the full one last
            for n, crop_model in self._crop.models.items():
                self._crop_cons[n] = self._context(crop_model)
        self._con = self._context(ctx_model)
        self._bound = self._con
        self._scene = mujoco.MjvScene(model, maxgeom=max_geom)
        for flag in FAST_RENDER_FLAGS_OFF:
            self._scene.flags[flag] = 0
        self._option = mujoco.MjvOption()
        self._cameras = []
        for cid in cam_ids:
            cam = mujoco.MjvCamera()
            cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
            cam.fixedcamid = cid
            self._cameras.append(cam)
        self._rect = mujoco.MjrRect(0, 0, width, height)
        self._scratch = np.empty((height, width, 3), dtype=np.uint8)

    @staticmethod
    def _context(ctx_model: mujoco.MjModel) -> mujoco.MjrContext:
        """An ``MjrContext`` of ``ctx_model`` drawing into its offscreen framebuffer."""
        con = mujoco.MjrContext(ctx_model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, con)
        if con.currentBuffer != mujoco.mjtFramebuffer.mjFB_OFFSCREEN:
            raise RuntimeError("could not select MuJoCo's offscreen framebuffer")
        return con

    def _floor_context(self, crop: _PlaneCrop, scene: mujoco.MjvScene) -> mujoco.MjrContext:
        """The context whose floor square covers what the scene's camera sees (bound)."""
        con = self._con
        index = crop.scene_index(scene, self._plane_index)
        if index >= 0:
            self._plane_index = index
            n = crop.place(scene, index, self._rect.width / self._rect.height)
            if n is not None:
                con = self._crop_cons[n]
        if con is not self._bound:
            mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, con)
            self._bound = con
        return con

    def _render(self, datas: Sequence[mujoco.MjData], start: int, stop: int,
                out: np.ndarray, visual: VisualBatch | None) -> None:
        scene, con, rect, scratch = self._scene, self._con, self._rect, self._scratch
        option, catmask = self._option, mujoco.mjtCatBit.mjCAT_ALL
        for b in range(start, stop):
            data = datas[b]
            model = data.model
            for v, cam in enumerate(self._cameras):
                mujoco.mjv_updateScene(model, data, option, None, cam, catmask, scene)
                if visual is not None:
                    visual.apply_to_scene(scene, b, cam.fixedcamid)
                if self._crop is not None:
                    con = self._floor_context(self._crop, scene)
                mujoco.mjr_render(rect, scene, con)
                mujoco.mjr_readPixels(scratch, None, rect, con)
                # OpenGL rows run bottom-up: one flipped copy into the caller's array.
                np.copyto(out[b, v], scratch[::-1])
            if visual is not None:
                visual.add_noise(out[b], b)

    def _free(self) -> None:
        for con in self._crop_cons.values():
            con.free()
        self._crop_cons.clear()
        if self._con is not None:
            self._con.free()
            self._con = None
        if self._gl is not None:
            self._gl.free()
            self._gl = None

    # -- called from the owner's thread -----------------------------------------------
    def submit(self, datas: Sequence[mujoco.MjData], start: int, stop: int,
               out: np.ndarray, visual: VisualBatch | None = None) -> cf.Future:
        return self._call(self._render, datas, start, stop, out, visual)

    def close(self) -> None:
        """Free the GL resources on the worker thread, then stop it (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            if thread.is_alive():
                self._call(self._free).result()
        finally:
            self._jobs.put(None)
            thread.join()


def _close_workers(workers: list[_GLWorker]) -> None:
    """Close and forget ``workers``; the renderer's finalizer (also run at exit)."""
    while workers:
        workers.pop().close()


class MultiViewRenderer:
    """Render several fixed cameras for a batch of ``MjData`` into ``[B, V, H, W, 3]`` uint8.

    Example::

        with MultiViewRenderer(model, ["front", "wrist"], 96, 96) as r:
            frames = r.render(datas)          # (len(datas), 2, 96, 96, 3)

    The datas must have up-to-date kinematics (after ``mj_forward``/``mj_step``). Each
    data is drawn with its own ``data.model``, which must have the structure of
    ``model`` (e.g. a per-env copy with randomised colours); meshes and textures are
    the ones uploaded from ``model`` at construction.
    """

    def __init__(self, model: mujoco.MjModel, cameras: Sequence[str], width: int, height: int,
                 nthread: int | None = None, *,
                 tessellation: tuple[int, int] | None = None,
                 plane_extent: float | None = None, crop_plane: bool = True) -> None:
        """Create the GL workers.

        Args:
            model: The compiled model; it is read, never modified.
            cameras: Names of cameras in ``model``; view ``v`` of the output is
                ``cameras[v]``.
            width: Image width in pixels, the same for every camera.
            height: Image height in pixels.
            nthread: Number of worker threads, each with its own GL context; default
                ``min(2, os.cpu_count())``.
            tessellation: Optional ``(numslices, numstacks)`` for MuJoCo's built-in
                round geoms (spheres, capsules, cylinders, ellipsoids) in the GL
                context; ``None`` keeps the model's ``vis.quality`` (28, 16 by default).
                Software GL spends most of ``mjr_render`` on their triangles: ``(12, 6)``
                renders the capsule-built Panda about 4x faster at 96x96 with llvmpipe.
            plane_extent: Optional half-size in metres to which infinite, untextured
                planes (the floor) are drawn, on MuJoCo's own grid, instead of twice the
                far clipping distance: pixels of floor within it are unchanged, floor
                beyond it is not drawn. ``None`` (default): MuJoCo's infinite plane.
            crop_plane: With ``plane_extent`` and one such plane, draw in each frame only
                the square of its grid the camera sees (the same pixels, see the module
                doc); False draws the whole extent in every frame.

        Raises:
            ValueError: For an unknown camera name (the message lists the model's
                cameras), no cameras, a non-positive size or ``nthread``.
            RuntimeError: If no OpenGL backend works (see :func:`sim.gl.select_gl_backend`).
        """
        self._workers: list[_GLWorker] = []
        # Frees the GL contexts on their threads at close(), garbage collection or exit.
        self._finalizer = weakref.finalize(self, _close_workers, self._workers)
        if isinstance(cameras, str):
            cameras = [cameras]
        cameras = list(cameras)
        if not cameras:
            raise ValueError("MultiViewRenderer needs at least one camera name")
        cam_ids = []
        for name in cameras:
            cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
            if cid < 0:
                raise ValueError(f"unknown camera {name!r}; the model's cameras are "
                                 f"{_camera_names(model)}")
            cam_ids.append(cid)
        if int(width) <= 0 or int(height) <= 0:
            raise ValueError(f"width and height must be positive, got {width}x{height}")
        if nthread is None:
            nthread = min(2, os.cpu_count() or 1)
        if int(nthread) < 1:
            raise ValueError(f"nthread must be >= 1, got {nthread}")

        self.backend: str = select_gl_backend()
        self._model = model
        self._cameras = tuple(cameras)
        self._cam_ids = tuple(cam_ids)
        self._width, self._height, self._nthread = int(width), int(height), int(nthread)
        self._structure = tuple(getattr(model, f) for f in _STRUCTURE_FIELDS)

        # Private copy only for creating the GL resources: no MSAA, no shadow map, an
        # offscreen buffer at least width x height. The caller's model stays untouched.
        ctx_model = copy.copy(model)
        ctx_model.vis.quality.offsamples = 0
        ctx_model.vis.quality.shadowsize = 0
        ctx_model.vis.global_.offwidth = max(ctx_model.vis.global_.offwidth, self._width)
        ctx_model.vis.global_.offheight = max(ctx_model.vis.global_.offheight, self._height)
        if tessellation is not None:
            slices, stacks = (int(n) for n in tessellation)
            if slices < 3 or stacks < 2:
                raise ValueError(f"tessellation needs numslices >= 3 and numstacks >= 2, "
                                 f"got {tessellation}")
            ctx_model.vis.quality.numslices = slices
            ctx_model.vis.quality.numstacks = stacks
        crop = None
        if plane_extent is not None:
            if float(plane_extent) <= 0:
                raise ValueError(f"plane_extent must be positive metres, got {plane_extent}")
            planes, full, cell = _finite_planes(ctx_model, float(plane_extent))
            if crop_plane and len(planes) == 1 and crop_sizes(full):
                crop = _PlaneCrop(ctx_model, planes[0], full, cell)
        # Enough room for every geom plus decorations such as tendons and flexes.
        max_geom = max(10_000, 2 * (model.ngeom + model.nsite + model.ntendon + model.nflex))
        try:
            # One after another: mujoco.egl initialises its shared EGL display lazily.
            for i in range(self._nthread):
                self._workers.append(_GLWorker(i, ctx_model, model, self._cam_ids,
                                               self._width, self._height, max_geom, crop))
        except BaseException:
            self.close()
            raise

    @property
    def cameras(self) -> tuple[str, ...]:
        """Camera names, in view order."""
        return self._cameras

    @property
    def width(self) -> int:
        """Image width in pixels."""
        return self._width

    @property
    def height(self) -> int:
        """Image height in pixels."""
        return self._height

    @property
    def nthread(self) -> int:
        """Number of worker threads (GL contexts)."""
        return self._nthread

    def output_shape(self, batch: int) -> tuple[int, int, int, int, int]:
        """Shape of :meth:`render`'s result for ``batch`` datas."""
        return (batch, len(self._cameras), self._height, self._width, 3)

    def _check_data(self, index: int, data: mujoco.MjData) -> None:
        dmodel = data.model
        if dmodel is self._model:
            return
        structure = tuple(getattr(dmodel, f) for f in _STRUCTURE_FIELDS)
        if structure != self._structure:
            diff = {f: (a, b) for f, a, b in zip(_STRUCTURE_FIELDS, structure, self._structure,
                                                 strict=True) if a != b}
            raise ValueError(f"datas[{index}] belongs to a model of another structure than "
                             f"the renderer's model (data vs renderer: {diff})")

    def render(self, datas: Sequence[mujoco.MjData], out: np.ndarray | None = None,
               visual: VisualBatch | None = None) -> np.ndarray:
        """Render every camera for every data.

        Args:
            datas: One ``MjData`` per environment, kinematics up to date.
            out: Optional preallocated uint8 array of shape ``[B, V, H, W, 3]`` to
                write into (it may be a strided view).
            visual: Optional per-env visual changes (lights, surface colours, camera
                poses, pixel noise; :mod:`sim.visual`), row ``b`` for ``datas[b]``.

        Returns:
            ``out`` (or a new array) of shape ``[B, V, H, W, 3]``, uint8 RGB, row 0 at
            the top of the image; ``[b, v]`` is ``datas[b]`` seen by ``cameras[v]``.

        Raises:
            RuntimeError: After :meth:`close`.
            ValueError: For a wrong ``out`` or a data of an incompatible model.
        """
        if not self._workers:
            raise RuntimeError("MultiViewRenderer.render() called after close()")
        datas = list(datas)
        shape = self.output_shape(len(datas))
        if out is None:
            out = np.empty(shape, dtype=np.uint8)
        else:
            if out.shape != shape or out.dtype != np.uint8:
                raise ValueError(f"out must be uint8 with shape {shape}, got {out.dtype} "
                                 f"{out.shape}")
            if not out.flags.writeable:
                raise ValueError("out is read-only")
        if visual is not None and len(visual.light_scale) != len(datas):
            raise ValueError(f"visual holds {len(visual.light_scale)} envs for {len(datas)} "
                             "datas")
        for i, data in enumerate(datas):
            self._check_data(i, data)
        nbatch = len(datas)
        if nbatch == 0:
            return out
        nwork = min(len(self._workers), nbatch)
        bounds = [nbatch * k // nwork for k in range(nwork + 1)]
        futures = [w.submit(datas, bounds[k], bounds[k + 1], out, visual)
                   for k, w in enumerate(self._workers[:nwork])]
        # Wait for every worker before raising, so none writes to `out` after we return.
        cf.wait(futures)
        for f in futures:
            f.result()
        return out

    def close(self) -> None:
        """Free the GL contexts and stop the worker threads (idempotent)."""
        self._finalizer()

    def __enter__(self) -> MultiViewRenderer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def tile_views(frames: np.ndarray) -> np.ndarray:
    """Put the views of one environment side by side.

    Args:
        frames: ``[V, H, W, 3]`` (one environment's row of :meth:`MultiViewRenderer.render`).

    Returns:
        ``[H, V * W, 3]``, view 0 on the left.
    """
    frames = np.asarray(frames)
    if frames.ndim != 4:
        raise ValueError(f"tile_views expects [V, H, W, C], got shape {frames.shape}")
    v, h, w, c = frames.shape
    return np.ascontiguousarray(frames.transpose(1, 0, 2, 3)).reshape(h, v * w, c)


def tile_batch(frames: np.ndarray, max_envs: int) -> np.ndarray:
    """Tile a batch of multi-view frames into one image: rows = envs, columns = views.

    Args:
        frames: ``[B, V, H, W, 3]`` as returned by :meth:`MultiViewRenderer.render`.
        max_envs: Show at most this many environments (the first ones).

    Returns:
        ``[min(B, max_envs) * H, V * W, 3]``.
    """
    frames = np.asarray(frames)
    if frames.ndim != 5:
        raise ValueError(f"tile_batch expects [B, V, H, W, C], got shape {frames.shape}")
    if max_envs < 1:
        raise ValueError(f"max_envs must be >= 1, got {max_envs}")
    sel = frames[:max_envs]
    n, v, h, w, c = sel.shape
    return np.ascontiguousarray(sel.transpose(0, 2, 1, 3, 4)).reshape(n * h, v * w, c)
