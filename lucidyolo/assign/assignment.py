"""The result of assigning ground-truth boxes to anchors, shared by every assigner and loss."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class Assignment(NamedTuple):
    """Per-anchor training targets for one head branch.

    Attributes:
        labels: ``(B, A)`` long, class index of the assigned GT, ``-1`` for background.
        boxes: ``(B, A, D)`` the assigned GT's box (xyxy px, ``D = 4``, for detection), zeros for background.
        weights: ``(B, A)`` soft target weight (normalised alignment), 0 for background.
        fg_mask: ``(B, A)`` bool, True where an anchor is a positive.
        gt_index: ``(B, A)`` long, index into the padded GT axis ``M``, ``-1`` for background:
            task losses gather their own targets (masks, angles, keypoints) with it.
    """

    labels: Tensor
    boxes: Tensor
    weights: Tensor
    fg_mask: Tensor
    gt_index: Tensor


def background_assignment(
    batch: int, num_anchors: int, dtype: torch.dtype, device: torch.device, box_dim: int = 4
) -> Assignment:
    """An assignment with every anchor background (no GT in the batch); ``boxes (B, A, box_dim)``."""
    return Assignment(
        labels=torch.full((batch, num_anchors), -1, dtype=torch.long, device=device),
        boxes=torch.zeros((batch, num_anchors, box_dim), dtype=dtype, device=device),
        weights=torch.zeros((batch, num_anchors), dtype=dtype, device=device),
        fg_mask=torch.zeros((batch, num_anchors), dtype=torch.bool, device=device),
        gt_index=torch.full((batch, num_anchors), -1, dtype=torch.long, device=device),
    )
