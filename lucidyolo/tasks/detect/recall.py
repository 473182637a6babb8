"""Recall at one IoU threshold: the det overfit gate's metric.

Matching is COCO's greedy rule at a single threshold: detections are visited
in descending score order; each takes the unmatched ground truth of its own
class with the highest IoU, if that IoU is >= the threshold; every ground
truth is matched at most once. Recall = matched GT / all GT.

The IoU matrix, the class mask and the threshold are computed for the whole
image at once (torchvision ``box_iou``). The assignment itself is sequential by
definition (a detection's choice depends on what the higher-scored ones took),
so it walks only the detections that have at least one candidate, on a small
numpy matrix.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torchvision.ops import box_iou


def greedy_match(
    pred_boxes: torch.Tensor,
    pred_scores: torch.Tensor,
    pred_labels: torch.Tensor,
    gt_boxes: torch.Tensor,
    gt_labels: torch.Tensor,
    iou_threshold: float = 0.5,
) -> torch.Tensor:
    """Which ground truths one image's detections find.

    Args:
        pred_boxes: ``(N, 4)`` ``xyxy`` detections.
        pred_scores: ``(N,)`` confidences (visiting order, highest first; ties
            keep the input order).
        pred_labels: ``(N,)`` integer class of each detection.
        gt_boxes: ``(M, 4)`` ``xyxy`` ground truth in the same frame.
        gt_labels: ``(M,)`` integer class of each ground truth.
        iou_threshold: minimum IoU for a match (inclusive).

    Returns:
        ``(M,)`` bool, True for every matched ground truth.
    """
    m = gt_boxes.shape[0]
    matched = np.zeros(m, dtype=bool)
    if m == 0 or pred_boxes.shape[0] == 0:
        return torch.from_numpy(matched)
    order = torch.sort(pred_scores, descending=True, stable=True).indices  # (N,)
    dtype = torch.promote_types(
        torch.promote_types(pred_boxes.dtype, gt_boxes.dtype), torch.float32
    )
    iou = box_iou(pred_boxes[order].to(dtype), gt_boxes.to(dtype))  # (N, M)
    same_class = pred_labels[order].long()[:, None] == gt_labels.long()[None, :]  # (N, M)
    cand = torch.where(same_class & (iou >= iou_threshold), iou, torch.full_like(iou, -1.0))
    has_cand = (cand >= 0).any(dim=1)  # (N,)
    cand_np = cand[has_cand].cpu().numpy()  # (n, M), rows in score order
    for row in cand_np:
        row = np.where(matched, -1.0, row)
        j = int(row.argmax())
        if row[j] >= 0:
            matched[j] = True
    return torch.from_numpy(matched)


def recall_counts(
    dets: torch.Tensor,
    gt_boxes: torch.Tensor,
    gt_labels: torch.Tensor,
    gt_mask: torch.Tensor,
    iou_threshold: float = 0.5,
) -> tuple[int, int]:
    """Matched and total ground-truth counts for a padded batch.

    Args:
        dets: ``(B, K, 6)`` decoder output ``x1, y1, x2, y2, score, class``;
            rows with ``score <= 0`` are padding.
        gt_boxes: ``(B, M, 4)`` ``xyxy`` ground truth in the same frame.
        gt_labels: ``(B, M)`` contiguous class index.
        gt_mask: ``(B, M)`` bool, True for real ground truth.
        iou_threshold: minimum IoU for a match.

    Returns:
        ``(matched, total)`` over the batch.
    """
    matched = 0
    for b in range(dets.shape[0]):  # loop over images; each image is vectorised
        valid = dets[b, :, 4] > 0
        d = dets[b][valid]  # (n, 6)
        g = gt_mask[b].bool()
        hits = greedy_match(
            d[:, :4], d[:, 4], d[:, 5], gt_boxes[b][g], gt_labels[b][g], iou_threshold
        )
        matched += int(hits.sum())
    return matched, int(gt_mask.bool().sum())


class RecallAtIoU:
    """Accumulates :func:`recall_counts` over batches.

    ``compute()`` is NaN when no ground truth was seen (recall is undefined,
    and NaN fails any ``>=`` floor, so an empty gate slice cannot pass).
    """

    def __init__(self, iou_threshold: float = 0.5) -> None:
        self.iou_threshold = iou_threshold
        self.matched = 0
        self.total = 0

    def update(
        self,
        dets: torch.Tensor,
        gt_boxes: torch.Tensor,
        gt_labels: torch.Tensor,
        gt_mask: torch.Tensor,
    ) -> None:
        """Add one padded batch (shapes as in :func:`recall_counts`)."""
        m, t = recall_counts(dets, gt_boxes, gt_labels, gt_mask, self.iou_threshold)
        self.matched += m
        self.total += t

    def compute(self) -> float:
        """Matched / total ground truth so far."""
        return self.matched / self.total if self.total else math.nan

    def reset(self) -> None:
        """Forget everything seen."""
        self.matched = 0
        self.total = 0
