"""The built-in instance segmentation task (``seg``, alias ``segment``).

Torch-free: every hook is a :func:`~lucidyolo.tasks.api.lazy_hook` into
:mod:`lucidyolo.tasks.segment.hooks`. Detection plus 32 mask coefficients per
anchor and branch, image-wide prototypes and a training-only semantic head.
"""

from __future__ import annotations

from pydantic import Field

from lucidyolo.tasks.api import (
    EvalOption,
    ExportSpec,
    GateSpec,
    MetricSpec,
    TaskCapabilities,
    TaskSpec,
    lazy_hook,
    lazy_hooks,
)
from lucidyolo.tasks.dual_head import DECODE_PATHS, INFERENCE_VIEW, DualHeadModelConfig


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

_HOOKS = "lucidyolo.tasks.segment.hooks"

SPEC = TaskSpec(
    name="seg",
    aliases=("segment",),
    description="boxes + one mask per instance (COCO polygons/RLE, YOLO polygons)",
    config_model=SegmentModelConfig,
    capabilities=TaskCapabilities(multi_device=True, export=True),
    default_preset="seg_nano_smoke.yaml",
    synthetic_preset="seg_nano_synthetic.yaml",
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
    **lazy_hooks(_HOOKS, "build_model", "build_criterion", "decode", "make_synthetic", "build_metric",
                 "metric_update", "matches", "evaluate", "predict", "draw", "label_lines", "coco_results",
                 "target_rows", "label_stats"),
    decode_paths=DECODE_PATHS,
    published_models=("SegmentationModel",),
    inference_view=INFERENCE_VIEW,
    eval_options=(
        EvalOption("masks", True, "also score the instance masks (COCO segm); false: boxes only, faster"),
    ),
    gate=GateSpec(
        preset="seg_nano_overfit.yaml",
        metric="mean mask IoU over all GT (train slice, e2e, conf>=0.25, unmatched = 0)",
        floor=0.70,
        score=lazy_hook(f"{_HOOKS}:gate_score"),
        # 32 training images x 100 epochs (400 steps): 0.926 in 307 s on 2 cores; 60 epochs gave 0.31.
        images=40,
        epochs=100,
    ),
    export=ExportSpec(
        outputs=("detections", "coeffs", "protos"),
        deploy=lazy_hook(f"{_HOOKS}:deploy"),
        check=lazy_hook(f"{_HOOKS}:export_check"),
    ),
)
