"""Mosaic: four images on a virtual ``2S x 2S`` canvas around a random centre.

The canvas is never materialised. Each tile gets a placement affine (resize so
its long side is S, corner on the mosaic centre); composed with the random
scale/translate it maps the source straight into the ``S x S`` output, so each
tile is resampled once (see :mod:`lucidyolo.data.augment.affine`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lucidyolo.data.augment.affine import IsoAffine


@dataclass(frozen=True)
class TilePlacement:
    """Where one mosaic tile sits on the ``2S`` canvas.

    Attributes:
        affine: source pixels -> canvas pixels.
        quadrant: canvas rectangle ``x0, y0, x1, y1`` the tile may cover.
    """

    affine: IsoAffine
    quadrant: tuple[float, float, float, float]


def draw_mosaic_centre(rng: np.random.Generator, size: int) -> tuple[float, float]:
    """Mosaic centre ``(xc, yc)`` uniform in ``[0.5 S, 1.5 S]^2`` (two draws)."""
    xc, yc = rng.uniform(0.5 * size, 1.5 * size, size=2)
    return float(xc), float(yc)


def mosaic_placements(hws: list[tuple[int, int]], centre: tuple[float, float], size: int) -> list[TilePlacement]:
    """Placement of four tiles: top-left, top-right, bottom-left, bottom-right of the centre.

    Args:
        hws: ``(h, w)`` of the four source images.
        centre: mosaic centre on the canvas.
        size: S (the canvas is ``2S``).

    Returns:
        Four :class:`TilePlacement`; each tile is scaled so its long side is S
        and touches the centre with its inner corner.
    """
    if len(hws) != 4:
        raise ValueError(f"mosaic needs 4 images, got {len(hws)}")
    xc, yc = centre
    c = 2.0 * size
    quadrants = ((0.0, 0.0, xc, yc), (xc, 0.0, c, yc), (0.0, yc, xc, c), (xc, yc, c, c))
    out = []
    for k, ((h, w), quad) in enumerate(zip(hws, quadrants, strict=True)):
        g = size / max(h, w)
        right, bottom = k in (1, 3), k in (2, 3)
        tx = xc if right else xc - g * w
        ty = yc if bottom else yc - g * h
        out.append(TilePlacement(IsoAffine(g, tx, ty), quad))
    return out
