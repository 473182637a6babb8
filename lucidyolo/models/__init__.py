"""YOLO26 models: ``create_model(variant, task, num_classes)`` and ``list_models(pattern)``."""

from lucidyolo.models.build import create_model, list_models

__all__ = ["create_model", "list_models"]
