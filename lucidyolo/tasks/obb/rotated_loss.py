"""Box terms of one branch for rotated boxes: ProbIoU, L1 on ``(cx, cy, w, h)`` and the angle term.

Replaces detection's CIoU and xyxy L1 (spec 30-objective, obb), with ``W =
max(sum of target weights, 1)`` and ``q`` the soft target weights:

- ``box = sum(q * (1 - ProbIoU)) / W`` (Hellinger form, :mod:`lucidyolo.structures.probiou`);
- ``l1 = sum(q * |delta (cx, cy, w, h)| / stride) / W``; both boxes are in long-edge
  canonical form, so the sides compare like with like;
- ``angle = sum(q * w_ar * sin^2(2 d)) / W`` with ``d`` the angle error and
  ``w_ar = exp(-ln^2(w / h) / 9)`` of the target: ``sin^2(2d)`` has period
  ``pi/2``, so wrapping ``d`` to ``[-pi/2, pi/2)`` and folding it to
  ``[-pi/4, pi/4)`` changes nothing and is not computed; ``w_ar`` fades the
  term for near-square boxes, whose angle is ambiguous.

Gains 7.5 box, 0.5 cls, 6.0 l1, 0.25 angle (1.0 destabilises training).
"""

from __future__ import annotations

import torch
from torch import Tensor

from lucidyolo.losses.branch import BranchLoss
from lucidyolo.structures.probiou import MIN_SIDE, hellinger

ASPECT_SCALE = 3.0
"""``w_ar = exp(-ln^2(w / h) / ASPECT_SCALE^2)``: 1, .948, .750, .555, .369 at aspect ratios 1, 2, 5, 10, 20."""


def aspect_weight(rboxes: Tensor) -> Tensor:
    """``(..., 5)`` -> ``(...)`` angle-term weight ``exp(-ln^2(w / h) / 9)``."""
    ratio = rboxes[..., 2].clamp(min=MIN_SIDE) / rboxes[..., 3].clamp(min=MIN_SIDE)
    return torch.exp(-ratio.log().square() / ASPECT_SCALE**2)


class RotatedBranchLoss(BranchLoss):
    """Weighted ``box`` (1 - ProbIoU), ``cls`` (BCE), ``l1`` (cx, cy, w, h in stride units) and ``angle`` terms.

    ``pred_boxes`` and the assignment's boxes are ``(B, A, 5)`` canonical
    ``[cx, cy, w, h, theta]`` px.
    """

    def __init__(self, box_gain: float = 7.5, cls_gain: float = 0.5, l1_gain: float = 6.0,
                 angle_gain: float = 0.25) -> None:
        super().__init__(box_gain=box_gain, cls_gain=cls_gain, l1_gain=l1_gain)
        self.gains["angle"] = angle_gain

    def box_terms(self, pred: Tensor, target: Tensor, strides: Tensor, weights: Tensor, norm: Tensor) -> dict[str, Tensor]:
        """``box``, ``l1`` and ``angle`` before gains (shapes as :meth:`BranchLoss.box_terms`, ``D = 5``)."""
        box = (hellinger(pred, target) * weights).sum() / norm
        l1_per_anchor = ((pred[..., :4] - target[..., :4]).abs() / strides.view(1, -1, 1)).sum(-1)  # (B, A)
        l1 = (l1_per_anchor * weights).sum() / norm
        d = pred[..., 4] - target[..., 4]
        angle = (weights * aspect_weight(target) * torch.sin(2 * d).square()).sum() / norm
        return {"box": box, "l1": l1, "angle": angle}
