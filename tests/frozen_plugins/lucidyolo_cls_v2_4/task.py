"""The ``cls`` task: image classification on the YOLO26 backbone (torch-free; hooks load lazily)."""

from __future__ import annotations

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import ExportSpec, MetricSpec, TaskCapabilities, TaskSpec, lazy_hook
from pydantic import Field

import lucidyolo_cls_v2_4.fields  # noqa: F401  (registers the image_class field)


class ClsModelConfig(ModelConfig):
    """Classification options beyond the shared ones (no dual head: the detection gains and top-k are not keys)."""

    task: str = "cls"
    label_smoothing: float = Field(0.1, ge=0, lt=1, description="cross-entropy label smoothing")
    dropout: float = Field(0.0, ge=0, lt=1, description="dropout before the linear layer")


_HOOKS = "lucidyolo_cls_v2_4.hooks"

SPEC = TaskSpec(
    name="cls",
    aliases=("classify",),
    description="one class per image (class folders: root/{train,val}/<class_name>/*.jpg)",
    config_model=ClsModelConfig,
    capabilities=TaskCapabilities(multi_device=True, export=True),
    api_version=(2, 4),
    # one head, one answer: softmax over the classes (no one-to-many branch to run NMS on)
    decode_paths=("e2e",),
    fields=("image_class",),
    loss_terms=("ce",),
    metrics=MetricSpec(
        keys=("val/top1", "val/top5"),
        primary="val/top1",
        columns={"val/top1": "metrics/accuracy_top1", "val/top5": "metrics/accuracy_top5"},
    ),
    default_preset="cls_nano_synthetic.yaml",
    synthetic_preset="cls_nano_synthetic.yaml",
    presets_package="lucidyolo_cls_v2_4",
    eval_batch_size=32,
    read_split=lazy_hook("lucidyolo_cls_v2_4.folders:read_class_folders"),
    make_synthetic=lazy_hook("lucidyolo_cls_v2_4.synthetic:make_synthetic"),
    build_model=lazy_hook(f"{_HOOKS}:build_model"),
    build_criterion=lazy_hook(f"{_HOOKS}:build_criterion"),
    decode=lazy_hook(f"{_HOOKS}:decode"),
    build_metric=lazy_hook(f"{_HOOKS}:build_metric"),
    metric_update=lazy_hook(f"{_HOOKS}:metric_update"),
    matches=lazy_hook(f"{_HOOKS}:matches"),
    evaluate=lazy_hook(f"{_HOOKS}:evaluate"),
    predict=lazy_hook(f"{_HOOKS}:predict"),
    draw=lazy_hook(f"{_HOOKS}:draw"),
    label_lines=lazy_hook(f"{_HOOKS}:label_lines"),
    target_rows=lazy_hook(f"{_HOOKS}:target_rows"),
    export=ExportSpec(outputs=("probs",), deploy=lazy_hook(f"{_HOOKS}:deploy"), check=lazy_hook(f"{_HOOKS}:export_check")),
)
