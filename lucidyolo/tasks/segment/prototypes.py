"""Mask prototypes (and the training-only semantic head) of the segmentation model.

A row's mask is ``coefficients . prototypes``: the head predicts ``P`` (32)
coefficients per anchor and this module ``P`` image-wide prototype maps at 2x
the P3 resolution (stride 4: 160 x 160 at 640 px). The prototypes read a
fusion of all three neck levels at P3 resolution (N3 plus nearest-upsampled
1x1 projections of N4 and N5), so large objects see deep context while the
maps keep P3's spatial detail. The same fused map feeds a 1x1 semantic
auxiliary conv that predicts per-class masks at stride 8; it only shapes the
features during training and is listed as a training-only submodule, which the
deployed graph drops.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from lucidyolo.models.conv import Conv


class PrototypeHead(nn.Module):
    """Neck features ``(N3, N4, N5)`` to prototypes (and semantic logits while training).

    Args:
        in_channels: channels of ``(N3, N4, N5)``.
        hidden: width of the prototype convolutions (``scale.channels(256)``).
        num_prototypes: ``P``, prototype maps (32).
        num_classes: ``C`` of the semantic auxiliary head; ``0`` builds none.

    ``forward`` returns ``{"protos": (B, P, 2*H3, 2*W3)}`` plus, while the
    semantic head exists, ``{"semantic": (B, C, H3, W3)}`` logits, where
    ``(H3, W3)`` is the N3 grid (stride 8).
    """

    train_only = ("semantic",)
    """Submodules the deployed graph removes (set to ``None``)."""

    def __init__(self, in_channels: Sequence[int], hidden: int, num_prototypes: int = 32, num_classes: int = 0) -> None:
        super().__init__()
        c3, c4, c5 = in_channels
        self.num_prototypes = num_prototypes
        self.lateral = nn.ModuleList([Conv(c4, c3, 1), Conv(c5, c3, 1)])
        self.tower = nn.Sequential(Conv(c3, hidden, 3), Conv(hidden, hidden, 3), Conv(hidden, hidden, 3))
        self.upsampled = Conv(hidden, hidden, 3)
        self.out = nn.Conv2d(hidden, num_prototypes, 1)
        self.semantic: nn.Module | None = nn.Conv2d(c3, num_classes, 1) if num_classes > 0 else None

    @property
    def class_params(self) -> tuple[str, ...]:
        """The semantic head's rows are per class (weight transfer maps them by class name)."""
        return ("semantic.weight", "semantic.bias") if self.semantic is not None else ()

    @property
    def outputs(self) -> tuple[str, ...]:
        """Names of the tensors :meth:`forward` returns, in order."""
        return ("protos", "semantic") if self.semantic is not None else ("protos",)

    def fuse(self, feats: Sequence[Tensor]) -> Tensor:
        """``N3 + up(proj(N4)) + up(proj(N5))``: ``(B, C3, H3, W3)``."""
        n3, n4, n5 = feats
        fused = n3
        for proj, f in zip(self.lateral, (n4, n5), strict=True):
            fused = fused + F.interpolate(proj(f), size=n3.shape[-2:], mode="nearest")
        return fused

    def forward(self, feats: Sequence[Tensor]) -> dict[str, Tensor]:
        fused = self.fuse(feats)
        x = F.interpolate(self.tower(fused), scale_factor=2.0, mode="nearest")
        out = {"protos": self.out(self.upsampled(x))}
        if self.semantic is not None:
            out["semantic"] = self.semantic(fused)
        return out
