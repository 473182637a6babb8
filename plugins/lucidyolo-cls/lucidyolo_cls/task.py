"""The ``cls`` task: image classification on the YOLO26 backbone (torch-free; hooks load lazily).

Written against plugin API 3.0: four roles, each holding only what classification has; the rest
keeps the roles' defaults (``--save-json`` refuses: classification has no COCO results format).
"""

from __future__ import annotations

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import ExportSpec, MetricSpec, TaskCapabilities, lazy_hook, lazy_hooks
from lucidyolo.tasks.api_roles import DataRole, EvaluationRole, InferenceRole, ModelRole, Task
from pydantic import Field

import lucidyolo_cls.fields  # noqa: F401  (registers the image_class field)


class ClsModelConfig(ModelConfig):
    """Classification options beyond the shared ones (no dual head: the detection gains and top-k are not keys)."""

    task: str = "cls"
    label_smoothing: float = Field(0.1, ge=0, lt=1, description="cross-entropy label smoothing")
    dropout: float = Field(0.0, ge=0, lt=1, description="dropout before the linear layer")


_HOOKS = "lucidyolo_cls.hooks"

TASK = Task(
    name="cls",
    aliases=("classify",),
    description="one class per image (class folders: root/{train,val}/<class_name>/*.jpg)",
    capabilities=TaskCapabilities(multi_device=True, export=True),
    api_version=(3, 0),
    default_preset="cls_nano_synthetic.yaml",
    synthetic_preset="cls_nano_synthetic.yaml",
    presets_package="lucidyolo_cls",
    data=DataRole(
        fields=("image_class",),
        read_split=lazy_hook("lucidyolo_cls.folders:read_class_folders"),
        make_synthetic=lazy_hook("lucidyolo_cls.synthetic:make_synthetic"),
        target_rows=lazy_hook(f"{_HOOKS}:target_rows"),
    ),
    model=ModelRole(
        config=ClsModelConfig,
        loss_terms=("ce",),
        export=ExportSpec(outputs=("probs",), deploy=lazy_hook(f"{_HOOKS}:deploy"),
                          check=lazy_hook(f"{_HOOKS}:export_check")),
        **lazy_hooks(_HOOKS, "build_model", "build_criterion"),
    ),
    # one head, one answer: softmax over the classes (no one-to-many branch to run NMS on)
    inference=InferenceRole(decode_paths=("e2e",), **lazy_hooks(_HOOKS, "decode", "predict", "draw", "label_lines")),
    evaluation=EvaluationRole(
        metrics=MetricSpec(
            keys=("val/top1", "val/top5"),
            primary="val/top1",
            columns={"val/top1": "metrics/accuracy_top1", "val/top5": "metrics/accuracy_top5"},
        ),
        **lazy_hooks(_HOOKS, "build_metric", "metric_update", "matches", "evaluate"),
    ),
)

SPEC = TASK.record()
"""The engine's record (what ``lucid`` reads; the entry point gives :data:`TASK`)."""
