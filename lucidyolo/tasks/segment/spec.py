"""The built-in instance segmentation task (``seg``, alias ``segment``): detection plus masks.

Torch-free: every hook is a :func:`~lucidyolo.tasks.api.lazy_hook` into
:mod:`lucidyolo.tasks.segment.hooks` (the deployed graph is detection's). Detection
plus 32 mask coefficients per anchor and branch, image-wide prototypes and a
training-only semantic head.
"""

from __future__ import annotations

from pydantic import Field

from lucidyolo.tasks.api import EvalOption, MetricSpec
from lucidyolo.tasks.dual_head import DualHeadModelConfig, dual_head_task


class SegmentModelConfig(DualHeadModelConfig):
    """Segmentation options (spec 30-objective, task terms)."""

    task: str = "seg"
    mask_gain: float = Field(2.5, ge=0)
    semantic_gain: float = Field(0.5, ge=0)
    num_prototypes: int = Field(32, gt=0)
    mask_crop: int = Field(
        32, ge=4, le=128, description="samples per side of the GT box at which the mask loss is evaluated"
    )


FIELDS: tuple[str, ...] = ("polygons", "crowd")
"""Polygon rings of every instance (the mask targets) and COCO crowd regions (ignored, scored as pycocotools does)."""

TASK = dual_head_task(
    name="seg",
    aliases=("segment",),
    description="boxes + one mask per instance (COCO polygons/RLE, YOLO polygons)",
    hooks="lucidyolo.tasks.segment.hooks",
    from_base=("deploy",),  # make_deploy_model keeps the prototypes: the outputs below
    extra_hooks=("label_stats",),
    config=SegmentModelConfig,
    fields=FIELDS,
    loss_terms=("box", "cls", "l1", "mask", "semantic"),
    metrics=MetricSpec(
        keys=(
            "val/precision", "val/recall", "val/mAP50", "val/mAP50-95",
            "val/segm_precision", "val/segm_recall", "val/segm_mAP50", "val/segm_mAP50-95",
        ),
        primary="val/segm_mAP50-95",
        summary=("val/segm_mAP50-95", "val/mAP50-95"),
        families={"box": "bbox", "seg": "segm", "mask": "segm"},  # report.box.map, report.seg.map
        plot_names={"B": "box", "bbox": "box", "M": "mask", "segm": "mask"},
        columns={
            "val/precision": "metrics/precision(B)", "val/recall": "metrics/recall(B)",
            "val/mAP50": "metrics/mAP50(B)", "val/mAP50-95": "metrics/mAP50-95(B)",
            "val/segm_precision": "metrics/precision(M)", "val/segm_recall": "metrics/recall(M)",
            "val/segm_mAP50": "metrics/mAP50(M)", "val/segm_mAP50-95": "metrics/mAP50-95(M)",
        },
    ),
    eval_options=(
        EvalOption("masks", True, "also score the instance masks (COCO segm); false: boxes only, faster"),
    ),
    published_model="SegmentationModel",
    preset_prefix="seg",
    # 32 training images x 100 epochs (400 steps): 0.926 in 307 s on 2 cores; 60 epochs gave 0.31.
    gate_metric="mean mask IoU over all GT (train slice, e2e, conf>=0.25, unmatched = 0)",
    gate_floor=0.70,
    export_outputs=("detections", "coeffs", "protos"),
)

SPEC = TASK.record()
"""The engine's record of the task (the entry point gives :data:`TASK`)."""
