"""Tile cores and the merge of tile detections / ground truth back to whole scenes, on hand-built grids."""

from __future__ import annotations

import numpy as np
import pytest

from lucidyolo.tasks.obb.rotated_map import rotated_map
from lucidyolo.tasks.obb.scene_merge import merge_to_scenes, scene_ground_truth, tile_cores

# A 150 x 150 scene cut into a 2 x 2 grid of 100 px windows overlapping by 50 px:
# x and y windows [0, 100) and [50, 150), overlap band [50, 100), boundary 75.
WINDOWS = [[0, 0, 100, 100], [50, 0, 150, 100], [0, 50, 100, 150], [50, 50, 150, 150]]
INFO = [("scene_a.png", w) for w in WINDOWS]


def _rb(*centres: tuple[float, float], size: float = 10.0, theta: float = 0.3) -> np.ndarray:
    return np.array([[x, y, size, size / 2, theta] for x, y in centres]).reshape(-1, 5)


def _local(scene_xy: tuple[float, float], window: list[int]) -> tuple[float, float]:
    return scene_xy[0] - window[0], scene_xy[1] - window[1]


def _tiles_seeing(scene_xy: tuple[float, float]) -> list[int]:
    x, y = scene_xy
    return [t for t, (x0, y0, x1, y1) in enumerate(WINDOWS) if x0 <= x < x1 and y0 <= y < y1]


