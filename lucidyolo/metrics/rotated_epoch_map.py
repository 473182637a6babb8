"""Epoch rotated mAP (AP@[.50:.05:.95] and AP50, per tile) for the obb task, single device.

:class:`RotatedEpochMAP` keeps, per validation image (tile), its predicted
rotated boxes and its ground truth as small float64 numpy arrays on the CPU;
``compute`` scores them with :func:`~lucidyolo.metrics.rotated_map.rotated_map`
(exact polygon IoU, DOTA difficult rule, COCO 101-point AP, up to 300
detections per tile). The obb task declares ``multi_device=False``: the AP
ranks every detection of the split together and nothing is gathered across
ranks.

Frame: predictions and ground truth both come in the network-input
(letterboxed) frame, and IoU is invariant to the letterbox's uniform scale
and shift, so no mapping back to original pixels is needed. Unlike upright
boxes, rotated boxes are not clipped to the image region inside the letterbox:
clipping a rotated box is not a rotated box, and a prediction reaching into
the padding is scored as it is. ``batch_meta`` serves only for the
image index (deduplication), as in
:class:`~lucidyolo.metrics.oks_epoch_map.OKSEpochMAP`.

Whole-scene scoring (merging tiles back with
:mod:`~lucidyolo.metrics.scene_merge`) belongs to ``lucid eval``: a training
validation batch carries no ``source_image`` / ``window``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor, nn

from lucidyolo.metrics.epoch_map import precision_recall
from lucidyolo.metrics.matches import Matches
from lucidyolo.metrics.rotated_map import RotatedAP, rotated_map, rotated_matches

ROTATED_MAX_DETS = 300
"""Detections scored per tile (the deployed graph's top-k)."""


def _np(t: Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


class RotatedEpochMAP(nn.Module):
    """Rotated AP@[.50:.05:.95] and AP50 over a validation epoch (per tile).

    Args:
        num_classes: contiguous classes ``0..C-1``; ``None`` uses one more than
            the largest label seen (classes without non-difficult GT are left out
            of the mean either way).
        max_dets: rows kept per image (top scores over all classes; ``None``
            keeps all).

    After ``compute()``, :attr:`last_result` holds the full
    :class:`~lucidyolo.metrics.rotated_map.RotatedAP` (per-class AP, mAP75),
    or ``None`` when there was nothing to score, and :attr:`last_matches` its
    :class:`~lucidyolo.metrics.matches.Matches` at IoU 0.5.
    """

    def __init__(self, num_classes: int | None = None, max_dets: int | None = ROTATED_MAX_DETS) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.max_dets = max_dets
        self.last_result: RotatedAP | None = None
        self.last_matches: Matches | None = None
        self.reset()

    def reset(self) -> None:
        """Forget every image seen (call after ``compute`` at the end of an epoch)."""
        # image id -> (det rboxes (n, 5), scores (n,), labels (n,), gt rboxes (m, 5), labels (m,), difficult (m,))
        self._images: dict[int, tuple[np.ndarray, ...]] = {}
        self._seen = 0

    def update(self, decoded: Tensor, gt: Mapping[str, Tensor], batch_meta: Mapping[str, Tensor]) -> None:
        """Add one batch.

        Args:
            decoded: ``(B, N, 7)`` ``cx, cy, w, h, theta, score, class`` rows,
                score 0 padding, network-input pixels.
            gt: padded ground truth in the same frame: ``rboxes (B, M, 5)``,
                ``labels (B, M)``, ``mask (B, M)`` bool, optional ``difficult (B, M)``
                bool (none difficult without it).
            batch_meta: ``index (B,)`` image index in the split (an image seen
                again keeps its first record; without it every image is new).
        """
        if decoded.ndim != 3 or decoded.shape[-1] != 7:
            raise ValueError(f"RotatedEpochMAP expects (B, N, 7) rotated rows, got {tuple(decoded.shape)}")
        b = decoded.shape[0]
        rows = _np(decoded)  # (B, N, 7)
        mask = gt["mask"].detach().to("cpu", torch.bool).numpy()  # (B, M)
        rboxes, labels = _np(gt["rboxes"]), _np(gt["labels"]).astype(np.int64)
        difficult = (
            gt["difficult"].detach().to("cpu", torch.bool).numpy() if gt.get("difficult") is not None
            else np.zeros_like(mask)
        )  # fmt: skip
        index = batch_meta.get("index")
        ids = (np.arange(self._seen, self._seen + b) if index is None else _np(index).reshape(b)).astype(np.int64)
        self._seen += b
        for i, image_id in enumerate(ids.tolist()):
            if image_id in self._images:
                continue
            det = rows[i, rows[i, :, 5] > 0]  # (n, 7) the real rows
            if self.max_dets is not None and det.shape[0] > self.max_dets:
                det = det[np.argsort(-det[:, 5], kind="stable")[: self.max_dets]]
            real = mask[i]
            self._images[image_id] = (
                det[:, :5], det[:, 5], det[:, 6].astype(np.int64),
                rboxes[i, real], labels[i, real], difficult[i, real],
            )  # fmt: skip

    def compute(self) -> dict[str, Tensor]:
        """Score everything seen.

        Returns:
            ``{"rotated_mAP50-95": t, "rotated_mAP50": t, "rotated_precision": t,
            "rotated_recall": t}`` (logged with a ``val/`` prefix; precision
            and recall at IoU 0.5 and the best mean-F1 confidence), float32 scalar
            tensors like :class:`~lucidyolo.metrics.oks_epoch_map.OKSEpochMAP`'s;
            0.0 where no class has non-difficult ground truth or nothing was
            seen, so a checkpoint monitor never prefers an empty epoch.
        """
        zero = {"rotated_mAP50-95": torch.tensor(0.0), "rotated_mAP50": torch.tensor(0.0),
                **precision_recall(None, "rotated_")}
        records = list(self._images.values())
        labels_seen = [int(r[2].max()) for r in records if r[2].size] + [int(r[4].max()) for r in records if r[4].size]
        num_classes = self.num_classes if self.num_classes is not None else max(labels_seen, default=-1) + 1
        if not records or num_classes <= 0:
            self.last_result = None
            self.last_matches = None
            return zero
        result = rotated_map(
            [(r[0], r[1], r[2]) for r in records], [(r[3], r[4], r[5]) for r in records],
            num_classes, max_dets=self.max_dets,
        )  # fmt: skip
        self.last_result = result
        self.last_matches = rotated_matches(
            [(r[0], r[1], r[2]) for r in records], [(r[3], r[4], r[5]) for r in records],
            num_classes, max_dets=self.max_dets,
        )  # fmt: skip

        def value(x: float) -> Tensor:
            return torch.tensor(x if np.isfinite(x) else 0.0, dtype=torch.float32)

        return {"rotated_mAP50-95": value(result.map50_95), "rotated_mAP50": value(result.map50),
                **precision_recall(self.last_matches, "rotated_")}
