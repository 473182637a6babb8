"""Hooks of the oriented-box task (imported lazily by :mod:`lucidyolo.tasks.obb.spec`; uses torch).

A rotated box is detection's ltrb, measured in the box's own frame, plus one
``angle`` stem per anchor and branch (:mod:`lucidyolo.structures.rotated_box_coder`).
Everything downstream compares ``[cx, cy, w, h, theta]`` boxes: the assigners
(candidacy inside the rotated rectangle, alignment on ProbIoU), the branch
loss (ProbIoU, L1 on the rotated box, the angle term), the decoders (top-k,
or class-wise greedy NMS on exact rotated IoU) and the metrics (rotated mAP
per tile and per whole scene, DOTA's VOC mAP50). Rows are ``(B, 300, 7)``
``[cx, cy, w, h, theta, score, class]`` in network-input pixels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from lucidyolo.tasks.dual_head import DECODE_PATHS
from lucidyolo.tasks.obb.spec import FIELDS

ANGLE_HIDDEN_DIV = 4
"""The angle stem's hidden width is ``max(1, C // 4)`` on two 3x3 convs (the published layout's ``cv4``)."""


def decode_rboxes(branch: Mapping[str, Tensor], anchors: Tensor, strides: Tensor) -> Tensor:
    """``(B, A, 5)`` canonical ``[cx, cy, w, h, theta]`` px from a branch's ``boxes (B, A, 4)`` and ``angle (B, A, 1)``."""
    from lucidyolo.structures.rotated_box_coder import ltrb_angle_to_rbox

    return ltrb_angle_to_rbox(branch["boxes"], branch["angle"], anchors, strides)


def build_model(cfg: Any, num_classes: int, **_: Any) -> nn.Module:
    from lucidyolo.models import create_model
    from lucidyolo.models.head import StemSpec

    angle = StemSpec("angle", (1,), hidden_div=ANGLE_HIDDEN_DIV, min_hidden=1, published="cv4")
    return create_model(cfg.variant, num_classes=num_classes, class_width=cfg.class_width, label="obb", extra_stems=[angle])


def build_criterion(cfg: Any, num_classes: int, **_: Any) -> nn.Module:
    from lucidyolo.assign.one_to_one import OneToOneAssigner
    from lucidyolo.assign.rotated_candidates import RotatedCandidacy
    from lucidyolo.assign.tal import TaskAlignedAssigner
    from lucidyolo.losses.criterion import DetectionCriterion
    from lucidyolo.structures.probiou import probiou
    from lucidyolo.tasks.obb.rotated_loss import RotatedBranchLoss

    # Alignment on ProbIoU rather than exact polygon IoU: it is smooth, costs a
    # few elementwise ops per pair (B x M x A of them every step) and ranks
    # overlaps alike (docs/decisions/obb.md).
    return DetectionCriterion(
        TaskAlignedAssigner(topk=cfg.o2m_topk, pair_iou=probiou, candidacy=RotatedCandidacy()),
        OneToOneAssigner(topk=cfg.o2o_topk, pair_iou=probiou, candidacy=RotatedCandidacy()),
        RotatedBranchLoss(box_gain=cfg.box_gain, cls_gain=cfg.cls_gain, l1_gain=cfg.l1_gain,
                          angle_gain=cfg.angle_gain),
        box_decoder=decode_rboxes,
        gt_boxes_key="rboxes",
        alpha_schedule=(cfg.alpha_start, cfg.alpha_end),
    )


def decode(outputs: Mapping[str, Any], path: str = "e2e", **_: Any) -> Tensor:
    """``(B, 300, 7)`` ``[cx, cy, w, h, theta, score, class]`` from the o2o (``e2e``) or o2m (``nms``) branch."""
    from lucidyolo.decode.e2e import e2e_topk

    anchors, strides = outputs["anchors"], outputs["strides"]
    if path == "e2e":
        return e2e_topk(decode_rboxes(outputs["o2o"], anchors, strides), outputs["o2o"]["logits"])[0]
    if path == "nms":
        from lucidyolo.tasks.obb.rotated_nms import rotated_nms_decode

        return rotated_nms_decode(decode_rboxes(outputs["o2m"], anchors, strides), outputs["o2m"]["logits"])[0]
    raise ValueError(f"unknown decode path {path!r} (e2e or nms)")



def build_metric(num_classes: int, **_: Any) -> nn.Module:
    from lucidyolo.tasks.obb.epoch_map import RotatedEpochMAP

    return RotatedEpochMAP(num_classes=num_classes)


def metric_update(metric: Any, decoded: Tensor, gt: Mapping[str, Tensor], batch_meta: Mapping[str, Tensor],
                  **_: Any) -> None:
    """Rows ``(B, 300, 7)`` against the padded rotated ground truth (network-input frame)."""
    metric.update(decoded, gt, batch_meta)


