"""One image's keypoint predictions as COCO results dicts (original pixels, dataset ids).

:func:`keypoint_results` is :func:`~lucidyolo.metrics.coco_eval.dets_to_coco_results`
(same rows kept, same ``image_id`` / ``category_id`` / ``bbox`` / ``score``) plus
each row's ``keypoints``: ``3K`` floats ``x1, y1, v1, x2, y2, v2, ...`` with the
points mapped back through the inverse letterbox (``x = (x_net - pad_x) / scale``),
clipped to ``[0, width] x [0, height]`` (the COCO pixel frame, as the boxes), and
``v`` the predicted point confidence (pycocotools reads only ``x, y`` of a
detection; ``v`` is kept for users of the results file).

The same list feeds both ``bbox`` and ``keypoints`` COCOeval runs. Because the
dicts carry ``bbox``, ``COCO.loadRes`` takes its box branch: a detection's area
is its box area (not the extent of its points), which only decides whether an
*unmatched* detection falls outside the medium / large area ranges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lucidyolo.metrics.coco_eval import dets_to_coco_results
from lucidyolo.metrics.mapping import unletterbox
from lucidyolo.tasks.keypoints.keypoint_detections import KeypointDetections


def keypoint_results(
    det: KeypointDetections,
    image_id: int,
    category_ids: Sequence[int],
    letterbox: tuple[float, float, float] = (1.0, 0.0, 0.0),
    orig_hw: tuple[int, int] | None = None,
) -> list[dict[str, Any]]:
    """COCO results dicts of one image's keypoint detections.

    Args:
        det: one image: ``rows (N, 6)`` ``x1, y1, x2, y2, score, class`` and
            ``keypoints (N, K, 3)`` ``x, y, confidence``, network-input pixels;
            rows with ``score <= 0`` are padding and are dropped.
        image_id: the ground truth's id of this image.
        category_ids: ``category_ids[label]`` is the dataset's own category id.
        letterbox: ``(scale, pad_x, pad_y)`` with ``x_net = x_orig * scale + pad_x``.
        orig_hw: original ``(height, width)`` for clipping; ``None`` skips clipping
            (only sensible without a letterbox, e.g. scoring in the network frame).

    Returns:
        One dict per valid row, in row order: ``image_id``, ``category_id``,
        ``bbox`` ``[x, y, w, h]``, ``score`` (as :func:`dets_to_coco_results`) and
        ``keypoints`` (``3K`` plain floats).
    """
    scale, pad_x, pad_y = (float(v) for v in letterbox)
    rows, kps = det.rows, det.keypoints
    if isinstance(rows, torch.Tensor):
        rows = rows.detach().to("cpu", torch.float64).numpy()
    if isinstance(kps, torch.Tensor):
        kps = kps.detach().to("cpu", torch.float64).numpy()
    rows = np.asarray(rows, np.float64).reshape(-1, 6)
    kps = np.asarray(kps, np.float64)
    if kps.ndim != 3 or kps.shape[0] != rows.shape[0] or kps.shape[2] != 3:
        raise ValueError(f"keypoints must be (N, K, 3) for rows (N, 6), got {kps.shape} for {rows.shape}")
    out = dets_to_coco_results(rows, image_id, category_ids, scale, pad_x, pad_y, orig_hw)
    kept = kps[rows[:, 4] > 0]  # (n, K, 3): the rows dets_to_coco_results kept, same order
    xy = unletterbox(kept[..., :2], scale, pad_x, pad_y, orig_hw)  # (n, K, 2)
    flat = np.concatenate([xy, kept[..., 2:3]], axis=-1).reshape(len(out), 3 * kps.shape[1])  # (n, 3K)
    for d, k in zip(out, flat.tolist(), strict=True):
        d["keypoints"] = k
    return out
