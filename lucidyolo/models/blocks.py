"""Convolutional building blocks of the YOLO26 trunk.

Every block keeps plain keyword constructors (channels in, channels out, repeat
count, expansion) so the backbone and neck read like the spec's layer list.
Shapes: all blocks map ``(B, c_in, H, W)`` to ``(B, c_out, H', W')`` with
``H' = H / stride`` (stride 1 unless stated).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lucidyolo.models.attention import PSABlock
from lucidyolo.models.conv import Conv


class Bottleneck(nn.Module):
    """Two 3x3 :class:`Conv` with hidden width ``int(c_out * e)``; residual when ``c_in == c_out``.

    Args:
        c_in: input channels.
        c_out: output channels.
        e: hidden expansion.
        shortcut: allow the residual (it is only added when channels match).
    """

    def __init__(self, c_in: int, c_out: int, e: float = 0.5, shortcut: bool = True) -> None:
        super().__init__()
        hidden = int(c_out * e)
        self.cv1 = Conv(c_in, hidden, 3)
        self.cv2 = Conv(hidden, c_out, 3)
        self.residual = shortcut and c_in == c_out

    def forward(self, x: Tensor) -> Tensor:
        """``(B, c_in, H, W) -> (B, c_out, H, W)``."""
        y = self.cv2(self.cv1(x))
        return x + y if self.residual else y


class C3k(nn.Module):
    """CSP unit with two 1x1 branches of width ``int(c_out * e)``; ``n`` Bottlenecks on one.

    Args:
        c_in: input channels.
        c_out: output channels.
        n: number of Bottlenecks (each with ``e=1.0``) on the first branch.
        e: branch width as a fraction of ``c_out``.
    """

    def __init__(self, c_in: int, c_out: int, n: int = 1, e: float = 0.5) -> None:
        super().__init__()
        hidden = int(c_out * e)
        self.cv1 = Conv(c_in, hidden, 1)
        self.cv2 = Conv(c_in, hidden, 1)
        self.m = nn.Sequential(*(Bottleneck(hidden, hidden, e=1.0) for _ in range(n)))
        self.cv3 = Conv(2 * hidden, c_out, 1)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, c_in, H, W) -> (B, c_out, H, W)``."""
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), dim=1))


class C3k2(nn.Module):
    """Split-and-chain CSP block (the YOLO26 workhorse).

    A 1x1 conv maps to ``2h`` channels (``h = int(c_out * e)``), the result is
    split into two halves, ``n`` inner units are chained on the last tensor and
    every intermediate is kept: the concat has ``(2 + n) h`` channels and a 1x1
    conv maps it to ``c_out``.

    Args:
        c_in: input channels.
        c_out: output channels.
        n: number of chained inner units.
        e: hidden width as a fraction of ``c_out``.
        c3k: inner unit is a :class:`C3k` (two Bottlenecks at the C3k's half
            width) instead of a :class:`Bottleneck` with ``e=0.5``.
        attention: append one :class:`~lucidyolo.models.attention.PSABlock` to
            every inner unit (the neck's last stage).
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        n: int = 1,
        e: float = 0.5,
        c3k: bool = False,
        attention: bool = False,
    ) -> None:
        super().__init__()
        self.hidden = int(c_out * e)
        h = self.hidden
        self.cv1 = Conv(c_in, 2 * h, 1)
        units: list[nn.Module] = []
        for _ in range(n):
            unit: nn.Module = C3k(h, h, n=2) if c3k else Bottleneck(h, h, e=0.5)
            if attention:
                unit = nn.Sequential(unit, PSABlock(h))
            units.append(unit)
        self.m = nn.ModuleList(units)
        self.cv2 = Conv((2 + n) * h, c_out, 1)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, c_in, H, W) -> (B, c_out, H, W)``."""
        parts = list(self.cv1(x).chunk(2, dim=1))  # 2 x (B, h, H, W)
        for unit in self.m:
            parts.append(unit(parts[-1]))
        return self.cv2(torch.cat(parts, dim=1))  # (B, (2+n)h, H, W) -> (B, c_out, H, W)


class SPPF(nn.Module):
    """Spatial pyramid pooling (fast) with a residual from input to output.

    1x1 to ``c_in / 2`` (conv + BN, no activation: measured on the published
    weights' module outputs); the same max-pool (k, stride 1) applied three times
    in a chain; concat of the four tensors; 1x1 to ``c_out``; plus the input when
    ``c_in == c_out`` (the YOLO26 change).

    Args:
        c_in: input channels.
        c_out: output channels.
        k: pooling kernel.
    """

    def __init__(self, c_in: int, c_out: int, k: int = 5) -> None:
        super().__init__()
        hidden = c_in // 2
        self.cv1 = Conv(c_in, hidden, 1, act=False)
        self.pool = nn.MaxPool2d(k, stride=1, padding=k // 2)
        self.cv2 = Conv(4 * hidden, c_out, 1)
        self.residual = c_in == c_out

    def forward(self, x: Tensor) -> Tensor:
        """``(B, c_in, H, W) -> (B, c_out, H, W)``."""
        y = [self.cv1(x)]
        for _ in range(3):
            y.append(self.pool(y[-1]))
        out = self.cv2(torch.cat(y, dim=1))  # (B, 4 * c_in/2, H, W) -> (B, c_out, H, W)
        return x + out if self.residual else out
