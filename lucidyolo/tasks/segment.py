"""The built-in instance segmentation task (``seg``, alias ``segment``).

Only the task declaration and its options exist so far; the mask head, loss and
metric are not built yet, so ``lucid fit seg`` refuses with exit code 2.
"""

from __future__ import annotations

from pydantic import Field

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import MetricSpec, TaskCapabilities, TaskSpec


class SegmentModelConfig(ModelConfig):
    """Segmentation options (spec 30-objective, task terms)."""

    task: str = "seg"
    mask_gain: float = Field(2.5, ge=0)
    semantic_gain: float = Field(0.5, ge=0)
    num_prototypes: int = Field(32, gt=0)


SPEC = TaskSpec(
    name="seg",
    aliases=("segment",),
    description="boxes + one mask per instance (COCO polygons/RLE, YOLO polygons)",
    config_model=SegmentModelConfig,
    capabilities=TaskCapabilities(multi_device=True, export=True),
    fields=("polygons",),
    metrics=MetricSpec(keys=("val/mAP50-95", "val/mAP50", "val/segm_mAP50-95")),
    default_preset="seg_nano_smoke.yaml",
)
