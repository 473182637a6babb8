"""Epoch box and mask mAP for instance segmentation, synchronised across ranks.

:class:`SegmEpochMAP` is :class:`~lucidyolo.metrics.epoch_map.EpochMAP` (box
mAP50-95 / mAP50, its rows, tokens and de-duplication unchanged) plus COCO
``segm`` mAP50-95 / mAP50 from pycocotools, both in the network-input frame.

Masks travel as COCO compressed RLE bytes inside float64 ``cat`` states, so
they sync over the same all-gather as the box rows (every state has one dtype
on every rank, including a rank that saw no batch, which torchmetrics fills
with an empty tensor of the metric dtype, float64):

* ``img_hw``: ``(token, H, W)`` per image record, the input size its RLEs use;
* ``det_rle`` / ``det_rle_len``: the RLE ``counts`` bytes of every predicted
  row EpochMAP keeps (score > 0), in EpochMAP's ``det_rows`` order, packed six
  bytes per float64 (an integer below 2**48, exact), each row padded to a whole
  number of words; ``det_rle_len`` holds each row's byte length;
* ``gt_rle`` / ``gt_rle_len``: the same for every ground-truth row, in
  ``gt_rows`` order.

Predicted masks come from :func:`~lucidyolo.tasks.segment.mask_assembly.masks_in_input`
(the input size is ``proto_stride`` times the prototype size); ground-truth
masks from the polygon rings (pycocotools ``frPyObjects`` + ``merge``), crowd
rows as ``iscrowd`` regions whose segmentation is their box.

Only the ``max_dets`` (100) highest-scored rows of each class in each image are
kept, for boxes and masks alike: COCOeval looks at no others (it keeps the top
``maxDets[-1]`` per image and category, ties in row order, exactly the rule
applied here), so the stats are unchanged and the masks of the rest are never
assembled, encoded or synced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from pycocotools import mask as mask_utils
from torch import Tensor

from lucidyolo.metrics.coco_eval import CocoResult, evaluate_coco
from lucidyolo.metrics.epoch_map import (
    EpochMAP,
    _rows_to_numpy,
    precision_recall,
    rows_to_coco,
    top_per_class,
)
from lucidyolo.metrics.mapping import clip_to_image
from lucidyolo.tasks.segment.mask_assembly import (
    PROTO_STRIDE,
    encode_rle_bytes,
    gt_instance_rles,
    masks_in_input,
)
from lucidyolo.tasks.segment.mask_detections import MaskDetections

_WORD = 6
"""Bytes per float64 word: integers below 2**48 are exact in float64 (53-bit mantissa)."""


def pack_bytes(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings -> ``(words (W,) float64, lengths (n,) float64)``, each blob padded to whole words."""
    lengths = np.array([len(b) for b in blobs], dtype=np.int64)
    if not blobs:
        return np.zeros(0, np.float64), np.zeros(0, np.float64)
    padded = b"".join(b + b"\0" * (-len(b) % _WORD) for b in blobs)
    grouped = np.frombuffer(padded, dtype=np.uint8).reshape(-1, _WORD)  # (W, 6)
    wide = np.zeros((grouped.shape[0], 8), dtype=np.uint8)
    wide[:, :_WORD] = grouped  # little-endian: the top two bytes stay 0
    return wide.view("<u8").reshape(-1).astype(np.float64), lengths.astype(np.float64)


