"""The training fast paths: snapped torch resample into planes and the fused HSV + flip pass."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from lucidyolo.data.augment.affine import IsoAffine, render_affine, render_affine_snapped
from lucidyolo.data.augment.hsv import apply_hsv, apply_hsv_chw
from lucidyolo.data.augment.pipeline import TrainAugment, strengths_for_variant
from tests.augment.scenes import rect_source


def test_a_sliver_that_snapping_empties_is_left_unwritten():
    # the mapped image covers output px 5 ([3.1, 6.1] clipped at 5); snapping its start to source column 3
    # moves the far edge to 5.75, so nothing is fully covered any more (this used to crash in interpolate)
    out = np.full((3, 16, 16), 114, np.uint8)
    rect, snapped = render_affine_snapped(out, np.full((8, 4, 3), 200, np.uint8), IsoAffine(0.75, 3.1, 0.0), clip=(5.0, 0.0, 16.0, 16.0))
    assert rect[2] <= rect[0] and snapped.tx == pytest.approx(5 - 0.75 * 3) and (out == 114).all()


@pytest.mark.parametrize("s", [0.43, 1.0, 1.37])
def test_snapped_resample_is_pillows_filter_on_the_snapped_map(s):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (61, 83, 3), dtype=np.uint8)
    affine = IsoAffine(s, -7.3, 4.6)
    out = np.full((3, 64, 64), 114, np.uint8)
    (x0, y0, x1, y1), snapped = render_affine_snapped(out, image, affine, clip=(0.0, 0.0, 50.5, 64.0))
    # the map moved by at most half a source pixel per axis
    assert snapped.s == s and abs(snapped.tx - affine.tx) <= s / 2 + 1e-9 and abs(snapped.ty - affine.ty) <= s / 2 + 1e-9
    assert 0 <= x0 < x1 <= 50 and 0 <= y0 < y1 <= 64
    # the snapped map sends the first written pixel's left/top edge to a whole source pixel
    cx, cy = (x0 - snapped.tx) / s, (y0 - snapped.ty) / s
    assert cx == pytest.approx(round(cx), abs=1e-6) and cy == pytest.approx(round(cy), abs=1e-6)
    # untouched outside the written rectangle
    mask = np.ones((64, 64), bool)
    mask[y0:y1, x0:x1] = False
    assert (out[:, mask] == 114).all()
    # Pillow with the exact fractional box of the same (snapped) map: within 1 level away from the crop start
    box = ((x0 - snapped.tx) / s, (y0 - snapped.ty) / s, (x1 - snapped.tx) / s, (y1 - snapped.ty) / s)
    ref = np.asarray(Image.fromarray(image).resize((x1 - x0, y1 - y0), Image.Resampling.BILINEAR, box=box))
    diff = np.abs(out[:, y0:y1, x0:x1].transpose(1, 2, 0).astype(int) - ref.astype(int))
    assert diff[1:, 1:].max() <= 1
    # and Pillow's exact renderer of the snapped map agrees the same way
    exact = np.full((64, 64, 3), 114, np.uint8)
    region = render_affine(exact, image, snapped, clip=(0.0, 0.0, 50.5, 64.0))
    assert region == (x0, y0, x1, y1)


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("gains", [[0.0, 0.0, 0.0], [0.012, -0.5, 0.3], [-0.4, 0.7, -0.4]])
def test_fused_hsv_flip_equals_the_separate_steps(flip, gains):
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (37, 29, 3), dtype=np.uint8)
    g = np.array(gains, np.float32)
    ref = apply_hsv(image, g)
    ref = (ref[:, ::-1] if flip else ref).transpose(2, 0, 1)
    # contiguous planes, and a strided view of the interleaved image (copied to planes first)
    for planes in (np.ascontiguousarray(image.transpose(2, 0, 1)), image.transpose(2, 0, 1)):
        out = apply_hsv_chw(planes, g, flip)
        assert out.dtype == np.uint8 and out.flags.c_contiguous and out.shape == (3, 37, 29)
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("device_hsv", [False, True])
def test_a_flipped_sample_is_the_unflipped_sample_mirrored(tmp_path, device_hsv):
    # the flip draw is taken either way, so both streams make the same sample up to the mirror
    source = rect_source(tmp_path, "pose", n=5)
    augs = [
        TrainAugment(len(source), source.load_image, source.targets, 96, strengths_for_variant("x", flip_lr=p), source.meta(), device_hsv)
        for p in (0.0, 1.0)
    ]
    for seed in range(8):
        a, b = (aug(seed % 5, np.random.default_rng(seed)) for aug in augs)
        assert b.image.shape == (3, 96, 96) and b.image.flags.c_contiguous
        assert b.image.dtype == (np.float32 if device_hsv else np.uint8)
        np.testing.assert_array_equal(b.image, a.image[:, :, ::-1])
        np.testing.assert_allclose(b.targets.boxes, np.c_[96 - a.targets.boxes[:, 2], a.targets.boxes[:, 1], 96 - a.targets.boxes[:, 0], a.targets.boxes[:, 3]])
        np.testing.assert_allclose(b.targets.keypoints[:, [1, 0, 2], 0], 96 - a.targets.keypoints[:, :, 0])  # flip_idx (1, 0, 2)
        np.testing.assert_array_equal(b.hsv_gains, a.hsv_gains)
