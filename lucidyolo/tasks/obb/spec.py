"""The built-in oriented-box task (``obb``, alias ``oriented``): detection with an angle stem.

Torch-free: every hook is a :func:`~lucidyolo.tasks.api.lazy_hook` into
:mod:`lucidyolo.tasks.obb.hooks`. Declares ``multi_device=False``: its rotated
mAP ranks every detection of the split together and is not gathered across
ranks, so more than one device would report a per-rank number that looks
plausible and is wrong.
"""

from __future__ import annotations

from pydantic import Field

from lucidyolo.tasks.api import MetricSpec
from lucidyolo.tasks.dual_head import DualHeadModelConfig, dual_head_task


class ObbModelConfig(DualHeadModelConfig):
    """Oriented-box options."""

    task: str = "obb"
    angle_gain: float = Field(0.25, ge=0, description="1.0 destabilises training; 0.25 is the measured choice")


FIELDS: tuple[str, ...] = ("rboxes",)
"""Beyond boxes, labels and difficult: the rotated box of every instance (long-edge canonical)."""

TASK = dual_head_task(
    name="obb",
    aliases=("oriented",),
    description="rotated boxes, long-edge angle (DOTA-v1.0 tiles, YOLO-OBB roots)",
    hooks="lucidyolo.tasks.obb.hooks",
    extra_hooks=("label_stats",),
    config=ObbModelConfig,
    multi_device=False,
    fields=FIELDS,
    loss_terms=("box", "cls", "l1", "angle"),
    metrics=MetricSpec(
        keys=("val/rotated_precision", "val/rotated_recall", "val/rotated_mAP50", "val/rotated_mAP50-95"),
        primary="val/rotated_mAP50-95",
        summary=("val/rotated_mAP50-95", "val/rotated_mAP50"),
        # the per-tile rotated AP; `box` as well, the name other trainers give it for rotated boxes
        families={"box": "rotated (per tile)", "obb": "rotated (per tile)"},
        plot_names={"R": "obb", "rotated (per tile)": "obb"},
        columns={
            "val/rotated_precision": "metrics/precision(R)", "val/rotated_recall": "metrics/recall(R)",
            "val/rotated_mAP50": "metrics/mAP50(R)", "val/rotated_mAP50-95": "metrics/mAP50-95(R)",
        },
    ),
    eval_batch_size=8,
    published_model="OBBModel",
    preset_prefix="obb",
    gate_metric="rotated mAP50 (train slice, e2e, exact polygon IoU, 101-point)",
    gate_floor=0.90,
    export_outputs=("detections",),
)

SPEC = TASK.record()
"""The engine's record of the task (the entry point gives :data:`TASK`)."""
