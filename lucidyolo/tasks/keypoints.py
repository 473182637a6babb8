"""The built-in keypoint task (``pose``, alias ``keypoints``).

Declares ``multi_device=False`` (its OKS AP is computed from per-split lists
that nothing gathers across ranks) and requires ``model.num_keypoints``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import MetricSpec, TaskCapabilities, TaskSpec


class PoseModelConfig(ModelConfig):
    """Keypoint options; ``num_keypoints`` has no default on purpose."""

    task: str = "pose"
    num_keypoints: int = Field(..., gt=0, description="K, points per instance (17 for COCO persons)")
    keypoint_loss: Literal["rle", "laplace_nll"] = "rle"
    keypoint_gain: float = Field(1.0, ge=0)
    oks_gain: float = Field(0.0, ge=0)


SPEC = TaskSpec(
    name="pose",
    aliases=("keypoints",),
    description="boxes + K keypoints per instance (COCO person_keypoints, YOLO pose roots)",
    config_model=PoseModelConfig,
    capabilities=TaskCapabilities(multi_device=False, export=True),
    fields=("keypoints", "visibility"),
    metrics=MetricSpec(keys=("val/oks_mAP",)),
    default_preset="pose_nano_smoke.yaml",
)
