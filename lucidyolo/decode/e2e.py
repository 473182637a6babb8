"""End-to-end decode of the one-to-one branch: best class per anchor, top-k, no IoU step.

The output has a fixed shape so it exports to ONNX as a single ``TopK`` node.
"""

from __future__ import annotations

import torch
from torch import Tensor


def e2e_topk(boxes_xyxy: Tensor, logits: Tensor, k: int = 300) -> tuple[Tensor, Tensor]:
    """Top-``k`` anchors by their best class score.

    Args:
        boxes_xyxy: ``(B, A, D)`` decoded boxes in pixels (``D = 4`` xyxy; a
            rotated task passes ``D = 5`` ``[cx, cy, w, h, theta]``).
        logits: ``(B, A, C)`` class logits.
        k: number of output rows.

    Returns:
        dets: ``(B, k, D + 2)`` rows ``[*box, score, class]`` (``[x1, y1, x2, y2,
            score, class]`` for xyxy) sorted by decreasing score; when ``A < k``
            the last ``k - A`` rows are zeros.
        kept_index: ``(B, k)`` long anchor index of each row (``-1`` on padding
            rows); gather task outputs (masks, angles, keypoints) with it.
    """
    b, a, _ = logits.shape
    d = boxes_xyxy.shape[-1]
    best, cls = logits.sigmoid().max(dim=-1)  # (B, A) score and class of the best class
    kk = min(k, a)  # static at trace time: A is fixed by the input size
    score, index = best.topk(kk, dim=1)  # (B, kk), sorted descending
    boxes = boxes_xyxy.gather(1, index.unsqueeze(-1).expand(b, kk, d))  # (B, kk, D)
    labels = cls.gather(1, index).to(boxes.dtype)  # (B, kk)
    dets = torch.cat((boxes, score.unsqueeze(-1), labels.unsqueeze(-1)), dim=-1)  # (B, kk, D + 2)
    if kk < k:
        dets = torch.cat((dets, dets.new_zeros(b, k - kk, d + 2)), dim=1)
        index = torch.cat((index, index.new_full((b, k - kk), -1)), dim=1)
    return dets, index


def gather_kept(values: Tensor, index: Tensor) -> Tensor:
    """Per-anchor ``values (B, A, *shape)`` at the kept ``index (B, k)`` -> ``(B, k, *shape)``, zeros where ``index < 0``.

    How every task output (mask coefficients, keypoints) follows the rows of
    :func:`e2e_topk` or :func:`~lucidyolo.decode.nms.nms_decode`.
    """
    flat = values.flatten(2)  # (B, A, prod(shape))
    picked = flat.gather(1, index.clamp(min=0).unsqueeze(-1).expand(-1, -1, flat.shape[-1]))
    picked = picked * (index >= 0).unsqueeze(-1)
    return picked.reshape(*index.shape, *values.shape[2:])
