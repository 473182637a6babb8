"""Aspect-preserving resize to a square input with constant padding, and its exact inverse.

The letterbox is the isotropic affine ``x' = scale * x + pad_x``,
``y' = scale * y + pad_y`` (edge pixel coordinates). The image is rendered with
that very affine (:func:`lucidyolo.data.augment.affine.render_affine`), so
mapping predictions back with :func:`lucidyolo.metrics.mapping.unletterbox` is exact: no per-axis
rounding of the resized size enters the coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lucidyolo.data.augment.affine import FILL_VALUE, IsoAffine, render_affine, transform_targets
from lucidyolo.structures.targets import Targets


@dataclass(frozen=True)
class LetterboxParams:
    """``x_input = scale * x_original + pad_x`` (same for y with ``pad_y``)."""

    scale: float
    pad_x: float
    pad_y: float

    def as_affine(self) -> IsoAffine:
        return IsoAffine(self.scale, self.pad_x, self.pad_y)


def letterbox_params(height: int, width: int, size: int) -> LetterboxParams:
    """Scale so the long side fills ``size``; centre the short side with integer padding.

    Args:
        height: original image height H.
        width: original image width W.
        size: square network input side S.
    """
    scale = min(size / height, size / width)
    pad_x = (size - round(width * scale)) // 2
    pad_y = (size - round(height * scale)) // 2
    return LetterboxParams(float(scale), float(pad_x), float(pad_y))


def letterbox_image(image: np.ndarray, size: int) -> tuple[np.ndarray, LetterboxParams]:
    """Letterbox one image.

    Args:
        image: ``(H, W, 3)`` uint8.
        size: output side S.

    Returns:
        ``(S, S, 3)`` uint8 image padded with 114, and the parameters.
    """
    h, w = image.shape[:2]
    params = letterbox_params(h, w, size)
    out = np.full((size, size, 3), FILL_VALUE, np.uint8)
    render_affine(out, image, params.as_affine())
    return out, params


def letterbox_targets(targets: Targets, params: LetterboxParams) -> Targets:
    """Map targets into the letterboxed frame (no clipping: letterbox keeps the whole image)."""
    return transform_targets(targets, params.as_affine())
