"""Numpy geometry for targets: rotated boxes, corner polygons, masks.

Rotated-box convention (see docs/ARCHITECTURE.md): ``(cx, cy, w, h, theta)``
in pixels, ``theta`` in radians is the direction of the ``w`` side measured
from the +x axis towards +y (image coordinates, y down, so a positive angle
turns clockwise on screen). Long-edge canonical form: ``w >= h`` and ``theta``
in ``[-pi/4, 3pi/4)``.

Numpy (and pycocotools for rasterising) only: this module must import without
torch.
"""

from __future__ import annotations

import numpy as np

from lucidyolo.structures.polygons import Polygons

_THETA_LO = -np.pi / 4
_THETA_PERIOD = np.pi


def canonicalize_rboxes(rboxes: np.ndarray) -> np.ndarray:
    """Bring rotated boxes to long-edge canonical form.

    A box with ``w < h`` is the same box as ``(h, w, theta + pi/2)``; a box is
    also unchanged by ``theta + pi``. So: swap sides where needed, then wrap
    theta into ``[-pi/4, 3pi/4)``.

    Args:
        rboxes: ``(N, 5)`` ``cx, cy, w, h, theta``.

    Returns:
        ``(N, 5)`` float32 canonical copy.
    """
    rb = np.array(rboxes, dtype=np.float64).reshape(-1, 5)
    swap = rb[:, 2] < rb[:, 3]
    w = np.where(swap, rb[:, 3], rb[:, 2])
    h = np.where(swap, rb[:, 2], rb[:, 3])
    theta = rb[:, 4] + np.where(swap, np.pi / 2, 0.0)
    theta = np.mod(theta - _THETA_LO, _THETA_PERIOD) + _THETA_LO
    # Float rounding of mod can land exactly on the open upper bound.
    theta = np.where(theta >= _THETA_LO + _THETA_PERIOD, _THETA_LO, theta)
    return np.stack([rb[:, 0], rb[:, 1], w, h, theta], axis=1).astype(np.float32)


def rbox_to_corners(rboxes: np.ndarray) -> np.ndarray:
    """Four corners of each rotated box.

    Corner order is the box's own top-left, top-right, bottom-right,
    bottom-left (at ``theta = 0`` these are the image-frame ones).

    Args:
        rboxes: ``(N, 5)`` ``cx, cy, w, h, theta``.

    Returns:
        ``(N, 4, 2)`` float32 corner coordinates in pixels.
    """
    rb = np.asarray(rboxes, dtype=np.float64).reshape(-1, 5)
    c, s = np.cos(rb[:, 4]), np.sin(rb[:, 4])
    half = np.array([[-0.5, -0.5], [0.5, -0.5], [0.5, 0.5], [-0.5, 0.5]])  # (4, 2)
    lx = half[None, :, 0] * rb[:, None, 2]  # (N, 4) along the w side
    ly = half[None, :, 1] * rb[:, None, 3]  # (N, 4) along the h side
    x = rb[:, None, 0] + lx * c[:, None] - ly * s[:, None]
    y = rb[:, None, 1] + lx * s[:, None] + ly * c[:, None]
    return np.stack([x, y], axis=-1).astype(np.float32)


def corners_to_rbox(corners: np.ndarray) -> np.ndarray:
    """Minimum-area rotated rectangle around each 4-point polygon, canonical.

    The minimum-area enclosing rectangle has a side along an edge of the convex
    hull; the hull edges of 4 points are among their 6 pairwise directions, so
    all 6 are tried at once and the smallest area wins. Exact for rectangles,
    the best rectangle fit for the slightly skewed quads DOTA annotators draw.

    Args:
        corners: ``(N, 4, 2)`` (or ``(N, 8)``) points in pixels.

    Returns:
        ``(N, 5)`` float32 canonical ``cx, cy, w, h, theta``.
    """
    pts = np.asarray(corners, dtype=np.float64).reshape(-1, 4, 2)
    n = pts.shape[0]
    if n == 0:
        return np.zeros((0, 5), np.float32)
    ii, jj = np.triu_indices(4, k=1)  # 6 pairs
    d = pts[:, jj] - pts[:, ii]  # (N, 6, 2)
    ang = np.arctan2(d[..., 1], d[..., 0])  # (N, 6)
    u = np.stack([np.cos(ang), np.sin(ang)], -1)  # (N, 6, 2) axis along the edge
    v = np.stack([-np.sin(ang), np.cos(ang)], -1)  # (N, 6, 2) perpendicular
    pu = np.einsum("npk,nek->nep", pts, u)  # (N, 6, 4) projections
    pv = np.einsum("npk,nek->nep", pts, v)
    w = pu.max(-1) - pu.min(-1)
    h = pv.max(-1) - pv.min(-1)
    area = w * h
    # Degenerate pairs (coincident points) give arbitrary angles but never a
    # smaller area than a real hull edge, so argmin stays correct.
    best = np.argmin(area, axis=1)
    r = np.arange(n)
    mu = 0.5 * (pu.max(-1) + pu.min(-1))[r, best]
    mv = 0.5 * (pv.max(-1) + pv.min(-1))[r, best]
    ub, vb = u[r, best], v[r, best]
    cx = mu * ub[:, 0] + mv * vb[:, 0]
    cy = mu * ub[:, 1] + mv * vb[:, 1]
    out = np.stack([cx, cy, w[r, best], h[r, best], ang[r, best]], axis=1)
    return canonicalize_rboxes(out)