def deploy(model: nn.Module, **_: Any) -> nn.Module:
    """Trunk + o2o branch, BN folded, rotated top-k: ``(B, 300, 7)`` ``[cx, cy, w, h, theta, score, class]``."""
    from lucidyolo.models.deploy import make_deploy_model

    return make_deploy_model(model, box_decoder=decode_rboxes, box_stems=("angle",))


def gate_score(model: Any, source: Any, img_size: int, conf: float, batch_size: int = 16, **_: Any) -> float:
    """Rotated mAP50 (101-point, exact polygon IoU) on ``source`` through the deployed end-to-end graph.

    ``conf`` is not applied: AP ranks every row by its score, as ``lucid eval`` does.
    """
    from lucidyolo.data.val_batches import val_batches
    from lucidyolo.tasks.obb.epoch_map import RotatedEpochMAP

    deployed = deploy(model).eval()
    metric = RotatedEpochMAP(num_classes=len(source.class_names))
    with torch.inference_mode():
        for images, gt, meta in val_batches(source, img_size, batch_size, FIELDS):
            metric.update(deployed(images), gt, meta)
    return float(metric.compute()["rotated_mAP50"])


def unletterbox_rboxes(rboxes: np.ndarray, scale: float, pad_x: float, pad_y: float) -> np.ndarray:
    """``(N, 5)`` rotated boxes in network-input pixels -> original pixels (the angle is unchanged)."""
    from lucidyolo.metrics.mapping import unletterbox

    out = np.array(rboxes, dtype=np.float64).reshape(-1, 5)
    out[:, 0:2] = unletterbox(out[:, 0:2], scale, pad_x, pad_y)  # centres move; sizes only scale
    out[:, 2:4] /= scale
    return out


def _rows_to_dicts(rows: Tensor, letterbox: tuple[float, float, float], class_names: Sequence[str] | None = None,
                   conf: float = 0.0) -> list[dict[str, Any]]:
    """One image's ``(k, 7)`` rows with ``score > max(conf, 0)`` -> dicts in original pixels."""
    from lucidyolo.structures.geometry import rbox_to_corners, rboxes_to_xyxy

    rows = rows[rows[:, 5] > 0]
    rows = rows[rows[:, 5] >= conf]
    rb = unletterbox_rboxes(rows[:, :5].double().numpy(), *letterbox)
    corners = rbox_to_corners(rb).astype(np.float64)
    env = rboxes_to_xyxy(rb).astype(np.float64)
    out = []
    for r, quad, box, score, label in zip(rb, corners, env, rows[:, 5].tolist(), rows[:, 6].long().tolist(),
                                          strict=True):
        d: dict[str, Any] = {
            "rbox": [round(float(v), 2) for v in r[:4]] + [round(float(r[4]), 5)],
            "polygon": [[round(float(x), 2), round(float(y), 2)] for x, y in quad],
            "box": [round(float(v), 2) for v in box],
            "score": round(float(score), 5),
            "label": int(label),
        }
        if class_names is not None:
            d["name"] = class_names[label] if label < len(class_names) else str(label)
        out.append(d)
    return out


def _to_results(rows: Tensor, image_id: int, category_ids: Sequence[int], letterbox: tuple[float, float, float],
                orig_hw: tuple[int, int]) -> list[dict[str, Any]]:
    """:func:`~lucidyolo.metrics.coco_protocol.predict_split`'s per-image results: rotated dicts with ids."""
    out = _rows_to_dicts(rows, letterbox)
    for d in out:
        d["image_id"] = int(image_id)
        d["category_id"] = int(category_ids[d["label"]])
    return out


def tile_windows(source: Any, n: int) -> list[tuple[str, list[int]]] | None:
    """``(source_image, window)`` of each of the first ``n`` images, from the split's COCO file; ``None`` if absent.

    The DOTA tiler (``lucid data tile dota``) writes both per image; a split
    without them (a YOLO-OBB root, synthetic images) has no whole scenes.
    """
    if source.ann_file is None:
        return None
    with open(source.ann_file, encoding="utf-8") as f:
        images = {im["id"]: im for im in json.load(f).get("images", [])}
    info = []
    for i in range(n):
        im = images.get(source.image_id(i), {})
        if "source_image" not in im or "window" not in im:
            return None
        info.append((str(im["source_image"]), [int(v) for v in im["window"]]))
    return info


