"""The built-in detection task (``det``, alias ``detect``)."""

from __future__ import annotations

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import TaskCapabilities, TaskSpec


class DetectModelConfig(ModelConfig):
    """Detection has no options beyond the shared ones."""


SPEC = TaskSpec(
    name="det",
    aliases=("detect",),
    description="axis-aligned boxes + class (COCO instances, YOLO roots)",
    config_model=DetectModelConfig,
    capabilities=TaskCapabilities(multi_device=True, export=True, metric_keys=("val/mAP50-95", "val/mAP50")),
    default_preset="det_nano_smoke.yaml",
)
