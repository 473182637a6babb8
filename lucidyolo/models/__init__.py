"""YOLO26 models: ``create_model(variant, num_classes)``, ``list_models(pattern)`` and ``build_trunk(variant)``
(backbone + neck, the shared features a plugin builds its own head on)."""

from lucidyolo.models.build import create_model, list_models
from lucidyolo.models.trunk import Trunk, build_trunk

__all__ = ["Trunk", "build_trunk", "create_model", "list_models"]
