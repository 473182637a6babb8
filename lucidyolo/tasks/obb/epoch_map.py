"""Epoch rotated mAP (AP@[.50:.05:.95] and AP50, per tile) for the obb task, single device.

:class:`RotatedEpochMAP` is a
:class:`~lucidyolo.metrics.per_image_epoch_metric.PerImageEpochMetric`: it
keeps, per validation image (tile), its predicted rotated boxes and its ground
truth as small numpy arrays on the CPU; ``compute`` scores them with
:func:`~lucidyolo.tasks.obb.rotated_map.rotated_map` (exact polygon IoU, DOTA
difficult rule, COCO 101-point AP, up to 300 detections per tile). The obb
task declares ``multi_device=False``: the AP ranks every detection of the
split together and nothing is gathered across ranks.

Frame: predictions and ground truth both come in the network-input
(letterboxed) frame, and IoU is invariant to the letterbox's uniform scale
and shift, so no mapping back to original pixels is needed. Unlike upright
boxes, rotated boxes are not clipped to the image region inside the letterbox:
clipping a rotated box is not a rotated box, and a prediction reaching into
the padding is scored as it is. ``batch_meta`` serves only for the
image index (deduplication), as in
:class:`~lucidyolo.tasks.keypoints.epoch_map.OKSEpochMAP`.

Whole-scene scoring (merging tiles back with
:mod:`~lucidyolo.tasks.obb.scene_merge`) belongs to ``lucid eval``: a training
validation batch carries no ``source_image`` / ``window``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np
import torch
from torch import Tensor

from lucidyolo.metrics.epoch_map import precision_recall
from lucidyolo.metrics.matches import Matches
from lucidyolo.metrics.per_image_epoch_metric import (
    ImageRows,
    PerImageEpochMetric,
    as_bool,
    as_float64,
)
from lucidyolo.tasks.obb.rotated_map import DetList, GtList, RotatedAP, rotated_map, rotated_matches

ROTATED_MAX_DETS = 300
"""Detections scored per tile (the deployed graph's top-k)."""


class RotatedEpochMAP(PerImageEpochMetric):
    """Rotated AP@[.50:.05:.95] and AP50 over a validation epoch (per tile).

    Args:
        num_classes: contiguous classes ``0..C-1``; ``None`` uses one more than
            the largest label seen (classes without non-difficult GT are left out
            of the mean either way).
        max_dets: rows kept per image (top scores over all classes; ``None``
            keeps all).

    After ``compute()``, :attr:`last_result` holds the full
    :class:`~lucidyolo.tasks.obb.rotated_map.RotatedAP` (per-class AP, mAP75),
    or ``None`` when there was nothing to score, and :attr:`last_matches` its
    :class:`~lucidyolo.metrics.matches.Matches` at IoU 0.5.
    """

    keys = ("rotated_mAP50-95", "rotated_mAP50", "rotated_precision", "rotated_recall")
    last_result: RotatedAP | None

    def __init__(self, num_classes: int | None = None, max_dets: int | None = ROTATED_MAX_DETS) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.max_dets = max_dets
        self.last_matches: Matches | None = None

    def clear_results(self) -> None:
        super().clear_results()
        self.last_matches = None

    def image_rows(self, decoded: Tensor, gt: Mapping[str, Tensor], batch_meta: Mapping[str, Tensor]) -> list[ImageRows]:
        """Each image's ``predicted`` ``(rboxes (n, 5), scores (n,), labels (n,) int64)`` and
        ``truth`` ``(rboxes (m, 5), labels (m,) int64, difficult (m,) bool)``.

        Args:
            decoded: ``(B, N, 7)`` ``cx, cy, w, h, theta, score, class`` rows,
                score 0 padding, network-input pixels.
            gt: padded ground truth in the same frame: ``rboxes (B, M, 5)``,
                ``labels (B, M)``, ``mask (B, M)`` bool, optional ``difficult (B, M)``
                bool (none difficult without it).
            batch_meta: ``index (B,)`` (see :meth:`update`).
        """
        if decoded.ndim != 3 or decoded.shape[-1] != 7:
            raise ValueError(f"RotatedEpochMAP expects (B, N, 7) rotated rows, got {tuple(decoded.shape)}")
        rows = as_float64(decoded)  # (B, N, 7)
        mask = as_bool(gt["mask"])  # (B, M)
        rboxes, labels = as_float64(gt["rboxes"]), as_float64(gt["labels"]).astype(np.int64)
        difficult = as_bool(gt["difficult"]) if gt.get("difficult") is not None else np.zeros_like(mask)
        images = []
        for i in range(rows.shape[0]):
            det = rows[i, rows[i, :, 5] > 0]  # (n, 7) the real rows
            if self.max_dets is not None and det.shape[0] > self.max_dets:
                det = det[np.argsort(-det[:, 5], kind="stable")[: self.max_dets]]
            real = mask[i]
            images.append(ImageRows((det[:, :5], det[:, 5], det[:, 6].astype(np.int64)),
                                    (rboxes[i, real], labels[i, real], difficult[i, real])))
        return images

    def score(self, images: Mapping[int, ImageRows]) -> dict[str, Tensor] | None:
        """``{"rotated_mAP50-95": t, "rotated_mAP50": t, "rotated_precision": t,
        "rotated_recall": t}`` (logged with a ``val/`` prefix; precision and
        recall at IoU 0.5 and the best mean-F1 confidence), float32 scalar
        tensors like :class:`~lucidyolo.tasks.keypoints.epoch_map.OKSEpochMAP`'s;
        0.0 where no class has non-difficult ground truth; ``None`` without
        any class.
        """
        # image_rows wrote each record as the three arrays rotated_map takes per image
        dets = cast(DetList, [r.predicted for r in images.values()])
        gts = cast(GtList, [r.truth for r in images.values()])
        labels_seen = [int(d[2].max()) for d in dets if d[2].size] + [int(g[1].max()) for g in gts if g[1].size]
        num_classes = self.num_classes if self.num_classes is not None else max(labels_seen, default=-1) + 1
        if num_classes <= 0:
            return None
        result = rotated_map(dets, gts, num_classes, max_dets=self.max_dets)
        self.last_result = result
        self.last_matches = rotated_matches(dets, gts, num_classes, max_dets=self.max_dets)

        def value(x: float) -> Tensor:
            return torch.tensor(x if np.isfinite(x) else 0.0, dtype=torch.float32)

        return {"rotated_mAP50-95": value(result.map50_95), "rotated_mAP50": value(result.map50),
                **precision_recall(self.last_matches, "rotated_")}
