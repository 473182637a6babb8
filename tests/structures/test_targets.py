"""Targets / Polygons: one selection applies to every field; owners stay consistent."""

from __future__ import annotations

import numpy as np
import pytest

from lucidyolo.structures.targets import Polygons, Targets


def _seg_targets() -> Targets:
    rings = [np.full((3, 2), 0.0), np.full((4, 2), 1.0), np.full((5, 2), 2.0), np.full((3, 2), 3.0)]
    polys = Polygons.from_rings(rings, [0, 0, 1, 2])  # instance 0 owns two rings
    return Targets(
        boxes=np.arange(12, dtype=np.float32).reshape(3, 4),
        labels=[5, 6, 7],
        difficult=[False, True, False],
        polygons=polys,
    )


def test_filter_by_mask_keeps_fields_aligned_and_reindexes_owners():
    t = _seg_targets()
    f = t.filter(np.array([True, False, True]))
    f.validate()
    assert f.labels.tolist() == [5, 7]
    assert f.difficult.tolist() == [False, False]
    assert f.boxes[1].tolist() == [8, 9, 10, 11]
    assert f.polygons.ring_owner.tolist() == [0, 0, 1]
    assert f.polygons.ring_lengths().tolist() == [3, 4, 3]
    assert np.all(f.polygons.ring(2) == 3.0)


def test_filter_by_index_honours_order_and_repeats():
    t = _seg_targets()
    f = t.filter(np.array([2, 0, 0]))
    f.validate()
    assert f.labels.tolist() == [7, 5, 5]
    assert f.polygons.ring_owner.tolist() == [0, 1, 1, 2, 2]
    assert f.polygons.ring_lengths().tolist() == [3, 3, 4, 3, 4]
    assert np.all(f.polygons.ring(0) == 3.0)


def test_filter_to_nothing_keeps_the_field_set():
    t = _seg_targets()
    f = t.filter(np.zeros(3, bool))
    f.validate()
    assert len(f) == 0 and f.polygons is not None and f.polygons.num_rings == 0


def test_concat_shifts_polygon_owners_by_previous_instance_counts():
    a, b = _seg_targets(), _seg_targets().filter(np.array([False, True, True]))
    c = Targets.concat([a, b])
    c.validate()
    assert len(c) == 5
    assert c.labels.tolist() == [5, 6, 7, 6, 7]
    assert c.polygons.ring_owner.tolist() == [0, 0, 1, 2, 3, 4]
    assert np.all(c.polygons.ring(4) == 2.0)


def test_concat_refuses_different_field_sets():
    with pytest.raises(ValueError, match="fields"):
        Targets.concat([_seg_targets(), Targets.empty()])


def test_clone_is_independent():
    t = _seg_targets()
    c = t.clone()
    c.boxes[0, 0] = 99
    c.polygons.points[0, 0] = 99
    assert t.boxes[0, 0] == 0 and t.polygons.points[0, 0] == 0


def test_empty_has_correct_shapes_per_task():
    t = Targets.empty_for_fields(("keypoints", "visibility"), meta={"num_keypoints": 17})
    t.validate()
    assert t.keypoints.shape == (0, 17, 2) and t.visibility.shape == (0, 17)
    assert Targets.empty_for_fields(("rboxes",)).rboxes.shape == (0, 5)
    assert Targets.empty_for_fields(()).polygons is None


def test_validate_detects_length_mismatch():
    t = Targets(boxes=np.zeros((2, 4)), labels=[0], difficult=[False, False])
    with pytest.raises(ValueError, match="labels"):
        t.validate()


def test_validate_detects_polygon_owner_out_of_range():
    t = Targets(boxes=np.zeros((1, 4)), labels=[0], difficult=[False],
                polygons=Polygons.from_rings([np.zeros((3, 2))], [3]))
    with pytest.raises(ValueError, match="ring_owner"):
        t.validate()


def test_pose_filter_keeps_keypoints_and_visibility_together():
    t = Targets(boxes=np.zeros((3, 4)), labels=[0, 0, 0], difficult=np.zeros(3, bool),
                keypoints=np.arange(3 * 7 * 2, dtype=np.float32).reshape(3, 7, 2),
                visibility=np.arange(21, dtype=np.float32).reshape(3, 7))
    f = t.filter(np.array([False, True, False]))
    f.validate()
    assert f.keypoints[0, 0].tolist() == [14.0, 15.0]
    assert f.visibility[0, 0] == 7.0
