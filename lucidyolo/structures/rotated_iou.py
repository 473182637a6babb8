"""Exact IoU of rotated boxes, vectorised over pairs (torch).

Boxes are ``(..., 5)`` ``[cx, cy, w, h, theta]`` in pixels and radians, with the
corner convention of :func:`lucidyolo.structures.geometry.rbox_to_corners`
(``theta`` is the direction of the ``w`` side from +x towards +y).

Method. The intersection of two convex quadrilaterals A and B is a convex
polygon whose vertices are all among 24 candidate points: the 4 corners of A
that lie in B, the 4 corners of B that lie in A, and the 16 crossings of an
edge of A with an edge of B. Every valid candidate lies on the boundary of the
intersection, so sorting the valid ones by angle around their mean (a point
inside the polygon) gives the polygon in order and the shoelace formula gives
its area. All of it runs on fixed-size tensors with validity masks: no Python
loop over boxes or pairs, and no per-pair vertex count to carry around.

Degenerate geometry is handled by tolerances that are relative, so they cost
an IoU error of order ``1e-5`` at most, never a wrong answer, and no NaN:

* Corners exactly on the other box's boundary (identical boxes, shared edges,
  boxes that touch, theta differing by a multiple of pi/2) may round to just
  outside. The inside test allows ``1e-5`` of the box's own half-sizes, and an
  edge crossing is accepted ``1e-5`` of an edge length beyond the segment, so
  such a vertex is found either way. Duplicated candidates are harmless: they
  add zero-length edges to the shoelace sum.
* Parallel and near-parallel edge pairs give no crossing (a division by almost
  zero); their shared stretch is bounded by corners that are found as above.
* Boxes with ``w <= 0`` or ``h <= 0`` have no area and an IoU of 0 (an inverted
  raw regression counts as empty, as in :func:`~lucidyolo.structures.box_iou.box_iou`).

Precision. Each pair is computed in the frame of its smaller box (centred on
it, axes along its sides), the other box turned by the angle difference: boxes
of equal angle meet with exactly parallel edges, every coordinate is of the
order of the smaller box (which bounds the intersection), and the shoelace sum
runs around the intersection's own mean, so float32 keeps its digits far from
the image origin. Against shapely in float64 the IoU error is ~1e-6 on random
pairs; the float32 floor grows with elongation, about ``1e-7 * long / short``
side (3e-5 for a 200 x 0.5 px box). The compute dtype is float32 for float32
and lower-precision inputs (float64 only if the caller passes float64).

Cost. A pair whose enclosing circles do not meet has IoU 0 and skips the exact
computation; the others are processed in chunks so that intermediates stay
below a fixed budget whatever the broadcast shape.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# Relative tolerance of the inside test (of a box's half-sizes) and of the edge
# parameters (of an edge length): far above float32 rounding, far below any
# visible area.
_REL_TOL = 1e-5
# Edges whose directions differ by less than this sine are treated as parallel.
_PARALLEL_SIN = 1e-7
# Chunk sizes (pairs per step), per device kind. Small on CPU on purpose: an
# intermediate of more than about 1 MB is a fresh mmap for the allocator, and
# its page faults cost more than the arithmetic (a 4 MB elementwise op is ~10x
# slower per element than a 256 KB one). On an accelerator launches dominate,
# so steps are large. The prefilter holds a few floats per pair; the exact
# step ~3 KB per pair (24 candidate points): ~25 MB on CPU, ~200 MB otherwise.
_GATHER_CHUNK = {"cpu": 1 << 16, "other": 1 << 20}
_EXACT_CHUNK = {"cpu": 1 << 13, "other": 1 << 16}
# Unit-square corners in the order of geometry.rbox_to_corners.
_HALF = ((-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5))


def _chunk(sizes: dict[str, int], device: torch.device) -> int:
    return sizes["cpu" if device.type == "cpu" else "other"]


def _compute_dtype(*tensors: Tensor) -> torch.dtype:
    dtype = torch.float32
    for t in tensors:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


def _corners_from(centre: Tensor, wh: Tensor, theta: Tensor) -> Tensor:
    """``centre (..., 2)``, ``wh (..., 2)``, ``theta (...)`` -> corners ``(..., 4, 2)``."""
    half = centre.new_tensor(_HALF)  # (4, 2)
    lx = half[:, 0] * wh[..., 0, None]  # (..., 4) along the w side
    ly = half[:, 1] * wh[..., 1, None]  # (..., 4) along the h side
    c, s = torch.cos(theta)[..., None], torch.sin(theta)[..., None]
    x = centre[..., 0, None] + lx * c - ly * s
    y = centre[..., 1, None] + lx * s + ly * c
    return torch.stack((x, y), dim=-1)


def rbox_corners(rboxes: Tensor) -> Tensor:
    """Four corners of each rotated box, as :func:`~lucidyolo.structures.geometry.rbox_to_corners`.

    Corner order is the box's own top-left, top-right, bottom-right,
    bottom-left (at ``theta = 0`` these are the image-frame ones); in the
    mathematical (y-up) sense they run counter-clockwise for ``w, h > 0``.

    Args:
        rboxes: ``(..., 5)`` ``cx, cy, w, h, theta``.

    Returns:
        ``(..., 4, 2)`` corner coordinates, in the dtype of ``rboxes``.
    """
    return _corners_from(rboxes[..., 0:2], rboxes[..., 2:4], rboxes[..., 4])


def _cross(u: Tensor, v: Tensor) -> Tensor:
    """z-component of the 2-D cross product: ``(..., 2), (..., 2) -> (...)``."""
    return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]


def _intersection_area(a: Tensor, b: Tensor) -> Tensor:
    """Area of the intersection of each pair: ``a, b (P, 5)`` with ``w, h > 0`` -> ``(P,)``.

    Works in the frame of the smaller box ``R`` of each pair (its centre at the
    origin, its sides along the axes); the other box ``O`` is turned by the
    angle difference. Same-angle boxes thus meet with exactly parallel edges,
    and every coordinate is of the order of ``R``, which bounds the
    intersection, so float32 keeps its digits far from the image origin.
    """
    p = a.shape[0]
    a_ref = (a[:, 2] * a[:, 3] <= b[:, 2] * b[:, 3])[:, None]
    ref = torch.where(a_ref, a, b)
    oth = torch.where(a_ref, b, a)
    c, s = torch.cos(ref[:, 4]), torch.sin(ref[:, 4])
    dx, dy = oth[:, 0] - ref[:, 0], oth[:, 1] - ref[:, 1]
    centre = torch.stack((dx * c + dy * s, dy * c - dx * s), dim=1)  # O's centre in R's frame
    delta = oth[:, 4] - ref[:, 4]
    zero = torch.zeros_like(centre)
    pr = _corners_from(zero, ref[:, 2:4], torch.zeros_like(delta))  # (P, 4, 2) exact +-w/2, +-h/2
    po = _corners_from(centre, oth[:, 2:4], delta)
    # Inside tests, each in the box's own frame, with a slack relative to its half-sizes.
    lim_r = 0.5 * (1 + _REL_TOL) * ref[:, 2:4]
    in_o = (po.abs() <= lim_r[:, None]).all(-1)  # corners of O inside R, (P, 4)
    cd, sd = torch.cos(delta)[:, None], torch.sin(delta)[:, None]
    d = pr - centre[:, None]
    lx, ly = d[..., 0] * cd + d[..., 1] * sd, d[..., 1] * cd - d[..., 0] * sd
    lim_o = 0.5 * (1 + _REL_TOL) * oth[:, 2:4]
    in_r = (lx.abs() <= lim_o[:, None, 0]) & (ly.abs() <= lim_o[:, None, 1])  # (P, 4)

    # Crossings of edge i of R (pr_i + t e_i) with edge j of O (po_j + u f_j).
    e = (pr.roll(-1, dims=1) - pr)[:, :, None]  # (P, 4, 1, 2)
    f = (po.roll(-1, dims=1) - po)[:, None]  # (P, 1, 4, 2)
    qp = po[:, None] - pr[:, :, None]  # (P, 4, 4, 2)
    den = _cross(e, f)  # (P, 4, 4)
    with torch.no_grad():
        parallel = den.square() <= _PARALLEL_SIN**2 * e.square().sum(-1) * f.square().sum(-1)
    # A safe denominator keeps the discarded lanes finite (and their gradients).
    den = torch.where(parallel, torch.ones_like(den), den)
    t = _cross(qp, f) / den
    u = _cross(qp, e) / den
    lo, hi = -_REL_TOL, 1 + _REL_TOL
    hit = ~parallel & (t >= lo) & (t <= hi) & (u >= lo) & (u <= hi)
    cross_pts = pr[:, :, None] + t[..., None] * e  # (P, 4, 4, 2)

    pts = torch.cat((pr, po, cross_pts.reshape(p, 16, 2)), dim=1)  # (P, 24, 2)
    valid = torch.cat((in_r, in_o, hit.reshape(p, 16)), dim=1)  # (P, 24)
    pts = torch.where(valid[..., None], pts, torch.zeros_like(pts))
    count = valid.sum(1)  # (P,)
    mean = pts.sum(1) / count.clamp(min=1)[:, None].to(pts.dtype)  # inside the polygon
    rel = pts - mean[:, None]
    with torch.no_grad():  # the order is not differentiable; atan2 at (0, 0) would give NaN grads
        angle = torch.atan2(rel[..., 1], rel[..., 0]).masked_fill(~valid, 4.0)  # invalid last
        order = angle.argsort(dim=1)
        k = torch.arange(24, device=a.device)
        live = k < count[:, None]  # (P, 24) the first `count` sorted slots are the polygon
        nxt = torch.where(k + 1 < count[:, None], k + 1, torch.zeros_like(k))  # cyclic successor
    ring = rel.gather(1, order[..., None].expand(-1, -1, 2))  # (P, 24, 2) in angular order
    succ = ring.gather(1, nxt[..., None].expand(-1, -1, 2))
    area = 0.5 * (_cross(ring, succ) * live).sum(1)
    return torch.where(count >= 3, area, torch.zeros_like(area))


def _iou_flat(a: Tensor, b: Tensor) -> Tensor:
    """IoU of ``a, b (P, 5)`` pairs (compute dtype) -> ``(P,)``."""
    a = torch.cat((a[:, :2], a[:, 2:4].clamp(min=0), a[:, 4:5]), dim=1)
    b = torch.cat((b[:, :2], b[:, 2:4].clamp(min=0), b[:, 4:5]), dim=1)
    area_a, area_b = a[:, 2] * a[:, 3], b[:, 2] * b[:, 3]
    out = area_a.new_zeros(a.shape[0])
    with torch.no_grad():
        # Enclosing circles that do not meet: IoU 0, skip the exact polygon.
        ra = 0.5 * torch.hypot(a[:, 2], a[:, 3])
        rb = 0.5 * torch.hypot(b[:, 2], b[:, 3])
        d2 = (a[:, :2] - b[:, :2]).square().sum(1)
        near = (d2 <= ((ra + rb) * (1 + _REL_TOL)).square()) & (area_a > 0) & (area_b > 0)
        idx = near.nonzero().squeeze(1)
    step = _chunk(_EXACT_CHUNK, a.device)
    for start in range(0, idx.numel(), step):
        sel = idx[start : start + step]
        aa, ab = area_a[sel], area_b[sel]
        inter = _intersection_area(a[sel], b[sel])
        # Rounding can push a nested box's area a hair past the smaller box.
        inter = torch.minimum(inter.clamp(min=0), torch.minimum(aa, ab))
        union = aa + ab - inter
        iou = inter / torch.where(union > 0, union, torch.ones_like(union))
        out = out.index_put((sel,), iou.clamp(0, 1))
    return out


def rotated_iou_pairs(a: Tensor, b: Tensor) -> Tensor:
    """Exact IoU of rotated boxes, element-wise with broadcasting.

    Like :func:`~lucidyolo.structures.box_iou.box_iou`, a ``(B, M, A)`` table
    comes from ``(B, M, 1, 5)`` and ``(B, 1, A, 5)`` without copying the boxes:
    pairs are gathered from the broadcast in bounded chunks.

    Works under autograd (gradients flow through the polygon vertices; the
    vertex order and the validity masks are piecewise constant), but it is
    meant for assignment, NMS and evaluation under ``no_grad``.

    Args:
        a: ``(..., 5)`` ``cx, cy, w, h, theta``.
        b: ``(..., 5)`` broadcastable against ``a``.

    Returns:
        ``(...)`` IoU in ``[0, 1]``, the broadcast shape; float32 unless an
        input is float64.
    """
    dtype = _compute_dtype(a, b)
    shape = torch.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    a_e = a.to(dtype).expand(*shape, 5)
    b_e = b.to(dtype).expand(*shape, 5)
    n = math.prod(shape)
    step = _chunk(_GATHER_CHUNK, a.device)
    if n <= step:
        return _iou_flat(a_e.reshape(-1, 5), b_e.reshape(-1, 5)).reshape(shape)
    parts = []
    for start in range(0, n, step):
        flat = torch.arange(start, min(start + step, n), device=a.device)
        coords = torch.unravel_index(flat, shape)  # indexing the expanded views reads, never copies them
        parts.append(_iou_flat(a_e[coords], b_e[coords]))
    return torch.cat(parts).reshape(shape)


def rotated_iou_matrix(a: Tensor, b: Tensor) -> Tensor:
    """Exact IoU between every box of ``a`` and every box of ``b``.

    Memory stays bounded for any ``N x M``: pairs are processed in chunks
    (see :func:`rotated_iou_pairs`).

    Args:
        a: ``(N, 5)`` ``cx, cy, w, h, theta``.
        b: ``(M, 5)``.

    Returns:
        ``(N, M)`` IoU in ``[0, 1]``.
    """
    return rotated_iou_pairs(a[:, None, :], b[None, :, :])
