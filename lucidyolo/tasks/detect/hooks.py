"""Hooks of the detection task (imported lazily by :mod:`lucidyolo.tasks.detect.spec`; uses torch).

Each function implements one hook contract of :class:`lucidyolo.tasks.api.TaskSpec`;
the engine calls them with keyword arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from lucidyolo.config.schema import ModelConfig
from lucidyolo.metrics.mapping import clip_to_image
from lucidyolo.tasks.detect.spec import FIELDS
from lucidyolo.tasks.dual_head import DECODE_PATHS


def build_model(cfg: ModelConfig, num_classes: int, **_: Any) -> nn.Module:
    from lucidyolo.models import create_model

    return create_model(cfg.variant, num_classes=num_classes, class_width=cfg.class_width, label="det")


def build_criterion(cfg: ModelConfig, num_classes: int, **_: Any) -> nn.Module:
    from lucidyolo.assign.one_to_one import OneToOneAssigner
    from lucidyolo.assign.tal import TaskAlignedAssigner
    from lucidyolo.losses.branch import BranchLoss
    from lucidyolo.losses.criterion import DetectionCriterion

    return DetectionCriterion(
        TaskAlignedAssigner(topk=cfg.o2m_topk),
        OneToOneAssigner(topk=cfg.o2o_topk),
        BranchLoss(box_gain=cfg.box_gain, cls_gain=cfg.cls_gain, l1_gain=cfg.l1_gain),
        alpha_schedule=(cfg.alpha_start, cfg.alpha_end),
    )


def decode(outputs: Mapping[str, Any], path: str = "e2e", **_: Any) -> Tensor:
    """``(B, 300, 6)`` ``[x1, y1, x2, y2, score, class]`` from the o2o (``e2e``) or o2m (``nms``) branch."""
    from lucidyolo.decode.e2e import e2e_topk
    from lucidyolo.decode.nms import nms_decode
    from lucidyolo.structures.box_coder import ltrb_to_xyxy

    anchors, strides = outputs["anchors"], outputs["strides"]
    if path == "e2e":
        boxes = ltrb_to_xyxy(outputs["o2o"]["boxes"], anchors, strides)
        return e2e_topk(boxes, outputs["o2o"]["logits"])[0]
    if path == "nms":
        boxes = ltrb_to_xyxy(outputs["o2m"]["boxes"], anchors, strides)
        return nms_decode(boxes, outputs["o2m"]["logits"])[0]
    raise ValueError(f"unknown decode path {path!r} (e2e or nms)")



def build_metric(num_classes: int, **_: Any) -> nn.Module:
    from lucidyolo.metrics.epoch_map import EpochMAP

    return EpochMAP(num_classes=num_classes)


def metric_update(metric: Any, decoded: Tensor, gt: Mapping[str, Tensor], batch_meta: Mapping[str, Tensor],
                  **_: Any) -> None:
    """Boxes ``(B, 300, 6)`` against the padded ground truth of the batch, crowd regions as pycocotools scores them.

    Boxes are first clipped to the image inside the letterbox, as ``lucid eval``
    clips them to the original image: a box hanging over the border otherwise
    covers a crowd region by a different fraction than the evaluated one.
    """
    metric.update(
        clip_to_image(decoded, batch_meta), gt["boxes"], gt["labels"], gt["mask"], batch_meta.get("index"),
        gt_crowd=gt.get("crowd"),
    )


def gate_score(model: Any, source: Any, img_size: int, conf: float, batch_size: int = 16, **_: Any) -> float:
    """Recall at IoU 0.5 of the deployed end-to-end graph on ``source`` (network-input frame)."""

    from lucidyolo.data.val_batches import val_batches
    from lucidyolo.tasks.detect.recall import RecallAtIoU

    deployed = deploy(model).eval()
    recall = RecallAtIoU(0.5)
    with torch.inference_mode():
        for images, gt, _ in val_batches(source, img_size, batch_size, FIELDS):
            dets = deployed(images)  # (B, 300, 6)
            dets = torch.where((dets[..., 4:5] >= conf), dets, torch.zeros_like(dets))
            recall.update(dets, gt["boxes"], gt["labels"], gt["mask"] & ~gt["crowd"])
    return recall.compute()  # NaN without ground truth: fails every floor


def _to_coco(rows: Tensor, image_id: int, category_ids: Sequence[int], letterbox: tuple[float, float, float],
             orig_hw: tuple[int, int]) -> list[dict[str, Any]]:
    from lucidyolo.metrics.coco_eval import dets_to_coco_results

    return dets_to_coco_results(rows, image_id, category_ids, *letterbox, orig_hw)


def evaluate(*, model: Any, decode: Any, source: Any, img_size: int, batch_size: int, device: Any,
             limit: int | None, options: Mapping[str, Any] | None = None,
             paths: Sequence[str] = DECODE_PATHS, **_: Any) -> dict[str, Any]:
    """COCO ``bbox`` through pycocotools for each decode path of ``paths``."""
    from lucidyolo.metrics.coco_protocol import evaluate_coco_protocol

    return evaluate_coco_protocol(
        model=model, decode=decode, to_results=_to_coco, source=source, fields=FIELDS, iou_types=("bbox",),
        img_size=img_size, batch_size=batch_size, device=device, limit=limit, paths=paths,
        matches=bool((options or {}).get("matches")),
    )


def predict(decoded: Tensor, image_hw: tuple[int, int], letterbox: tuple[float, float, float],
            class_names: Sequence[str], conf: float, **_: Any) -> list[dict[str, Any]]:
    """One image's ``(300, 6)`` rows -> ``{"box": xyxy original px, "score", "label", "name"}`` dicts."""
    from lucidyolo.metrics.mapping import unletterbox

    dets = decoded[decoded[:, 4] >= max(conf, 1e-9)]
    scale, pad_x, pad_y = letterbox
    boxes = np.asarray(unletterbox(dets[:, :4].double().numpy(), scale, pad_x, pad_y, image_hw))
    scores, labels = dets[:, 4].numpy(), dets[:, 5].long().numpy()
    return [
        {"box": [round(float(v), 2) for v in b], "score": round(float(s), 4), "label": int(c),
         "name": class_names[int(c)] if int(c) < len(class_names) else str(int(c))}
        for b, s, c in zip(boxes, scores, labels, strict=True)
    ]


