"""The built-in oriented-box task (``obb``, alias ``oriented``).

Torch-free: every hook is a :func:`~lucidyolo.tasks.api.lazy_hook` into
:mod:`lucidyolo.tasks.obb.hooks`. Declares ``multi_device=False``: its rotated
mAP ranks every detection of the split together and is not gathered across
ranks, so more than one device would report a per-rank number that looks
plausible and is wrong.
"""

from __future__ import annotations

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


class ObbModelConfig(DualHeadModelConfig):
    """Oriented-box options."""

    task: str = "obb"
    angle_gain: float = Field(0.25, ge=0, description="1.0 destabilises training; 0.25 is the measured choice")


FIELDS: tuple[str, ...] = ("rboxes",)
"""Beyond boxes, labels and difficult: the rotated box of every instance (long-edge canonical)."""

_HOOKS = "lucidyolo.tasks.obb.hooks"

SPEC = TaskSpec(
    name="obb",
    aliases=("oriented",),
    description="rotated boxes, long-edge angle (DOTA-v1.0 tiles, YOLO-OBB roots)",
    config_model=ObbModelConfig,
    capabilities=TaskCapabilities(multi_device=False, export=True),
    default_preset="obb_nano_smoke.yaml",
    synthetic_preset="obb_nano_synthetic.yaml",
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
    **lazy_hooks(_HOOKS, "build_model", "build_criterion", "decode", "make_synthetic", "build_metric",
                 "metric_update", "matches", "evaluate", "predict", "draw", "label_lines", "coco_results",
                 "target_rows", "label_stats"),
    decode_paths=DECODE_PATHS,
    published_models=("OBBModel",),
    inference_view=INFERENCE_VIEW,
    gate=GateSpec(
        preset="obb_nano_overfit.yaml",
        metric="rotated mAP50 (train slice, e2e, exact polygon IoU, 101-point)",
        floor=0.90,
        score=lazy_hook(f"{_HOOKS}:gate_score"),
        images=40,
        epochs=100,
    ),
    export=ExportSpec(
        outputs=("detections",), deploy=lazy_hook(f"{_HOOKS}:deploy"), check=lazy_hook(f"{_HOOKS}:export_check")
    ),
)
