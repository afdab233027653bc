"""Visual randomisation: how camera frames look, drawn per env at every reset.

What changes (each a ``(low, high)`` range sampled uniformly per env and episode):

- **light**: every light's diffuse, ambient and specular colour (the headlight included)
  scaled by ``light_intensity``; the direction of the model's own lights turned by an
  angle in ``light_tilt_deg`` about a random axis.
- **surfaces**: the geoms named in ``surfaces`` (the floor the objects stand on) moved
  by an RGB distance in ``surface_shift`` in a random direction (clipped to [0, 1]); the
  robot's geoms likewise by ``robot_shift``. The task's objects (the cube, ball and goal
  an instruction names by colour) are never recoloured: only the named surfaces and the
  geoms attached to the robot are; and a drawn colour closer than ``min_contrast`` (RGB
  distance) to any object's colour is drawn again, so a green floor never hides a green
  goal.
- **cameras**: every camera moved by a distance in ``camera_shift_m`` (random direction)
  and turned by an angle in ``camera_tilt_deg`` (random axis, about its own position);
  cameras mounted on a moving body (the wrist camera) by ``mounted_camera_scale`` times
  that distance and angle (1: like the scene cameras).
- **image noise**: Gaussian pixel noise of a standard deviation in ``image_noise`` (0-255
  levels), new noise every frame.

Textures are not varied: the shipped scenes have none to vary.

The draws come from a generator of their own (seeded from the env's seed), so turning
visual randomisation on or off leaves every physics draw unchanged. Nothing here
modifies a model: :class:`VisualBatch` edits the renderer's scene after
``mjv_updateScene`` and the pixels after reading them (see :mod:`sim.render`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

__all__ = ["VisualBatch", "VisualRandomization", "VisualSampler"]

_MJOBJ_GEOM = 5  # mujoco.mjtObj.mjOBJ_GEOM (no mujoco import: GL is chosen by sim.render)


@dataclass
class VisualRandomization:
    """Ranges of the visual changes (see the module doc); ``enabled=False`` turns all off.

    The defaults change nothing; ``configs/visual/train.yaml`` holds the training ranges.
    """

    enabled: bool = False
    light_intensity: tuple[float, float] = (1.0, 1.0)
    light_tilt_deg: tuple[float, float] = (0.0, 0.0)
    surface_shift: tuple[float, float] = (0.0, 0.0)
    robot_shift: tuple[float, float] = (0.0, 0.0)
    camera_shift_m: tuple[float, float] = (0.0, 0.0)
    camera_tilt_deg: tuple[float, float] = (0.0, 0.0)
    image_noise: tuple[float, float] = (0.0, 0.0)
    surfaces: tuple[str, ...] = ("floor",)
    min_contrast: float = 0.3
    mounted_camera_scale: float = 1.0

    def __post_init__(self) -> None:
        """Check every range is ``(low, high)`` with ``0 <= low <= high``.

        Raises:
            ValueError: For a malformed or negative range.
        """
        for f in fields(self):
            if f.name in ("enabled", "surfaces", "min_contrast", "mounted_camera_scale"):
                continue
            value = tuple(float(x) for x in getattr(self, f.name))
            if len(value) != 2 or not 0.0 <= value[0] <= value[1]:
                raise ValueError(f"visual.{f.name} must be [low, high] with 0 <= low <= high, "
                                 f"got {list(value)}")
            setattr(self, f.name, value)
        self.surfaces = tuple(str(s) for s in self.surfaces)

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> VisualRandomization:
        """From a config mapping (unknown keys raise ValueError naming the known ones)."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown visual randomisation setting(s) {unknown}; known: "
                             f"{sorted(known)}")
        return cls(**values)


