"""Hooks of the instance segmentation task (imported lazily by :mod:`lucidyolo.tasks.segment.spec`; uses torch).

Segmentation is detection plus one stem (``coeffs``: ``P`` tanh coefficients per
anchor and branch) and one extra module (:class:`~lucidyolo.tasks.segment.prototypes.PrototypeHead`:
prototypes, and a semantic head only while training). Its decode returns
:class:`~lucidyolo.tasks.segment.mask_detections.MaskDetections`: the box rows of
detection plus what assembles their masks where a consumer needs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from lucidyolo.tasks.detect import hooks as detect_hooks
from lucidyolo.tasks.dual_head import DECODE_PATHS
from lucidyolo.tasks.segment.mask_detections import MaskDetections
from lucidyolo.tasks.segment.spec import FIELDS

PROTO_WIDTH = 256
"""Base width of the prototype convolutions (scaled by the variant like every layer: 64 for n)."""


def build_model(cfg: Any, num_classes: int, **_: Any) -> nn.Module:
    from lucidyolo.models import create_model
    from lucidyolo.models.head import StemSpec
    from lucidyolo.tasks.segment.prototypes import PrototypeHead

    p = int(cfg.num_prototypes)
    model = create_model(cfg.variant, num_classes=num_classes, class_width=cfg.class_width, label="seg",
                         extra_stems=[StemSpec("coeffs", (p,), hidden_div=4, min_hidden=p, published="cv4")])
    model.extras["protos"] = PrototypeHead(
        model.neck.out_channels, model.scale.channels(PROTO_WIDTH), num_prototypes=p, num_classes=num_classes
    )
    return model


def build_criterion(cfg: Any, num_classes: int, **_: Any) -> nn.Module:
    from lucidyolo.assign.one_to_one import OneToOneAssigner
    from lucidyolo.assign.tal import TaskAlignedAssigner
    from lucidyolo.losses.branch import BranchLoss
    from lucidyolo.losses.criterion import DetectionCriterion
    from lucidyolo.tasks.segment.mask_loss import MaskTerm, SemanticTerm

    return DetectionCriterion(
        TaskAlignedAssigner(topk=cfg.o2m_topk),
        OneToOneAssigner(topk=cfg.o2o_topk),
        BranchLoss(box_gain=cfg.box_gain, cls_gain=cfg.cls_gain, l1_gain=cfg.l1_gain),
        alpha_schedule=(cfg.alpha_start, cfg.alpha_end),
        branch_terms=[MaskTerm(mask_gain=cfg.mask_gain, crop=cfg.mask_crop)],
        global_terms=[SemanticTerm(semantic_gain=cfg.semantic_gain)],
        branch_inputs=("protos",),
    )


def decode(outputs: Mapping[str, Any], path: str = "e2e", **_: Any) -> MaskDetections:
    """Box rows ``(B, 300, 6)`` of the ``path`` branch, its coefficients gathered by the kept anchor index, the prototypes."""
    from lucidyolo.decode.e2e import e2e_topk, gather_kept
    from lucidyolo.decode.nms import nms_decode
    from lucidyolo.structures.box_coder import ltrb_to_xyxy

    if path not in ("e2e", "nms"):
        raise ValueError(f"unknown decode path {path!r} (e2e or nms)")
    branch = outputs["o2o" if path == "e2e" else "o2m"]
    boxes = ltrb_to_xyxy(branch["boxes"], outputs["anchors"], outputs["strides"])
    rows, index = (e2e_topk if path == "e2e" else nms_decode)(boxes, branch["logits"])
    return MaskDetections(rows, gather_kept(branch["coeffs"], index), outputs["protos"])  # coeffs (B, 300, P)



def build_metric(num_classes: int, **_: Any) -> nn.Module:
    from lucidyolo.tasks.segment.epoch_map import SegmEpochMAP

    return SegmEpochMAP(num_classes=num_classes)


def metric_update(metric: Any, decoded: MaskDetections, gt: Mapping[str, Tensor], batch_meta: Mapping[str, Tensor],
                  **_: Any) -> None:
    """Boxes and masks of one batch against its padded ground truth (polygon rings, crowd regions)."""
    metric.update(decoded, gt, batch_meta)



def gate_score(model: Any, source: Any, img_size: int, conf: float, batch_size: int = 16, **_: Any) -> float:
    """Mean mask IoU over every GT of ``source`` (unmatched = 0), deployed end-to-end graph, network-input frame."""
    from lucidyolo.data.val_batches import val_batches
    from lucidyolo.models.deploy import make_deploy_model
    from lucidyolo.tasks.segment.mask_iou import MeanMaskIoU

    deployed = make_deploy_model(model).eval()  # the family's deployed graph keeps the prototypes
    metric = MeanMaskIoU()
    with torch.inference_mode():
        for images, gt, _ in val_batches(source, img_size, batch_size, FIELDS):
            dets, coeffs, protos = deployed(images)
            metric.update(MaskDetections(dets, coeffs, protos), gt, conf)
    return metric.compute()  # NaN without ground truth: fails every floor


def evaluate(*, model: Any, decode: Any, source: Any, img_size: int, batch_size: int, device: Any,
             limit: int | None, options: Mapping[str, Any] | None = None,
             paths: Sequence[str] = DECODE_PATHS, **_: Any) -> dict[str, Any]:
    """COCO ``bbox`` and ``segm`` through pycocotools for each decode path of ``paths`` (``masks: False``: boxes only)."""
    from lucidyolo.metrics.coco_eval import dets_to_coco_results
    from lucidyolo.metrics.coco_protocol import evaluate_coco_protocol
    from lucidyolo.tasks.segment.mask_assembly import mask_results

    with_masks = bool((options or {}).get("masks", True))

    def boxes_only(det: MaskDetections, image_id: int, category_ids: Sequence[int],
                   letterbox: tuple[float, float, float], orig_hw: tuple[int, int]) -> list[dict[str, Any]]:
        return dets_to_coco_results(det.rows, image_id, category_ids, *letterbox, orig_hw)

    return evaluate_coco_protocol(
        model=model, decode=decode, to_results=mask_results if with_masks else boxes_only, source=source,
        fields=FIELDS, iou_types=("bbox", "segm") if with_masks else ("bbox",), img_size=img_size,
        batch_size=batch_size, device=device, limit=limit, paths=paths, matches=bool((options or {}).get("matches")),
    )


def predict(decoded: MaskDetections, image_hw: tuple[int, int], letterbox: tuple[float, float, float],
            class_names: Sequence[str], conf: float, **_: Any) -> list[dict[str, Any]]:
    """Detection's dicts plus ``"mask"``: COCO RLE (``size`` ``[h, w]``, ``counts`` str) in original pixels."""
    from lucidyolo.tasks.segment.mask_assembly import encode_rle, masks_in_original

    keep = decoded.rows[:, 4] >= max(conf, 1e-9)
    kept = MaskDetections(decoded.rows[keep], decoded.coeffs[keep], decoded.protos)
    rows = detect_hooks.predict(decoded=kept.rows, image_hw=image_hw, letterbox=letterbox, class_names=class_names,
                                conf=conf)
    masks = masks_in_original(kept, letterbox, image_hw)  # (N, h, w) bool, rows in order
    for row, rle in zip(rows, encode_rle(masks), strict=True):
        row["mask"] = rle
    return rows


