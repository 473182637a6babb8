"""The trunk every YOLO26 task shares: backbone (+ PAN neck), images to multi-scale feature maps.

A task that needs the YOLO26 features but not the dual head (a classifier, a
point or heat-map task) builds its model on :func:`build_trunk` or subclasses
:class:`Trunk`. The parameter names are those of the detection model
(``backbone.*``, ``neck.*``), so ``--model.weights`` from a det, seg, obb or
keypoints run transfers the trunk by name.
"""

from __future__ import annotations

from torch import Tensor, nn

from lucidyolo.models.backbone import Backbone
from lucidyolo.models.neck import PANNeck
from lucidyolo.models.scales import SCALES, Scale, variant_key

STRIDES: tuple[int, int, int] = (8, 16, 32)
"""Strides of the three feature maps (P3/N3, P4/N4, P5/N5)."""


class Trunk(nn.Module):
    """Backbone, and the PAN neck unless ``neck`` is False.

    ``forward(images (B, 3, H, W))`` with ``H, W`` multiples of 32 returns three
    maps ``(B, out_channels[i], H / strides[i], W / strides[i])``: the neck's
    ``(N3, N4, N5)``, or the backbone's ``(P3, P4, P5)`` without the neck.

    Args:
        scale: the variant's row of the scale table.
        neck: build the PAN neck (det-style features that mix all scales);
            False keeps the backbone only (a classifier reads P5).

    Attributes:
        out_channels: channels of the three maps.
        strides: :data:`STRIDES`.
    """

    def __init__(self, scale: Scale, neck: bool = True) -> None:
        super().__init__()
        self.backbone = Backbone(scale)
        self.neck = PANNeck(scale, self.backbone.out_channels) if neck else None
        self.out_channels: tuple[int, int, int] = (
            self.neck.out_channels if self.neck is not None else self.backbone.out_channels
        )
        self.strides = STRIDES

    def forward(self, images: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        feats = self.backbone(images)
        return self.neck(feats) if self.neck is not None else feats


def build_trunk(variant: str = "n", neck: bool = True) -> Trunk:
    """A randomly initialised trunk of ``variant`` (``n s m l x``, or ``yolo26n`` ...).

    Raises:
        ConfigError: an unknown variant.
    """
    return Trunk(SCALES[variant_key(variant)], neck=neck)
