"""The fastest form of a trained model for ``lucid predict`` and ``lucid eval``.

Training keeps BatchNorm and both head branches; answering a request needs
neither: BatchNorm folds into its convolution, and the end-to-end decoder reads
only the one-to-one branch. Both views keep the training output layout
(``{"o2o": {stem: (B, A, ...)}, "anchors", "strides", extras...}``), so every
task's own ``decode`` hook reads them unchanged:

- :func:`inference_model` with ``paths=("e2e",)``: the deployed trunk and o2o
  branch (:func:`~lucidyolo.models.deploy.make_deploy_model`, BN folded, no o2m
  branch, no training-only modules) behind :class:`E2EOutputs`;
- with ``"nms"`` among the paths, or for a model that is not a dual-head
  YOLO26 (a plugin's own): a BN-folded copy of the whole model (the o2m branch
  feeds NMS).

Both run in channels-last memory layout except on MPS: oneDNN's CPU convolutions
and cuDNN are faster with it (``benchmarks/infer.py`` has the numbers).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from lucidyolo.models.deploy import DeployModel, make_deploy_model
from lucidyolo.models.fuse import fold_batchnorm
from lucidyolo.models.yolo26 import YOLO26


class E2EOutputs(nn.Module):
    """A :class:`DeployModel`'s raw outputs in the training layout, o2o branch only.

    ``forward(images (B, 3, H, W))`` returns ``{"o2o": {stem: (B, A, ...)}, "anchors": (A, 2),
    "strides": (A,), **extras}``: what a task's ``decode(outputs, "e2e")`` reads.
    """

    def __init__(self, deployed: DeployModel) -> None:
        super().__init__()
        self.deployed = deployed
        self.stems = tuple(deployed.branch.output_names)

    def forward(self, images: Tensor) -> dict[str, Any]:
        raw = self.deployed.forward_raw(images)
        out: dict[str, Any] = {k: v for k, v in raw.items() if k not in self.stems}
        out["o2o"] = {k: raw[k] for k in self.stems}
        return out


class ChannelsLastInput(nn.Module):
    """Feeds ``model`` its images in channels-last layout (the weights are converted once)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model.to(memory_format=torch.channels_last)

    def forward(self, images: Tensor) -> Any:
        return self.model(images.contiguous(memory_format=torch.channels_last))


def inference_model(model: nn.Module, paths: Sequence[str] = ("e2e", "nms"), device: torch.device | str = "cpu",
                    fold: bool = True) -> nn.Module:
    """An eval-mode, gradient-free, BN-folded copy of ``model`` on ``device`` for the decode ``paths``.

    ``fold=False``: an unfolded copy of the whole model, whose forward is bit for
    bit the training run's validation forward (same layout, same kernels). The
    original model is not modified.
    """
    device = torch.device(device)
    # The o2o-only view needs the dual-head YOLO26; any other model (a plugin's own) is folded whole.
    if tuple(paths) == ("e2e",) and fold and isinstance(model, YOLO26):
        fast: nn.Module = E2EOutputs(make_deploy_model(model))
    else:
        fast = copy.deepcopy(model).eval()
        if fold:
            fast = fold_batchnorm(fast)
    fast = fast.to(device).eval().requires_grad_(False)
    return fast if device.type == "mps" else ChannelsLastInput(fast).eval()