def _stats(result: Any, class_names: Sequence[str]) -> dict[str, Any]:
    """A :class:`~lucidyolo.tasks.obb.rotated_map.RotatedAP` as ``lucid eval``'s ``{"stats": ..., "per_class": ...}``."""
    per_class = [
        {"name": class_names[c] if c < len(class_names) else str(c), "ap": float(result.ap50_95[c]),
         "ap50": float(result.ap50[c]), "gt": int(result.npos[c])}
        for c in range(len(result.ap50_95)) if np.isfinite(result.ap50_95[c])
    ]
    return {"stats": {"mAP50-95": float(result.map50_95), "mAP50": float(result.map50),
                      "mAP75": float(result.map75)}, "per_class": per_class}


def evaluate(*, model: Any, decode: Any, source: Any, img_size: int, batch_size: int, device: Any,
             limit: int | None, options: Mapping[str, Any] | None = None,
             paths: Sequence[str] = DECODE_PATHS, **_: Any) -> dict[str, Any]:
    """Rotated mAP per tile (cap 300), and per whole scene plus DOTA's VOC mAP50 when the tiles carry their windows."""
    import time

    from lucidyolo.metrics.coco_protocol import predict_split
    from lucidyolo.tasks.obb.rotated_map import rotated_map, rotated_matches, voc_map50
    from lucidyolo.tasks.obb.scene_merge import merge_to_scenes, scene_ground_truth

    t0 = time.perf_counter()
    results, timings = predict_split(model, decode, _to_results, source, FIELDS, img_size, batch_size, device, limit,
                                     paths=paths)
    timings["predict_s"] = time.perf_counter() - t0
    n = len(source) if limit is None else min(limit, len(source))
    c = len(source.class_names)
    row_of = {source.image_id(i): i for i in range(n)}
    gts = []
    for i in range(n):
        t = source.targets(i)
        gts.append((t.rboxes.astype(np.float64), t.labels.astype(np.int64), t.difficult.astype(bool)))
    tiles = tile_windows(source, n)
    scored: dict[str, Any] = {}
    found: dict[str, Any] = {}
    for path, dicts in results.items():
        per = [([], [], []) for _ in range(n)]
        for d in dicts:
            rb, sc, lb = per[row_of[d["image_id"]]]
            rb.append(d["rbox"])
            sc.append(d["score"])
            lb.append(d["label"])
        dets = [(np.asarray(rb, np.float64).reshape(-1, 5), np.asarray(sc, np.float64), np.asarray(lb, np.int64))
                for rb, sc, lb in per]
        t1 = time.perf_counter()
        scored[path] = {"rotated (per tile)": _stats(rotated_map(dets, gts, c, max_dets=300), source.class_names)}
        if (options or {}).get("matches"):
            found[path] = {"rotated (per tile)": rotated_matches(dets, gts, c, 300, names=source.class_names)}
        if tiles is not None:
            _, scene_dets = merge_to_scenes(dets, tiles)
            _, scene_gts = scene_ground_truth(gts, tiles)
            scene = _stats(rotated_map(scene_dets, scene_gts, c, max_dets=None), source.class_names)
            scored[path]["rotated (whole scene)"] = scene
            scored[path]["DOTA VOC07 (whole scene)"] = {
                "stats": {"mAP50": float(voc_map50(scene_dets, scene_gts, c, use_07_metric=True).map50)}
            }
        timings[f"rotated_map_{path}_s"] = time.perf_counter() - t1
    return {"paths": scored, "timings": timings, "results": results, "num_images": n,
            "engine": "lucidyolo rotated mAP (exact polygon IoU by shapely)",
            "num_scenes": len({s for s, _ in tiles}) if tiles is not None else None,
            **({"matches": found} if found else {})}


def predict(decoded: Tensor, image_hw: tuple[int, int], letterbox: tuple[float, float, float],
            class_names: Sequence[str], conf: float, **_: Any) -> list[dict[str, Any]]:
    """One image's ``(300, 7)`` rows -> ``{"rbox": [cx, cy, w, h, theta], "polygon": 4 corners, "box": envelope,
    "score", "label", "name"}`` in original pixels."""
    return _rows_to_dicts(decoded, letterbox, class_names, conf=max(conf, 1e-9))


def target_rows(gt: Mapping[str, Tensor], class_names: Sequence[str], **_: Any) -> list[list[dict[str, Any]]]:
    """``gt["rboxes"] (B, M, 5)`` as :func:`predict`'s dicts (``rbox``, ``polygon``, ``box``), ``"score"`` NaN."""
    from lucidyolo.structures.geometry import rbox_to_corners

    rboxes, labels, valid = gt["rboxes"].double().cpu().numpy(), gt["labels"].cpu().numpy(), gt["mask"].cpu().numpy()
    out: list[list[dict[str, Any]]] = []
    for b in range(valid.shape[0]):
        keep = np.flatnonzero(valid[b])
        quads = rbox_to_corners(rboxes[b, keep]).astype(np.float64).reshape(-1, 4, 2)
        out.append([
            {"rbox": [float(v) for v in rboxes[b, j]], "polygon": quad.tolist(),
             "box": [*quad.min(axis=0).tolist(), *quad.max(axis=0).tolist()], "score": float("nan"),
             "label": int(labels[b, j]),
             "name": class_names[int(labels[b, j])] if 0 <= int(labels[b, j]) < len(class_names) else str(int(labels[b, j]))}
            for j, quad in zip(keep, quads, strict=True)
        ])
    return out


