"""Labels and pixels stay aligned through mosaic + fused affine + flip, for every field."""

from __future__ import annotations

import numpy as np
import pytest

from lucidyolo.data.augment.pipeline import TrainAugment, strengths_for_variant
from tests.augment.scenes import rect_source

S = 128


def _is_red(px: np.ndarray) -> np.ndarray:
    return (px[..., 0] > 200) & (px[..., 1] < 70) & (px[..., 2] < 70)


def _augment(source, mosaic: bool, flip: float) -> TrainAugment:
    st = strengths_for_variant("n", mixup=0.0, copy_paste=0.0, hsv_h=0.0, hsv_s=0.0, hsv_v=0.0, flip_lr=flip, mosaic=1.0 if mosaic else 0.0)
    return TrainAugment(len(source), source.load_image, source.targets, S, st, source.meta())


@pytest.mark.parametrize("task", ["det", "seg", "obb", "pose"])
@pytest.mark.parametrize("mosaic", [True, False])
@pytest.mark.parametrize("flip", [0.0, 1.0])
def test_every_surviving_instance_covers_its_rectangle_pixels(tmp_path, task, mosaic, flip):
    source = rect_source(tmp_path / task, task, n=5)
    aug = _augment(source, mosaic, flip)
    checked = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        out = aug(int(rng.integers(0, len(source))), rng, use_mosaic=mosaic)
        assert out.image.shape == (3, S, S) and out.image.dtype == np.uint8 and out.image.flags.c_contiguous
        img, t = out.image.transpose(1, 2, 0), out.targets
        t.validate()
        for k in range(len(t)):
            x0, y0, x1, y1 = t.boxes[k]
            assert 0 - 1 <= x0 < x1 <= S and 0 <= y0 < y1 <= S
            assert x1 - x0 >= 2 and y1 - y0 >= 2
            # interior shrunk by 2 px: bilinear edges and the spec's 1-px flip offset stay outside
            ix0, iy0, ix1, iy1 = int(np.ceil(x0 + 2)), int(np.ceil(y0 + 2)), int(np.floor(x1 - 2)), int(np.floor(y1 - 2))
            if ix1 > ix0 and iy1 > iy0:
                assert _is_red(img[iy0:iy1, ix0:ix1]).all(), f"seed {seed} box {t.boxes[k]}"
                checked += 1
            if t.rboxes is not None:
                cx, cy = t.rboxes[k, :2]
                assert x0 - 1 <= cx <= x1 + 1 and y0 - 1 <= cy <= y1 + 1 or not (0 <= cx < S and 0 <= cy < S)
                assert -np.pi / 4 <= t.rboxes[k, 4] < 3 * np.pi / 4 and t.rboxes[k, 2] >= t.rboxes[k, 3]
            if t.keypoints is not None:
                vis = t.visibility[k] > 0
                kp = t.keypoints[k][vis]
                inside = (kp[:, 0] >= 1) & (kp[:, 0] < S - 1) & (kp[:, 1] >= 1) & (kp[:, 1] < S - 1)
                kp = kp[inside]
                assert _is_red(img[np.round(kp[:, 1]).astype(int), np.round(kp[:, 0]).astype(int)]).all()
                # left/right semantics survive the flip: keypoint 0 stays left of keypoint 1
                assert t.keypoints[k, 0, 0] < t.keypoints[k, 1, 0]
        if t.polygons is not None and len(t):
            from lucidyolo.structures.geometry import polygons_to_xyxy

            pb = polygons_to_xyxy(t.polygons, len(t))
            # polygons are unclipped: their box contains the clipped box
            assert np.all(pb[:, :2] <= t.boxes[:, :2] + 1e-3) and np.all(pb[:, 2:] >= t.boxes[:, 2:] - 1e-3)
    assert checked >= 3


def test_mosaic_puts_four_images_into_one_sample(tmp_path):
    source = rect_source(tmp_path, "det", n=4)
    st = strengths_for_variant("n", scale=0.0, translate=0.0, mixup=0.0, copy_paste=0.0, flip_lr=0.0, hsv_h=0.0, hsv_s=0.0, hsv_v=0.0)
    aug = TrainAugment(len(source), source.load_image, source.targets, S, st)
    counts = []
    for seed in range(8):
        out = aug(0, np.random.default_rng(seed), use_mosaic=True)
        counts.append(len(out.targets))
        assert out.affine is None
    # with scale 1 the output is the central S x S crop of a 2S canvas around a random centre:
    # several tiles (and their rectangles) must show up in at least one draw
    assert max(counts) >= 2