def target_rows(gt: Mapping[str, Tensor], class_names: Sequence[str], **_: Any) -> list[list[dict[str, Any]]]:
    """A padded batch's ground truth as :func:`predict`'s dicts, one list per image, in network-input pixels.

    ``gt["boxes"] (B, M, 4)`` xyxy, ``labels (B, M)``, ``mask (B, M)``; a row per
    real slot in slot order, ``"score"`` NaN (a label has none: drawn as its name alone).
    """
    boxes, labels, valid = gt["boxes"].double().cpu().numpy(), gt["labels"].cpu().numpy(), gt["mask"].cpu().numpy()
    return [
        [{"box": [float(v) for v in boxes[b, j]], "score": float("nan"), "label": int(labels[b, j]),
          "name": class_names[int(labels[b, j])] if 0 <= int(labels[b, j]) < len(class_names) else str(int(labels[b, j]))}
         for j in np.flatnonzero(valid[b])]
        for b in range(valid.shape[0])
    ]


def draw(image: np.ndarray, predictions: Sequence[Mapping[str, Any]], class_names: Sequence[str], **_: Any) -> Any:
    from lucidyolo.predict.draw import draw_boxes

    boxes = np.array([p["box"] for p in predictions], dtype=np.float64).reshape(-1, 4)
    scores = np.array([p["score"] for p in predictions], dtype=np.float64)
    labels = np.array([p["label"] for p in predictions], dtype=np.int64)
    return draw_boxes(image, boxes, scores, labels, class_names)


def scored(predictions: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The dicts whose (rounded) score is above zero: COCO results drop the rest, so every converter drops them."""
    return [p for p in predictions if float(p["score"]) > 0]


def _box_rows(predictions: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """``(N, 6)`` ``x1, y1, x2, y2, score, label`` of :func:`predict`'s dicts (original pixels)."""
    return np.array([[*p["box"], p["score"], p["label"]] for p in predictions], np.float64).reshape(-1, 6)


def label_lines(predictions: Sequence[Mapping[str, Any]], image_hw: tuple[int, int], **_: Any) -> list[str]:
    """``label cx cy w h conf`` per box, normalised by the image size (the YOLO detection row + confidence)."""
    from lucidyolo.predict.label_lines import box_lines

    return box_lines(predictions, image_hw)


def coco_results(predictions: Sequence[Mapping[str, Any]], image_id: int, image_hw: tuple[int, int],
                 class_names: Sequence[str], **_: Any) -> list[dict[str, Any]]:
    """COCO ``bbox`` results (``category_id`` the label index) of :func:`predict`'s dicts with a score above 0."""
    from lucidyolo.metrics.coco_eval import dets_to_coco_results

    rows = _box_rows(scored(predictions))  # already in original pixels: the identity letterbox
    classes = max(len(class_names), int(rows[:, 5].max()) + 1 if len(rows) else 0)
    return dets_to_coco_results(rows, image_id, list(range(classes)), orig_hw=image_hw)


def deploy(model: nn.Module, **_: Any) -> nn.Module:
    """The deployed graph: BN folded, trunk + o2o branch + top-k, output ``(B, 300, 6)``."""
    from lucidyolo.models.deploy import make_deploy_model

    return make_deploy_model(model)


def export_check(deployed: nn.Module, onnx_path: Path, images: Tensor, **_: Any) -> dict[str, Any]:
    """onnxruntime against PyTorch on ``images``: rows matched, classes equal, box and score gaps."""
    from lucidyolo.export.onnx import detections_pass, onnx_parity

    parity = onnx_parity(deployed, onnx_path, images)
    ok = detections_pass(parity)
    summary = (
        f"{parity['matched']}/{parity['rows']} rows matched, classes equal {parity['classes_equal']}, max box diff "
        f"{parity['max_box_diff']:.2e} px ({parity['max_box_diff_norm']:.1e} of the side), max score diff "
        f"{parity['max_score_diff']:.1e}, top-k score profile diff {parity['sorted_score_diff']:.1e}"
    )
    if parity["rows"] == 0:
        summary += " (every top-k score is tied within 1e-4, an untrained model?: only the score profile was compared)"
    return {**parity, "passed": bool(ok), "summary": summary}


def matches(metric: Any, **_: Any) -> dict[str, Any]:
    """``{"B": Matches}``: the box metric's own pycocotools matches at IoU 0.5 (``{}`` before anything was scored)."""
    result = metric.last_result
    return {"B": result.matches} if result is not None and result.matches is not None else {}
