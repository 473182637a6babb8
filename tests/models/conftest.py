"""Shared fixtures: a seeded nano model whose BatchNorm statistics are calibrated on one batch.

With default initialisation and fresh running statistics (mean 0, var 1), eval-mode
activations shrink at every layer and the head outputs become constant; one
train-mode pass with cumulative statistics gives the eval-mode network the
non-degenerate behaviour of a trained one, so folding and decoding are tested
on realistic, distinct values.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lucidyolo.models import create_model
from lucidyolo.models.yolo26 import YOLO26


def calibrate_batchnorm(model: nn.Module, images: torch.Tensor) -> nn.Module:
    """Set every BatchNorm's running statistics to those of ``images``; returns the model in eval mode."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: one pass sets the statistics exactly
    model.train()
    with torch.no_grad():
        model(images)
    for bn in bns:
        bn.momentum = 0.03
    return model.eval()


@pytest.fixture(scope="module")
def calibrated_nano() -> YOLO26:
    torch.manual_seed(0)
    model = create_model("n", num_classes=80)
    return calibrate_batchnorm(model, torch.rand(2, 3, 256, 256, generator=torch.Generator().manual_seed(1)))