def rboxes_to_xyxy(rboxes: np.ndarray) -> np.ndarray:
    """Axis-aligned box enclosing each rotated box: ``(N, 5)`` -> ``(N, 4)`` float32."""
    c = rbox_to_corners(rboxes)
    return np.concatenate([c.min(1), c.max(1)], axis=1).astype(np.float32)


def corners_to_xyxy(corners: np.ndarray) -> np.ndarray:
    """Axis-aligned box enclosing each polygon: ``(N, K, 2)`` -> ``(N, 4)`` float32."""
    c = np.asarray(corners, dtype=np.float32)
    if c.shape[0] == 0:
        return np.zeros((0, 4), np.float32)
    return np.concatenate([c.min(1), c.max(1)], axis=1)


def polygons_to_xyxy(polygons: Polygons, num_instances: int) -> np.ndarray:
    """Enclosing box of all rings of each instance.

    Args:
        polygons: rings with owners in ``[0, num_instances)``.
        num_instances: N.

    Returns:
        ``(N, 4)`` float32 xyxy; instances without rings get zeros.
    """
    out = np.zeros((num_instances, 4), np.float32)
    if polygons.points.shape[0] == 0:
        return out
    owner = polygons.point_owner()
    lo = np.full((num_instances, 2), np.inf, np.float32)
    hi = np.full((num_instances, 2), -np.inf, np.float32)
    np.minimum.at(lo, owner, polygons.points)
    np.maximum.at(hi, owner, polygons.points)
    has = np.isfinite(lo[:, 0])
    out[has] = np.concatenate([lo[has], hi[has]], axis=1)
    return out


def polygon_areas(polygons: Polygons) -> np.ndarray:
    """Shoelace area of every ring: ``(R,)`` float64 (absolute value)."""
    if polygons.num_rings == 0:
        return np.zeros(0)
    p = polygons.points.astype(np.float64)
    lengths = polygons.ring_lengths()
    starts = polygons.ring_offsets[:-1]
    # Successor of each point within its own ring (wraps to the ring start).
    idx = np.arange(p.shape[0])
    nxt = idx + 1
    ends = polygons.ring_offsets[1:]
    ring_of_point = np.repeat(np.arange(polygons.num_rings), lengths)
    nxt = np.where(nxt == ends[ring_of_point], starts[ring_of_point], nxt)
    cross = p[:, 0] * p[nxt, 1] - p[nxt, 0] * p[:, 1]
    areas = np.zeros(polygons.num_rings)
    np.add.at(areas, ring_of_point, cross)
    return np.abs(areas) * 0.5


def polygons_to_masks(polygons: Polygons, num_instances: int, height: int, width: int) -> np.ndarray:
    """Rasterise each instance's rings (union) into a binary mask.

    Uses pycocotools' polygon rasteriser, so masks match COCO evaluation.
    Rings with fewer than 3 points cover no area and are skipped.

    Args:
        polygons: rings with owners in ``[0, num_instances)``, pixel coordinates.
        num_instances: N.
        height: mask height H.
        width: mask width W.

    Returns:
        ``(N, H, W)`` uint8 in ``{0, 1}``.
    """
    from pycocotools import mask as mask_utils

    masks = np.zeros((num_instances, height, width), np.uint8)
    lengths = polygons.ring_lengths()
    valid = np.flatnonzero(lengths >= 3)
    if valid.size == 0 or num_instances == 0:
        return masks
    # pycocotools reads a 4-number list as a box, so rings need >= 3 points
    # (6 numbers); a triangle is 6 numbers, which is fine.
    rings = [polygons.ring(r).astype(np.float64).reshape(-1).tolist() for r in valid]
    rles = mask_utils.frPyObjects(rings, height, width)
    decoded = mask_utils.decode(rles)  # (H, W, R') Fortran order
    decoded = np.moveaxis(decoded, -1, 0)  # (R', H, W)
    owners = polygons.ring_owner[valid]
    order = np.argsort(owners, kind="stable")
    owners = owners[order]
    decoded = decoded[order]
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
    masks[owners[starts]] = np.maximum.reduceat(decoded, starts, axis=0)
    return masks


