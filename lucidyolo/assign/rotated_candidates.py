"""Candidacy for rotated boxes: anchor centre inside the rotated rectangle, with the STAL side clamp.

The rotated analogue of :mod:`lucidyolo.assign.candidates`: an anchor is a
candidate for a GT when its centre, expressed in the box's own frame
(``u`` along the ``w`` side, ``v`` along the ``h`` side), satisfies
``|u| <= w/2`` and ``|v| <= h/2`` (edges inclusive). STAL replaces each
rotated side shorter than ``min_side`` by ``surrogate_side`` for this test only.
"""

from __future__ import annotations

import torch
from torch import Tensor


def anchors_in_rboxes(anchors: Tensor, rboxes: Tensor, min_side: float | None = 8.0,
                      surrogate_side: float = 16.0) -> Tensor:
    """Whether each anchor centre lies inside each (STAL-widened) rotated box.

    Args:
        anchors: ``(A, 2)`` centres ``(x, y)`` px.
        rboxes: ``(B, M, 5)`` ``[cx, cy, w, h, theta]``.
        min_side: rotated sides shorter than this are widened (``None``: plain candidacy).
        surrogate_side: the side that replaces a short one.

    Returns:
        ``(B, M, A)`` bool.
    """
    wh = rboxes[..., 2:4]
    if min_side is not None:
        wh = torch.where(wh < min_side, torch.full_like(wh, surrogate_side), wh)
    dx = anchors[:, 0].view(1, 1, -1) - rboxes[..., 0:1]  # (B, M, A)
    dy = anchors[:, 1].view(1, 1, -1) - rboxes[..., 1:2]
    cos, sin = rboxes[..., 4:5].cos(), rboxes[..., 4:5].sin()
    u = dx * cos + dy * sin
    v = -dx * sin + dy * cos
    # A hair of slack: anchors on an edge must stay inside after the rotation's rounding.
    slack = 1e-4
    return (u.abs() <= wh[..., 0:1] / 2 + slack) & (v.abs() <= wh[..., 1:2] / 2 + slack)


class RotatedCandidacy:
    """``candidacy(anchors, rboxes) -> (B, M, A)`` for :class:`~lucidyolo.assign.tal.TaskAlignedAssigner`."""

    def __init__(self, min_side: float | None = 8.0, surrogate_side: float = 16.0) -> None:
        self.min_side = min_side
        self.surrogate_side = surrogate_side

    def __call__(self, anchors: Tensor, rboxes: Tensor) -> Tensor:
        return anchors_in_rboxes(anchors, rboxes, self.min_side, self.surrogate_side)

    def __repr__(self) -> str:
        return f"RotatedCandidacy(min_side={self.min_side}, surrogate_side={self.surrogate_side})"
