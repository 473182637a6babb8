"""Axis-aligned IoU and Complete-IoU (CIoU) for xyxy boxes, element-wise with broadcasting.

CIoU (Zheng et al., "Distance-IoU Loss", AAAI 2020) adds to IoU a centre-distance
penalty ``rho^2 / c^2`` (``c`` the diagonal of the smallest enclosing box) and an
aspect-ratio penalty ``alpha * v``. Both functions accept any broadcastable
leading shapes, so the assigner can form a ``(B, M, A)`` IoU table from
``(B, M, 1, 4)`` and ``(B, 1, A, 4)`` without copying boxes.

Box geometry shared by the assigners (IoU table) and the branch loss (CIoU):
it lives below both so neither imports the other for it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

CIOU_EPS = 1e-7


def box_iou(boxes1: Tensor, boxes2: Tensor, eps: float = CIOU_EPS) -> Tensor:
    """IoU of two sets of xyxy boxes, element-wise with broadcasting.

    Degenerate boxes (``x2 < x1``) count as empty; raw box regressions are
    unbounded, so an inverted prediction must score IoU 0, not a negative area.

    Args:
        boxes1: ``(..., 4)`` boxes ``x1, y1, x2, y2``.
        boxes2: ``(..., 4)`` boxes broadcastable against ``boxes1``.
        eps: added to the union so two empty boxes give 0, not NaN.

    Returns:
        ``(...)`` IoU in ``[0, 1]``.
    """
    w1 = (boxes1[..., 2] - boxes1[..., 0]).clamp(min=0)
    h1 = (boxes1[..., 3] - boxes1[..., 1]).clamp(min=0)
    w2 = (boxes2[..., 2] - boxes2[..., 0]).clamp(min=0)
    h2 = (boxes2[..., 3] - boxes2[..., 1]).clamp(min=0)
    iw = (
        torch.minimum(boxes1[..., 2], boxes2[..., 2])
        - torch.maximum(boxes1[..., 0], boxes2[..., 0])
    ).clamp(min=0)
    ih = (
        torch.minimum(boxes1[..., 3], boxes2[..., 3])
        - torch.maximum(boxes1[..., 1], boxes2[..., 1])
    ).clamp(min=0)
    inter = iw * ih
    union = w1 * h1 + w2 * h2 - inter + eps
    return inter / union


def box_ciou(pred: Tensor, target: Tensor, eps: float = CIOU_EPS) -> Tensor:
    """Complete IoU ``IoU - rho^2 / c^2 - alpha * v`` of xyxy boxes, element-wise.

    ``v = 4 / pi^2 * (atan(w_t / h_t) - atan(w_p / h_p))^2`` and
    ``alpha = v / (1 - IoU + v)``. As in the CIoU paper, ``alpha`` is a
    trade-off weight and receives no gradient. Widths and heights are floored at
    ``eps`` inside the aspect term so an inverted raw prediction gives a finite
    value and finite gradients (its IoU is 0 and the L1 term pulls it back).

    Args:
        pred: ``(..., 4)`` predicted boxes ``x1, y1, x2, y2``.
        target: ``(..., 4)`` target boxes, broadcastable against ``pred``.
        eps: numerical floor for unions, diagonals and sides.

    Returns:
        ``(...)`` CIoU in ``[-1.5, 1]`` (1 for identical boxes).
    """
    iou = box_iou(pred, target, eps)
    # Squared diagonal of the smallest enclosing box.
    cw = torch.maximum(pred[..., 2], target[..., 2]) - torch.minimum(pred[..., 0], target[..., 0])
    ch = torch.maximum(pred[..., 3], target[..., 3]) - torch.minimum(pred[..., 1], target[..., 1])
    c2 = cw.square() + ch.square() + eps
    # Squared distance between centres (x2 + x1 is twice the centre, hence the 1/4).
    rho2 = (
        (pred[..., 0] + pred[..., 2] - target[..., 0] - target[..., 2]).square()
        + (pred[..., 1] + pred[..., 3] - target[..., 1] - target[..., 3]).square()
    ) / 4
    wp = (pred[..., 2] - pred[..., 0]).clamp(min=eps)
    hp = (pred[..., 3] - pred[..., 1]).clamp(min=eps)
    wt = (target[..., 2] - target[..., 0]).clamp(min=eps)
    ht = (target[..., 3] - target[..., 1]).clamp(min=eps)
    v = (4 / math.pi**2) * (torch.atan(wt / ht) - torch.atan(wp / hp)).square()
    with torch.no_grad():
        alpha = v / (1 - iou + v + eps)
    return iou - rho2 / c2 - alpha * v
