"""Validation letterbox: aspect kept, grey padding, and an exact closed-form inverse."""

from __future__ import annotations

import numpy as np
import pytest

from lucidyolo.data.augment.letterbox import (
    letterbox_image,
    letterbox_params,
    letterbox_targets,
)
from lucidyolo.metrics.mapping import unletterbox
from tests.augment.scenes import rect_scene, rect_targets


@pytest.mark.parametrize("hw", [(480, 640), (640, 480), (333, 777), (64, 64), (1000, 120)])
def test_letterbox_round_trip_is_exact(hw):
    h, w = hw
    p = letterbox_params(h, w, 320)
    rng = np.random.default_rng(0)
    pts = rng.uniform(0, 1, (50, 4)) * np.array([w, h, w, h])
    fwd = pts * p.scale + np.array([p.pad_x, p.pad_y, p.pad_x, p.pad_y])
    back = unletterbox(fwd, p.scale, p.pad_x, p.pad_y)
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
    back = unletterbox(t.boxes, p.scale, p.pad_x, p.pad_y)
    np.testing.assert_allclose(back[0], box, atol=1e-4)


@pytest.mark.parametrize("hw,size", [((480, 640), 640), ((640, 427), 640), ((37, 320), 320)])
def test_unit_scale_letterbox_is_pillows_bilinear_byte_for_byte(hw, size):
    # at scale 1 the render is a whole-pixel shift and takes a copy instead of Pillow's resample;
    # Pillow's own bilinear resize over the same box is the oracle
    from PIL import Image

    rng = np.random.default_rng(4)
    img = rng.integers(0, 256, (*hw, 3), dtype=np.uint8)
    out, p = letterbox_image(img, size)
    assert p.scale == 1.0
    h, w = hw
    ref = np.asarray(Image.fromarray(img).resize((w, h), Image.Resampling.BILINEAR, box=(0.0, 0.0, float(w), float(h))))
    y, x = int(p.pad_y), int(p.pad_x)
    np.testing.assert_array_equal(out[y : y + h, x : x + w], ref)
    mask = np.ones((size, size), bool)
    mask[y : y + h, x : x + w] = False
    assert (out[mask] == 114).all()


def test_unit_scale_render_with_a_shift_and_clip_matches_pillow():
    from PIL import Image

    from lucidyolo.data.augment.affine import IsoAffine, render_affine

    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)
    out = np.full((64, 64, 3), 114, np.uint8)
    region = render_affine(out, img, IsoAffine(1.0, -9.0, 20.0), clip=(3.0, 0.0, 60.0, 64.0))
    assert region == (3, 20, 60, 64)  # x from 3 (clip) to 60 (clip), y from 20 (shift) to 64 (frame)
    ref = np.asarray(Image.fromarray(img).resize((57, 44), Image.Resampling.BILINEAR, box=(12.0, 0.0, 69.0, 44.0)))
    np.testing.assert_array_equal(out[20:64, 3:60], ref)
    assert (out[:20] == 114).all() and (out[:, :3] == 114).all() and (out[:, 60:] == 114).all()
