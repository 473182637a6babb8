"""``mask_polygon``: one simplified outline per mask that rasterises back to (nearly) the mask."""

from __future__ import annotations

import numpy as np
from pycocotools import mask as mask_utils

from lucidyolo.structures.mask_polygon import mask_polygon
from lucidyolo.structures.rle_polygons import mask_to_rings


def _raster(ring: np.ndarray, h: int, w: int) -> np.ndarray:
    rle = mask_utils.merge(mask_utils.frPyObjects([ring.ravel().tolist()], h, w))
    return mask_utils.decode(rle).astype(bool)


def test_a_disc_outline_has_few_vertices_and_rasterises_back_to_the_disc():
    h, w = 120, 160
    yy, xx = np.mgrid[:h, :w]
    disc = (xx + 0.5 - 70) ** 2 + (yy + 0.5 - 60) ** 2 <= 40**2
    staircase = max(mask_to_rings(disc), key=len)
    ring = mask_polygon(disc)
    assert 8 <= len(ring) < len(staircase) / 3  # the staircase's vertices dropped
    back = _raster(ring, h, w)
    iou = (back & disc).sum() / (back | disc).sum()
    assert iou > 0.97
    # exact without simplifying
    np.testing.assert_array_equal(_raster(mask_polygon(disc, tolerance=0), h, w), disc)


def test_the_largest_part_is_kept_and_an_empty_mask_has_no_outline():
    m = np.zeros((50, 50), bool)
    m[5:10, 5:10] = True  # 25 px
    m[20:40, 20:45] = True  # 500 px: the one kept
    ring = mask_polygon(m)
    assert ring.min(0).tolist() == [20, 20] and ring.max(0).tolist() == [45, 40]
    assert mask_polygon(np.zeros((8, 8), bool)).shape == (0, 2)
