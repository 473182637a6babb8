"""The built-in detection task (``det``, alias ``detect``): the base of the dual-head family.

Torch-free: every hook is a :func:`~lucidyolo.tasks.api.lazy_hook` into
:mod:`lucidyolo.tasks.detect.hooks`.
"""

from __future__ import annotations

from lucidyolo.tasks.api import MetricSpec
from lucidyolo.tasks.dual_head import DualHeadModelConfig, dual_head_task


class DetectModelConfig(DualHeadModelConfig):
    """Detection has no options beyond the shared ones."""

    task: str = "det"


FIELDS: tuple[str, ...] = ("crowd",)
"""Beyond boxes, labels and difficult, detection reads COCO crowd regions: ignored by the
assigners, passed to the epoch metric so it scores them as pycocotools does."""

TASK = dual_head_task(
    name="det",
    aliases=("detect",),
    description="axis-aligned boxes + class (COCO instances, YOLO roots)",
    hooks="lucidyolo.tasks.detect.hooks",
    config=DetectModelConfig,
    compile_step=True,
    fields=FIELDS,
    loss_terms=("box", "cls", "l1"),
    metrics=MetricSpec(
        # results.csv column order of the common convention
        keys=("val/precision", "val/recall", "val/mAP50", "val/mAP50-95"),
        primary="val/mAP50-95",
        summary=("val/mAP50-95", "val/mAP50"),
        families={"box": "bbox"},  # Model.evaluate(...).box.map
        plot_names={"B": "box", "bbox": "box"},  # box_pr_curve.png ..., run folder and `lucid eval --plots` alike
        columns={
            "val/precision": "metrics/precision(B)", "val/recall": "metrics/recall(B)",
            "val/mAP50": "metrics/mAP50(B)", "val/mAP50-95": "metrics/mAP50-95(B)",
        },
    ),
    published_model="DetectionModel",
    preset_prefix="det",
    # 32 training images x 100 epochs (400 steps, lr decayed to 0.1x), no scale/translate jitter:
    # 1.000 with seeds 0 and 1 in ~281 s on 1 thread (with jitter: 0.938-0.969, at the floor);
    # 80 images x 50 epochs at constant lr gave 0.959 in 676-908 s, 32 x 100 at constant lr 0.948.
    gate_metric="recall@0.5 (train slice, e2e, conf>=0.25)",
    gate_floor=0.95,
    export_outputs=("detections",),
)

SPEC = TASK.record()
"""The engine's record of the task (the entry point gives :data:`TASK`)."""
