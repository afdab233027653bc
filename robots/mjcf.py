"""Read an MJCF file without MuJoCo: element names, the timestep and the body tree.

What a robot's spec and its kinematics need from the MJCF, read with the standard
library's XML parser, so that a robot computer without MuJoCo validates robot.yaml
against the same file the simulator compiles. ``<include>`` files are read in place
and ``<default>`` classes (``class`` / ``childclass``) are applied to joints and
sites. Names follow MuJoCo: the world body is called ``world``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TIMESTEP = 0.002  # MuJoCo's default <option timestep>
_ORIENTATIONS = ("quat", "axisangle", "euler", "xyaxes", "zaxis")


class MjcfError(ValueError):
    """An MJCF file that cannot be read (bad XML, a missing include)."""


@dataclass(frozen=True)
class MjcfJoint:
    """A joint of a body: type (hinge, slide, ball, free), anchor and axis in the body frame."""

    name: str
    type: str
    # The numbers as written in the file (3 each in a valid MJCF; MuJoCo checks them).
    pos: tuple[float, ...]
    axis: tuple[float, ...]


@dataclass(frozen=True)
class MjcfBody:
    """A body: its parent, its frame in the parent and its joints in MJCF order.

    ``orientation`` names a non-quat attribute when the body is not oriented by ``quat``, or is
    ``frame`` for a body inside a ``<frame>`` element.
    """

    name: str
    parent: str | None
    # The numbers as written in the file (3 and 4 in a valid MJCF; MuJoCo checks them).
    pos: tuple[float, ...]
    quat: tuple[float, ...]
    orientation: str
    joints: tuple[MjcfJoint, ...]


@dataclass(frozen=True)
class MjcfSite:
    """A site: the body it is attached to and its position in that body's frame.

    The position is in the frame of an enclosing ``<frame>`` element when ``in_frame``.
    """

    name: str
    body: str
    pos: tuple[float, ...]  # as written in the file (3 numbers in a valid MJCF)
    in_frame: bool = False


@dataclass(frozen=True)
class Mjcf:
    """The parts of an MJCF model that robot.yaml and the torch kinematics refer to."""

    path: Path
    timestep: float
    bodies: dict[str, MjcfBody]
    sites: dict[str, MjcfSite]

    @property
    def joints(self) -> dict[str, MjcfJoint]:
        """Named joints of every body."""
        return {j.name: j for b in self.bodies.values() for j in b.joints if j.name}


def _floats(text: str | None, default: tuple[float, ...]) -> tuple[float, ...]:
    return default if text is None else tuple(float(v) for v in text.split())


def _expand_includes(element: ET.Element, folder: Path) -> None:
    """Replace every ``<include file=...>`` below ``element`` by the included file's children."""
    for i, child in enumerate(list(element)):
        if child.tag == "include":
            path = folder / child.get("file", "")
            try:
                root = ET.parse(path).getroot()
            except (OSError, ET.ParseError) as err:
                raise MjcfError(f"cannot read included file {path}: {err}") from err
            _expand_includes(root, path.parent)
            element.remove(child)
            for offset, included in enumerate(root):
                element.insert(i + offset, included)
        else:
            _expand_includes(child, folder)


def _default_classes(root: ET.Element) -> dict[str, dict[str, dict[str, str]]]:
    """class name -> element tag -> default attributes (parents' values inherited)."""
    classes: dict[str, dict[str, dict[str, str]]] = {}

    def visit(node: ET.Element, inherited: dict[str, dict[str, str]]) -> None:
        own = {tag: dict(attrs) for tag, attrs in inherited.items()}
        for child in node:
            if child.tag != "default":
                own[child.tag] = {**own.get(child.tag, {}), **child.attrib}
        classes[node.get("class", "main")] = own
        for child in node:
            if child.tag == "default":
                visit(child, own)

    for top in root.findall("default"):
        visit(top, {})
    return classes


def read_mjcf(path: str | Path) -> Mjcf:
    """Read the MJCF at ``path``; raises :class:`MjcfError` for unreadable XML."""
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as err:
        raise MjcfError(f"cannot read {path}: {err}") from err
    _expand_includes(root, path.parent)
    classes = _default_classes(root)
    timestep = DEFAULT_TIMESTEP
    for option in root.findall("option"):
        timestep = float(option.get("timestep", timestep))

    def attrs(element: ET.Element, tag: str, childclass: str) -> dict[str, str]:
        defaults = classes.get(element.get("class", childclass), {})
        return {**defaults.get(tag, {}), **element.attrib}

    bodies: dict[str, MjcfBody] = {}
    sites: dict[str, MjcfSite] = {}

    def members(node: ET.Element, childclass: str, in_frame: bool
                ) -> Iterator[tuple[ET.Element, str, bool]]:
        """The children of a body, with those of its ``<frame>`` elements flattened in."""
        for child in node:
            if child.tag == "frame":
                yield from members(child, child.get("childclass", childclass), True)
            else:
                yield child, childclass, in_frame

    def visit(node: ET.Element, name: str, parent: str | None, childclass: str,
              orientation: str) -> None:
        joints, children = [], []
        for child, cls, in_frame in members(node, childclass, False):
            if child.tag in ("joint", "freejoint"):
                a = attrs(child, "joint", cls)
                kind = "free" if child.tag == "freejoint" else a.get("type", "hinge")
                joints.append(MjcfJoint(a.get("name", ""), kind, _floats(a.get("pos"), (0.0,) * 3),
                                        _floats(a.get("axis"), (0.0, 0.0, 1.0))))
            elif child.tag == "site" and child.get("name"):
                a = attrs(child, "site", cls)
                sites[a["name"]] = MjcfSite(a["name"], name, _floats(a.get("pos"), (0.0,) * 3),
                                            in_frame)
            elif child.tag == "body":
                children.append((child, cls, in_frame))
        bodies[name] = MjcfBody(name, parent, _floats(node.get("pos"), (0.0,) * 3),
                                _floats(node.get("quat"), (1.0, 0.0, 0.0, 0.0)), orientation,
                                tuple(joints))
        for index, (child, cls, in_frame) in enumerate(children):
            kind = next((k for k in _ORIENTATIONS if k in child.attrib), "quat")
            visit(child, child.get("name", f"{name}/body{index}"), name,
                  child.get("childclass", cls), "frame" if in_frame else kind)

    for world in root.findall("worldbody"):
        visit(world, "world", None, "main", "quat")
    return Mjcf(path, timestep, bodies, sites)
