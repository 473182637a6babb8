"""lucid_points: a test plugin whose instances are single points with a class, and no boxes.

It reads the standard YOLO folder layout with its own row rule (``c x y``,
normalised), trains a heat-map head on lucidyolo's documented trunk, and is
scored by point F1 within a radius. Nothing in it is a box: the spec declares
``boxes=False``, the field's YOLO rule returns no boxes and its survival rule
replaces the box rule. It exists to prove the task seam carries such a task
without an engine edit (tests/engine/test_point_plugin.py).
"""

from __future__ import annotations

from pydantic import Field

import lucid_points.field  # noqa: F401  (registers the "points" field)
from lucidyolo.config.schema import DataConfig, ModelConfig, TrainerConfig
from lucidyolo.tasks.api import MetricSpec, lazy_hook
from lucidyolo.tasks.api_roles import DataRole, EvaluationRole, InferenceRole, ModelRole, Task


class PointsConfig(ModelConfig):
    task: str = "points"
    radius: float = Field(8.0, gt=0, description="a prediction within this many pixels of a point of its class finds it")


class PointsData(DataConfig):
    """Dots need no 640 px input: the task's own defaults (API 2.5 ``config_data``)."""

    img_size: int = Field(128, description="square network input side, a positive multiple of 32")
    batch_size: int = Field(8, gt=0)


class PointsTrainer(TrainerConfig):
    max_epochs: int = Field(24, gt=0)


_HOOKS = "lucid_points.hooks"

TASK = Task(
    name="points",
    description="class-labelled points without boxes (YOLO rows: c x y)",
    config_trainer=PointsTrainer,
    api_version=(3, 0),
    data=DataRole(fields=("points",), boxes=False, config=PointsData,
                  make_synthetic=lazy_hook("lucid_points.synthetic:make_synthetic")),
    model=ModelRole(config=PointsConfig, loss_terms=("heat", "offset"),
                    build_model=lazy_hook(f"{_HOOKS}:build_model"),
                    build_criterion=lazy_hook(f"{_HOOKS}:build_criterion")),
    inference=InferenceRole(decode_paths=("peaks",), decode=lazy_hook(f"{_HOOKS}:decode")),
    evaluation=EvaluationRole(
        metrics=MetricSpec(keys=("val/f1", "val/precision", "val/recall"), primary="val/f1"),
        build_metric=lazy_hook(f"{_HOOKS}:build_metric"),
        metric_update=lazy_hook(f"{_HOOKS}:metric_update"),
    ),
)

SPEC = TASK.record()
"""The engine's record of the task (tests read it; the entry point gives :data:`TASK`)."""
