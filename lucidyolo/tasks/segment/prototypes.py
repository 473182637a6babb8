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

    The published layout: ``feat_refine`` (1x1 Conv of N4 and N5 to the N3
    width), their nearest-upsampled sum with N3 through ``feat_fuse`` (3x3
    Conv), then ``cv1`` (3x3 Conv), ``upsample`` (2x2 transposed conv, stride 2),
    ``cv2`` (3x3 Conv) and ``cv3`` (1x1 Conv to ``P``); the semantic head
    ``semseg`` (two 3x3 Conv and a 1x1 conv to ``C``) reads the fused map.

    Args:
        in_channels: channels of ``(N3, N4, N5)``.
        hidden: width of the prototype convolutions (the N3 width).
        num_prototypes: ``P``, prototype maps (32).
        num_classes: ``C`` of the semantic auxiliary head; ``0`` builds none.

    ``forward`` returns ``{"protos": (B, P, 2*H3, 2*W3)}`` plus, while the
    semantic head exists, ``{"semantic": (B, C, H3, W3)}`` logits, where
    ``(H3, W3)`` is the N3 grid (stride 8).
    """

    train_only = ("semseg",)
    """Submodules the deployed graph removes (set to ``None``)."""

    published = "proto"
    """The publisher's name of this module inside its head (its inner names are the publisher's)."""

    def __init__(self, in_channels: Sequence[int], hidden: int, num_prototypes: int = 32, num_classes: int = 0) -> None:
        super().__init__()
        c3, c4, c5 = in_channels
        self.num_prototypes = num_prototypes
        self.feat_refine = nn.ModuleList([Conv(c4, c3, 1), Conv(c5, c3, 1)])
        self.feat_fuse = Conv(c3, c3, 3)
        self.cv1 = Conv(c3, hidden, 3)
        self.upsample = nn.ConvTranspose2d(hidden, hidden, 2, 2, bias=True)
        self.cv2 = Conv(hidden, hidden, 3)
        self.cv3 = Conv(hidden, num_prototypes, 1)
        self.semseg: nn.Module | None = (
            nn.Sequential(Conv(c3, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, num_classes, 1)) if num_classes > 0 else None
        )

    @property
    def class_params(self) -> tuple[str, ...]:
        """The semantic head's rows are per class (weight transfer maps them by class name)."""
        return ("semseg.2.weight", "semseg.2.bias") if self.semseg is not None else ()

    @property
    def outputs(self) -> tuple[str, ...]:
        """Names of the tensors :meth:`forward` returns, in order."""
        return ("protos", "semantic") if self.semseg is not None else ("protos",)

    def fuse(self, feats: Sequence[Tensor]) -> Tensor:
        """``feat_fuse(N3 + up(refine(N4)) + up(refine(N5)))``: ``(B, C3, H3, W3)``."""
        n3, n4, n5 = feats
        fused = n3
        for proj, f in zip(self.feat_refine, (n4, n5), strict=True):
            fused = fused + F.interpolate(proj(f), size=n3.shape[-2:], mode="nearest")
        return self.feat_fuse(fused)

    def forward(self, feats: Sequence[Tensor]) -> dict[str, Tensor]:
        fused = self.fuse(feats)
        out = {"protos": self.cv3(self.cv2(self.upsample(self.cv1(fused))))}
        if self.semseg is not None:
            out["semantic"] = self.semseg(fused)
        return out
