"""Which part of a finite floor plane a camera can see, on the plane's own grid.

MuJoCo draws a plane geom from a display list made once per ``MjrContext``: a grid of
quads covering the plane's whole extent, lit per vertex, so the grid (not only the
plane's outline) decides the pixels. :class:`sim.render.MultiViewRenderer` with
``plane_extent`` draws the floor out to that many metres on MuJoCo's own lattice of
cell ``c``: a square of half-size ``K * c`` around the plane's (camera-recentred)
position, ``(2K)^2`` quads per frame, most of them outside the camera's view.

:func:`visible_square` finds, for one camera, the smallest square of the plane's grid,
out of a few prepared half-sizes ``n * c`` (one ``MjrContext`` each), that holds every
cell of that ``K * c`` square the camera's view frustum reaches, and where to put it:
an offset of whole cells, so that its quads are the reference square's quads and the
pixels stay those of the full square. Cells are counted in the plane's frame, from its
position; the frustum is MuJoCo's (``mjr_render``: the average of the scene's two GL
cameras, its half-width matched to the viewport's aspect ratio).

The frustum is widened by ``SLACK`` and the cells it touches by ``MARGIN`` cells on
every side, so a cell at the border of the view is never left out by rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["MARGIN", "SLACK", "crop_sizes", "visible_square"]

MARGIN = 1       # cells added around the visible ones on every side
SLACK = 1.02     # the view frustum's half-width and half-height, widened by this factor

Vec = tuple[float, float, float]


def crop_sizes(full: int) -> list[int]:
    """Half-sizes (cells) of the smaller squares to prepare for a square of ``full``.

    Powers of two from 2 up to below ``full``: a frame draws at most 4x the cells it
    needs (2x per side).
    """
    sizes, n = [], 2
    while n < full:
        sizes.append(n)
        n *= 2
    return sizes


def _dot(a: Vec, b: Vec) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: Vec, b: Vec) -> Vec:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _to_plane(mat: Sequence[float], v: Vec) -> Vec:
    """World vector ``v`` in the plane's frame (``mat``: row-major rotation, local -> world)."""
    return (mat[0] * v[0] + mat[3] * v[1] + mat[6] * v[2],
            mat[1] * v[0] + mat[4] * v[1] + mat[7] * v[2],
            mat[2] * v[0] + mat[5] * v[1] + mat[8] * v[2])


def _clip(poly: list[Vec], normal: Vec, origin: Vec) -> list[Vec]:
    """The part of convex polygon ``poly`` where ``normal . (p - origin) >= 0``."""
    out: list[Vec] = []
    side = [_dot(normal, (p[0] - origin[0], p[1] - origin[1], p[2] - origin[2])) for p in poly]
    for i, p in enumerate(poly):
        j = (i + 1) % len(poly)
        if side[i] >= 0:
            out.append(p)
        if (side[i] >= 0) != (side[j] >= 0):
            t = side[i] / (side[i] - side[j])
            q = poly[j]
            out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1]),
                        p[2] + t * (q[2] - p[2])))
    return out


def _place(lo: int, hi: int, n: int, full: int) -> int:
    """Centre (cells) of a square of half-size ``n`` holding ``[lo, hi]`` inside ``full``."""
    centre = (lo + hi) // 2
    return min(max(centre, hi - n, -full + n), lo + n, full - n)


def visible_square(plane_pos: Sequence[float], plane_mat: Sequence[float],
                   cam_pos: Vec, forward: Vec, up: Vec, frustum: tuple[float, float, float,
                                                                       float, float],
                   aspect: float, cell: float, full: int, sizes: Sequence[int]
                   ) -> tuple[int, int, int] | None:
    """The square to draw for one camera: ``(n, cx, cy)``, or None for the full square.

    Args:
        plane_pos: The plane geom's position in the scene (world, metres).
        plane_mat: Its rotation, row-major 3x3 (plane frame -> world), 9 numbers.
        cam_pos: The camera's position (world).
        forward: Its unit viewing direction (world).
        up: Its unit up direction (world).
        frustum: ``(near, bottom, top, center, width)`` of ``mjvGLCamera`` (``width``
            0: matched to ``aspect``).
        aspect: Viewport width / height.
        cell: The grid's cell size (metres).
        full: Half-size of the drawn floor in cells (``K``).
        sizes: The prepared half-sizes (cells), ascending, all below ``full``.

    Returns:
        ``n`` (one of ``sizes``) and the square's centre ``(cx, cy)`` in whole cells of
        the plane frame, with ``|cx| + n <= full`` and ``|cy| + n <= full``; None when
        no prepared square holds the visible cells or the camera is not above the plane
        (then the full square is drawn).
    """
    rel = (cam_pos[0] - plane_pos[0], cam_pos[1] - plane_pos[1], cam_pos[2] - plane_pos[2])
    eye = _to_plane(plane_mat, rel)
    if eye[2] <= 0.0:
        return None
    f, u = _to_plane(plane_mat, forward), _to_plane(plane_mat, up)
    r = _cross(f, u)
    near, bottom, top, center, width = frustum
    half_w = width if width else 0.5 * aspect * (top - bottom)
    mid_y = 0.5 * (top + bottom)
    x0, x1 = center + SLACK * -half_w, center + SLACK * half_w
    y0, y1 = mid_y + SLACK * (bottom - mid_y), mid_y + SLACK * (top - mid_y)

    def ray(x: float, y: float) -> Vec:
        return (f[0] * near + r[0] * x + u[0] * y, f[1] * near + r[1] * x + u[1] * y,
                f[2] * near + r[2] * x + u[2] * y)

    corners = [ray(x0, y0), ray(x1, y0), ray(x1, y1), ray(x0, y1)]
    inside = ray(center, mid_y)
    half = full * cell
    poly: list[Vec] = [(-half, -half, 0.0), (half, -half, 0.0), (half, half, 0.0),
                       (-half, half, 0.0)]
    for k in range(4):
        normal = _cross(corners[k], corners[(k + 1) % 4])
        if _dot(normal, inside) < 0:
            normal = (-normal[0], -normal[1], -normal[2])
        poly = _clip(poly, normal, eye)
        if not poly:
            return sizes[0], 0, 0  # no floor in view: the smallest square, anywhere
    xs, ys = [p[0] / cell for p in poly], [p[1] / cell for p in poly]
    lo_x = max(math.floor(min(xs)) - MARGIN, -full)
    hi_x = min(math.ceil(max(xs)) + MARGIN, full)
    lo_y = max(math.floor(min(ys)) - MARGIN, -full)
    hi_y = min(math.ceil(max(ys)) + MARGIN, full)
    need = max(hi_x - lo_x, hi_y - lo_y)
    for n in sizes:
        if 2 * n >= need:
            return n, _place(lo_x, hi_x, n, full), _place(lo_y, hi_y, n, full)
    return None
