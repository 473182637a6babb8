"""The classifier: the YOLO26 backbone of a variant, global average pooling and one linear layer."""

from __future__ import annotations

import copy

import torch
from lucidyolo.models import Trunk
from lucidyolo.models.fuse import fold_batchnorm
from lucidyolo.models.scales import SCALES
from torch import Tensor, nn


class Classifier(Trunk):
    """``images (B, 3, S, S)`` in ``[0, 1]`` -> ``{"logits": (B, C)}``.

    The shared trunk (:func:`lucidyolo.models.build_trunk`) without its neck:
    only the deepest backbone level (P5, stride 32) feeds the head; pooled over
    space it is the image descriptor.

    Args:
        variant: scale-table row (``n s m l x``).
        num_classes: C.
        dropout: before the linear layer (training only).
    """

    class_params = ("fc.weight", "fc.bias")
    """Per-class rows (dim 0): starting from other weights maps them by class name."""

    def __init__(self, variant: str, num_classes: int, dropout: float = 0.0) -> None:
        super().__init__(SCALES[variant], neck=False)  # det's parameter names: a det run's backbone transfers
        self.variant = variant
        self.num_classes = num_classes
        channels = self.out_channels[-1]
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, images: Tensor) -> dict[str, Tensor]:
        p5 = super().forward(images)[-1]  # (B, C5, S/32, S/32)
        return {"logits": self.fc(self.drop(self.pool(p5).flatten(1)))}


class DeployedClassifier(nn.Module):
    """The exported graph: BN folded, ``images (B, 3, S, S)`` -> ``probs (B, C)`` (softmax)."""

    def __init__(self, model: Classifier) -> None:
        super().__init__()
        self.model = fold_batchnorm(copy.deepcopy(model)).eval()

    def forward(self, images: Tensor) -> Tensor:
        return torch.softmax(self.model(images)["logits"], dim=-1)
