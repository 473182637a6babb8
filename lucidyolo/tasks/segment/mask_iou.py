"""Mean mask IoU over every ground-truth instance: the seg overfit gate's metric.

For each image, predictions with ``score >= conf`` are visited in descending
score order (ties keep row order); each takes the still-unmatched non-crowd
ground truth of its own class with the largest mask IoU, if that IoU is
``> 0``. The metric is the mean, over *all* non-crowd ground truths seen, of
the IoU of the prediction that took it, 0 for a ground truth nobody took: it
falls with missed instances as well as with poor masks.

Masks live in the network-input frame: predictions from
:func:`~lucidyolo.tasks.segment.mask_assembly.masks_in_input` (input size =
``proto_stride`` times the prototype size), ground truth rasterised from the
polygon rings (:func:`~lucidyolo.tasks.segment.mask_assembly.gt_instance_rles`). The
``(N, G)`` IoU matrix of an image is one ``pycocotools.mask.iou`` call on RLEs
(vectorised in C); only the assignment, sequential by definition, loops.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
from pycocotools import mask as mask_utils
from torch import Tensor

from lucidyolo.tasks.segment.mask_assembly import (
    PROTO_STRIDE,
    encode_rle_bytes,
    gt_instance_rles,
    masks_in_input,
)
from lucidyolo.tasks.segment.mask_detections import MaskDetections


def greedy_mask_match(iou: np.ndarray, same_class: np.ndarray) -> np.ndarray:
    """IoU each ground truth gets from the greedy assignment.

    Args:
        iou: ``(N, G)`` mask IoU, predictions in visiting (descending score) order.
        same_class: ``(N, G)`` bool, prediction and ground truth share a class.

    Returns:
        ``(G,)`` float64: the IoU of the prediction that took each ground
        truth, 0 where none did.
    """
    got = np.zeros(iou.shape[1], dtype=np.float64)
    taken = np.zeros(iou.shape[1], dtype=bool)
    cand = np.where(same_class & (iou > 0), iou, -1.0)  # (N, G)
    for row in cand[(cand > 0).any(axis=1)]:  # only predictions with a candidate
        row = np.where(taken, -1.0, row)
        j = int(row.argmax())
        if row[j] > 0:
            taken[j] = True
            got[j] = row[j]
    return got


class MeanMaskIoU:
    """Accumulates the matched mask IoU of every non-crowd ground truth.

    Args:
        proto_stride: network-input pixels per prototype pixel.

    ``compute()`` is NaN when no ground truth was seen (undefined, and NaN
    fails any ``>=`` floor, so an empty gate slice cannot pass).
    """

    def __init__(self, proto_stride: float = PROTO_STRIDE) -> None:
        self.proto_stride = proto_stride
        self.iou_sum = 0.0
        self.total = 0

    def update(self, decoded: MaskDetections, gt: Mapping[str, Tensor], conf: float) -> None:
        """Add one padded batch.

        Args:
            decoded: ``rows (B, K, 6)`` ``[x1, y1, x2, y2, score, class]``
                network-input pixels (score 0 padding), ``coeffs (B, K, P)``,
                ``protos (B, P, Hp, Wp)``.
            gt: ``boxes (B, M, 4)``, ``labels (B, M)``, ``mask (B, M)``,
                optional ``crowd (B, M)`` (crowd rows are left out), and the
                polygon rings (``poly_points``, ``poly_ring_lengths``,
                ``poly_ring_image``, ``poly_ring_slot``).
            conf: minimum score of a prediction (inclusive; rows with score
                ``<= 0`` are padding whatever ``conf``).
        """
        b, _, hp, wp = decoded.protos.shape
        height, width = round(hp * self.proto_stride), round(wp * self.proto_stride)
        rles = gt_instance_rles(gt, height, width)  # per image, real slots in slot order
        valid = gt["mask"].bool().cpu()
        crowd = gt.get("crowd")
        crowd_b = torch.zeros_like(valid) if crowd is None else crowd.bool().cpu()
        labels = gt["labels"].cpu()
        for i in range(b):
            slots = valid[i].nonzero()[:, 0]  # (G_all,) the order of rles[i]
            keep_gt = ~crowd_b[i, slots]
            gt_rles = [r for r, k in zip(rles[i], keep_gt.tolist(), strict=True) if k]
            gt_labels = labels[i, slots][keep_gt].numpy()  # (G,)
            self.total += len(gt_rles)
            rows = decoded.rows[i]
            scores = rows[:, 4]
            picked = ((scores >= conf) & (scores > 0)).nonzero()[:, 0]
            if not gt_rles or picked.numel() == 0:
                continue
            order = picked[torch.sort(scores[picked], descending=True, stable=True).indices]  # (N,)
            det = MaskDetections(rows[order], decoded.coeffs[i][order], decoded.protos[i])
            pred_rles = encode_rle_bytes(masks_in_input(det, height, width))
            iou = np.asarray(mask_utils.iou(pred_rles, gt_rles, [0] * len(gt_rles)), dtype=np.float64)
            pred_labels = rows[order, 5].long().cpu().numpy()  # (N,)
            same = pred_labels[:, None] == gt_labels[None, :]
            self.iou_sum += float(greedy_mask_match(iou.reshape(len(pred_rles), len(gt_rles)), same).sum())

    def compute(self) -> float:
        """Mean matched mask IoU over all non-crowd ground truth seen (NaN without any)."""
        return self.iou_sum / self.total if self.total else math.nan

    def reset(self) -> None:
        """Forget everything seen."""
        self.iou_sum = 0.0
        self.total = 0
