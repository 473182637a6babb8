"""The built-in detection task (``det``, alias ``detect``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import TaskCapabilities, TaskSpec


class DetectModelConfig(ModelConfig):
    """Detection has no options beyond the shared ones."""


# Thin wrappers keep this module torch-free: the hooks import their module on first call.
def _build_model(cfg: ModelConfig, num_classes: int) -> Any:
    from lucidyolo.tasks import detect_hooks

    return detect_hooks.build_model(cfg, num_classes)


def _build_criterion(cfg: ModelConfig, num_classes: int) -> Any:
    from lucidyolo.tasks import detect_hooks

    return detect_hooks.build_criterion(cfg, num_classes)


def _decode(outputs: Any, path: str = "e2e") -> Any:
    from lucidyolo.tasks import detect_hooks

    return detect_hooks.decode(outputs, path)


def _make_synthetic(out_dir: Path, num_images: int, img_size: int, seed: int) -> Path:
    from lucidyolo.tasks import detect_hooks

    return detect_hooks.make_synthetic(out_dir, num_images, img_size, seed)


def _build_metric(num_classes: int) -> Any:
    from lucidyolo.tasks import detect_hooks

    return detect_hooks.build_metric(num_classes)


SPEC = TaskSpec(
    name="det",
    aliases=("detect",),
    description="axis-aligned boxes + class (COCO instances, YOLO roots)",
    config_model=DetectModelConfig,
    capabilities=TaskCapabilities(multi_device=True, export=True, metric_keys=("val/mAP50-95", "val/mAP50")),
    default_preset="det_nano_smoke.yaml",
    synthetic_preset="det_nano_synthetic.yaml",
    build_model=_build_model,
    build_criterion=_build_criterion,
    decode=_decode,
    make_synthetic=_make_synthetic,
    build_metric=_build_metric,
)
