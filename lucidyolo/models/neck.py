"""PAN neck: a top-down pass (P5 -> T4 -> N3) then a bottom-up pass (N3 -> N4 -> N5)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lucidyolo.models.blocks import C3k2
from lucidyolo.models.conv import Conv
from lucidyolo.models.scales import Scale


class PANNeck(nn.Module):
    """T4 = C3k2(up(P5) ++ P4 -> 512, c3k); N3 = C3k2(up(T4) ++ P3 -> 256, c3k);
    N4 = C3k2(Conv s2(N3) ++ T4 -> 512, c3k); N5 = C3k2(Conv s2(N4) ++ P5 -> 1024,
    one inner unit: Bottleneck + attention block, at every depth). Upsampling is
    nearest x2 (base widths). This is the published YOLO26 layout.

    Args:
        scale: the variant's row of the scale table.
        in_channels: channels of ``(P3, P4, P5)``.

    Attributes:
        out_channels: channels of ``(N3, N4, N5)``.
    """

    def __init__(self, scale: Scale, in_channels: tuple[int, int, int]) -> None:
        super().__init__()
        ch, rep = scale.channels, scale.repeats
        c3, c4, c5 = in_channels
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.top4 = C3k2(c5 + c4, ch(512), rep(2), c3k=True)
        self.out3 = C3k2(ch(512) + c3, ch(256), rep(2), c3k=True)
        self.down3 = Conv(ch(256), ch(256), 3, 2)
        self.out4 = C3k2(ch(256) + ch(512), ch(512), rep(2), c3k=True)
        self.down4 = Conv(ch(512), ch(512), 3, 2)
        self.out5 = C3k2(ch(512) + c5, ch(1024), 1, attention=True)
        self.out_channels = (ch(256), ch(512), ch(1024))

    def forward(self, feats: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """``(P3, P4, P5)`` to ``(N3, N4, N5)`` at strides 8, 16, 32."""
        p3, p4, p5 = feats
        t4 = self.top4(torch.cat((self.up(p5), p4), dim=1))
        n3 = self.out3(torch.cat((self.up(t4), p3), dim=1))
        n4 = self.out4(torch.cat((self.down3(n3), t4), dim=1))
        n5 = self.out5(torch.cat((self.down4(n4), p5), dim=1))
        return n3, n4, n5
