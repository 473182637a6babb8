"""Rasterise ragged polygon rings onto regular sample grids, fully vectorised in torch.

The training losses of instance segmentation need ground-truth masks sampled at
given points (a ``crop x crop`` grid over every GT box, the stride-8 semantic
grid). They are built here straight from the ragged rings the batch carries
(``poly_points``, ``poly_ring_lengths``, ...), never from dense full-image masks.

Sample grid of ring ``r``: sample ``(row i, col j)`` lies at
``origin[r] + ((j + 0.5) * step[r, 0], (i + 0.5) * step[r, 1])`` in the frame of the
points (``x, y``; ``step > 0``). With ``origin = 0, step = 1`` these are the pixel
centres of an image; with ``origin = (x1, y1), step = (w, h) / S`` they are the bin
centres of an ``S x S`` ROI over the box (what ``roi_align(aligned=True,
sampling_ratio=1)`` samples).

Inside test: the even-odd (crossing) rule on each ring alone; rings are closed
implicitly (the last point connects to the first). A target's value is the OR of
its rings (COCO multi-part instances). Rings with fewer than 3 points or zero
area give nothing.

Algorithm (no Python loop over rings, edges or rows):

1. every ring is moved into its own grid frame ``g = (p - origin) / step - 0.5``,
   where sample ``(i, j)`` sits at the integer point ``(j, i)``;
2. every edge is intersected with every sample row ``v = i`` (half-open rule:
   an edge crosses row ``i`` when ``min(v0, v1) <= i < max(v0, v1)``, so a vertex
   on a row is counted once and horizontal edges never);
3. each crossing at ``u = xc`` adds 1 at column ``floor(xc) + 1`` (the first sample
   strictly right of it) of a ``(R, H, W + 1)`` counter (column ``W`` collects
   crossings right of the grid); a cumulative sum along the row then counts, for
   every sample, the crossings left of it, and its parity is the inside bit;
4. the per-ring bits are OR-ed into their targets with an ``index_add``.

Memory: ``O(E * H + R * H * W)`` for ``E`` edges (= points), ``R`` rings and an
``H x W`` grid, whatever the size of the frame the points live in.
"""

from __future__ import annotations

import torch
from torch import Tensor

_FLAT_EPS = 1e-6
"""A ring whose |area| is below this fraction of its squared extent (grid units) is
degenerate (collinear points): float rounding could otherwise leave stray samples."""


def rasterize_rings(
    points: Tensor,
    ring_lengths: Tensor,
    ring_target: Tensor,
    num_targets: int,
    origin: Tensor,
    step: Tensor,
    height: int,
    width: int,
) -> Tensor:
    """Even-odd rasterisation of rings at per-ring sample grids, OR-ed per target.

    Args:
        points: ``(P, 2)`` float ``x, y`` of all rings, concatenated ring after ring.
        ring_lengths: ``(R,)`` int points per ring (sums to ``P``).
        ring_target: ``(R,)`` long target in ``[0, num_targets)`` each ring belongs to.
        num_targets: ``T``, the number of output masks.
        origin: ``(R, 2)`` float ``x, y`` of each ring's grid origin, in the points' frame.
        step: ``(R, 2)`` float ``x, y`` spacing (> 0) of each ring's samples.
        height: ``H`` rows of samples.
        width: ``W`` columns of samples.

    Returns:
        ``(T, H, W)`` bool on the device of ``points``: sample ``(t, i, j)`` is True when
        it is inside at least one ring of target ``t`` (all False with no rings).
    """
    device = points.device
    num_rings = int(ring_lengths.shape[0])
    out = torch.zeros((num_targets, height * width), dtype=torch.int32, device=device)
    if num_rings == 0 or points.shape[0] == 0 or height == 0 or width == 0:
        return out.view(num_targets, height, width).bool()

    lengths = ring_lengths.to(device=device, dtype=torch.long)
    ring_of_point = torch.repeat_interleave(
        torch.arange(num_rings, device=device), lengths, output_size=points.shape[0]
    )  # (P,)
    start = torch.cumsum(lengths, 0) - lengths  # (R,) first point of each ring
    index = torch.arange(points.shape[0], device=device)
    nxt = index + 1
    nxt = torch.where(nxt == (start + lengths)[ring_of_point], start[ring_of_point], nxt)  # closes the ring

    # 1. grid frame of the owning ring: sample (i, j) at the integer point (j, i).
    grid = (points.float() - origin.float()[ring_of_point]) / step.float()[ring_of_point] - 0.5  # (P, 2)
    a, b = grid, grid[nxt]  # each edge a -> b, (E, 2) with E = P

    keep_ring = _solid_rings(grid, a, b, ring_of_point, lengths, start)  # (R,)
    keep_edge = keep_ring[ring_of_point]  # (E,)

    # 2. crossings of every edge with every sample row. The endpoints are ordered
    # by v so the two directions of one segment give bit-identical crossings.
    swap = b[:, 1] < a[:, 1]
    lo = torch.where(swap[:, None], b, a)
    hi = torch.where(swap[:, None], a, b)
    dv = hi[:, 1] - lo[:, 1]
    slope = torch.where(dv > 0, (hi[:, 0] - lo[:, 0]) / dv.clamp(min=1e-30), torch.zeros_like(dv))
    rows = torch.arange(height, device=device, dtype=grid.dtype)  # (H,)
    crosses = (lo[:, 1:2] <= rows) & (rows < hi[:, 1:2]) & keep_edge[:, None]  # (E, H)
    xc = lo[:, 0:1] + (rows - lo[:, 1:2]) * slope[:, None]  # (E, H)

    # 3. +1 at the first sample strictly right of each crossing; cumsum; parity.
    col = (torch.floor(xc.clamp(-1.0, float(width))) + 1).long().clamp(0, width)  # (E, H)
    flat = (ring_of_point[:, None] * height + rows.long()) * (width + 1) + col
    counter = torch.zeros(num_rings * height * (width + 1), dtype=torch.int32, device=device)
    counter.scatter_add_(0, flat.reshape(-1), crosses.reshape(-1).to(torch.int32))
    left = counter.view(num_rings, height, width + 1)[..., :width].cumsum(-1, dtype=torch.int32)
    inside = (left & 1).view(num_rings, height * width)  # (R, H*W) 0/1

    # 4. union by target.
    out.index_add_(0, ring_target.to(device=device, dtype=torch.long), inside)
    return (out > 0).view(num_targets, height, width)


def _solid_rings(
    grid: Tensor, a: Tensor, b: Tensor, ring_of_point: Tensor, lengths: Tensor, start: Tensor
) -> Tensor:
    """``(R,)`` bool: the ring has at least 3 points and a non-zero area (relative to its extent)."""
    num_rings = lengths.shape[0]
    # Shoelace about each ring's first point (smaller products, less cancellation).
    base = grid[start.clamp(max=grid.shape[0] - 1)][ring_of_point]
    pa, pb = a - base, b - base
    cross = pa[:, 0] * pb[:, 1] - pa[:, 1] * pb[:, 0]
    twice_area = torch.zeros(num_rings, dtype=grid.dtype, device=grid.device).index_add_(0, ring_of_point, cross)
    # Squared extent: the largest squared distance of a point from the first one.
    extent = torch.zeros(num_rings, dtype=grid.dtype, device=grid.device).scatter_reduce_(
        0, ring_of_point, (pa * pa).sum(-1), reduce="amax", include_self=True
    )
    return (lengths >= 3) & (twice_area.abs() > _FLAT_EPS * extent)
