"""One keep mask for every field; flips mirror every field and keep rotated boxes canonical."""

from __future__ import annotations

import numpy as np

from lucidyolo.data.augment.affine import clip_and_filter
from lucidyolo.data.augment.flip import hflip_targets
from lucidyolo.structures.geometry import canonicalize_rboxes, rbox_to_corners
from lucidyolo.structures.targets import Polygons, Targets


def _targets(boxes: np.ndarray) -> Targets:
    n = len(boxes)
    rings = [np.array([[b[0], b[1]], [b[2], b[1]], [b[2], b[3]], [b[0], b[3]]]) for b in boxes]
    return Targets(
        boxes,
        np.arange(n),
        np.arange(n) % 2 == 0,
        polygons=Polygons.from_rings(rings, list(range(n))),
        rboxes=canonicalize_rboxes(np.c_[(boxes[:, :2] + boxes[:, 2:]) / 2, boxes[:, 2:] - boxes[:, :2], np.full(n, 0.3)]),
        keypoints=np.repeat(((boxes[:, :2] + boxes[:, 2:]) / 2)[:, None], 2, 1),
        visibility=np.full((n, 2), 2.0),
    )


def test_survival_rules_apply_one_mask_to_every_field():
    boxes = np.array(
        [
            [10, 10, 30, 30],  # inside: kept
            [-19, 10, 1, 30],  # 1 px visible width: dropped (side < 2)
            [-18, 0, 2, 20],  # 2 px x 20 px of 20 x 20 = 0.1: kept (ratio == 0.1)
            [-40, 0, 3, 10],  # 3 px of 43 px wide: ratio 0.07 -> dropped
            [50, 50, 60, 60],  # inside: kept
        ],
        np.float32,
    )
    t = clip_and_filter(_targets(boxes), (0, 0, 64, 64))
    np.testing.assert_array_equal(t.labels, [0, 2, 4])
    np.testing.assert_array_equal(t.difficult, [True, True, True])
    np.testing.assert_allclose(t.boxes[1], [0, 0, 2, 20])
    assert t.rboxes.shape == (3, 5) and t.keypoints.shape == (3, 2, 2)
    assert t.polygons.num_rings == 3 and sorted(t.polygons.ring_owner.tolist()) == [0, 1, 2]
    np.testing.assert_allclose(t.polygons.ring(2)[0], [50, 50])
    t.validate()


def test_keypoints_outside_the_visible_region_become_invisible():
    t = _targets(np.array([[-10, 10, 20, 30]], np.float32))
    t.keypoints[0, 1] = [-5, 20]
    out = clip_and_filter(t, (0, 0, 64, 64))
    np.testing.assert_array_equal(out.visibility[0], [2.0, 0.0])


def test_double_flip_restores_every_field_and_rboxes_stay_canonical():
    rng = np.random.default_rng(1)
    xy = rng.uniform(0, 40, (6, 2))
    boxes = np.c_[xy, xy + rng.uniform(3, 20, (6, 2))].astype(np.float32)
    t = _targets(boxes)
    t.rboxes[:, 4] = np.array([-0.7, -0.2, 0.0, 0.5, 1.6, 2.3])  # across the canonical range
    t.rboxes = canonicalize_rboxes(t.rboxes)
    f = hflip_targets(t, 80, meta={"flip_idx": [1, 0]})
    np.testing.assert_allclose(f.boxes[:, 0], 80 - boxes[:, 2])  # x' = W - x in continuous coordinates
    theta = f.rboxes[:, 4]
    assert np.all((theta >= -np.pi / 4) & (theta < 3 * np.pi / 4)) and np.all(f.rboxes[:, 2] >= f.rboxes[:, 3])
    # mirrored rbox corners are the mirror of the original corners (as point sets)
    c0 = rbox_to_corners(t.rboxes)
    c1 = rbox_to_corners(f.rboxes)
    c0[..., 0] = 80 - c0[..., 0]
    for a, b in zip(c0, c1, strict=True):
        d = np.abs(a[:, None] - b[None]).sum(-1).min(1)
        assert d.max() < 1e-3
    g = hflip_targets(f, 80, meta={"flip_idx": [1, 0]})
    np.testing.assert_allclose(g.boxes, t.boxes, atol=1e-4)
    np.testing.assert_allclose(g.polygons.points, t.polygons.points, atol=1e-4)
    np.testing.assert_allclose(g.keypoints, t.keypoints, atol=1e-4)
    np.testing.assert_allclose(canonicalize_rboxes(g.rboxes), t.rboxes, atol=1e-4)


def test_flip_swaps_keypoint_pairs_with_their_visibility():
    t = _targets(np.array([[10, 10, 30, 30]], np.float32))
    t.keypoints[0] = [[12, 20], [28, 20]]
    t.visibility[0] = [1.0, 2.0]
    f = hflip_targets(t, 40, meta={"flip_idx": [1, 0]})
    np.testing.assert_allclose(f.keypoints[0], [[40 - 28, 20], [40 - 12, 20]])
    np.testing.assert_array_equal(f.visibility[0], [2.0, 1.0])
