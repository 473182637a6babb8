"""Model size summary: parameters of the whole trained model and GFLOPs of the deployed graph.

Both are measured on the ``meta`` device (shapes only, no memory, no arithmetic),
so even the x variant at 640 px takes well under a second.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from lucidyolo.models.build import create_model
from lucidyolo.models.deploy import make_deploy_model
from lucidyolo.models.yolo26 import YOLO26


def count_params(module: nn.Module) -> int:
    """Number of parameters (trainable or not) of ``module``."""
    return sum(p.numel() for p in module.parameters())


def deploy_gflops(model: YOLO26, img_size: int = 640) -> float:
    """GFLOPs (2 x multiply-accumulates, 1e9) of one ``img_size`` image through the deployed graph.

    Counts convolutions and matrix products (attention) of trunk + o2o branch +
    top-k decode with ``torch.utils.flop_counter.FlopCounterMode``.
    """
    deployed = make_deploy_model(model)
    ref = next(deployed.parameters())
    images = torch.zeros(1, 3, img_size, img_size, device=ref.device, dtype=ref.dtype)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        deployed(images)
    return counter.get_total_flops() / 1e9


def model_summary(
    variant: str = "n", num_classes: int = 80, img_size: int = 640, build: Callable[[], YOLO26] | None = None
) -> dict:
    """Size figures of one variant, computed on the meta device.

    Args:
        variant, num_classes: the detection model to build when ``build`` is not given.
        img_size: square input side.
        build: builds the model to measure (a task's ``build_model`` bound to its
            config); called under the meta device.

    Returns:
        ``{"model": "yolo26n", "task", "num_classes", "img_size", "params": int
        (whole model, both branches), "params_deploy": int (trunk + o2o + extras without their training-only parts, before BN folding),
        "gflops": float (deployed graph), "anchors": int}``.
    """
    with torch.device("meta"):
        model = build() if build is not None else create_model(variant, num_classes=num_classes)
    model.eval()
    train_only = sum(
        count_params(sub) for m in model.extras.values() for n in getattr(m, "train_only", ())
        if (sub := getattr(m, n, None)) is not None
    )
    deploy_params = (
        count_params(model.backbone) + count_params(model.neck) + count_params(model.head.o2o)
        + count_params(model.extras) - train_only
    )
    anchors = sum((img_size // s) ** 2 for s in model.strides)
    return {
        "model": f"yolo26{model.variant}",
        "task": model.task,
        "num_classes": num_classes,
        "img_size": img_size,
        "params": count_params(model),
        "params_deploy": deploy_params,
        "gflops": deploy_gflops(model, img_size),
        "anchors": anchors,
    }