def _unit_vectors(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    v = rng.standard_normal((*shape, 3))
    return v / np.linalg.norm(v, axis=-1, keepdims=True).clip(1e-9)


def _rotations(rng: np.random.Generator, shape: tuple[int, ...], angle_rad: np.ndarray
               ) -> np.ndarray:
    """Rotation matrices [*shape, 3, 3] by ``angle_rad`` [*shape] about random axes."""
    k = _unit_vectors(rng, shape)
    x, y, z = k[..., 0], k[..., 1], k[..., 2]
    zero = np.zeros_like(x)
    kx = np.stack([np.stack([zero, -z, y], -1), np.stack([z, zero, -x], -1),
                   np.stack([-y, x, zero], -1)], -2)
    a = angle_rad[..., None, None]
    return np.eye(3) + np.sin(a) * kx + (1.0 - np.cos(a)) * (kx @ kx)


@dataclass
class VisualBatch:
    """The visual changes of a batch of envs for one render call (row ``b`` = ``datas[b]``)."""

    light_scale: np.ndarray     # [B]
    light_rot: np.ndarray       # [B, 3, 3]
    geom_index: dict[int, int]  # model geom id -> column of geom_rgb
    geom_rgb: np.ndarray        # [B, G, 3]
    camera_offset: np.ndarray   # [B, ncam, 3] (model camera ids)
    camera_rot: np.ndarray      # [B, ncam, 3, 3]
    noise_std: np.ndarray       # [B]
    noise_seed: np.ndarray      # [B] uint64: this call's noise

    def apply_to_scene(self, scene: Any, b: int, cam_id: int) -> None:
        """Edit a scene filled by ``mjv_updateScene`` for env ``b`` seen by camera ``cam_id``."""
        scale = float(self.light_scale[b])
        rot = self.light_rot[b]
        for i in range(scene.nlight):
            light = scene.lights[i]
            light.diffuse *= scale
            light.ambient *= scale
            light.specular *= scale
            if not light.headlight:
                light.dir[:] = rot @ light.dir
        index, rgb = self.geom_index, self.geom_rgb[b]
        if index:
            for i in range(scene.ngeom):
                geom = scene.geoms[i]
                if geom.objtype == _MJOBJ_GEOM:
                    col = index.get(geom.objid)
                    if col is not None:
                        geom.rgba[:3] = rgb[col]
        offset, cam_rot = self.camera_offset[b, cam_id], self.camera_rot[b, cam_id]
        for cam in scene.camera:
            cam.pos[:] = cam.pos + offset
            cam.forward[:] = cam_rot @ cam.forward
            cam.up[:] = cam_rot @ cam.up

    def add_noise(self, frames: np.ndarray, b: int) -> None:
        """Add env ``b``'s pixel noise to its uint8 frames [V, H, W, 3] in place."""
        std = float(self.noise_std[b])
        if std <= 0.0:
            return
        noise = np.random.default_rng(int(self.noise_seed[b])).standard_normal(
            frames.shape, dtype=np.float32)
        noisy = frames.astype(np.float32) + std * noise
        np.copyto(frames, noisy.clip(0.0, 255.0).round().astype(np.uint8))


class VisualSampler:
    """Per-env visual draws of a model: resampled at reset, read at every render.

    Args:
        cfg: The ranges (must be enabled).
        model: The compiled ``MjModel`` (read only).
        robot_root_body: Body id whose kinematic tree is the robot (its geoms take
            ``robot_shift``); ``None`` leaves the robot's colours alone.
        num_envs: Batch size.
        seed: Seed of the sampler's own generator.

    Raises:
        ValueError: If a name in ``cfg.surfaces`` is no geom of the model.
    """

    def __init__(self, cfg: VisualRandomization, model: Any, robot_root_body: int | None,
                 num_envs: int, seed: int) -> None:
        self.cfg, self.num_envs = cfg, num_envs
        names = [model.geom(i).name for i in range(model.ngeom)]
        missing = [s for s in cfg.surfaces if s not in names]
        if missing:
            raise ValueError(f"visual.surfaces names no geom {missing}; named geoms: "
                             f"{sorted(n for n in names if n)}")
        surface_ids = [names.index(s) for s in cfg.surfaces]
        robot_ids = []
        if robot_root_body is not None and cfg.robot_shift[1] > 0:
            root = model.body_rootid[robot_root_body]
            robot_ids = [g for g in range(model.ngeom)
                         if model.body_rootid[model.geom_bodyid[g]] == root
                         and g not in surface_ids]
        self._surface_cols = np.arange(len(surface_ids))
        self._robot_cols = np.arange(len(surface_ids), len(surface_ids) + len(robot_ids))
        ids = surface_ids + robot_ids
        self.geom_index = {g: col for col, g in enumerate(ids)}
        robot_root = None if robot_root_body is None else model.body_rootid[robot_root_body]
        self._object_rgb = np.asarray(
            [model.geom_rgba[g][:3] for g in range(model.ngeom)
             if g not in surface_ids and model.geom_bodyid[g] != 0
             and model.body_rootid[model.geom_bodyid[g]] != robot_root],
            dtype=np.float64).reshape(-1, 3)
        # The colour each geom is drawn with: its material's unless it has its own.
        base = []
        for g in ids:
            rgba = model.geom_rgba[g]
            mat = model.geom_matid[g]
            base.append(model.mat_rgba[mat][:3] if mat >= 0 and np.allclose(
                rgba, (0.5, 0.5, 0.5, 1.0)) else rgba[:3])
        self._base_rgb = np.asarray(base, dtype=np.float64).reshape(len(ids), 3)
        self._ncam = int(model.ncam)
        self._camera_scale = np.where(np.asarray(model.cam_bodyid) != 0,
                                      float(cfg.mounted_camera_scale), 1.0)  # [ncam]
        b, g, c = num_envs, len(ids), self._ncam
        self.light_scale = np.ones(b)
        self.light_rot = np.tile(np.eye(3), (b, 1, 1))
        self.geom_rgb = np.tile(self._base_rgb, (b, 1, 1)).reshape(b, g, 3)
        self.camera_offset = np.zeros((b, c, 3))
        self.camera_rot = np.tile(np.eye(3), (b, c, 1, 1))
        self.noise_std = np.zeros(b)
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        """Restart the generator (the env's ``reset(seed=...)`` does this)."""
        self._rng = np.random.default_rng([int(seed), 0x56495355])

    def _uniform(self, low_high: tuple[float, float], shape: tuple[int, ...]) -> np.ndarray:
        low, high = low_high
        return self._rng.uniform(low, high, size=shape)

    def resample(self, env_ids: Sequence[int] | np.ndarray) -> None:
        """Draw new visuals for envs ``env_ids`` (called at their reset)."""
        ids = np.asarray(env_ids, dtype=np.int64).reshape(-1)
        n, cfg, rng = len(ids), self.cfg, self._rng
        if n == 0:
            return
        self.light_scale[ids] = self._uniform(cfg.light_intensity, (n,))
        self.light_rot[ids] = _rotations(rng, (n,), np.radians(
            self._uniform(cfg.light_tilt_deg, (n,))))
        rgb = np.tile(self._base_rgb, (n, 1, 1))
        for cols, rng_range in ((self._surface_cols, cfg.surface_shift),
                                (self._robot_cols, cfg.robot_shift)):
            if len(cols):
                rgb[:, cols] = self._shifted(self._base_rgb[cols], rng_range, n)
        self.geom_rgb[ids] = rgb
        c = self._ncam
        self.camera_offset[ids] = (self._uniform(cfg.camera_shift_m, (n, c))[..., None]
                                   * self._camera_scale[:, None] * _unit_vectors(rng, (n, c)))
        self.camera_rot[ids] = _rotations(rng, (n, c), np.radians(
            self._uniform(cfg.camera_tilt_deg, (n, c)) * self._camera_scale))
        self.noise_std[ids] = self._uniform(cfg.image_noise, (n,))

    def _shifted(self, base: np.ndarray, dist_range: tuple[float, float], n: int
                 ) -> np.ndarray:
        """[n, G, 3] colours ``base`` [G, 3] moved by a distance in ``dist_range``.

        Clipped to [0, 1]; a colour within ``min_contrast`` of an object's is drawn again
        (up to 16 times, then the base colour is kept).
        """
        out = np.tile(base, (n, 1, 1))
        todo = np.ones(out.shape[:2], dtype=bool)
        for _ in range(16):
            k = int(todo.sum())
            if k == 0:
                break
            dist = self._uniform(dist_range, (k,))[:, None]
            out[todo] = (np.broadcast_to(base, out.shape)[todo]
                         + dist * _unit_vectors(self._rng, (k,))).clip(0.0, 1.0)
            todo = self._too_close(out)
        out[todo] = np.broadcast_to(base, out.shape)[todo]
        return out

    def _too_close(self, rgb: np.ndarray) -> np.ndarray:
        """bool [...]: colours [..., 3] within ``min_contrast`` of an object's colour."""
        if len(self._object_rgb) == 0:
            return np.zeros(rgb.shape[:-1], dtype=bool)
        d = np.linalg.norm(rgb[..., None, :] - self._object_rgb, axis=-1)
        return (d < self.cfg.min_contrast).any(-1)

    def batch(self, env_ids: Sequence[int]) -> VisualBatch:
        """The current visuals of envs ``env_ids``, with fresh pixel-noise seeds."""
        ids = np.asarray(env_ids, dtype=np.int64).reshape(-1)
        return VisualBatch(
            light_scale=self.light_scale[ids], light_rot=self.light_rot[ids],
            geom_index=self.geom_index, geom_rgb=self.geom_rgb[ids],
            camera_offset=self.camera_offset[ids], camera_rot=self.camera_rot[ids],
            noise_std=self.noise_std[ids],
            noise_seed=self._rng.integers(0, 2**63, size=len(ids), dtype=np.uint64))
