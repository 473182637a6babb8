"""The built-in keypoint task (``keypoints``, alias ``pose``): detection with a keypoint stem.

Torch-free: every hook is a :func:`~lucidyolo.tasks.api.lazy_hook` into
:mod:`lucidyolo.tasks.keypoints.hooks`. Detection plus, per anchor and branch,
``K`` point offsets and ``K x 2`` scales trained by residual log-likelihood
estimation. Declares ``multi_device=False``: its OKS AP is computed from
per-split lists that nothing gathers across ranks.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from lucidyolo.tasks.api import MetricSpec
from lucidyolo.tasks.dual_head import DualHeadModelConfig, dual_head_task


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

TASK = dual_head_task(
    name="keypoints",
    aliases=("pose",),
    description="boxes + K keypoints per instance (COCO person_keypoints, YOLO pose roots)",
    hooks="lucidyolo.tasks.keypoints.hooks",
    extra_hooks=("label_stats", "transfer_weights", "published_meta"),
    config=KeypointModelConfig,
    multi_device=False,
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
    published_model="PoseModel",
    preset_prefix="pose",
    gate_metric="OKS AP (train slice, e2e, 7-point symbol, uniform sigma 0.072)",
    gate_floor=0.30,
    export_outputs=("detections", "keypoints"),
)

SPEC = TASK.record()
"""The engine's record of the task (the entry point gives :data:`TASK`)."""
