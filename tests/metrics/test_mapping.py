"""Inverse letterbox: exact round trip, clipping, tensor and ndarray inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lucidyolo.metrics.mapping import letterbox_boxes, unletterbox


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_round_trip_is_exact_in_float64(kind):
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 300, (50, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(1, 100, (50, 2))], 1)
    boxes = np.clip(boxes, 0, [427, 381, 427, 381])
    arr = torch.tensor(boxes) if kind == "torch" else boxes
    scale, px, py = 640 / 427, 0.0, (640 - 381 * 640 / 427) / 2
    back = unletterbox(letterbox_boxes(arr, scale, px, py), scale, px, py, (381, 427))
    assert type(back) is type(arr)
    np.testing.assert_allclose(np.asarray(back), boxes, rtol=0, atol=1e-10)


def test_boxes_are_clipped_to_the_original_image():
    net = torch.tensor([[-20.0, 90.0, 700.0, 650.0]])  # spills into both padding bands
    out = unletterbox(net, 2.0, 0.0, 100.0, (220, 320))
    assert out.tolist() == [[0.0, 0.0, 320.0, 220.0]]


def test_unclipped_mode_keeps_outside_coordinates():
    out = unletterbox(np.array([[-10.0, 0.0, 10.0, 10.0]]), 1.0, 0.0, 0.0, None)
    assert out.tolist() == [[-10.0, 0.0, 10.0, 10.0]]


def test_non_positive_scale_is_refused():
    with pytest.raises(ValueError, match="scale"):
        unletterbox(np.zeros((1, 4)), 0.0, 0.0, 0.0, (10, 10))


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_points_and_polygons_take_the_same_inverse(kind):
    # hand-derived: scale 2, pad (10, 4); x = (x_net - 10) / 2, y = (y_net - 4) / 2
    pts = np.array([[[30.0, 24.0], [10.0, 4.0]], [[50.0, 44.0], [12.0, 8.0]]])  # (2, 2, 2)
    flat = pts.reshape(2, 4)  # the same points as one polygon row each
    conv = torch.tensor if kind == "torch" else np.asarray
    want = [[[10.0, 10.0], [0.0, 0.0]], [[20.0, 20.0], [1.0, 2.0]]]
    assert np.asarray(unletterbox(conv(pts), 2.0, 10.0, 4.0)).tolist() == want
    assert np.asarray(unletterbox(conv(flat), 2.0, 10.0, 4.0)).reshape(2, 2, 2).tolist() == want
    clipped = np.asarray(unletterbox(conv(pts), 2.0, 10.0, 4.0, (15, 18))).tolist()
    assert clipped == [[[10.0, 10.0], [0.0, 0.0]], [[18.0, 15.0], [1.0, 2.0]]]


def test_integer_input_becomes_float64():
    assert unletterbox(np.array([[3, 5]]), 2.0, 1.0, 1.0).tolist() == [[1.0, 2.0]]
    assert unletterbox(torch.tensor([[3, 5]]), 2.0, 1.0, 1.0).dtype == torch.float64


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_no_rows_give_no_rows(kind):
    empty = torch.zeros(0, 4) if kind == "torch" else np.zeros((0, 4))
    assert tuple(unletterbox(empty, 2.0, 1.0, 1.0, (10, 10)).shape) == (0, 4)


def test_rotated_boxes_move_their_centres_through_the_same_inverse():
    from lucidyolo.tasks.obb.hooks import unletterbox_rboxes

    # hand-derived: scale 2, pad (10, 4); the centre as a point, w and h / 2, the angle kept
    net = np.array([[30.0, 24.0, 8.0, 6.0, 0.5], [10.0, 4.0, 3.0, 1.0, -1.25]])
    want = [[10.0, 10.0, 4.0, 3.0, 0.5], [0.0, 0.0, 1.5, 0.5, -1.25]]
    assert unletterbox_rboxes(net, 2.0, 10.0, 4.0).tolist() == want
    # and bit for bit the points' inverse at an inexact scale
    scale, px, py = 640 / 427, 0.0, (640 - 381 * 640 / 427) / 2
    rb = np.random.default_rng(1).uniform(1, 600, (20, 5))
    out = unletterbox_rboxes(rb, scale, px, py)
    assert np.array_equal(out[:, :2], unletterbox(rb[:, :2], scale, px, py))
    assert np.array_equal(out[:, 2:4], rb[:, 2:4] / scale) and np.array_equal(out[:, 4], rb[:, 4])