def target_rows(gt: Mapping[str, Tensor], image_hw: tuple[int, int], class_names: Sequence[str],
                **_: Any) -> list[list[dict[str, Any]]]:
    """Detection's target dicts plus ``"mask"``: each instance's rings (crowd: its box) as one RLE in the input frame."""
    from lucidyolo.tasks.segment.mask_assembly import gt_instance_rles

    rows = detect_hooks.target_rows(gt=gt, class_names=class_names)
    rles = gt_instance_rles({k: v.cpu() for k, v in gt.items()}, int(image_hw[0]), int(image_hw[1]))
    for image_rows, image_rles in zip(rows, rles, strict=True):
        for row, rle in zip(image_rows, image_rles, strict=True):
            row["mask"] = rle
    return rows


def draw(image: np.ndarray, predictions: Sequence[Mapping[str, Any]], class_names: Sequence[str], **_: Any) -> Any:
    """Filled translucent masks with their outlines under detection's boxes and captions."""
    from lucidyolo.predict.draw import draw_masks

    return draw_masks(image, predictions, class_names)


def label_lines(predictions: Sequence[Mapping[str, Any]], image_hw: tuple[int, int], **_: Any) -> list[str]:
    """``label x1 y1 ... xn yn conf`` per instance: the outline of its mask's largest part, normalised.

    The outline follows pixel edges, simplified within a pixel (:func:`~lucidyolo.structures.mask_polygon.mask_polygon`);
    an empty mask (every pixel below the threshold) writes its box's four corners, so each prediction has its row.
    """
    from lucidyolo.predict.label_lines import format_line, normalise_xy
    from lucidyolo.structures.mask_polygon import mask_polygon
    from lucidyolo.structures.rle_polygons import decode_rle

    h, w = image_hw
    out = []
    for p in predictions:  # one outline per instance: each is its own mask
        ring = mask_polygon(decode_rle(p["mask"], h, w))  # (n, 2) px
        if not len(ring):
            x1, y1, x2, y2 = p["box"]
            ring = np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], np.float64)
        out.append(format_line(int(p["label"]), normalise_xy(ring, image_hw), p["score"]))
    return out


