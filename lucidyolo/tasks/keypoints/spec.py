"""The built-in keypoint task (``keypoints``, alias ``pose``).

Torch-free: every hook is a :func:`~lucidyolo.tasks.api.lazy_hook` into
:mod:`lucidyolo.tasks.keypoints.hooks`. Detection plus, per anchor and branch,
``K`` point offsets and ``K x 2`` scales trained by residual log-likelihood
estimation. Declares ``multi_device=False``: its OKS AP is computed from
per-split lists that nothing gathers across ranks.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from lucidyolo.tasks.api import (
    ExportSpec,
    GateSpec,
    MetricSpec,
    TaskCapabilities,
    TaskSpec,
    lazy_hook,
    lazy_hooks,
)
from lucidyolo.tasks.dual_head import DECODE_PATHS, INFERENCE_VIEW, DualHeadModelConfig


class KeypointModelConfig(DualHeadModelConfig):
    """Keypoint options (spec 30-objective, pose terms)."""

    task: str = "keypoints"
    num_keypoints: Annotated[int, Field(gt=0)] | Literal["auto"] = Field(
        "auto", description="K, points per instance: 'auto' reads the dataset (kpt_shape, COCO keypoint names)"
    )
    keypoint_loss: Literal["rle", "laplace_nll"] = "rle"
    keypoint_gain: float = Field(1.0, ge=0)
    oks_gain: float = Field(0.0, ge=0)
    visibility_gain: float = Field(1.0, ge=0, description="gain of the point-visibility BCE (kvis)")


FIELDS: tuple[str, ...] = ("keypoints", "crowd")
"""The K points and their visibility of every instance, and COCO crowd regions (ignored, scored as pycocotools does)."""

_HOOKS = "lucidyolo.tasks.keypoints.hooks"

SPEC = TaskSpec(
    name="keypoints",
    aliases=("pose",),
    description="boxes + K keypoints per instance (COCO person_keypoints, YOLO pose roots)",
    config_model=KeypointModelConfig,
    capabilities=TaskCapabilities(multi_device=False, export=True),
    default_preset="pose_nano_smoke.yaml",
    synthetic_preset="pose_nano_synthetic.yaml",
    fields=FIELDS,
    meta_keys=("num_keypoints", "flip_idx", "skeleton"),
    reference_meta={"num_keypoints": 17},
    loss_terms=("box", "cls", "l1", "kpt", "oks", "kvis"),
    metrics=MetricSpec(
        keys=("val/oks_precision", "val/oks_recall", "val/oks_mAP"),
        primary="val/oks_mAP",
        summary=("val/oks_mAP",),
        families={"box": "bbox", "pose": "keypoints", "keypoints": "keypoints"},  # report.pose.map: OKS AP
        plot_names={"B": "box", "bbox": "box", "P": "keypoints", "keypoints": "keypoints"},
        columns={
            "val/oks_precision": "metrics/precision(P)", "val/oks_recall": "metrics/recall(P)",
            "val/oks_mAP": "metrics/mAP50-95(P)",
        },
    ),
    **lazy_hooks(_HOOKS, "build_model", "build_criterion", "decode", "make_synthetic", "build_metric",
                 "metric_update", "matches", "evaluate", "predict", "draw", "label_lines", "coco_results",
                 "target_rows", "label_stats", "transfer_weights", "published_meta"),
    decode_paths=DECODE_PATHS,
    published_models=("PoseModel",),
    inference_view=INFERENCE_VIEW,
    gate=GateSpec(
        preset="pose_nano_overfit.yaml",
        metric="OKS AP (train slice, e2e, 7-point symbol, uniform sigma 0.072)",
        floor=0.30,
        score=lazy_hook(f"{_HOOKS}:gate_score"),
        images=40,
        epochs=100,
    ),
    export=ExportSpec(
        outputs=("detections", "keypoints"),
        deploy=lazy_hook(f"{_HOOKS}:deploy"),
        check=lazy_hook(f"{_HOOKS}:export_check"),
    ),
)
