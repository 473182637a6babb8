"""Anchor candidacy: which anchor centres may be assigned to which GT box (TAL and STAL).

TAL makes an anchor a candidate for a GT when the anchor centre lies inside the
GT box, edges inclusive. Small-target-aware assignment (STAL, YOLO26) widens
only this candidacy test: every GT side shorter than ``min_side`` px is
replaced by ``surrogate_side`` px around the same centre, so a 6 x 6 px object
between stride-8 anchor centres still gets candidates. Scores, IoU, targets and
weights keep using the original box.
"""

from __future__ import annotations

import torch
from torch import Tensor


def stal_candidacy_boxes(
    boxes: Tensor, min_side: float = 8.0, surrogate_side: float = 16.0
) -> Tensor:
    """Replace each side shorter than ``min_side`` by ``surrogate_side`` around the box centre.

    Sides are treated independently: a 6 x 20 px box becomes 16 x 20 px.

    Args:
        boxes: ``(..., 4)`` xyxy px.
        min_side: sides strictly shorter than this are widened.
        surrogate_side: the side length that replaces a short side.

    Returns:
        ``(..., 4)`` xyxy px boxes used only for candidacy.
    """
    centre = (boxes[..., :2] + boxes[..., 2:]) / 2  # (..., 2) as (cx, cy)
    size = boxes[..., 2:] - boxes[..., :2]  # (..., 2) as (w, h)
    size = torch.where(size < min_side, torch.full_like(size, surrogate_side), size)
    return torch.cat((centre - size / 2, centre + size / 2), dim=-1)


def anchors_in_boxes(anchors: Tensor, boxes: Tensor) -> Tensor:
    """Whether each anchor centre lies inside each box, edges inclusive.

    Args:
        anchors: ``(A, 2)`` centres ``(x, y)`` px.
        boxes: ``(B, M, 4)`` xyxy px.

    Returns:
        ``(B, M, A)`` bool.
    """
    ax = anchors[:, 0].view(1, 1, -1)  # (1, 1, A)
    ay = anchors[:, 1].view(1, 1, -1)
    x1, y1, x2, y2 = (boxes[..., i : i + 1] for i in range(4))  # each (B, M, 1)
    return (ax >= x1) & (ax <= x2) & (ay >= y1) & (ay <= y2)
