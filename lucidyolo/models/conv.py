"""The convolution primitive every YOLO26 module is made of: conv + BatchNorm + SiLU.

It sits below :mod:`~lucidyolo.models.blocks` and :mod:`~lucidyolo.models.attention`
(both build from it, and blocks compose attention), so the model modules import
one way; :func:`lucidyolo.models.fuse.fold_batchnorm` folds exactly these.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lucidyolo.models.batchnorm import BatchNorm2d


class SiLU(nn.Module):
    """SiLU, in place only when no autograd graph is recorded.

    An in-place SiLU inside a recorded graph makes autograd clone its input (the
    backward needs the pre-activation), a copy per activation that costs more than
    writing a new tensor: n at 320 px x 8 on 2 CPU threads spent ~40 ms of a ~400 ms
    step in those clones. Without a graph (eval, predict, export) in place is free.
    """

    def forward(self, x: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, C, H, W)``."""
        return F.silu(x, inplace=not torch.is_grad_enabled())


class Conv(nn.Module):
    """Convolution (no bias) + BatchNorm + optional SiLU with "same" padding.

    After :func:`lucidyolo.models.fuse.fold_batchnorm` the BatchNorm is an
    ``Identity`` and the convolution carries a bias.

    Args:
        c_in: input channels.
        c_out: output channels.
        k: square kernel size (odd).
        s: stride.
        groups: convolution groups.
        act: apply SiLU after the BatchNorm.
    """

    def __init__(
        self, c_in: int, c_out: int, k: int = 1, s: int = 1, groups: int = 1, act: bool = True
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, k, s, padding=k // 2, groups=groups, bias=False)
        self.bn: nn.Module = BatchNorm2d(c_out, eps=1e-3, momentum=0.1)
        self.act: nn.Module = SiLU() if act else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        """``(B, c_in, H, W) -> (B, c_out, H/s, W/s)``."""
        return self.act(self.bn(self.conv(x)))


class DWConv(Conv):
    """Depthwise :class:`Conv` (groups = channels); ``c_out`` must be a multiple of ``c_in``."""

    def __init__(self, c_in: int, c_out: int, k: int = 3, s: int = 1, act: bool = True) -> None:
        super().__init__(c_in, c_out, k, s, groups=c_in, act=act)
