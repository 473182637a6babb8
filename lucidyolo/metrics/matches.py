"""What an epoch metric matched: the input of every curve and confusion matrix.

A task's ``matches(metric)`` hook returns one :class:`Matches` per IoU type
(``"B"`` boxes, ``"M"`` masks, ``"R"`` rotated boxes, ``"P"`` keypoints: the
letters of its ``results.csv`` columns), read from the metric's *own*
matching at its IoU threshold (0.5): pycocotools' ``evalImgs`` for COCO
metrics, :func:`~lucidyolo.tasks.obb.rotated_map.match_detections` for rotated
boxes. Nothing downstream matches again, so the PR curve's area is the AP50 the
metric reports and the confusion matrix's diagonal is its true-positive count.

Order: detections come in the metric's ranking order, image by image, each
image's in descending score (stable). A stable sort by score within one class
then reproduces the metric's tie rule (pycocotools' ``mergesort`` over the
image-order concatenation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Matches:
    """One IoU type's matching of a whole split (``D`` detections, ``C`` classes).

    Attributes:
        scores: ``(D,)`` float64 confidence of each scored detection (the ones
            the metric looked at: after its per-image cap).
        classes: ``(D,)`` int64 predicted class index in ``[0, C)``.
        tp: ``(D,)`` bool, matched to a ground truth of its class at
            ``iou_threshold`` by the metric's greedy rule.
        ignored: ``(D,)`` bool, excused by the metric (a crowd region, a
            difficult object): neither true nor false positive.
        confused: ``(D,)`` int64, for an unmatched, not ignored detection the
            class of the ground truth of *another* class it overlaps most, if
            that overlap (the metric's own IoU / OKS) reaches
            ``iou_threshold``; ``-1`` otherwise (and for every TP).
        num_gt: ``(C,)`` int64 ground truths per class that count for recall
            (crowd / difficult ones excluded).
        names: ``C`` class names.
        iou_threshold: the IoU (OKS) a match needs.
    """

    scores: np.ndarray
    classes: np.ndarray
    tp: np.ndarray
    ignored: np.ndarray
    confused: np.ndarray
    num_gt: np.ndarray
    names: tuple[str, ...] = field(default=())
    iou_threshold: float = 0.5

    def __post_init__(self) -> None:
        d = self.scores.shape[0]
        for name in ("classes", "tp", "ignored", "confused"):
            if getattr(self, name).shape != (d,):
                raise ValueError(
                    f"Matches.{name} has shape {getattr(self, name).shape}, expected ({d},)"
                )
        if self.names and len(self.names) != self.num_gt.shape[0]:
            raise ValueError(f"{len(self.names)} class names for {self.num_gt.shape[0]} classes")

    @property
    def num_classes(self) -> int:
        return int(self.num_gt.shape[0])

    @staticmethod
    def build(
        scores: Sequence[float] | np.ndarray,
        classes: Sequence[int] | np.ndarray,
        tp: Sequence[bool] | np.ndarray,
        num_gt: Sequence[int] | np.ndarray,
        ignored: Sequence[bool] | np.ndarray | None = None,
        confused: Sequence[int] | np.ndarray | None = None,
        names: Sequence[str] | None = None,
        iou_threshold: float = 0.5,
    ) -> Matches:
        """A :class:`Matches` from array-likes, with the dtypes fixed (``ignored`` / ``confused`` default to none)."""
        s = np.asarray(scores, dtype=np.float64).reshape(-1)
        n = np.asarray(num_gt, dtype=np.int64).reshape(-1)
        return Matches(
            scores=s,
            classes=np.asarray(classes, dtype=np.int64).reshape(-1),
            tp=np.asarray(tp, dtype=bool).reshape(-1),
            ignored=np.zeros(s.shape, bool)
            if ignored is None
            else np.asarray(ignored, dtype=bool).reshape(-1),
            confused=np.full(s.shape, -1, np.int64)
            if confused is None
            else np.asarray(confused, np.int64).reshape(-1),
            num_gt=n,
            names=tuple(names) if names is not None else tuple(str(i) for i in range(n.shape[0])),
            iou_threshold=float(iou_threshold),
        )
