"""Per-variant strengths, close-mosaic, mixup, copy-paste, HSV and the pose no-flip rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lucidyolo.data.augment.copy_paste import copy_paste
from lucidyolo.data.augment.hsv import apply_hsv, draw_hsv_gains
from lucidyolo.data.augment.mixup import draw_mixup_lambda, mixup
from lucidyolo.data.augment.pipeline import TrainAugment, strengths_for_variant
from lucidyolo.data.datasets import TrainDataset
from tests.augment.scenes import rect_scene, rect_source, rect_targets


def test_variant_strengths_follow_the_spec_table():
    table = {"n": (0.5, 0.0, 0.1), "s": (0.9, 0.05, 0.15), "m": (0.9, 0.1, 0.4), "l": (0.9, 0.1, 0.5), "x": (0.9, 0.2, 0.6)}
    for v, (scale, mix, cp) in table.items():
        st = strengths_for_variant(v)
        assert (st.scale, st.mixup, st.copy_paste) == (scale, mix, cp)
        assert (st.mosaic, st.translate, st.flip_lr, st.close_mosaic) == (1.0, 0.1, 0.5, 10)
        assert (st.hsv_h, st.hsv_s, st.hsv_v) == (0.015, 0.7, 0.4)
    with pytest.raises(ValueError):
        strengths_for_variant("q")


def test_close_mosaic_switches_mosaic_off_for_the_last_epochs(tmp_path):
    ds = TrainDataset(rect_source(tmp_path, "det"), 64, "n", seed=0, epochs=12, close_mosaic=10)
    assert [ds.mosaic_enabled(e) for e in range(12)] == [True, True] + [False] * 10
    assert all(math.isnan(v) for v in ds[(0, 0)].letterbox)  # mosaic sample: no single map
    assert not any(math.isnan(v) for v in ds[(5, 0)].letterbox)  # single image: a real affine


def test_mixup_blends_pixels_and_keeps_both_label_sets():
    a, b = np.full((8, 8, 3), 200, np.uint8), np.full((8, 8, 3), 100, np.uint8)
    ta, tb = rect_targets((0, 0, 4, 4), "det", 0), rect_targets((2, 2, 8, 8), "det", 1)
    img, t = mixup(a, ta, b, tb, 0.25)
    assert (img == 125).all() and img.dtype == np.uint8
    np.testing.assert_array_equal(t.labels, [0, 1])
    lams = [draw_mixup_lambda(np.random.default_rng(s)) for s in range(200)]
    assert abs(np.mean(lams) - 0.5) < 0.02 and 0.4 < np.std(lams) * 16 < 1.3  # Beta(32, 32): sd ~0.062


def test_copy_paste_pastes_mirrored_polygon_instances_where_free():
    box = (4, 10, 20, 30)
    img = rect_scene(40, 64, box).transpose(2, 0, 1)  # (3, H, W) planes, as the pipeline has them
    out, t = copy_paste(img, rect_targets(box, "seg"), apply=True)
    assert len(t) == 2
    np.testing.assert_allclose(t.boxes[1], [64 - 20, 10, 64 - 4, 30])
    assert (out[:, 12:28, 46:58].transpose(1, 2, 0) == (250, 10, 10)).all()  # pasted pixels under the pasted box
    assert (out[:, 10:30, 4:20] == img[:, 10:30, 4:20]).all() and (out[:, :, 24:40] == 60).all()  # the rest stays
    # a centred instance would cover itself: nothing is pasted
    centred = (24, 10, 40, 30)
    _, t2 = copy_paste(rect_scene(40, 64, centred).transpose(2, 0, 1), rect_targets(centred, "seg"), apply=True)
    assert len(t2) == 1
    # not drawn, or a task without polygons: unchanged
    _, t3 = copy_paste(img, rect_targets(box, "seg"), apply=False)
    _, t4 = copy_paste(img, rect_targets(box, "det"), apply=True)
    assert len(t3) == 1 and len(t4) == 1


def test_hsv_gains_change_colour_in_the_drawn_direction():
    rng = np.random.default_rng(0)
    g = draw_hsv_gains(rng, 0.015, 0.7, 0.4)
    assert np.all(np.abs(g) <= [0.015, 0.7, 0.4])
    img = rect_scene(32, 32, (4, 4, 28, 28), colour=(180, 120, 60))
    assert apply_hsv(img, np.zeros(3, np.float32)) is img
    darker = apply_hsv(img, np.array([0, 0, -0.4], np.float32)).astype(float)
    assert darker.mean() / img.astype(float).mean() == pytest.approx(0.6, abs=0.02)
    grey = apply_hsv(img, np.array([0, -1.0, 0], np.float32))
    assert np.ptp(grey[16, 16].astype(int)) <= 1  # saturation x0 gives grey


def test_pose_without_flip_idx_is_never_flipped(tmp_path):
    source = rect_source(tmp_path, "pose", flip_idx=None)
    st_flip = strengths_for_variant("n", flip_lr=1.0, mixup=0.0, copy_paste=0.0)
    st_none = strengths_for_variant("n", flip_lr=0.0, mixup=0.0, copy_paste=0.0)
    a = TrainAugment(len(source), source.load_image, source.targets, 64, st_flip, None)(0, np.random.default_rng(3))
    b = TrainAugment(len(source), source.load_image, source.targets, 64, st_none, None)(0, np.random.default_rng(3))
    assert (a.image == b.image).all()
    np.testing.assert_array_equal(a.targets.keypoints, b.targets.keypoints)


def test_train_dataset_is_reproducible_and_epochs_draw_new_streams(tmp_path):
    source = rect_source(tmp_path, "seg", n=6)
    d1 = TrainDataset(source, 64, "x", seed=7)
    d2 = TrainDataset(source, 64, "x", seed=7)
    s1 = [d1[(0, i)] for i in range(6)]
    s2 = [d2[(0, i)] for i in range(6)]
    for a, b in zip(s1, s2, strict=True):
        assert (a.image == b.image).all()
        np.testing.assert_array_equal(a.targets.boxes, b.targets.boxes)
    e1 = [d1[(1, i)] for i in range(6)]
    assert any(not (a.image == b.image).all() for a, b in zip(s1, e1, strict=True))
    d3 = TrainDataset(source, 64, "x", seed=8)
    assert any(not (a.image == d3[(0, i)].image).all() for i, a in enumerate(s1))
