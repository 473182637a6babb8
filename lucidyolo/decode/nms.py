"""NMS decode of the one-to-many branch (comparison and ablations).

Best class per anchor, confidence threshold, class-wise NMS with
``torchvision.ops.batched_nms`` over the whole batch at once (image and class
form one group id, so boxes of different images never suppress each other),
then the first ``max_det`` survivors of each image.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchvision.ops import batched_nms


def nms_decode(
    boxes: Tensor, logits: Tensor, conf: float = 0.001, iou: float = 0.7, max_det: int = 300
) -> tuple[Tensor, Tensor]:
    """Class-wise NMS over a batch, padded to a fixed number of rows.

    Args:
        boxes: ``(B, A, 4)`` decoded ``xyxy`` boxes in pixels.
        logits: ``(B, A, C)`` class logits.
        conf: keep anchors whose best sigmoid score is ``>= conf``.
        iou: suppress a box overlapping a higher-scored box of the same class
            and image by more than this IoU.
        max_det: rows per image.

    Returns:
        dets: ``(B, max_det, 6)`` rows ``[x1, y1, x2, y2, score, class]`` sorted by
            decreasing score, zero rows as padding.
        kept_index: ``(B, max_det)`` long anchor index of each row (``-1`` on padding
            rows), as :func:`~lucidyolo.decode.e2e.e2e_topk` returns it: task
            outputs are gathered the same way on both decode paths.
    """
    b, _, c = logits.shape
    best, cls = logits.sigmoid().max(dim=-1)  # (B, A)
    img, anc = (best >= conf).nonzero(as_tuple=True)  # (N,) candidates over the whole batch
    cand_boxes = boxes[img, anc].float()  # (N, 4)
    cand_scores = best[img, anc].float()
    cand_cls = cls[img, anc]
    keep = batched_nms(cand_boxes, cand_scores, img * c + cand_cls, iou)  # sorted by score desc
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