def _detections(objects: list[tuple[float, float]]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every tile detects every object whose centre its window contains (tile-local), score = object id / 10."""
    out = []
    for t, w in enumerate(WINDOWS):
        ids = [k for k, xy in enumerate(objects) if t in _tiles_seeing(xy)]
        out.append((_rb(*[_local(objects[k], w) for k in ids]), np.array([0.1 * (k + 1) for k in ids]),
                    np.array(ids, dtype=np.int64)))  # fmt: skip
    return out


def test_tile_cores_2x2():
    cores = tile_cores(np.array(WINDOWS))
    np.testing.assert_array_equal(cores, [[0, 0, 75, 75], [75, 0, 150, 75], [0, 75, 75, 150], [75, 75, 150, 150]])


def test_tile_cores_flush_last_window_and_single_window():
    # Width 250, patch 100, stride 80, last window flush with the edge: [0,100) [80,180) [150,250).
    # Overlap bands [80,100) and [150,180): boundaries 90 and 165.
    w = np.array([[0, 0, 100, 60], [80, 0, 180, 60], [150, 0, 250, 60]])
    np.testing.assert_array_equal(tile_cores(w), [[0, 0, 90, 60], [90, 0, 165, 60], [165, 0, 250, 60]])
    np.testing.assert_array_equal(tile_cores(np.array([[0, 0, 80, 70]])), [[0, 0, 80, 70]])
    assert tile_cores(np.zeros((0, 4))).shape == (0, 4)


def test_overlap_detection_survives_once_shifted_to_scene():
    objects = [
        (60.0, 30.0),  # x in the overlap band, y in the top-only band: tiles 0, 1 -> tile 0 keeps it
        (90.0, 120.0),  # x overlap band, y bottom-only: tiles 2, 3 -> tile 3 keeps it
        (80.0, 80.0),  # in all four windows -> tile 3 keeps it
        (20.0, 20.0),  # one window only
        (140.0, 60.0),  # y overlap band: tiles 1, 3 -> tile 1 keeps it
    ]
    assert [len(_tiles_seeing(o)) for o in objects] == [2, 2, 4, 1, 2]
    names, scenes = merge_to_scenes(_detections(objects), INFO)
    assert names == ["scene_a.png"]
    rb, sc, lb = scenes[0]
    assert sorted(lb.tolist()) == [0, 1, 2, 3, 4]  # each object exactly once
    order = np.argsort(lb)
    np.testing.assert_allclose(rb[order, :2], objects, atol=1e-12)  # scene pixels
    np.testing.assert_allclose(rb[:, 2:], np.tile([10.0, 5.0, 0.3], (5, 1)))  # w, h, theta untouched
    np.testing.assert_allclose(sc[order], [0.1, 0.2, 0.3, 0.4, 0.5])
    # Which tile kept it: survivors come in tile order (tile 0: 0, 3; tile 1: 4; tile 2: none; tile 3: 1, 2).
    assert lb.tolist() == [0, 3, 4, 1, 2]


def test_centre_on_boundary_goes_to_exactly_one_tile():
    objects = [(75.0, 30.0), (30.0, 75.0), (75.0, 75.0)]  # on the x, the y, and both boundaries
    names, scenes = merge_to_scenes(_detections(objects), INFO)
    assert sorted(scenes[0][2].tolist()) == [0, 1, 2]
    # Half-open cores: the boundary belongs to the tile after it, so (75, 75) goes to tile 3, last in order.
    assert scenes[0][2].tolist()[-1] == 2


def test_scene_edges_belong_to_edge_tiles():
    # A centre on the far scene edge (150) and one a fraction of a pixel outside the scene.
    dets = [(np.zeros((0, 5)), np.zeros(0), np.zeros(0, np.int64)) for _ in WINDOWS]
    dets[3] = (_rb((100.0, 40.0), (100.2, 100.0)), np.array([0.5, 0.6]), np.array([0, 1]))  # scene (150, 90), (150.2, 150)
    dets[0] = (_rb((-0.3, 10.0)), np.array([0.7]), np.array([2]))  # scene (-0.3, 10)
    _, scenes = merge_to_scenes(dets, INFO)
    assert scenes[0][2].tolist() == [2, 0, 1]
    np.testing.assert_allclose(scenes[0][0][:, :2], [[-0.3, 10.0], [150.0, 90.0], [150.2, 150.0]])


def test_several_scenes_sorted_and_shuffled_tiles():
    info = [("b.png", WINDOWS[1]), ("a.png", [0, 0, 64, 64]), ("b.png", WINDOWS[0]), ("c.png", [0, 0, 64, 64])]
    dets = [
        (_rb((10.0, 10.0)), np.array([0.9]), np.array([1])),  # b, window 1: scene (60, 10), core [75, ...) -> dropped
        (_rb((30.0, 30.0)), np.array([0.8]), np.array([0])),  # a, single tile
        (_rb((60.0, 10.0)), np.array([0.7]), np.array([1])),  # b, window 0: the same object, kept
        (np.zeros((0, 5)), np.zeros(0), np.zeros(0, np.int64)),  # c: nothing detected
    ]
    names, scenes = merge_to_scenes(dets, info)
    assert names == ["a.png", "b.png", "c.png"]
    assert [s[1].tolist() for s in scenes] == [[0.8], [0.7], []]
    np.testing.assert_allclose(scenes[1][0][:, :2], [[60.0, 10.0]])
    assert scenes[2][0].shape == (0, 5)
    with pytest.raises(ValueError, match="tile"):
        merge_to_scenes(dets[:2], info)


def test_scene_ground_truth_prefers_the_full_copy():
    # Object A, upright, x [55, 95), y [10, 20): inside window 1 ([50, 150)) whole, inside window 0
    # ([0, 100)) whole too: both copies are full, centre 75 -> tile 1's core only.
    # Object B, x [85, 115), y [30, 40): whole in window 1; window 0 cuts it at 100 -> clipped copy
    # x [85, 100) centre 92.5, flagged difficult there (U = 0.5): 92.5 >= 75 lies outside tile 0's core,
    # so only tile 1's full copy (centre 100) survives, not difficult.
    # Object C, x [40, 60), y [60, 70): whole in windows 0 and 2, centre (50, 65) -> tile 0's core (65 < 75).
    def box(x0, x1, y0, y1, window):
        return [(x0 + x1) / 2 - window[0], (y0 + y1) / 2 - window[1], x1 - x0, y1 - y0, 0.0]

    w0, w1, w2, w3 = WINDOWS
    tile_gts = [
        (np.array([box(55, 95, 10, 20, w0), box(85, 100, 30, 40, w0), box(40, 60, 60, 70, w0)]),
         np.array([0, 1, 2]), np.array([False, True, False])),
        (np.array([box(55, 95, 10, 20, w1), box(85, 115, 30, 40, w1)]), np.array([0, 1]), np.array([False, False])),
        (np.array([box(40, 60, 60, 70, w2)]), np.array([2]), np.array([False])),
        (np.zeros((0, 5)), np.zeros(0, np.int64), np.zeros(0, bool)),
    ]  # fmt: skip
    names, scenes = scene_ground_truth(tile_gts, INFO)
    rb, lb, df = scenes[0]
    order = np.argsort(lb)
    assert lb[order].tolist() == [0, 1, 2]
    assert df[order].tolist() == [False, False, False]
    np.testing.assert_allclose(rb[order, :4], [[75, 15, 40, 10], [100, 35, 30, 10], [50, 65, 20, 10]])
    # Scoring the merged scene: the full-copy detections of the three objects are a perfect set.
    dets = [(rb.copy(), np.array([0.9, 0.8, 0.7]), lb.copy())]
    assert rotated_map(dets, scenes, 3).map50_95 == pytest.approx(1.0)
    names_d, _ = merge_to_scenes([(np.zeros((0, 5)), np.zeros(0), np.zeros(0))] * 4, INFO)
    assert names_d == names
