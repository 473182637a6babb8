"""Rotated boxes from the head's raw outputs, in torch (the training and deployed path).

A rotated prediction is the axis-aligned ltrb of detection measured in the
box's own frame plus one angle per anchor:

- ``theta = raw_angle`` in radians, unbounded: the published YOLO26 layout's
  angle (its weights decode so; docs/decisions/obb.md). The angle term's
  ``sin^2(2 d)`` is periodic, so an unbounded angle costs nothing in training;
- ``w = (l + r) * s`` and ``h = (t + b) * s``; the centre is the anchor plus
  the ltrb offset ``((r - l) / 2, (b - t) / 2) * s`` turned by ``theta`` (the
  four distances are the box's, not the image's);
- the result is brought to long-edge form (``w >= h``, ``theta`` in
  ``[-pi/4, 3pi/4)``) with :func:`canonicalize_rboxes`, the torch twin of
  :func:`lucidyolo.structures.geometry.canonicalize_rboxes`.

Angle convention as in :mod:`lucidyolo.structures.geometry`: ``theta`` is the
direction of the ``w`` side from +x towards +y (image coordinates).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

THETA_LO = -math.pi / 4
"""Lower bound of the canonical angle range ``[-pi/4, 3pi/4)``."""


def raw_to_angle(raw: Tensor) -> Tensor:
    """``(..., 1)`` raw angle -> ``(..., 1)`` radians: the head predicts the angle itself (the published layout)."""
    return raw


def canonicalize_rboxes(rboxes: Tensor) -> Tensor:
    """``(..., 5)`` ``[cx, cy, w, h, theta]`` -> the same boxes with ``w >= h`` and ``theta`` in ``[-pi/4, 3pi/4)``.

    Differentiable almost everywhere: a swap is a permutation plus a constant.
    """
    cx, cy, w, h, theta = rboxes.unbind(-1)
    swap = w < h
    w2 = torch.where(swap, h, w)
    h2 = torch.where(swap, w, h)
    theta = theta + swap.to(theta.dtype) * (math.pi / 2)
    theta = torch.remainder(theta - THETA_LO, math.pi) + THETA_LO
    return torch.stack((cx, cy, w2, h2, theta), dim=-1)


def ltrb_angle_to_rbox(raw_ltrb: Tensor, raw_angle: Tensor, anchors: Tensor, strides: Tensor) -> Tensor:
    """Decode rotated boxes.

    Args:
        raw_ltrb: ``(B, A, 4)`` raw ``l, t, r, b`` in stride units (the box frame).
        raw_angle: ``(B, A, 1)`` raw angle (radians).
        anchors: ``(A, 2)`` anchor centres px.
        strides: ``(A,)`` anchor strides.

    Returns:
        ``(B, A, 5)`` canonical ``[cx, cy, w, h, theta]`` px / radians.
    """
    s = strides.view(1, -1, 1)
    lt, rb = (raw_ltrb * s).split(2, dim=-1)  # (B, A, 2) each
    theta = raw_to_angle(raw_angle)  # (B, A, 1)
    wh = lt + rb
    off = (rb - lt) / 2  # (B, A, 2) centre offset in the box frame
    cos, sin = theta.cos(), theta.sin()
    dx = off[..., :1] * cos - off[..., 1:] * sin
    dy = off[..., :1] * sin + off[..., 1:] * cos
    centre = anchors.unsqueeze(0) + torch.cat((dx, dy), dim=-1)
    return canonicalize_rboxes(torch.cat((centre, wh, theta), dim=-1))


def rboxes_to_xyxy(rboxes: Tensor) -> Tensor:
    """``(..., 5)`` rotated boxes -> ``(..., 4)`` enclosing axis-aligned ``xyxy``."""
    cx, cy, w, h, theta = rboxes.unbind(-1)
    cos, sin = theta.cos().abs(), theta.sin().abs()
    half_w = (w * cos + h * sin) / 2
    half_h = (w * sin + h * cos) / 2
    return torch.stack((cx - half_w, cy - half_h, cx + half_w, cy + half_h), dim=-1)
