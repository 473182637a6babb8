"""Factories of the detection task (imported lazily by :mod:`lucidyolo.tasks.detect`; uses torch).

Each function implements one hook contract of :class:`lucidyolo.tasks.api.TaskSpec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from lucidyolo.config.schema import ModelConfig


def build_model(cfg: ModelConfig, num_classes: int) -> nn.Module:
    from lucidyolo.models import create_model

    return create_model(cfg.variant, task="det", num_classes=num_classes)


def build_criterion(cfg: ModelConfig, num_classes: int) -> nn.Module:
    from lucidyolo.assign.one_to_one import OneToOneAssigner
    from lucidyolo.assign.tal import TaskAlignedAssigner
    from lucidyolo.losses.branch import BranchLoss
    from lucidyolo.losses.criterion import DetectionCriterion

    return DetectionCriterion(
        TaskAlignedAssigner(topk=cfg.o2m_topk),
        OneToOneAssigner(topk=cfg.o2o_topk),
        BranchLoss(box_gain=cfg.box_gain, cls_gain=cfg.cls_gain, l1_gain=cfg.l1_gain),
    )


def decode(outputs: Mapping[str, Any], path: str = "e2e") -> Tensor:
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


def make_synthetic(out_dir: Path, num_images: int, img_size: int, seed: int) -> Path:
    from lucidyolo.data.synth import write_synthetic

    return write_synthetic(out_dir, "det", num_images, img_size=img_size, seed=seed, fmt="coco")


def build_metric(num_classes: int) -> nn.Module:
    from lucidyolo.metrics.epoch_map import EpochMAP

    return EpochMAP(num_classes=num_classes)
