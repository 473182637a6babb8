"""Hooks of the keypoint task (imported lazily by :mod:`lucidyolo.tasks.keypoints.spec`; uses torch).

Keypoints are detection plus one stem per branch with two outputs per anchor:
``kpts (K, 3)`` raw offsets (point = anchor + raw * stride) and a visibility
logit, and ``kpt_sigma (K, 2)`` raw scales (sigmoid), trained by :class:`~lucidyolo.tasks.keypoints.keypoint_loss.KeypointTerm`. Decode and
the deployed graph turn them into ``[x, y, confidence]`` per point
(:func:`decode_keypoints`) gathered by the kept anchor index, so every consumer
sees :class:`~lucidyolo.tasks.keypoints.keypoint_detections.KeypointDetections`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from lucidyolo.errors import ConfigError
from lucidyolo.tasks.detect import hooks as detect_hooks
from lucidyolo.tasks.dual_head import DECODE_PATHS
from lucidyolo.tasks.keypoints.keypoint_detections import KeypointDetections
from lucidyolo.tasks.keypoints.spec import FIELDS


def keypoint_stem(k: int) -> Any:
    """The keypoint stem of the published layout (``cv4``): two 3x3 Conv at ``max(C3 // 4, 5K)``, then
    ``kpts (K, 3)`` (raw x, y offsets and a visibility logit, ``cv4_kpts``) and ``kpt_sigma (K, 2)``
    (raw scales, ``cv4_sigma``) from the same tower."""
    from lucidyolo.models.head import StemOutput, StemSpec

    return StemSpec("kpts", (k, 3), tower="conv", hidden_div=4, min_hidden=5 * k, published="cv4",
                    published_output="cv4_kpts",
                    extra_outputs=(StemOutput("kpt_sigma", (k, 2), published="cv4_sigma"),))

CONFIDENCE_THRESHOLD = 0.5
"""``lucid predict --save`` draws a point whose confidence (its visibility probability) reaches this."""


def num_keypoints(cfg: Any, meta: Mapping[str, Any]) -> int:
    """``model.num_keypoints``: ``'auto'`` reads the dataset meta; an explicit value must agree with it.

    Raises:
        ConfigError: ``auto`` without a dataset to read it from, or a value the dataset contradicts.
    """
    found = meta.get("num_keypoints")
    if cfg.num_keypoints == "auto":
        if found is None:
            raise ConfigError(
                "`model.num_keypoints` is 'auto' but there is no dataset to read it from.",
                why="K sizes the keypoint stems; it comes from the data's kpt_shape or COCO keypoint names.",
                fix="Pass `--data-root` (or a config with data) or set `--model.num_keypoints K`.",
            )
        return int(found)
    if found is not None and int(found) != int(cfg.num_keypoints):
        raise ConfigError(
            f"`model.num_keypoints` = {cfg.num_keypoints} but the dataset declares {found} keypoints per instance.",
            why="the stems would predict a different point list than the labels hold.",
            fix=f"Set `--model.num_keypoints {found}` or leave it at 'auto'.",
        )
    return int(cfg.num_keypoints)


def build_model(cfg: Any, num_classes: int, meta: Mapping[str, Any] | None = None, **_: Any) -> nn.Module:
    from lucidyolo.models import create_model
    from lucidyolo.tasks.keypoints.realnvp import RealNVP2D

    k = num_keypoints(cfg, meta or {})
    model = create_model(cfg.variant, num_classes=num_classes, class_width=cfg.class_width, label="keypoints", extra_stems=[keypoint_stem(k)])
    model.aux["flow"] = RealNVP2D()  # the RLE density: trained with the model, read by the criterion, never deployed
    return model


KEYPOINT_STEMS = ("kpts", "kpt_sigma")


def published_meta(checkpoint: Any, **_: Any) -> dict[str, Any]:
    """The keypoint count a published pose checkpoint was built for (its ``kpt_shape``), e.g. ``{"num_keypoints": 17}``."""
    shape = getattr(checkpoint, "keypoint_shape", None)
    return {"num_keypoints": int(shape[0])} if shape else {}


def transfer_weights(source: Mapping[str, Tensor], target: Mapping[str, Tensor], source_meta: Mapping[str, Any],
                     meta: Mapping[str, Any], **_: Any) -> dict[str, str]:
    """Keypoint stem tensors whose shape depends on K start fresh, with that reason: the rows and sigmas, and the
    tower where ``5 K`` sets its width (``max(C3 // 4, 5 K)``); the rest copies as usual.

    Only a matching K copies the per-keypoint rows: a different K is a different point list
    (e.g. 17 COCO body points vs 7 symbol points), and no names tie points of one to the other.
    """
    k_src, k = source_meta.get("num_keypoints"), meta.get("num_keypoints")
    if k_src is None or k is None or int(k_src) == int(k):
        return {}
    reason = f"keypoints: the checkpoint predicts K={int(k_src)} points, this dataset has K={int(k)}"
    return {
        name: reason for name, fresh in target.items()
        if any(f".stems.{stem}." in name for stem in KEYPOINT_STEMS)
        and name in source and tuple(source[name].shape) != tuple(fresh.shape)
    }


def build_criterion(cfg: Any, num_classes: int, meta: Mapping[str, Any] | None = None,
                    model: nn.Module | None = None, **_: Any) -> nn.Module:
    from lucidyolo.assign.one_to_one import OneToOneAssigner
    from lucidyolo.assign.tal import TaskAlignedAssigner
    from lucidyolo.losses.branch import BranchLoss
    from lucidyolo.losses.criterion import DetectionCriterion
    from lucidyolo.tasks.keypoints.keypoint_loss import KeypointTerm
    from lucidyolo.tasks.keypoints.oks import keypoint_sigmas

    k = num_keypoints(cfg, meta or {})
    return DetectionCriterion(
        TaskAlignedAssigner(topk=cfg.o2m_topk),
        OneToOneAssigner(topk=cfg.o2o_topk),
        BranchLoss(box_gain=cfg.box_gain, cls_gain=cfg.cls_gain, l1_gain=cfg.l1_gain),
        alpha_schedule=(cfg.alpha_start, cfg.alpha_end),
        # One term instance for both branches: they share (and both train) its flow.
        branch_terms=[KeypointTerm(k, kind=cfg.keypoint_loss, keypoint_gain=cfg.keypoint_gain,
                                   oks_gain=cfg.oks_gain, sigmas=keypoint_sigmas(k),
                                   visibility_gain=cfg.visibility_gain,
                                   flow=model.aux["flow"] if model is not None else None)],
    )


def decode_keypoints(raw: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Per-anchor ``keypoints (B, A, K, 3)`` ``[x, y, confidence]`` px from ``kpts``, ``kpt_sigma``, ``anchors``, ``strides``.

    ``confidence = sigmoid(visibility logit)``, the point's third raw channel: the
    probability that the point is labelled (the published decode's score).
    """
    xy = raw["anchors"][None, :, None, :] + raw["kpts"][..., :2] * raw["strides"][None, :, None, None]  # (B, A, K, 2)
    conf = raw["kpts"][..., 2:].sigmoid()  # (B, A, K, 1)
    return {"keypoints": torch.cat([xy, conf], -1)}


def decode(outputs: Mapping[str, Any], path: str = "e2e", **_: Any) -> KeypointDetections:
    """Box rows ``(B, 300, 6)`` of the ``path`` branch and their points ``(B, 300, K, 3)`` (zeros on padding)."""
    from lucidyolo.decode.e2e import e2e_topk, gather_kept
    from lucidyolo.decode.nms import nms_decode
    from lucidyolo.structures.box_coder import ltrb_to_xyxy

    if path not in ("e2e", "nms"):
        raise ValueError(f"unknown decode path {path!r} (e2e or nms)")
    branch = outputs["o2o" if path == "e2e" else "o2m"]
    anchors, strides = outputs["anchors"], outputs["strides"]
    rows, index = (e2e_topk if path == "e2e" else nms_decode)(ltrb_to_xyxy(branch["boxes"], anchors, strides),
                                                              branch["logits"])
    points = decode_keypoints({**branch, "anchors": anchors, "strides": strides})["keypoints"]  # (B, A, K, 3)
    return KeypointDetections(rows, gather_kept(points, index))



def build_metric(num_classes: int, meta: Mapping[str, Any] | None = None, **_: Any) -> nn.Module:
    from lucidyolo.tasks.keypoints.epoch_map import OKSEpochMAP

    k = (meta or {}).get("num_keypoints")
    if k is None:
        raise ConfigError("The keypoint metric needs the dataset's keypoint count.", fix="Train from a dataset.")
    return OKSEpochMAP(int(k), num_classes=num_classes)


def metric_update(metric: Any, decoded: KeypointDetections, gt: Mapping[str, Tensor], batch_meta: Mapping[str, Tensor],
                  **_: Any) -> None:
    """Rows and points of one batch against its padded ground truth (network-input frame)."""
    metric.update(decoded, gt, batch_meta)


def deploy(model: nn.Module, **_: Any) -> nn.Module:
    """Trunk + o2o branch, BN folded: ``(detections (B, 300, 6), keypoints (B, 300, K, 3))`` in input pixels."""
    from lucidyolo.models.deploy import make_deploy_model

    return make_deploy_model(model, decode_stems=decode_keypoints, stem_outputs=("keypoints",))


def gate_score(model: Any, source: Any, img_size: int, conf: float, batch_size: int = 16, **_: Any) -> float:
    """OKS AP@[.50:.05:.95] on ``source`` through the deployed end-to-end graph (uniform sigma unless K = 17).

    ``conf`` is not applied: AP ranks every row by its score, as ``lucid eval`` does.
    """
    from lucidyolo.data.val_batches import val_batches
    from lucidyolo.tasks.keypoints.epoch_map import OKSEpochMAP

    deployed = deploy(model).eval()
    metric = OKSEpochMAP(int(source.meta()["num_keypoints"]), num_classes=len(source.class_names))
    with torch.inference_mode():
        for images, gt, meta in val_batches(source, img_size, batch_size, FIELDS):
            dets, points = deployed(images)
            metric.update(KeypointDetections(dets, points), gt, meta)
    return float(metric.compute()["oks_mAP"])


def evaluate(*, model: Any, decode: Any, source: Any, img_size: int, batch_size: int, device: Any,
             limit: int | None, options: Mapping[str, Any] | None = None,
             paths: Sequence[str] = DECODE_PATHS, **_: Any) -> dict[str, Any]:
    """COCO ``bbox`` and ``keypoints`` (OKS, the 17 person sigmas) through pycocotools for each decode path of ``paths``.

    Raises:
        ConfigError: the split's instances do not have 17 points (the COCO protocol's sigmas are per person point).
    """
    from lucidyolo.metrics.coco_protocol import evaluate_coco_protocol
    from lucidyolo.tasks.keypoints.results import keypoint_results

    k = source.meta().get("num_keypoints")
    if k != 17:
        raise ConfigError(
            f"The COCO keypoint protocol scores 17 person points; this split has {k} per instance.",
            why="OKS weighs each point by the COCO person sigma of its joint; other schemas have no published sigmas, "
                "and a number with invented ones would look comparable to COCO results and is not.",
            fix="Read `val/oks_mAP` of the run (uniform sigma 0.072) or `lucid gate overfit --task keypoints`.",
        )
    return evaluate_coco_protocol(
        model=model, decode=decode, to_results=keypoint_results, source=source, fields=FIELDS,
        iou_types=("bbox", "keypoints"), img_size=img_size, batch_size=batch_size, device=device, limit=limit, paths=paths,
        matches=bool((options or {}).get("matches")),
    )


def predict(decoded: KeypointDetections, image_hw: tuple[int, int], letterbox: tuple[float, float, float],
            class_names: Sequence[str], conf: float, **_: Any) -> list[dict[str, Any]]:
    """Detection's dicts plus ``"keypoints"``: ``[[x, y, confidence], ...]`` (K points) in original pixels."""
    from lucidyolo.metrics.mapping import unletterbox

    keep = decoded.rows[:, 4] >= max(conf, 1e-9)
    rows = detect_hooks.predict(decoded=decoded.rows[keep], image_hw=image_hw, letterbox=letterbox,
                                class_names=class_names, conf=conf)
    points = decoded.keypoints[keep].double().numpy()  # (N, K, 3)
    xy = unletterbox(points[..., :2], *letterbox, image_hw)
    for row, p_xy, p_conf in zip(rows, xy, points[..., 2], strict=True):
        row["keypoints"] = [[round(float(x), 2), round(float(y), 2), round(float(c), 4)]
                            for (x, y), c in zip(p_xy, p_conf, strict=True)]
    return rows


def target_rows(gt: Mapping[str, Tensor], class_names: Sequence[str], **_: Any) -> list[list[dict[str, Any]]]:
    """Detection's target dicts plus ``"keypoints"``: ``[[x, y, 1 or 0], ...]``, 1 where the point is labelled.

    ``gt["keypoints"] (B, M, K, 2)`` input pixels, ``visibility (B, M, K)`` (0 absent,
    1 occluded, 2 visible): a labelled point gets confidence 1 and is drawn, an absent one 0 and is not.
    """
    rows = detect_hooks.target_rows(gt=gt, class_names=class_names)
    valid = gt["mask"].cpu().numpy()
    points = torch.cat([gt["keypoints"].double(), (gt["visibility"] > 0).double()[..., None]], -1).cpu().numpy()
    for b, image_rows in enumerate(rows):
        for row, j in zip(image_rows, np.flatnonzero(valid[b]), strict=True):
            row["keypoints"] = points[b, j].tolist()
    return rows


def draw(image: np.ndarray, predictions: Sequence[Mapping[str, Any]], class_names: Sequence[str],
         meta: Mapping[str, Any] | None = None, **_: Any) -> Any:
    """Detection's boxes and captions, then each skeleton: points coloured by side, hidden below the threshold;
    the limbs are the data's ``skeleton`` when it declares one."""
    from lucidyolo.predict.draw import draw_keypoints

    boxed = detect_hooks.draw(image=image, predictions=predictions, class_names=class_names)
    # no prediction (nothing above the threshold) is an empty (0, 0, 3) array, which has no K to reshape by
    points = np.array([p["keypoints"] for p in predictions], dtype=np.float64).reshape(len(predictions), -1, 3) \
        if predictions else np.zeros((0, 0, 3))
    meta = meta or {}
    return draw_keypoints(np.asarray(boxed), points,
                          flip_idx=meta.get("flip_idx"), threshold=CONFIDENCE_THRESHOLD, skeleton=meta.get("skeleton"))


VISIBLE, NOT_LABELLED = 2.0, 0.0
"""YOLO pose visibility of a written point: visible at or above :data:`CONFIDENCE_THRESHOLD`, else not labelled."""


def label_lines(predictions: Sequence[Mapping[str, Any]], image_hw: tuple[int, int], **_: Any) -> list[str]:
    """``label cx cy w h x1 y1 v1 ... xK yK vK conf`` per instance (the YOLO pose row with ``kpt_shape [K, 3]``).

    ``v`` is 2 (visible) for a point whose confidence reaches :data:`CONFIDENCE_THRESHOLD` (the one
    :func:`draw` uses) and 0 (not labelled) below it, so the file without its last column trains as it reads.
    """
    from lucidyolo.predict.label_lines import format_line, normalise_xy, xyxy_to_cxcywh_normalised

    if not predictions:
        return []
    boxes = xyxy_to_cxcywh_normalised(np.array([p["box"] for p in predictions], np.float64), image_hw)  # (N, 4)
    points = np.array([p["keypoints"] for p in predictions], np.float64)  # (N, K, 3) px + confidence
    xy = normalise_xy(points[..., :2], image_hw)  # (N, K, 2)
    v = np.where(points[..., 2:3] >= CONFIDENCE_THRESHOLD, VISIBLE, NOT_LABELLED)  # (N, K, 1)
    rows = np.concatenate([boxes, np.concatenate([xy, v], -1).reshape(len(predictions), -1)], 1)  # (N, 4 + 3K)
    return [format_line(int(p["label"]), r, p["score"]) for p, r in zip(predictions, rows, strict=True)]


def coco_results(predictions: Sequence[Mapping[str, Any]], image_id: int, image_hw: tuple[int, int],
                 class_names: Sequence[str], **_: Any) -> list[dict[str, Any]]:
    """COCO keypoint results: ``bbox``, ``score`` and ``keypoints`` ``[x1, y1, c1, ...]`` (``c`` the point's confidence)."""
    from lucidyolo.tasks.keypoints.results import keypoint_results

    kept = detect_hooks.scored(predictions)
    rows = np.array([[*p["box"], p["score"], p["label"]] for p in kept], np.float64).reshape(-1, 6)
    k = len(kept[0]["keypoints"]) if kept else 0
    points = np.array([p["keypoints"] for p in kept], np.float64).reshape(len(kept), k, 3)
    classes = max(len(class_names), int(rows[:, 5].max()) + 1 if len(rows) else 0)
    # already in original pixels: the identity letterbox
    return keypoint_results(KeypointDetections(torch.from_numpy(rows), torch.from_numpy(points)), image_id, list(range(classes)), orig_hw=image_hw)


def export_check(deployed: nn.Module, onnx_path: Path, images: Tensor, **_: Any) -> dict[str, Any]:
    """Detection rows as for det, plus the gathered points of the matched rows."""
    from lucidyolo.tasks.keypoints.export_parity import keypoint_parity

    return keypoint_parity(deployed, onnx_path, images)


def label_stats(instances: Mapping[str, Any], **_: Any) -> dict[str, dict[str, Any]]:
    """``labels.png`` panel: per keypoint index, how many instances label it and how many see it.

    ``instances["visibility"] (M, K)``: 0 absent, 1 labelled but occluded, 2 visible
    (a YOLO root without a visibility column reads every labelled point as 2).
    """
    vis = instances.get("visibility")
    if vis is None:
        return {}
    vis = np.asarray(vis).reshape(len(vis), -1)  # (M, K)
    labelled = (vis > 0).sum(axis=0)  # (K,)
    visible = (vis >= 2).sum(axis=0)  # (K,)
    return {"keypoint_visibility": {
        "kind": "bars", "title": "keypoints per index", "categories": [str(k) for k in range(vis.shape[1])],
        "series": {"labelled (v > 0)": labelled, "visible (v = 2)": visible},
        "xlabel": "keypoint index", "ylabel": "instances",
        "summary": {"instances": int(vis.shape[0]),
                    "instances_without_keypoints": int(((vis > 0).sum(axis=1) == 0).sum())},
    }}


def matches(metric: Any, **_: Any) -> dict[str, Any]:
    """``{"P": Matches}``: the keypoint metric's own pycocotools matches at OKS 0.5."""
    result = metric.last_result
    return {"P": result.matches} if result is not None and result.matches is not None else {}
