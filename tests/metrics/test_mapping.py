"""Inverse letterbox: exact round trip, clipping, tensor and ndarray inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lucidyolo.metrics.mapping import letterbox_boxes, unletterbox_boxes


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_round_trip_is_exact_in_float64(kind):
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 300, (50, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(1, 100, (50, 2))], 1)
    boxes = np.clip(boxes, 0, [427, 381, 427, 381])
    arr = torch.tensor(boxes) if kind == "torch" else boxes
    scale, px, py = 640 / 427, 0.0, (640 - 381 * 640 / 427) / 2
    back = unletterbox_boxes(letterbox_boxes(arr, scale, px, py), scale, px, py, (381, 427))
    assert type(back) is type(arr)
    np.testing.assert_allclose(np.asarray(back), boxes, rtol=0, atol=1e-10)


def test_boxes_are_clipped_to_the_original_image():
    net = torch.tensor([[-20.0, 90.0, 700.0, 650.0]])  # spills into both padding bands
    out = unletterbox_boxes(net, 2.0, 0.0, 100.0, (220, 320))
    assert out.tolist() == [[0.0, 0.0, 320.0, 220.0]]


def test_unclipped_mode_keeps_outside_coordinates():
    out = unletterbox_boxes(np.array([[-10.0, 0.0, 10.0, 10.0]]), 1.0, 0.0, 0.0, (5, 5), clip=False)
    assert out.tolist() == [[-10.0, 0.0, 10.0, 10.0]]


def test_non_positive_scale_is_refused():
    with pytest.raises(ValueError, match="scale"):
        unletterbox_boxes(np.zeros((1, 4)), 0.0, 0.0, 0.0, (10, 10))
