"""What the YOLO26 paper's size tables measure, computed for a lucid model (shared by the size gates).

The paper's params column is the deployed graph's (trunk + one-to-one branch + deployed task modules) with
BatchNorm folded into the convolutions; its GFLOPs column is that graph's convolutions (2 x MACs) at 640 px.
Both agree with every detection row to the paper's rounding (docs/decisions/model.md, "Size").
Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from lucidyolo.models.deploy import make_deploy_model


def paper_quantities(model: nn.Module, img_size: int = 640) -> dict[str, float]:
    """``{"params_m": deployed params with BN folded (M), "conv_gflops": deployed convolutions (GFLOPs)}``
    of a model built on the meta device (shapes only)."""
    deployed = make_deploy_model(model)
    params = sum(p.numel() for p in deployed.parameters())
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        deployed(torch.zeros(1, 3, img_size, img_size, device="meta"))
    conv = counter.get_flop_counts()["Global"].get(torch.ops.aten.convolution, 0)
    return {"params_m": params / 1e6, "conv_gflops": conv / 1e9}


def interval(paper: float, rounding: float, rel_tol: float = 0.0) -> tuple[float, float]:
    """The values a figure the paper rounds to ``rounding`` allows, widened by ``rel_tol``."""
    return (paper - rounding) * (1 - rel_tol), (paper + rounding) * (1 + rel_tol)
