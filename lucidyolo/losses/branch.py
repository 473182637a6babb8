"""Detection loss of one head branch (o2m or o2o) given its assignment.

With ``W = max(sum of target weights, 1)`` over the global batch (summed over every
process, :mod:`lucidyolo.losses.normaliser`):

- ``cls``: BCE-with-logits over all anchors x classes against ``one-hot x weight``
  (background target 0), summed, ``/ W``;
- ``box``: ``sum(weight * (1 - CIoU)) / W`` over positives;
- ``l1``: ``sum(weight * |pred - target|) / W`` over positives and the four
  xyxy coordinates, with the pixel error divided by the anchor's stride. In
  pixels this term is 8-32x too large and swamps the objective;
- ``total = 7.5 box + 0.5 cls + 6.0 l1``.

All terms are computed densely over every anchor and masked by the weights
(zero for background), so the graph has no data-dependent shapes and compiles
as one piece.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lucidyolo.assign.assignment import Assignment
from lucidyolo.losses.normaliser import global_normaliser
from lucidyolo.structures.box_iou import box_ciou


class BranchLoss(nn.Module):
    """Weighted ``box`` (CIoU), ``cls`` (BCE) and ``l1`` (stride units) terms of one branch.

    Args:
        box_gain: gain of the CIoU term.
        cls_gain: gain of the classification term.
        l1_gain: gain of the L1 term.
    """

    def __init__(self, box_gain: float = 7.5, cls_gain: float = 0.5, l1_gain: float = 6.0) -> None:
        super().__init__()
        self.gains = {"box": box_gain, "cls": cls_gain, "l1": l1_gain}

    def extra_repr(self) -> str:
        return ", ".join(f"{k}_gain={v}" for k, v in self.gains.items())

    def forward(
        self, logits: Tensor, pred_boxes: Tensor, strides: Tensor, assignment: Assignment
    ) -> dict[str, Tensor]:
        """Loss terms of one branch.

        Args:
            logits: ``(B, A, C)`` class logits.
            pred_boxes: ``(B, A, 4)`` decoded predicted xyxy px (with grad).
            strides: ``(A,)`` anchor strides.
            assignment: targets from an assigner for this branch.

        Returns:
            Dict of 0-d float32 tensors: ``box``, ``cls``, ``l1`` (before gains),
            ``total`` (gain-weighted sum) and ``num_fg`` (positive count, detached).
        """
        num_classes = logits.shape[-1]
        weights = assignment.weights.float()  # (B, A), zero for background
        norm = global_normaliser(weights.sum())  # max(W, 1), W over every process's share of the batch
        fg = assignment.fg_mask

        target_cls = F.one_hot(assignment.labels.clamp(min=0), num_classes).float()  # (B, A, C)
        target_cls = target_cls * weights.unsqueeze(-1)  # background rows: weight 0 -> all zero
        cls = F.binary_cross_entropy_with_logits(logits.float(), target_cls, reduction="sum") / norm

        pred = pred_boxes.float()
        # Background anchors get their own (detached) prediction as target: the
        # term is zeroed by the weight anyway, and this keeps every element finite.
        target = torch.where(fg.unsqueeze(-1), assignment.boxes.float(), pred.detach())
        terms = {"cls": cls, **self.box_terms(pred, target, strides.float(), weights, norm)}
        total = sum(self.gains[k] * v for k, v in terms.items())
        return {**terms, "total": total, "num_fg": fg.sum().float()}

    def box_terms(self, pred: Tensor, target: Tensor, strides: Tensor, weights: Tensor, norm: Tensor) -> dict[str, Tensor]:
        """The box terms before gains: ``box`` (1 - CIoU) and ``l1`` (xyxy, stride units).

        Args:
            pred: ``(B, A, 4)`` float32 predicted xyxy px (with grad).
            target: ``(B, A, 4)`` assigned xyxy px (background rows: ``pred`` detached).
            strides: ``(A,)`` float32 anchor strides.
            weights: ``(B, A)`` soft target weights (zero for background).
            norm: 0-d ``max(sum(weights), 1)`` (:func:`~lucidyolo.losses.normaliser.global_normaliser`).
        """
        box = ((1.0 - box_ciou(pred, target)) * weights).sum() / norm
        l1_per_anchor = ((pred - target).abs() / strides.view(1, -1, 1)).sum(-1)  # (B, A)
        l1 = (l1_per_anchor * weights).sum() / norm
        return {"box": box, "l1": l1}