def corners_to_polygons(corners: np.ndarray) -> Polygons:
    """One ring per instance from ``(N, K, 2)`` corner arrays (e.g. rbox corners)."""
    c = np.asarray(corners, dtype=np.float32)
    n, k = c.shape[0], c.shape[1] if c.ndim == 3 else 0
    return Polygons(
        c.reshape(-1, 2),
        np.arange(n + 1, dtype=np.int64) * k,
        np.arange(n, dtype=np.int64),
    )


def hflip_rboxes(rboxes: np.ndarray, width: float) -> np.ndarray:
    """Mirror rotated boxes about the vertical centre line and re-canonicalise.

    ``x' = width - x``: the data spec's ``(W - 1) - x`` written for continuous
    coordinates (pixel ``i`` spans ``[i, i + 1)``). Mirroring negates the
    angle; negating alone can leave theta outside ``[-pi/4, 3pi/4)``, hence the
    canonicalisation.

    Args:
        rboxes: ``(N, 5)`` canonical rotated boxes.
        width: image width W in pixels.

    Returns:
        ``(N, 5)`` float32 canonical mirrored boxes.
    """
    rb = np.array(rboxes, dtype=np.float64).reshape(-1, 5)
    rb[:, 0] = width - rb[:, 0]
    rb[:, 4] = -rb[:, 4]
    return canonicalize_rboxes(rb)


def min_area_rboxes_of_polygons(polygons: Polygons, num_instances: int) -> np.ndarray:
    """Canonical minimum-area rotated rectangle of each instance's points.

    Used to turn clipped or annotated polygons (any point count) into rboxes.
    Instances with exactly 4 points go through :func:`corners_to_rbox` in one
    vectorised call; others use the convex hull (shapely).

    Returns:
        ``(N, 5)`` float32; instances without points get zeros.
    """
    out = np.zeros((num_instances, 5), np.float32)
    if polygons.points.shape[0] == 0 or num_instances == 0:
        return out
    owner = polygons.point_owner()
    counts = np.bincount(owner, minlength=num_instances)
    order = np.argsort(owner, kind="stable")
    pts = polygons.points[order]
    starts = np.concatenate([[0], np.cumsum(counts)])
    four = np.flatnonzero(counts == 4)
    if four.size:
        idx = starts[four][:, None] + np.arange(4)[None, :]
        out[four] = corners_to_rbox(pts[idx])
    other = np.flatnonzero((counts > 0) & (counts != 4))
    if other.size:
        import shapely

        for i in other:  # rare path (clipped polygons); hull per instance
            p = pts[starts[i] : starts[i + 1]]
            rect = shapely.minimum_rotated_rectangle(shapely.MultiPoint(p.astype(np.float64)))
            coords = np.asarray(shapely.get_coordinates(rect))
            if coords.shape[0] >= 5:
                out[i] = corners_to_rbox(coords[:4][None])[0]
            else:  # degenerate (collinear points): a zero-height box along the segment
                a, b = p.min(0), p.max(0)
                out[i] = canonicalize_rboxes(
                    np.array([[*(a + b) / 2, np.hypot(*(b - a)), 0.0, np.arctan2(*(b - a)[::-1])]])
                )[0]
    return out


def affine_points(points: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Points ``(..., 2)`` float32 under the ``2 x 3`` affine matrix ``m``: ``p' = m[:, :2] @ p + m[:, 2]``.

    Computed per coordinate in float32 (``x * m00 + y * m01 + m02``), so an
    isotropic map gives exactly ``x * s + tx``: the off-diagonal products are
    zeros, and skipping them keeps the rounding of the plain scale-and-shift.
    """
    pts = np.asarray(points, np.float32)
    x, y = pts[..., 0], pts[..., 1]
    (a, b, c), (d, e, f) = (float(v) for v in m[0]), (float(v) for v in m[1])
    out = np.empty_like(pts)
    out[..., 0] = x * a + c if b == 0.0 else x * a + y * b + c
    out[..., 1] = y * e + f if d == 0.0 else x * d + y * e + f
    return out


def similarity_of(m: np.ndarray) -> tuple[float, float]:
    """``(scale, turn)`` of a ``2 x 3`` affine that is a similarity (isotropic scale, rotation, shift).

    ``turn`` is the rotation in radians (positive turns clockwise on screen, as
    ``theta``). Shapes with an orientation (rotated boxes) can follow only such maps.

    Raises:
        ValueError: ``m`` shears, scales unequally or mirrors.
    """
    (a, b, _), (d, e, _) = m
    scale = float(np.hypot(a, d))
    if scale <= 0 or not (np.isclose(a, e, atol=1e-9 * scale) and np.isclose(b, -d, atol=1e-9 * scale)):
        raise ValueError(f"a rotated box cannot follow the affine map {np.asarray(m).tolist()} (not a similarity)")
    return scale, float(np.arctan2(d, a))