def draw(image: np.ndarray, predictions: Sequence[Mapping[str, Any]], class_names: Sequence[str], **_: Any) -> Any:
    """The rotated quadrilaterals with "name score" captions."""
    from lucidyolo.predict.draw import draw_rotated

    quads = np.array([p["polygon"] for p in predictions], dtype=np.float64).reshape(-1, 4, 2)
    scores = np.array([p["score"] for p in predictions], dtype=np.float64)
    labels = np.array([p["label"] for p in predictions], dtype=np.int64)
    return draw_rotated(image, quads, scores, labels, class_names)


def label_lines(predictions: Sequence[Mapping[str, Any]], image_hw: tuple[int, int], **_: Any) -> list[str]:
    """``label x1 y1 x2 y2 x3 y3 x4 y4 conf`` per rotated box: its four corners normalised (the YOLO-OBB row)."""
    from lucidyolo.predict.label_lines import format_line, normalise_xy

    quads = np.array([p["polygon"] for p in predictions], np.float64).reshape(-1, 4, 2)
    corners = normalise_xy(quads, image_hw)  # (N, 4, 2)
    return [format_line(int(p["label"]), q, p["score"]) for p, q in zip(predictions, corners, strict=True)]


def coco_results(predictions: Sequence[Mapping[str, Any]], image_id: int, image_hw: tuple[int, int],
                 class_names: Sequence[str], **_: Any) -> list[dict[str, Any]]:
    """COCO results of the upright envelopes (``bbox``) with each quadrilateral as a polygon ``segmentation``
    and the rotated box itself as ``rbox`` ``[cx, cy, w, h, theta]`` (as in the tiler's COCO files)."""
    from lucidyolo.tasks.detect import hooks as detect_hooks

    kept = detect_hooks.scored(predictions)
    out = detect_hooks.coco_results(predictions=kept, image_id=image_id, image_hw=image_hw, class_names=class_names)
    for d, p in zip(out, kept, strict=True):
        d["segmentation"] = [[float(v) for xy in p["polygon"] for v in xy]]
        d["rbox"] = [float(v) for v in p["rbox"]]
    return out


def export_check(deployed: nn.Module, onnx_path: Path, images: Tensor, **_: Any) -> dict[str, Any]:
    """onnxruntime against PyTorch on ``images``: 7-column rows matched, classes equal, box/angle and score gaps."""
    from lucidyolo.tasks.detect.hooks import export_check as rows_check

    return rows_check(deployed=deployed, onnx_path=onnx_path, images=images)


ANGLE_BIN_DEGREES = 10
"""Width of the angle histogram's bins; 18 of them cover the canonical range ``[-45, 135)`` degrees."""


def label_stats(instances: Mapping[str, Any], **_: Any) -> dict[str, dict[str, Any]]:
    """``labels.png`` panel: the distribution of ``theta`` of ``instances["rboxes"] (M, 5)``, in degrees.

    Long-edge canonical form puts theta in ``[-pi/4, 3pi/4)``: the bins cover exactly that range.
    """
    rboxes = instances.get("rboxes")
    if rboxes is None:
        return {}
    degrees = np.degrees(np.asarray(rboxes, dtype=np.float64).reshape(-1, 5)[:, 4])  # (M,)
    edges = np.arange(-45, 135 + ANGLE_BIN_DEGREES, ANGLE_BIN_DEGREES, dtype=np.float64)  # (19,)
    # a value a rounding error outside the canonical range still counts, in the end bin
    counts, _ = np.histogram(degrees.clip(edges[0], edges[-1]), bins=edges)
    return {"angle": {
        "kind": "histogram", "title": "rotated box angles", "edges": edges, "counts": counts,
        "xlabel": "theta (degrees, long edge)", "ylabel": "instances",
        # within 0.001 degree of a multiple of 90 (float32 radians do not round-trip exactly)
        "summary": {"axis_aligned": int((np.abs((degrees + 45.0) % 90.0 - 45.0) < 1e-3).sum())},
    }}


def matches(metric: Any, **_: Any) -> dict[str, Any]:
    """``{"R": Matches}``: the rotated metric's matches at IoU 0.5 (exact polygon IoU, DOTA difficult rule)."""
    return {"R": metric.last_matches} if metric.last_matches is not None else {}