def unpack_bytes(words: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    """Inverse of :func:`pack_bytes`."""
    lengths = lengths.astype(np.int64)
    wide = words.astype("<u8").reshape(-1, 1).view(np.uint8)  # (W, 8)
    flat = wide[:, :_WORD].tobytes()
    starts = np.concatenate([[0], np.cumsum(-(-lengths // _WORD) * _WORD)])[:-1]
    return [flat[s:s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]


class SegmEpochMAP(EpochMAP):
    """Box and mask mAP50-95 / mAP50 over a validation epoch, synchronised across ranks.

    Args:
        num_classes: contiguous classes (categories ``0..C-1``); ``None`` uses
            the labels seen.
        max_dets: rows kept per image and class (COCOeval's ``maxDets[-1]``;
            ``None`` keeps every row).
        proto_stride: network-input pixels per prototype pixel (input size =
            stride x prototype size).
        **kwargs: passed to :class:`torchmetrics.Metric`.

    After ``compute()``, :attr:`last_result` holds the ``bbox``
    :class:`~lucidyolo.metrics.coco_eval.CocoResult` and
    :attr:`last_segm_result` the ``segm`` one.
    """

    img_hw: list[Tensor]
    det_rle: list[Tensor]
    det_rle_len: list[Tensor]
    gt_rle: list[Tensor]
    gt_rle_len: list[Tensor]

    def __init__(self, num_classes: int | None = None, max_dets: int | None = 100,
                 proto_stride: float = PROTO_STRIDE, **kwargs: Any) -> None:
        super().__init__(num_classes=num_classes, **kwargs)
        self.max_dets = max_dets
        self.proto_stride = proto_stride
        for name in ("img_hw", "det_rle", "det_rle_len", "gt_rle", "gt_rle_len"):
            self.add_state(name, default=[], dist_reduce_fx="cat")
        self.last_segm_result: CocoResult | None = None

    def update(  # type: ignore[override]
        self,
        decoded: MaskDetections,
        gt: Mapping[str, Tensor],
        batch_meta: Mapping[str, Tensor],
    ) -> None:
        """Add one batch.

        Args:
            decoded: ``rows (B, K, 6)`` network-input pixels (score 0 padding),
                ``coeffs (B, K, P)``, ``protos (B, P, Hp, Wp)``.
            gt: padded ground truth: ``boxes (B, M, 4)``, ``labels (B, M)``,
                ``mask (B, M)``, optional ``crowd (B, M)``, and the polygon
                rings (``poly_points``, ``poly_ring_lengths``,
                ``poly_ring_image``, ``poly_ring_slot``).
            batch_meta: ``letterbox (B, 3)``, ``orig_hw (B, 2)``, optional
                ``index (B,)`` (dataset index: enables de-duplication).
        """
        # boxes clipped to the image inside the letterbox as for det (lucid eval clips to
        # the original image); the masks are cropped by the same clipped boxes
        rows = clip_to_image(decoded.rows, batch_meta)
        if self.max_dets is not None:
            rows = top_per_class(rows, self.max_dets)
        super().update(rows, gt["boxes"], gt["labels"], gt["mask"], batch_meta.get("index"),
                       gt_crowd=gt.get("crowd"))
        b, _, hp, wp = decoded.protos.shape
        height, width = round(hp * self.proto_stride), round(wp * self.proto_stride)
        # same device rule as EpochMAP's rows (float64; MPS has none and is single-process)
        device = rows.device if rows.device.type != "mps" else torch.device("cpu")
        tokens = self.img_rows[-1].reshape(-1, 2)[:, 0]  # (B,) the records EpochMAP just added
        size = tokens.new_tensor([height, width]).expand(b, 2)
        self.img_hw.append(torch.cat([tokens[:, None], size], dim=1).reshape(-1).to(device))  # (B*3,)

        det_blobs: list[bytes] = []
        for i in range(b):  # EpochMAP's det_rows order: image by image, rows with score > 0
            masks = masks_in_input(MaskDetections(rows[i], decoded.coeffs[i], decoded.protos[i]), height, width)
            det_blobs += [r["counts"] for r in encode_rle_bytes(masks)]
        gt_blobs = [r["counts"] for image in gt_instance_rles(gt, height, width) for r in image]
        for blobs, words_state, len_state in (
            (det_blobs, self.det_rle, self.det_rle_len),
            (gt_blobs, self.gt_rle, self.gt_rle_len),
        ):
            words, lengths = pack_bytes(blobs)
            words_state.append(torch.from_numpy(words).to(device))
            len_state.append(torch.from_numpy(lengths).to(device))

    def _segm_coco(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """COCO ground truth and results with RLE segmentations, de-duplicated as the box rows."""
        img_rows = _rows_to_numpy(self.img_rows, 2)
        det_rows = _rows_to_numpy(self.det_rows, 7)
        gt_rows = _rows_to_numpy(self.gt_rows, 7)
        gt, dets = rows_to_coco(img_rows, det_rows, gt_rows, self.num_classes)
        img_hw = _rows_to_numpy(self.img_hw, 3)
        det_rle = unpack_bytes(_rows_to_numpy(self.det_rle, 1)[:, 0], _rows_to_numpy(self.det_rle_len, 1)[:, 0])
        gt_rle = unpack_bytes(_rows_to_numpy(self.gt_rle, 1)[:, 0], _rows_to_numpy(self.gt_rle_len, 1)[:, 0])
        if len(det_rle) != det_rows.shape[0] or len(gt_rle) != gt_rows.shape[0]:
            raise RuntimeError("SegmEpochMAP: mask states are out of step with the box rows")
        # rows_to_coco keeps, for each image id, its record with the smallest token, and
        # every row of that record in state order: pick the same rows' masks
        order = np.lexsort((img_rows[:, 0], img_rows[:, 1]))
        _, first = np.unique(img_rows[order, 1], return_index=True)
        kept_tokens = img_rows[order[first], 0]
        det_keep = np.flatnonzero(np.isin(det_rows[:, 0], kept_tokens))
        gt_keep = np.flatnonzero(np.isin(gt_rows[:, 0], kept_tokens))
        if det_keep.size != len(dets) or gt_keep.size != len(gt["annotations"]) or not np.array_equal(
            det_rows[det_keep, 5], np.array([d["score"] for d in dets], dtype=np.float64)
        ):
            raise RuntimeError("SegmEpochMAP: masks no longer line up with rows_to_coco's rows")
        size = {tok: [int(h), int(w)] for tok, h, w in img_hw.tolist()}
        id_size = {int(i): size[t] for t, i in zip(img_rows[order[first], 0].tolist(),
                                                   img_rows[order[first], 1].tolist(), strict=True)}
        # annToRLE reads every image's height and width, even for RLE segmentations
        images = [{**im, "height": id_size[im["id"]][0], "width": id_size[im["id"]][1]} for im in gt["images"]]
        anns = []
        for ann, j in zip(gt["annotations"], gt_keep.tolist(), strict=True):
            rle = {"size": size[gt_rows[j, 0]], "counts": gt_rle[j].decode("ascii")}
            # COCO's area of a mask annotation is its pixel count (it decides the area ranges)
            anns.append({**ann, "segmentation": rle, "area": float(mask_utils.area(rle))})
        seg_dets = [
            {**d, "segmentation": {"size": size[det_rows[j, 0]], "counts": det_rle[j].decode("ascii")}}
            for d, j in zip(dets, det_keep.tolist(), strict=True)
        ]
        return {**gt, "images": images, "annotations": anns}, seg_dets

    def compute(self) -> dict[str, Tensor]:
        """Score everything seen (on every rank, after sync).

        Returns:
            ``{"mAP50-95", "mAP50", "precision", "recall", "segm_mAP50-95",
            "segm_mAP50", "segm_precision", "segm_recall"}`` float tensors, 0.0 where COCOeval reports -1 or there is nothing to score
            (as :meth:`EpochMAP.compute`).
        """
        out = super().compute()
        gt, dets = self._segm_coco()
        zero = torch.tensor(0.0, dtype=torch.float32)
        if not gt["images"] or not gt["categories"]:
            self.last_segm_result = None
            return {**out, "segm_mAP50-95": zero, "segm_mAP50": zero.clone(), **precision_recall(None, "segm_")}
        result = evaluate_coco(gt, dets, iou_type="segm", matches=True)
        self.last_segm_result = result
        return {
            **out,
            "segm_mAP50-95": torch.tensor(max(result.stats["AP"], 0.0), dtype=torch.float32),
            "segm_mAP50": torch.tensor(max(result.stats["AP50"], 0.0), dtype=torch.float32),
            **precision_recall(result.matches, "segm_"),
        }
