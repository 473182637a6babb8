"""The YOLO26 backbone: five stride-2 stages producing P3 (stride 8), P4 (16) and P5 (32)."""

from __future__ import annotations

from torch import Tensor, nn

from lucidyolo.models.attention import C2PSA
from lucidyolo.models.blocks import SPPF, C3k2
from lucidyolo.models.conv import Conv
from lucidyolo.models.scales import Scale


class Backbone(nn.Module):
    """Conv s2 -> 64; Conv s2 -> 128; C3k2(->256, e=0.25); Conv s2 -> 256;
    C3k2(->512, e=0.25) => P3 (those two C3k2 chain C3k units from m up); Conv s2 -> 512; C3k2(->512, c3k) => P4;
    Conv s2 -> 1024; C3k2(->1024, c3k); SPPF; C2PSA => P5 (base widths).

    Args:
        scale: the variant's row of the scale table.

    Attributes:
        out_channels: channels of ``(P3, P4, P5)``.
    """

    def __init__(self, scale: Scale) -> None:
        super().__init__()
        ch, rep, early = scale.channels, scale.repeats, scale.c3k_early
        self.stem = nn.Sequential(Conv(3, ch(64), 3, 2), Conv(ch(64), ch(128), 3, 2))
        self.stage2 = C3k2(ch(128), ch(256), rep(2), e=0.25, c3k=early)
        self.stage3 = nn.Sequential(
            Conv(ch(256), ch(256), 3, 2), C3k2(ch(256), ch(512), rep(2), e=0.25, c3k=early)
        )
        self.stage4 = nn.Sequential(
            Conv(ch(512), ch(512), 3, 2), C3k2(ch(512), ch(512), rep(2), c3k=True)
        )
        self.stage5 = nn.Sequential(
            Conv(ch(512), ch(1024), 3, 2),
            C3k2(ch(1024), ch(1024), rep(2), c3k=True),
            SPPF(ch(1024), ch(1024)),
            C2PSA(ch(1024), ch(1024), rep(2)),
        )
        self.out_channels = (ch(512), ch(512), ch(1024))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Images ``(B, 3, H, W)`` to ``(P3 (B, c3, H/8, W/8), P4 (.., H/16, ..), P5 (.., H/32, ..))``."""
        p3 = self.stage3(self.stage2(self.stem(x)))
        p4 = self.stage4(p3)
        p5 = self.stage5(p4)
        return p3, p4, p5