def coco_results(predictions: Sequence[Mapping[str, Any]], image_id: int, image_hw: tuple[int, int],
                 class_names: Sequence[str], **_: Any) -> list[dict[str, Any]]:
    """Detection's ``bbox`` results plus ``segmentation``: the mask's COCO RLE (one list scores bbox and segm)."""
    kept = detect_hooks.scored(predictions)
    out = detect_hooks.coco_results(predictions=kept, image_id=image_id, image_hw=image_hw, class_names=class_names)
    for d, p in zip(out, kept, strict=True):
        d["segmentation"] = dict(p["mask"])
    return out


def export_check(deployed: nn.Module, onnx_path: Path, images: Tensor, **_: Any) -> dict[str, Any]:
    """Detection rows as for det, plus the prototypes and the assembled masks of the compared rows."""
    from lucidyolo.tasks.segment.export_parity import mask_parity

    return mask_parity(deployed, onnx_path, images)


VERTEX_BINS = 30
"""At most this many bins in the vertices-per-polygon histogram (one per count while counts span fewer)."""


def label_stats(instances: Mapping[str, Any], **_: Any) -> dict[str, dict[str, Any]]:
    """``labels.png`` panel: vertices per polygon ring of ``instances["polygons"]``.

    Bins are whole vertex counts (edges at half-integers), widened by a whole
    factor when the counts span more than :data:`VERTEX_BINS` values.
    """
    polygons = instances.get("polygons")
    if polygons is None:
        return {}
    lengths = polygons.ring_lengths()  # (R,) points per ring
    lo, hi = (int(lengths.min()), int(lengths.max())) if lengths.size else (0, 0)
    width = -(-(hi - lo + 1) // VERTEX_BINS)  # ceil: at most VERTEX_BINS bins
    bins = -(-(hi - lo + 1) // width)
    edges = lo - 0.5 + width * np.arange(bins + 1, dtype=np.float64)  # (bins + 1,)
    counts, _ = np.histogram(lengths, bins=edges)
    owners = np.bincount(polygons.ring_owner) if polygons.num_rings else np.zeros(0, np.int64)
    return {"polygon_vertices": {
        "kind": "histogram", "title": "vertices per polygon", "edges": edges, "counts": counts,
        "xlabel": "vertices", "ylabel": "polygons",
        "summary": {"polygons": int(lengths.size), "mean": float(lengths.mean()) if lengths.size else 0.0,
                    "max": hi, "instances_with_several_polygons": int((owners > 1).sum())},
    }}


def matches(metric: Any, **_: Any) -> dict[str, Any]:
    """``{"B": boxes, "M": masks}``: the metric's own pycocotools matches at IoU 0.5 (mask IoU for ``M``)."""
    out = {}
    for key, result in (("B", metric.last_result), ("M", metric.last_segm_result)):
        if result is not None and result.matches is not None:
            out[key] = result.matches
    return out
