"""A task's scene as USD for Isaac Lab: MJCF -> USD offline, cached by content hash.

The scene is the task's own MJCF (robot with its actuators + task objects +
the local floor), converted with ``mujoco-usd-converter`` and then adjusted
for Isaac Lab's Newton importer:

* mocap bodies are left out: our tasks use them only as visual markers (they
  cannot collide), and the env keeps their poses on the MuJoCo side;
* the MJCF actuators are left out: Isaac Lab drives the joints with implicit
  PD actuators built from the same gains (see ``isaaclab_physics.py``), and two
  sets of actuators on one joint would double the gains;
* body gravity compensation is written where Newton reads it
  (``mjc:gravcomp``; the converter writes ``mjc:body:gravcomp``);
* every geom gets a unique name (:func:`geom_prim_name`) and a site sharing a
  geom's name is renamed, so each shape prim of the USD names its MJCF geom
  (touch sensors and friction read-back find their shapes by it).

Runs in the Isaac Lab environment (it needs ``pxr`` and the converter).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import mujoco

from robots.build import robot_mjspec
from sim.backends import TaskNotSupported
from sim.task import Task

CONVERSION_VERSION = 2  # bump when the adjustments below change (invalidates the cache)


def cache_dir() -> Path:
    """Where converted scenes live: ``$EMBODIED_CACHE/isaaclab_usd``.

    The default cache is ``~/.cache/embodied``.
    """
    root = os.environ.get("EMBODIED_CACHE") or Path.home() / ".cache" / "embodied"
    return Path(root) / "isaaclab_usd"


def geom_prim_name(geom_name: str, body_name: str, index: int) -> str:
    """The USD shape name of a geom: its own name, or ``<body>__geom<index within the body>``."""
    return geom_name or f"{body_name}__geom{index}"


def scene_mjcf(task: Task) -> str:
    """The MJCF of ``task``'s scene without its mocap (marker) bodies, geoms named."""
    spec = robot_mjspec(task.robot)
    task.build_scene(spec)
    geom_names = set()
    for body in spec.bodies:
        for k, geom in enumerate(body.geoms):
            geom.name = geom_prim_name(geom.name, body.name, k)
            geom_names.add(geom.name)
    renamed = {}
    for site in spec.sites:
        if site.name in geom_names:
            renamed[site.name] = f"{site.name}__site"
            site.name = renamed[site.name]
    for sensor in spec.sensors:  # not converted, but the spec must still compile
        if sensor.objtype == mujoco.mjtObj.mjOBJ_SITE and sensor.objname in renamed:
            sensor.objname = renamed[sensor.objname]
    for body in list(spec.bodies):
        if body.mocap:
            solid = [g.name for g in body.geoms if g.contype or g.conaffinity]
            if solid:
                raise TaskNotSupported(
                    f"task '{task.name}': mocap body '{body.name}' has colliding geoms {solid}; "
                    "the Isaac Lab backend keeps mocap bodies as visual markers only")
            spec.delete(body)
    spec.compile()
    return spec.to_xml()


def _adjust(stage_path: Path, out_path: Path) -> None:
    from pxr import Sdf, Usd

    stage = Usd.Stage.Open(str(stage_path))
    for prim in list(stage.Traverse()):
        if prim.GetTypeName() == "MjcActuator":
            stage.RemovePrim(prim.GetPath())
            continue
        attr = prim.GetAttribute("mjc:body:gravcomp")
        if attr and attr.Get() is not None:
            prim.CreateAttribute("mjc:gravcomp", Sdf.ValueTypeNames.Float,
                                 custom=True).Set(float(attr.Get()))
    stage.Export(str(out_path))


def task_usd(task: Task, cache: Path | None = None) -> Path:
    """Path of the USD of ``task``'s scene, converted on first use.

    Cached by the hash of its MJCF (no network: the floor and every shape are local).
    """
    from mujoco_usd_converter import Converter

    xml = scene_mjcf(task)
    key = hashlib.sha1(f"{CONVERSION_VERSION}\n{xml}".encode()).hexdigest()[:16]
    folder = (cache or cache_dir()) / f"{task.name}-{key}"
    usd = folder / "scene.usda"
    if usd.exists():
        return usd
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "scene.xml").write_text(xml)
        result = Converter(layer_structure=False, scene=False).convert(
            str(tmp / "scene.xml"), str(tmp / "converted"))
        if not result:
            raise RuntimeError(f"mujoco-usd-converter could not convert the scene of task "
                               f"'{task.name}'")
        staged = tmp / "out"
        staged.mkdir()
        (staged / "scene.xml").write_text(xml)
        _adjust(Path(result.path), staged / "scene.usda")
        try:
            staged.rename(folder)  # atomic: another process may have finished first
        except OSError:
            if not usd.exists():
                raise
        shutil.rmtree(staged, ignore_errors=True)
    return usd

