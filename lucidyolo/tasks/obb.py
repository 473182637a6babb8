"""The built-in oriented-box task (``obb``, alias ``oriented``).

Declares ``multi_device=False``: its rotated mAP ranks every detection of the
split together and is not gathered across ranks, so more than one device would
report a per-rank number that looks plausible and is wrong.
"""

from __future__ import annotations

from pydantic import Field

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import MetricSpec, TaskCapabilities, TaskSpec


class ObbModelConfig(ModelConfig):
    """Oriented-box options."""

    task: str = "obb"
    angle_gain: float = Field(0.25, ge=0, description="1.0 destabilises training; 0.25 is the measured choice")


SPEC = TaskSpec(
    name="obb",
    aliases=("oriented",),
    description="rotated boxes, long-edge angle (DOTA-v1.0 tiles, YOLO-OBB roots)",
    config_model=ObbModelConfig,
    capabilities=TaskCapabilities(multi_device=False, export=True),
    fields=("rboxes",),
    metrics=MetricSpec(keys=("val/rotated_mAP50-95", "val/rotated_mAP50")),
    eval_img_size=1024,
    eval_batch_size=8,
    default_preset="obb_nano_smoke.yaml",
)
