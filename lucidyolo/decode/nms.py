"""NMS decode of the one-to-many branch (comparison and ablations).

Best class per anchor, the ``pre_nms_topk`` best of each image, confidence
threshold, class-wise NMS over the whole batch at once (image and class form
one group id, so boxes of different images never suppress each other), then
the first ``max_det`` survivors of each image.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchvision.ops import nms


def grouped_nms(boxes: Tensor, scores: Tensor, groups: Tensor, iou: float) -> Tensor:
    """NMS within each group (boxes of different groups never suppress each other).

    Same result as ``torchvision.ops.batched_nms``, whose CPU path for more than
    1,000 boxes masks the whole candidate list once per group (``G x N`` work: 8 s
    of 14 for 32 images x 80 classes of an untrained model). Here the candidates
    are sorted by group once and each group's contiguous run goes through
    ``torchvision.ops.nms``.

    Args:
        boxes: ``(N, 4)`` ``xyxy``.
        scores: ``(N,)``.
        groups: ``(N,)`` int64 group of each box (image x class).
        iou: suppression threshold.

    Returns:
        ``(K,)`` int64 indices of the kept boxes, by decreasing score.
    """
    if groups.numel() == 0:
        return groups.new_zeros(0)
    order = torch.sort(groups, stable=True).indices  # (N,) runs of one group
    _, counts = torch.unique_consecutive(groups[order], return_counts=True)
    keeps = [
        run[nms(boxes[run], scores[run], iou)]
        for run in torch.split(order, counts.tolist())
    ]
    keep = torch.cat(keeps)
    return keep[torch.sort(scores[keep], descending=True, stable=True).indices]


PRE_NMS_TOPK = 3000
"""Anchors per image that enter NMS at most (the highest-scored ones): 10 x ``max_det``."""


def nms_decode(
    boxes: Tensor, logits: Tensor, conf: float = 0.001, iou: float = 0.7, max_det: int = 300,
    pre_nms_topk: int | None = PRE_NMS_TOPK,
) -> tuple[Tensor, Tensor]:
    """Class-wise NMS over a batch, padded to a fixed number of rows.

    Args:
        boxes: ``(B, A, 4)`` decoded ``xyxy`` boxes in pixels.
        logits: ``(B, A, C)`` class logits.
        conf: keep anchors whose best sigmoid score is ``>= conf``.
        iou: suppress a box overlapping a higher-scored box of the same class
            and image by more than this IoU.
        max_det: rows per image.
        pre_nms_topk: per image, only the ``pre_nms_topk`` best-scored anchors enter NMS (None: all).
            An untrained model scores every anchor above 0.001 (8,400 per image at 640 px). Greedy NMS
            decides each box from higher-scored boxes only, so the cap changes no row unless fewer than
            ``max_det`` boxes survive among the top ``pre_nms_topk`` (as in
            :func:`~lucidyolo.tasks.obb.rotated_nms.rotated_nms_decode`).

    Returns:
        dets: ``(B, max_det, 6)`` rows ``[x1, y1, x2, y2, score, class]`` sorted by
            decreasing score, zero rows as padding.
        kept_index: ``(B, max_det)`` long anchor index of each row (``-1`` on padding
            rows), as :func:`~lucidyolo.decode.e2e.e2e_topk` returns it: task
            outputs are gathered the same way on both decode paths.
    """
    b, _, c = logits.shape
    best, cls = logits.sigmoid().max(dim=-1)  # (B, A)
    if pre_nms_topk is not None and best.shape[1] > pre_nms_topk:  # the rest score 0, below any conf
        top = best.topk(pre_nms_topk, dim=1, sorted=False).indices  # (B, pre_nms_topk)
        best = torch.zeros_like(best).scatter_(1, top, best.gather(1, top))
    img, anc = (best >= conf).nonzero(as_tuple=True)  # (N,) candidates over the whole batch
    cand_boxes = boxes[img, anc].float()  # (N, 4)
    cand_scores = best[img, anc].float()
    cand_cls = cls[img, anc]
    keep = grouped_nms(cand_boxes, cand_scores, img * c + cand_cls, iou)  # sorted by score desc
    # Regroup survivors by image while keeping the score order inside each image.
    keep = keep[torch.sort(img[keep], stable=True).indices]
    k_img = img[keep]
    per_image = torch.bincount(k_img, minlength=b)  # (B,)
    first = torch.cumsum(per_image, 0) - per_image  # index of each image's first survivor
    rank = torch.arange(keep.numel(), device=keep.device) - first[k_img]
    sel = rank < max_det
    keep, k_img, rank = keep[sel], k_img[sel], rank[sel]
    rows = torch.cat(
        (cand_boxes[keep], cand_scores[keep, None], cand_cls[keep, None].float()), dim=1
    )  # (K, 6)
    dets = boxes.new_zeros(b, max_det, 6, dtype=torch.float32)
    dets[k_img, rank] = rows
    kept = torch.full((b, max_det), -1, dtype=torch.long, device=boxes.device)
    kept[k_img, rank] = anc[keep]
    return dets.to(boxes.dtype), kept
