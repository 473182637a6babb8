"""Epoch keypoint mAP (COCO OKS AP@[.50:.05:.95]) for the pose task, single device.

:class:`OKSEpochMAP` is a
:class:`~lucidyolo.metrics.per_image_epoch_metric.PerImageEpochMetric`: it
keeps, per validation image, its predicted rows and points and its ground
truth as small float64 numpy arrays on the CPU; ``compute`` builds a COCO
ground-truth dict and results list from them and scores them with pycocotools'
``keypoints`` COCOeval (through :func:`~lucidyolo.metrics.coco_eval.evaluate_coco`,
with the task's sigmas). The pose task declares ``multi_device=False``, so
nothing is gathered across ranks.

Everything is scored in the network-input (letterboxed) frame the batch comes
in. OKS is invariant to the letterbox's uniform scale and shift (squared point
distances and areas scale together), so AP matches original-pixel scoring of
the same ground truth (same areas), provided points and boxes are clipped to
the image the way
:func:`~lucidyolo.tasks.keypoints.results.keypoint_results` clips them to
the original image: ``update`` clips them to the image's region inside the
letterbox (skipped for mosaics, whose letterbox is NaN).

Ground-truth records (one per real row of the padded batch):

* ``bbox`` the GT box, ``area`` its ``w * h``: the padded batch carries no
  segmentation area, which COCO's own person annotations use, so small / large
  splits and the OKS scale differ from the official protocol's by that choice
  (``lucid eval`` on a COCO JSON split uses the JSON's areas);
* ``keypoints`` ``[x, y, v]`` with ``v`` the batch's visibility,
  ``num_keypoints`` the count of ``v > 0``; a GT with no visible point has
  ``num_keypoints == 0`` and COCOeval ignores it (neither needed nor able to
  produce a false positive), as on COCO;
* ``iscrowd`` from ``gt["crowd"]`` when the batch carries it, else 0.

Only the ``max_dets`` (20, COCOeval's ``maxDets`` for keypoints) best rows of
each class in each image are kept: COCOeval looks at no others (top
``maxDets[-1]`` per image and category, ties in row order, the rule applied
here), so the number is unchanged and the memory stays small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lucidyolo.metrics.coco_eval import CocoResult, evaluate_coco
from lucidyolo.metrics.epoch_map import precision_recall, top_per_class
from lucidyolo.metrics.mapping import clip_to_image, image_region
from lucidyolo.metrics.per_image_epoch_metric import (
    ImageRows,
    PerImageEpochMetric,
    as_bool,
    as_float64,
)
from lucidyolo.tasks.keypoints.keypoint_detections import KeypointDetections
from lucidyolo.tasks.keypoints.oks import keypoint_sigmas
from lucidyolo.tasks.keypoints.results import keypoint_results

KEYPOINT_MAX_DETS = 20
"""COCOeval's ``maxDets`` for ``iouType="keypoints"``."""


def _clip_points(points: Tensor, batch_meta: Mapping[str, Tensor]) -> Tensor:
    """Clip ``(B, N, K, 2+)`` points' ``x, y`` to each image's region inside the letterbox (no-op for NaN mosaics)."""
    region = image_region(batch_meta, points)
    if region is None:
        return points
    lo, hi = region
    xy = torch.maximum(torch.minimum(points[..., :2], hi[:, None, None]), lo[:, None, None])
    return torch.cat((xy, points[..., 2:]), dim=-1)


