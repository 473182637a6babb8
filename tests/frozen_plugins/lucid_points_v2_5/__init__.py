"""lucid_points_v2_5: a test plugin whose instances are single points with a class, and no boxes.

It reads the standard YOLO folder layout with its own row rule (``c x y``,
normalised), trains a heat-map head on lucidyolo's documented trunk, and is
scored by point F1 within a radius. Nothing in it is a box: the spec declares
``boxes=False``, the field's YOLO rule returns no boxes and its survival rule
replaces the box rule. It exists to prove the task seam carries such a task
without an engine edit (tests/engine/test_point_plugin.py).
"""

from __future__ import annotations

from pydantic import Field

import lucid_points_v2_5.field  # noqa: F401  (registers the "points" field)
from lucidyolo.config.schema import DataConfig, ModelConfig, TrainerConfig
from lucidyolo.tasks.api import MetricSpec, TaskSpec, lazy_hook


class PointsConfig(ModelConfig):
    task: str = "points"
    radius: float = Field(8.0, gt=0, description="a prediction within this many pixels of a point of its class finds it")


class PointsData(DataConfig):
    """Dots need no 640 px input: the task's own defaults (API 2.5 ``config_data``)."""

    img_size: int = Field(128, description="square network input side, a positive multiple of 32")
    batch_size: int = Field(8, gt=0)


class PointsTrainer(TrainerConfig):
    max_epochs: int = Field(24, gt=0)


_HOOKS = "lucid_points_v2_5.hooks"

SPEC = TaskSpec(
    name="points",
    description="class-labelled points without boxes (YOLO rows: c x y)",
    config_model=PointsConfig,
    config_data=PointsData,
    config_trainer=PointsTrainer,
    api_version=(2, 5),
    boxes=False,
    fields=("points",),
    loss_terms=("heat", "offset"),
    decode_paths=("peaks",),
    metrics=MetricSpec(keys=("val/f1", "val/precision", "val/recall"), primary="val/f1"),
    make_synthetic=lazy_hook("lucid_points_v2_5.synthetic:make_synthetic"),
    build_model=lazy_hook(f"{_HOOKS}:build_model"),
    build_criterion=lazy_hook(f"{_HOOKS}:build_criterion"),
    decode=lazy_hook(f"{_HOOKS}:decode"),
    build_metric=lazy_hook(f"{_HOOKS}:build_metric"),
    metric_update=lazy_hook(f"{_HOOKS}:metric_update"),
)
