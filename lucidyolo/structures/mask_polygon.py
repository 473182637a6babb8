"""One polygon for a binary mask: the outline a YOLO segmentation row can hold.

A YOLO segmentation row is one ring per instance, while a predicted mask may
have several parts; the row keeps the largest part (by area). Its outline runs
along pixel edges (:func:`~lucidyolo.structures.rle_polygons.mask_to_rings`, exact,
a staircase with a vertex at every step), then Douglas-Peucker simplification
within ``tolerance`` pixels drops the staircase's vertices: rasterised again,
the polygon differs from the mask only along its boundary.
"""

from __future__ import annotations

import numpy as np

SIMPLIFY_PX = 1.0
"""Douglas-Peucker tolerance in pixels: the staircase of a diagonal edge becomes one segment."""


def mask_polygon(mask: np.ndarray, tolerance: float = SIMPLIFY_PX) -> np.ndarray:
    """The outline of the largest part of ``mask``.

    Args:
        mask: ``(h, w)`` bool.
        tolerance: simplification tolerance in pixels (0 keeps every corner of the pixel staircase).

    Returns:
        ``(n, 2)`` float64 ``x, y`` pixel-edge coordinates, not closed, ``n >= 3``; ``(0, 2)`` for an empty mask.
    """
    import shapely

    from lucidyolo.structures.rle_polygons import mask_to_rings

    rings = mask_to_rings(mask)
    if not rings:
        return np.zeros((0, 2), np.float64)
    areas = [shapely.area(shapely.Polygon(r)) for r in rings]  # one per part: a mask has few
    ring = rings[int(np.argmax(areas))]  # (n, 2)
    if tolerance <= 0:
        return ring
    simple = shapely.simplify(shapely.Polygon(ring), tolerance, preserve_topology=True)
    xy = shapely.get_coordinates(shapely.get_exterior_ring(simple))[:-1]  # drop the closing repeat
    return np.ascontiguousarray(xy, np.float64) if len(xy) >= 3 else ring
