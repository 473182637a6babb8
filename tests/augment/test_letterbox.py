"""Validation letterbox: aspect kept, grey padding, and an exact closed-form inverse."""

from __future__ import annotations

import numpy as np
import pytest

from lucidyolo.data.augment.letterbox import (
    letterbox_image,
    letterbox_params,
    letterbox_targets,
    unletterbox_points,
)
from tests.augment.scenes import rect_scene, rect_targets


@pytest.mark.parametrize("hw", [(480, 640), (640, 480), (333, 777), (64, 64), (1000, 120)])
def test_letterbox_round_trip_is_exact(hw):
    h, w = hw
    p = letterbox_params(h, w, 320)
    rng = np.random.default_rng(0)
    pts = rng.uniform(0, 1, (50, 4)) * np.array([w, h, w, h])
    fwd = pts * p.scale + np.array([p.pad_x, p.pad_y, p.pad_x, p.pad_y])
    back = unletterbox_points(fwd, p)
    np.testing.assert_allclose(back, pts, rtol=0, atol=1e-9)
    # the long side fills the input, the padding is centred and integral
    assert max(h * p.scale, w * p.scale) == pytest.approx(320)
    assert p.pad_x == int(p.pad_x) and p.pad_y == int(p.pad_y)
    assert min(p.pad_x, p.pad_y) == 0


def test_letterbox_image_and_targets_agree():
    box = (30, 20, 90, 50)
    img = rect_scene(100, 160, box)
    out, p = letterbox_image(img, 64)
    assert out.shape == (64, 64, 3)
    t = letterbox_targets(rect_targets(box, "det"), p)
    x0, y0, x1, y1 = t.boxes[0]
    assert (out[int(np.ceil(y0)) + 1 : int(y1) - 1, int(np.ceil(x0)) + 1 : int(x1) - 1] == (250, 10, 10)).all()
    # padding rows (top and bottom) are the fill grey
    assert p.pad_y > 0
    assert (out[: int(p.pad_y)] == 114).all() and (out[-int(p.pad_y) :] == 114).all()
    back = unletterbox_points(t.boxes, p)
    np.testing.assert_allclose(back[0], box, atol=1e-4)
