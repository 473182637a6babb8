"""RLE -> rings: exact pixel outlines, checked against pycocotools' own rasteriser and a flood fill."""

from __future__ import annotations

import time
from collections import deque

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from lucidyolo.structures.rle_polygons import decode_rle, mask_to_rings, rle_to_rings


def uncompressed(mask: np.ndarray) -> dict:
    """COCO uncompressed RLE written here from the format (column-major runs, starting with a zero run)."""
    flat = np.asarray(mask, bool).ravel(order="F").astype(np.int8)
    edges = np.flatnonzero(np.diff(flat)) + 1
    runs = np.diff(np.r_[0, edges, flat.size]).tolist()
    if flat.size and flat[0]:
        runs = [0, *runs]
    return {"size": list(mask.shape), "counts": runs}


def compressed(mask: np.ndarray) -> dict:
    """COCO compressed RLE as a JSON file holds it (``counts`` a str), encoded by pycocotools."""
    rle = mask_utils.encode(np.asfortranarray(np.asarray(mask, np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}


def rasterise(rings: list[np.ndarray], h: int, w: int) -> np.ndarray:
    """Union of the rings through pycocotools' polygon rasteriser (what COCO eval and copy-paste use)."""
    if not rings:
        return np.zeros((h, w), bool)
    rles = mask_utils.frPyObjects([r.ravel().tolist() for r in rings], h, w)
    return mask_utils.decode(mask_utils.merge(rles)).astype(bool)


def fill_holes(mask: np.ndarray) -> np.ndarray:
    """Foreground plus every background pixel not 4-connected to the outside (plain BFS)."""
    h, w = mask.shape
    bg = np.ones((h + 2, w + 2), bool)
    bg[1:-1, 1:-1] = ~mask
    seen = np.zeros_like(bg)
    seen[0, 0] = True
    todo = deque([(0, 0)])
    while todo:
        r, c = todo.popleft()
        for rr, cc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= rr < h + 2 and 0 <= cc < w + 2 and bg[rr, cc] and not seen[rr, cc]:
                seen[rr, cc] = True
                todo.append((rr, cc))
    return ~seen[1:-1, 1:-1]


def blob(rng: np.random.Generator, h: int, w: int, smooth: int) -> np.ndarray:
    """Thresholded noise, box-blurred ``smooth`` times (0 = salt and pepper, many corner contacts)."""
    f = rng.random((h, w))
    for _ in range(smooth):
        f = (f + np.roll(f, 1, 0) + np.roll(f, -1, 0) + np.roll(f, 1, 1) + np.roll(f, -1, 1)) / 5
    return f > np.quantile(f, rng.uniform(0.3, 0.9))


def corner_set(ring: np.ndarray) -> set[tuple[float, float]]:
    return {(float(x), float(y)) for x, y in ring}


def test_rectangle_gives_its_four_pixel_edge_corners():
    m = np.zeros((5, 6), bool)
    m[1:3, 1:4] = True  # 3 wide, 2 high: pixels (r, c) for r in 1..2, c in 1..3
    for seg in (compressed(m), uncompressed(m)):
        rings = rle_to_rings(seg, 5, 6)
        assert len(rings) == 1 and rings[0].shape == (4, 2)
        assert corner_set(rings[0]) == {(1.0, 1.0), (4.0, 1.0), (4.0, 3.0), (1.0, 3.0)}


def test_bytes_counts_and_full_image():
    m = np.ones((3, 4), bool)
    seg = compressed(m)
    seg["counts"] = seg["counts"].encode("ascii")
    (ring,) = rle_to_rings(seg, 3, 4)
    assert corner_set(ring) == {(0.0, 0.0), (4.0, 0.0), (4.0, 3.0), (0.0, 3.0)}


def test_two_components_give_two_rings():
    m = np.zeros((8, 10), bool)
    m[1:3, 1:3] = True
    m[4:7, 5:9] = True
    rings = rle_to_rings(compressed(m), 8, 10)
    assert sorted(len(r) for r in rings) == [4, 4]
    assert {frozenset(corner_set(r)) for r in rings} == {
        frozenset({(1.0, 1.0), (3.0, 1.0), (3.0, 3.0), (1.0, 3.0)}),
        frozenset({(5.0, 4.0), (9.0, 4.0), (9.0, 7.0), (5.0, 7.0)}),
    }


def test_a_hole_is_filled():
    m = np.zeros((7, 7), bool)
    m[1:6, 1:6] = True
    m[2:5, 2:5] = False  # square donut
    (ring,) = rle_to_rings(compressed(m), 7, 7)
    assert corner_set(ring) == {(1.0, 1.0), (6.0, 1.0), (6.0, 6.0), (1.0, 6.0)}
    assert rasterise([ring], 7, 7).sum() == 25


def test_an_island_in_a_hole_is_absorbed():
    m = np.zeros((9, 9), bool)
    m[1:8, 1:8] = True
    m[2:7, 2:7] = False
    m[4, 4] = True
    (ring,) = rle_to_rings(compressed(m), 9, 9)
    assert corner_set(ring) == {(1.0, 1.0), (8.0, 1.0), (8.0, 8.0), (1.0, 8.0)}


def test_gap_closed_by_a_corner_contact_is_filled():
    # Two parts touching only at corners (GEOS keeps them apart) enclose pixel (1, 1).
    m = np.array([[1, 1, 0], [1, 0, 1], [1, 1, 0], [1, 0, 0]], bool)
    rings = rle_to_rings(compressed(m), 4, 3)
    assert np.array_equal(rasterise(rings, 4, 3), fill_holes(m))
    assert rasterise(rings, 4, 3)[1, 1]


def test_diagonal_pixels_stay_two_rings():
    m = np.zeros((3, 3), bool)
    m[0, 0] = m[1, 1] = True
    rings = rle_to_rings(compressed(m), 3, 3)
    assert len(rings) == 2 and all(len(r) == 4 for r in rings)


def test_empty_rle_gives_no_ring():
    m = np.zeros((4, 5), bool)
    assert rle_to_rings(compressed(m), 4, 5) == []
    assert rle_to_rings(uncompressed(m), 4, 5) == []


@pytest.mark.parametrize("smooth", [0, 1, 3, 8])
def test_random_blobs_rasterise_back_to_the_hole_free_mask(smooth):
    """Measured: pycocotools reproduces the filled mask pixel for pixel (0 differing pixels), so exactness is asserted."""
    rng = np.random.default_rng(smooth)
    for _ in range(12):
        h, w = (int(v) for v in rng.integers(8, 90, 2))
        m = blob(rng, h, w, smooth)
        want = fill_holes(m)
        for seg in (compressed(m), uncompressed(m)):
            rings = rle_to_rings(seg, h, w)
            got = rasterise(rings, h, w)
            iou = (got & want).sum() / max((got | want).sum(), 1)
            assert iou >= 0.99
            assert np.array_equal(got, want)


def test_rings_are_minimal_staircases():
    """Integer vertices, no repeated closing point, every vertex a corner, positive shoelace area."""
    rng = np.random.default_rng(5)
    m = blob(rng, 60, 70, 3)
    rings = mask_to_rings(m)
    assert rings
    for ring in rings:
        assert ring.dtype == np.float64 and ring.ndim == 2 and ring.shape[1] == 2 and len(ring) >= 4
        assert np.array_equal(ring, np.round(ring))
        assert not np.array_equal(ring[0], ring[-1])
        d = np.roll(ring, -1, 0) - ring  # edge vectors
        axis = d[:, 0] != 0
        assert np.all((d[:, 0] == 0) != (d[:, 1] == 0))  # axis-aligned, non-degenerate
        assert np.all(axis != np.roll(axis, -1))  # horizontal and vertical alternate: no collinear point
        x, y = ring[:, 0], ring[:, 1]
        assert np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y) > 0


def test_decode_matches_pycocotools_and_rejects_malformed_rles():
    m = blob(np.random.default_rng(2), 20, 30, 2)
    assert np.array_equal(decode_rle(compressed(m), 20, 30), m)
    assert np.array_equal(decode_rle(uncompressed(m), 20, 30), m)
    good = compressed(m)
    bad = [
        ({"counts": good["counts"]}, "size"),
        ({**good, "size": [30, 20]}, "differs"),
        ({**good, "counts": good["counts"][:-2]}, "pixels"),  # truncated: pycocotools would read past it
        ({**good, "counts": ""}, "pixels"),
        ({**good, "counts": "zz"}, "character"),
        ({"size": [20, 30], "counts": [1, 2, 3]}, "pixels"),
        ({"size": [20, 30], "counts": 7}, "type"),
    ]
    for seg, word in bad:
        with pytest.raises(ValueError, match=word):
            rle_to_rings(seg, 20, 30)


def test_640x480_blob_speed_is_measured(capsys):
    """Measured, not asserted (numbers printed with ``-s``): a smooth 640x480 blob converts in about 8 ms on this 2-core machine."""
    yy, xx = np.mgrid[:480, :640]
    rng = np.random.default_rng(0)
    # A smooth, irregular object: a disc whose radius wobbles with the angle.
    ang = np.arctan2(yy - 240, xx - 320)
    radius = 180 + sum(rng.uniform(5, 25) * np.sin(k * ang + rng.uniform(0, 6.3)) for k in range(2, 7))
    m = np.hypot(yy - 240, xx - 320) < radius
    seg = compressed(m)
    rle_to_rings(seg, 480, 640)  # warm-up (imports)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        rings = rle_to_rings(seg, 480, 640)
        times.append(time.perf_counter() - t0)
    assert np.array_equal(rasterise(rings, 480, 640), fill_holes(m))
    with capsys.disabled():
        print(f"\n640x480 blob: {int(m.sum())} px, {len(rings)} ring(s), {sum(len(r) for r in rings)} points, "
              f"median {1000 * float(np.median(times)):.1f} ms")
