"""Anchor grid and the DFL-free box coder shared by the model, assigners, losses and decoders.

Anchor centres sit at ``(i + 0.5) * stride``, row-major, level by level (8400
anchors at 640 px for strides 8, 16, 32). Each anchor regresses four raw,
unbounded distances ``l, t, r, b`` in stride units.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor


def make_anchors(
    feature_sizes: Sequence[tuple[int, int]],
    strides: Sequence[int],
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    """Anchor centres and strides for a pyramid.

    Args:
        feature_sizes: ``(h, w)`` of each level's feature map.
        strides: stride of each level in input pixels.

    Returns:
        anchors: ``(A, 2)`` centres ``(x, y)`` in input pixels.
        anchor_strides: ``(A,)`` stride of each anchor.
    """
    points, stride_list = [], []
    for (h, w), s in zip(feature_sizes, strides, strict=True):
        ys = (torch.arange(h, dtype=dtype, device=device) + 0.5) * s
        xs = (torch.arange(w, dtype=dtype, device=device) + 0.5) * s
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        points.append(torch.stack((gx, gy), dim=-1).reshape(-1, 2))  # (h*w, 2), row-major
        stride_list.append(torch.full((h * w,), float(s), dtype=dtype, device=device))
    return torch.cat(points), torch.cat(stride_list)


def ltrb_to_xyxy(raw: Tensor, anchors: Tensor, strides: Tensor) -> Tensor:
    """Decode raw distances to boxes: ``x1 = ax - l*s, y1 = ay - t*s, x2 = ax + r*s, y2 = ay + b*s``.

    Args:
        raw: ``(..., A, 4)`` raw ``l, t, r, b`` in stride units.
        anchors: ``(A, 2)`` centres in pixels.
        strides: ``(A,)`` strides.

    Returns:
        ``(..., A, 4)`` boxes ``x1, y1, x2, y2`` in pixels.
    """
    s = strides.unsqueeze(-1)  # (A, 1)
    lt = anchors - raw[..., :2] * s
    rb = anchors + raw[..., 2:] * s
    return torch.cat((lt, rb), dim=-1)


def xyxy_to_ltrb(boxes: Tensor, anchors: Tensor, strides: Tensor) -> Tensor:
    """Inverse of :func:`ltrb_to_xyxy`: boxes ``(..., A, 4)`` to raw distances in stride units."""
    s = strides.unsqueeze(-1)
    lt = (anchors - boxes[..., :2]) / s
    rb = (boxes[..., 2:] - anchors) / s
    return torch.cat((lt, rb), dim=-1)


BoxDecoder = Callable[[Mapping[str, Tensor], Tensor, Tensor], Tensor]
"""``box_decoder(branch, anchors (A, 2), strides (A,)) -> (B, A, D)``: a task's box form from one branch's stems."""


def decode_xyxy(branch: Mapping[str, Tensor], anchors: Tensor, strides: Tensor) -> Tensor:
    """The default box form: ``xyxy`` px ``(B, A, 4)`` from the branch's raw ltrb ``boxes``."""
    return ltrb_to_xyxy(branch["boxes"], anchors, strides)