class OKSEpochMAP(PerImageEpochMetric):
    """COCO keypoint AP@[.50:.05:.95] (OKS) over a validation epoch.

    Args:
        num_keypoints: K, points per instance.
        sigmas: ``K`` per-point OKS sigmas; ``None`` uses
            :func:`~lucidyolo.tasks.keypoints.oks.keypoint_sigmas` (COCO person for 17,
            uniform 0.072 otherwise).
        num_classes: contiguous classes (categories ``0..C-1``); ``None`` uses
            the labels seen.
        max_dets: rows kept per image and class (``None`` keeps all).

    After ``compute()``, :attr:`last_result` holds the full ``keypoints``
    :class:`~lucidyolo.metrics.coco_eval.CocoResult` (10 stats), or ``None``
    when there was nothing to score.
    """

    keys = ("oks_mAP", "oks_precision", "oks_recall")
    last_result: CocoResult | None

    def __init__(
        self,
        num_keypoints: int,
        sigmas: Sequence[float] | None = None,
        num_classes: int | None = None,
        max_dets: int | None = KEYPOINT_MAX_DETS,
    ) -> None:
        super().__init__()
        self.num_keypoints = int(num_keypoints)
        self.sigmas = list(keypoint_sigmas(self.num_keypoints) if sigmas is None else (float(s) for s in sigmas))
        if len(self.sigmas) != self.num_keypoints:
            raise ValueError(f"{len(self.sigmas)} sigmas for num_keypoints={self.num_keypoints}")
        self.num_classes = num_classes
        self.max_dets = max_dets

    def image_rows(self, decoded: KeypointDetections, gt: Mapping[str, Tensor],
                   batch_meta: Mapping[str, Tensor]) -> list[ImageRows]:
        """Each image's ``predicted`` ``(rows (n, 6), points (n, K, 3))`` and ``truth`` ``(boxes (m, 4),
        labels (m,), points (m, K, 2), visibility (m, K), crowd (m,) bool)``, float64 but for ``crowd``.

        Args:
            decoded: ``rows (B, N, 6)`` (score 0 padding) and ``keypoints (B, N, K, 3)``,
                network-input pixels.
            gt: padded ground truth in the same frame: ``boxes (B, M, 4)`` xyxy,
                ``labels (B, M)``, ``mask (B, M)`` bool, ``keypoints (B, M, K, 2)``,
                ``visibility (B, M, K)``, optional ``crowd (B, M)``.
            batch_meta: ``index (B,)`` (see :meth:`update`), optional
                ``letterbox (B, 3)`` and ``orig_hw (B, 2)`` (enable clipping).
        """
        rows, points = decoded.rows, decoded.keypoints
        if points.shape[-2] != self.num_keypoints or gt["keypoints"].shape[-2] != self.num_keypoints:
            raise ValueError(
                f"OKSEpochMAP(num_keypoints={self.num_keypoints}) got predicted K={points.shape[-2]}, "
                f"ground-truth K={gt['keypoints'].shape[-2]}"
            )
        if "letterbox" in batch_meta and "orig_hw" in batch_meta:
            rows = clip_to_image(rows, batch_meta)
            points = _clip_points(points, batch_meta)
        if self.max_dets is not None:
            rows = top_per_class(rows, self.max_dets)
        rows_np, points_np = as_float64(rows), as_float64(points)
        mask = as_bool(gt["mask"])  # (B, M)
        boxes, labels = as_float64(gt["boxes"]), as_float64(gt["labels"])
        gt_points, vis = as_float64(gt["keypoints"]), as_float64(gt["visibility"])
        crowd = as_float64(gt["crowd"]) > 0 if gt.get("crowd") is not None else np.zeros_like(mask)
        images = []
        for i in range(rows_np.shape[0]):
            keep, real = rows_np[i, :, 4] > 0, mask[i]
            images.append(ImageRows(
                (rows_np[i, keep], points_np[i, keep]),
                (boxes[i, real], labels[i, real], gt_points[i, real], vis[i, real], crowd[i, real]),
            ))  # fmt: skip
        return images

    def to_coco(self, images: Mapping[int, ImageRows] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The COCO ground truth and ``keypoints`` results of ``images`` (default: everything seen), network-input frame.

        Category ids are the contiguous labels; image ids the split indices.
        """
        images = self._images if images is None else images
        labels: set[int] = set()
        for (det, _), (_, lab, *_) in images.values():
            labels |= set(det[:, 5].astype(np.int64).tolist()) | set(lab.astype(np.int64).tolist())
        cat_ids = list(range(self.num_classes)) if self.num_classes is not None else sorted(labels)
        identity = list(range(max([*cat_ids, *labels], default=-1) + 1))  # label -> category id
        anns: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for image_id, ((det, det_pts), (boxes, lab, pts, vis, crowd)) in images.items():
            results += keypoint_results(KeypointDetections(det, det_pts), image_id, identity)
            wh = boxes[:, 2:] - boxes[:, :2]  # (m, 2)
            flat = np.concatenate([pts, vis[..., None]], axis=-1).reshape(len(boxes), 3 * self.num_keypoints)  # (m, 3K)
            for j in range(len(boxes)):
                w, h = float(wh[j, 0]), float(wh[j, 1])
                anns.append({
                    "id": len(anns) + 1,  # pycocotools treats id 0 as "unmatched": start at 1
                    "image_id": image_id,
                    "category_id": int(lab[j]),
                    "bbox": [float(boxes[j, 0]), float(boxes[j, 1]), w, h],
                    "area": w * h,
                    "iscrowd": int(crowd[j]),
                    "keypoints": flat[j].tolist(),
                    "num_keypoints": int((vis[j] > 0).sum()),
                })  # fmt: skip
        gt = {
            "images": [{"id": i} for i in images],
            "categories": [{"id": c, "name": str(c)} for c in cat_ids],
            "annotations": anns,
        }
        return gt, results

    def score(self, images: Mapping[int, ImageRows]) -> dict[str, Tensor] | None:
        """``{"oks_mAP": t, "oks_precision": t, "oks_recall": t}`` (logged as
        ``val/oks_mAP`` ...; precision and recall at OKS 0.5 and the best
        mean-F1 confidence), float32 tensors; 0.0 where COCOeval reports -1
        (no scorable ground truth), as :class:`~lucidyolo.metrics.epoch_map.EpochMAP`
        does; ``None`` without any category.
        """
        gt, results = self.to_coco(images)
        if not gt["categories"]:
            return None
        result = evaluate_coco(gt, results, iou_type="keypoints", kpt_oks_sigmas=self.sigmas, matches=True)
        self.last_result = result
        return {"oks_mAP": torch.tensor(max(result.stats["AP"], 0.0), dtype=torch.float32),
                **precision_recall(result.matches, "oks_")}
