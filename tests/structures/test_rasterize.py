"""Ring rasterisation: pycocotools agreement, hand-derived masks, sample frames, unions, edge cases.

Golden values are independent of the implementation: pycocotools's own polygon
rasteriser, pixel sets derived by hand, and matplotlib's point-in-polygon test
at the sample points.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.path import Path as MplPath
from pycocotools import mask as coco_mask

from lucidyolo.structures.rasterize import rasterize_rings

# pycocotools's decode trips numpy 2's __array__ copy-keyword deprecation; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword")


def _raster(rings, targets=None, num_targets=None, origin=None, step=None, height=8, width=8, device="cpu"):
    """Call :func:`rasterize_rings` with rings given as a list of ``(n, 2)`` arrays."""
    pts = torch.tensor(np.concatenate([np.asarray(r, np.float32).reshape(-1, 2) for r in rings]), device=device)
    lengths = torch.tensor([len(r) for r in rings], device=device)
    r = len(rings)
    targets = torch.zeros(r, dtype=torch.long) if targets is None else torch.as_tensor(targets)
    num_targets = int(targets.max()) + 1 if num_targets is None else num_targets
    origin = torch.zeros(r, 2) if origin is None else torch.as_tensor(origin, dtype=torch.float32).expand(r, 2)
    step = torch.ones(r, 2) if step is None else torch.as_tensor(step, dtype=torch.float32).expand(r, 2)
    out = rasterize_rings(pts, lengths, targets.to(device), num_targets, origin.to(device), step.to(device), height, width)
    return out.cpu().numpy()


def _star(rng: np.random.Generator, centre, r_min: float, r_max: float, n: int) -> np.ndarray:
    """A simple (non-self-intersecting) star-shaped polygon: jittered angles, random radii."""
    ang = (np.arange(n) + rng.uniform(0.1, 0.9, n)) * (2 * np.pi / n)
    rad = rng.uniform(r_min, r_max, n)
    return np.stack([centre[0] + rad * np.cos(ang), centre[1] + rad * np.sin(ang)], 1)


def _edge_distance(centres: np.ndarray, ring: np.ndarray) -> np.ndarray:
    """Distance of each point to the nearest edge of the closed ring."""
    a, b = ring, np.roll(ring, -1, 0)
    ab = b - a
    t = np.clip(((centres[:, None] - a) * ab).sum(-1) / (ab * ab).sum(-1), 0, 1)
    return np.linalg.norm(centres[:, None] - (a + t[..., None] * ab), axis=-1).min(1)


def test_agrees_with_pycocotools_on_random_polygons() -> None:
    """Pixel grid (origin 0, step 1): pycocotools rasterises with its own rule, so allow
    disagreement only on boundary pixels. Measured on 2000 such polygons: every differing
    pixel has its centre within 0.18 px of an edge, IoU >= 0.97 for these sizes."""
    rng = np.random.default_rng(0)
    height, width = 48, 64
    for _ in range(200):
        n = int(rng.integers(5, 13))
        ring = _star(rng, rng.uniform([16, 16], [width - 16, height - 16]), 8, 15, n)
        ref = coco_mask.decode(coco_mask.frPyObjects([ring.ravel().tolist()], height, width))[..., 0].astype(bool)
        got = _raster([ring], height=height, width=width)[0]
        assert (ref & got).sum() / (ref | got).sum() >= 0.95
        diff = np.argwhere(ref != got)
        if len(diff):
            assert _edge_distance(diff[:, ::-1] + 0.5, ring).max() < 0.25


def test_self_intersecting_polygons_match_pycocotools_away_from_edges() -> None:
    rng = np.random.default_rng(1)
    height, width = 40, 40
    for _ in range(100):
        ring = rng.uniform([0, 0], [width, height], (int(rng.integers(4, 10)), 2))
        ref = coco_mask.decode(coco_mask.frPyObjects([ring.ravel().tolist()], height, width))[..., 0].astype(bool)
        diff = np.argwhere(ref != _raster([ring], height=height, width=width)[0])
        if len(diff):
            assert _edge_distance(diff[:, ::-1] + 0.5, ring).max() < 0.25


def test_axis_aligned_square_covers_exactly_its_pixels() -> None:
    """x in [2, 5], y in [1, 4]: pixel centres j + 0.5 in (2, 5) are columns 2..4, rows 1..3."""
    want = np.zeros((8, 8), bool)
    want[1:4, 2:5] = True
    square = [[2, 1], [5, 1], [5, 4], [2, 4]]
    np.testing.assert_array_equal(_raster([square])[0], want)
    np.testing.assert_array_equal(_raster([square[::-1]])[0], want)  # orientation does not matter


def test_triangle() -> None:
    """(0, 0), (8.5, 0), (0, 8.5): centre (j + .5, i + .5) is inside iff i + j + 1 < 8.5, i.e. i + j <= 7."""
    got = _raster([[[0, 0], [8.5, 0], [0, 8.5]]])[0]
    i, j = np.mgrid[:8, :8]
    np.testing.assert_array_equal(got, i + j <= 7)
    assert got.sum() == 36


def test_even_odd_rule_leaves_the_pentagram_core_empty() -> None:
    """A {5/2} pentagram: its central pentagon is crossed twice, so even-odd leaves it out."""
    ang = np.pi / 2 + np.arange(5) * 4 * np.pi / 5
    star = np.stack([16 + 14 * np.cos(ang), 16 + 14 * np.sin(ang)], 1)
    got = _raster([star], height=32, width=32)[0]
    assert not got[15:17, 15:17].any()  # around the centre (16, 16)
    tip = star[0]  # (16, 30): just inside the lower tip
    assert got[int(tip[1]) - 3, int(tip[0])]


def test_rings_of_one_target_are_unioned_and_targets_kept_apart() -> None:
    a = [[0, 0], [4, 0], [4, 4], [0, 4]]
    b = [[2, 2], [6, 2], [6, 6], [2, 6]]  # overlaps a on [2, 4]^2: a union keeps it, XOR would not
    c = [[6, 0], [8, 0], [8, 2], [6, 2]]
    got = _raster([a, b, c], targets=[0, 0, 1], num_targets=3)
    want0 = np.zeros((8, 8), bool)
    want0[0:4, 0:4] = True
    want0[2:6, 2:6] = True
    want1 = np.zeros((8, 8), bool)
    want1[0:2, 6:8] = True
    np.testing.assert_array_equal(got[0], want0)
    np.testing.assert_array_equal(got[1], want1)
    assert not got[2].any()  # a target without rings is empty


def test_roi_frame_equals_point_in_polygon_at_the_sample_points() -> None:
    """origin = box corner, step = box size / S: sample (i, j) is the point x1 + (j + .5) w / S."""
    rng = np.random.default_rng(2)
    crop = 12
    rings, origins, steps, want = [], [], [], []
    for _ in range(30):
        ring = _star(rng, rng.uniform(20, 80, 2), 4, 18, int(rng.integers(5, 12)))
        lo = ring.min(0) - rng.uniform(0, 3, 2)
        size = ring.max(0) + rng.uniform(0, 3, 2) - lo
        step = size / crop
        j, i = np.meshgrid(np.arange(crop), np.arange(crop))
        samples = np.stack([lo[0] + (j + 0.5) * step[0], lo[1] + (i + 0.5) * step[1]], -1).reshape(-1, 2)
        want.append(MplPath(ring).contains_points(samples).reshape(crop, crop))
        rings.append(ring)
        origins.append(lo)
        steps.append(step)
    got = _raster(rings, targets=np.arange(30), origin=np.array(origins), step=np.array(steps), height=crop, width=crop)
    np.testing.assert_array_equal(got, np.stack(want))


def test_roi_frame_equals_subsampled_pixel_raster() -> None:
    """Box corner (7.5, 3.5), step 2: ROI samples are the centres of pixels 8, 10, ... and 4, 6, ..."""
    rng = np.random.default_rng(3)
    ring = _star(rng, (24, 20), 6, 14, 9)
    full = _raster([ring], height=48, width=48)[0]
    roi = _raster([ring], origin=[7.5, 3.5], step=[2.0, 2.0], height=16, width=16)[0]
    np.testing.assert_array_equal(roi, full[4::2, 8::2][:16, :16])


def test_no_rings_gives_all_false() -> None:
    out = rasterize_rings(
        torch.zeros(0, 2), torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 3,
        torch.zeros(0, 2), torch.ones(0, 2), 5, 7,
    )
    assert out.shape == (3, 5, 7) and out.dtype == torch.bool and not out.any()


def test_degenerate_rings_give_nothing_and_do_not_disturb_others() -> None:
    square = [[1, 1], [5, 1], [5, 5], [1, 5]]
    two_points = [[0, 0], [7.3, 6.1]]
    collinear = [[0.3, 0.7], [3.3, 3.1], [6.3, 5.5]]  # on one line
    back_and_forth = [[0.2, 0.4], [7.7, 6.9], [0.2, 0.4], [7.7, 6.9]]
    got = _raster([two_points, square, collinear, back_and_forth], targets=[1, 0, 2, 3], num_targets=4)
    np.testing.assert_array_equal(got[0], _raster([square])[0])
    assert not got[1:].any()


def test_many_rings_each_in_its_own_frame() -> None:
    """2000 rings x 40 points on 32 x 32 grids (one vectorised call), checked against matplotlib."""
    rng = np.random.default_rng(4)
    num, n, size = 2000, 40, 32
    rings = [_star(rng, rng.uniform(10, 22, 2), 3, 10, n) for _ in range(num)]
    shift = rng.uniform(-2, 2, (num, 2))
    step = rng.uniform(0.8, 1.2, (num, 2))
    got = _raster(rings, targets=np.arange(num), origin=shift, step=step, height=size, width=size)
    j, i = np.meshgrid(np.arange(size), np.arange(size))
    for r in range(0, num, 7):  # a spread subset keeps the reference loop short
        samples = np.stack([shift[r, 0] + (j + 0.5) * step[r, 0], shift[r, 1] + (i + 0.5) * step[r, 1]], -1)
        want = MplPath(rings[r]).contains_points(samples.reshape(-1, 2)).reshape(size, size)
        np.testing.assert_array_equal(got[r], want)


@pytest.mark.gpu
def test_cuda_matches_cpu() -> None:
    rng = np.random.default_rng(5)
    rings = [_star(rng, rng.uniform(10, 54, 2), 3, 12, int(rng.integers(3, 30))) for _ in range(300)]
    targets = rng.integers(0, 50, 300)
    cpu = _raster(rings, targets=targets, num_targets=50, height=64, width=64)
    cuda = _raster(rings, targets=targets, num_targets=50, height=64, width=64, device="cuda")
    np.testing.assert_array_equal(cpu, cuda)
