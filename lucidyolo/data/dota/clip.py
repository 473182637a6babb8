"""Which objects a tile holds, and with which corners: the clipping rule (``U``).

Each object's 4-corner ring is intersected with the window box (shapely).
``U = clipped area / original area``:

* ``U == 0`` (no overlap, or only touching): not in this tile;
* ``U >= 0.7``: kept with its original 4 corners, which may reach a little
  past the tile edge;
* ``0 < U < 0.7``: kept, flagged ``difficult`` (most of the object is in
  another tile), and re-fitted: the clipped piece is replaced by the 4
  corners of its minimum-area rotated rectangle, those corners clamped to
  the window (the rectangle of a cut piece can poke past the cut line).

An object already difficult in the label stays difficult. Original rings of
zero area are dropped once per scene and counted.

A kept ring's COCO ``bbox`` and ``area`` are those of the ring clipped to the
tile (:func:`tile_annotations`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely
from shapely import polygons as make_polygons

from lucidyolo.data.dota.windows import Window

#: ``U`` below this keeps an object flagged difficult and re-fitted.
KEEP_AS_IS_U = 0.7


def object_polygons(corners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shapely polygons of the rings and their areas.

    Args:
        corners: ``(N, 4, 2)`` pixels.

    Returns:
        ``polys (N,)`` shapely Polygons, ``areas (N,)`` float64. A ring whose
        corners are listed in crossing (bow-tie) order is replaced by its
        convex hull, the quadrilateral the annotator meant; GEOS cannot
        intersect a self-crossing ring.
    """
    c = np.asarray(corners, np.float64).reshape(-1, 4, 2)
    polys = make_polygons(c)
    if len(polys):
        bad = ~shapely.is_valid(polys)
        if bad.any():
            polys[bad] = shapely.convex_hull(polys[bad])
    return polys, shapely.area(polys).astype(np.float64)


@dataclass
class ClippedObjects:
    """Objects of one window, in label order.

    Attributes:
        index: ``(M,)`` int64 rows of the scene's objects.
        rings: ``(M, 4, 2)`` float64 scene pixels (original or re-fitted corners).
        cut: ``(M,)`` bool, ``U < 0.7`` (flagged difficult and re-fitted).
        u: ``(M,)`` float64 kept fraction of each object's area.
    """

    index: np.ndarray
    rings: np.ndarray
    cut: np.ndarray
    u: np.ndarray


def clip_objects(corners: np.ndarray, polys: np.ndarray, areas: np.ndarray, window: Window) -> ClippedObjects:
    """Apply the clipping rule of the module docstring to one window.

    Args:
        corners: ``(N, 4, 2)`` scene pixels.
        polys, areas: from :func:`object_polygons`; objects with ``area <= 0``
            must already be removed.
        window: ``(x0, y0, x1, y1)``.
    """
    x0, y0, x1, y1 = window
    c = np.asarray(corners, np.float64).reshape(-1, 4, 2)
    lo, hi = c.min(1), c.max(1)
    # Box test first: a big scene has thousands of objects and hundreds of
    # windows, and most pairs are far apart. Strict inequalities: an object
    # that only touches the window has U == 0.
    near = (lo[:, 0] < x1) & (hi[:, 0] > x0) & (lo[:, 1] < y1) & (hi[:, 1] > y0)
    inside = near & (lo[:, 0] >= x0) & (hi[:, 0] <= x1) & (lo[:, 1] >= y0) & (hi[:, 1] <= y1)
    u = np.where(inside, 1.0, 0.0)
    part = np.flatnonzero(near & ~inside)
    pieces = np.empty(0, dtype=object)
    if len(part):
        pieces = shapely.intersection(polys[part], shapely.box(x0, y0, x1, y1))
        u[part] = shapely.area(pieces) / areas[part]
    keep = np.flatnonzero(u > 0)
    rings = c[keep].copy()
    cut = u[keep] < KEEP_AS_IS_U
    if cut.any():
        piece_of = dict(zip(part.tolist(), pieces, strict=True))
        bounds_lo, bounds_hi = np.array([x0, y0], np.float64), np.array([x1, y1], np.float64)
        for j in np.flatnonzero(cut):
            rect = shapely.minimum_rotated_rectangle(piece_of[int(keep[j])])
            xy = np.asarray(shapely.get_coordinates(rect), np.float64)
            if len(xy) < 4:  # a sliver GEOS collapses to a line: keep its clipped box instead
                bx0, by0, bx1, by1 = shapely.bounds(rect)
                xy = np.array([[bx0, by0], [bx1, by0], [bx1, by1], [bx0, by1]])
            rings[j] = np.clip(xy[:4], bounds_lo, bounds_hi)
    return ClippedObjects(index=keep.astype(np.int64), rings=rings, cut=cut, u=u[keep])


def tile_annotations(rings: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COCO ``bbox`` and ``area`` of tile-local rings clipped to the tile.

    Args:
        rings: ``(M, 4, 2)`` tile-local pixels (already rounded).
        width, height: the tile's size.

    Returns:
        ``bbox (M, 4)`` ``[x, y, w, h]``, ``area (M,)``, ``ok (M,)`` bool: the
        ring still has positive area inside the tile (a re-fitted sliver can
        collapse when clamped and rounded).
    """
    m = len(rings)
    if m == 0:
        return np.zeros((0, 4)), np.zeros(0), np.zeros(0, bool)
    polys, _ = object_polygons(rings)
    inter = shapely.intersection(polys, shapely.box(0, 0, width, height))
    b = shapely.bounds(inter)  # NaN for an empty intersection
    area = shapely.area(inter)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(b).all(1) & (area > 0) & (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
    bbox = np.stack([b[:, 0], b[:, 1], b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)
    return np.where(ok[:, None], bbox, 0.0), np.where(ok, area, 0.0), ok
