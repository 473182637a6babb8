"""Worker HSV equals a float64 colorsys HSV jitter up to 8-bit rounding, for every gain and colour."""

from __future__ import annotations

import colorsys

import numpy as np
import pytest
import torch

from lucidyolo.data.augment.hsv import apply_hsv, hue_step
from lucidyolo.data.device_hsv import hsv_jitter


def reference_hsv(image: np.ndarray, gains) -> np.ndarray:
    """The textbook definition, pixel by pixel in float64: ``(H, W, 3)`` uint8 -> uint8."""
    gh, gs, gv = (float(g) for g in gains)
    out = np.empty_like(image)
    for idx in np.ndindex(image.shape[:2]):
        h, s, v = colorsys.rgb_to_hsv(*(image[idx].astype(np.float64) / 255.0))
        h = (h + gh) % 1.0
        s = min(max(s * (1.0 + gs), 0.0), 1.0)
        v = min(max(v * (1.0 + gv), 0.0), 1.0)
        out[idx] = np.rint(np.array(colorsys.hsv_to_rgb(h, s, v)) * 255.0)
    return out


def edge_colours() -> np.ndarray:
    """``(1, N, 3)`` greys, black/white, primaries/secondaries, hue-wrap reds/magentas and near-ties."""
    base = [
        (0, 0, 0), (255, 255, 255), (1, 1, 1), (114, 114, 114), (254, 254, 254),
        (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255),
        (200, 10, 12), (200, 12, 10), (255, 0, 1), (255, 1, 0), (250, 3, 250), (250, 250, 3),
        (7, 200, 200), (100, 99, 100), (100, 100, 99), (1, 0, 0), (0, 0, 1), (128, 64, 0), (10, 200, 180),
    ]
    return np.array(base, np.uint8)[None]


def max_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a.astype(np.int64) - b.astype(np.int64)).max())


@pytest.mark.parametrize("hgain,sgain,vgain", [(0.015, 0.7, 0.4), (1.0, 0.7, 0.4), (0.2, 2.0, 1.5)])
def test_random_images_and_gains_match_the_colorsys_reference(hgain, sgain, vgain):
    rng = np.random.default_rng(7)
    for _ in range(6):
        img = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
        img[::4, :, 1] = img[::4, :, 0]  # channel ties on some rows
        img[1::4] = img[1::4, :, :1]  # and greys on others
        gains = (rng.uniform(-1, 1, 3) * [hgain, sgain, vgain]).astype(np.float32)
        assert max_diff(apply_hsv(img, gains), reference_hsv(img, gains)) <= 1, gains


@pytest.mark.parametrize(
    "gains",
    [
        [0.015, 0.0, 0.0], [-0.015, 0.0, 0.0], [0.0, 0.7, 0.0], [0.0, -0.7, 0.0], [0.0, 0.0, 0.4], [0.0, 0.0, -0.4],
        [0.015, 0.7, 0.4], [-0.015, -0.7, -0.4], [0.5, 0.0, 0.0], [1 / 3, 0.0, 0.0], [-1 / 6, 0.3, 0.0],
        [0.999, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, -1.5, 0.0], [0.0, 0.0, -1.0], [0.0, 0.0, 2.0],
    ],
)
def test_edge_colours_match_the_reference(gains):
    img = edge_colours()
    g = np.array(gains, np.float32)
    assert max_diff(apply_hsv(img, g), reference_hsv(img, g)) <= 1


def test_hue_wraps_around_red():
    # hue 0.9935 (red-magenta) pushed by +0.015 wraps to 0.0085; hue 0.0065 by -0.015 wraps to 0.9915
    img = np.array([[[255, 0, 10], [255, 10, 0]]], np.uint8)
    h0 = [colorsys.rgb_to_hsv(*(px / 255.0))[0] for px in img[0]]
    for gh in (0.015, -0.015):
        out = apply_hsv(img, np.array([gh, 0, 0], np.float32))
        got = [colorsys.rgb_to_hsv(*(px / 255.0))[0] for px in out[0]]
        for h_in, h_out in zip(h0, got, strict=True):
            # one 8-bit level moves a fully saturated hue by 1/1530
            assert abs((h_out - (h_in + gh) + 0.5) % 1.0 - 0.5) < 1e-3
    assert colorsys.rgb_to_hsv(*(apply_hsv(img, np.array([0.015, 0, 0]))[0, 0] / 255.0))[0] < 0.01
    assert colorsys.rgb_to_hsv(*(apply_hsv(img, np.array([-0.015, 0, 0]))[0, 1] / 255.0))[0] > 0.99


def test_whole_third_hue_steps_are_channel_rolls():
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)
    assert hue_step(1 / 3) == (1, pytest.approx(0.0, abs=1e-9))
    assert hue_step(-0.01) == (0, pytest.approx(-0.06))
    np.testing.assert_array_equal(apply_hsv(img, np.array([1 / 3, 0, 0])), np.roll(img, 1, axis=2))
    np.testing.assert_array_equal(apply_hsv(img, np.array([-1 / 3, 0, 0])), np.roll(img, -1, axis=2))


def test_result_does_not_depend_on_memory_layout_or_row_length():
    rng = np.random.default_rng(2)
    img = rng.integers(0, 256, (37, 29, 3), dtype=np.uint8)
    g = np.array([0.012, -0.4, 0.3], np.float32)
    full = apply_hsv(img, g)
    np.testing.assert_array_equal(apply_hsv(img[:, ::-1], g), full[:, ::-1])
    assert full.dtype == np.uint8 and full.flags.c_contiguous and full.shape == img.shape
    # rows shorter and longer than one vector of the compiled loop, and its remainder
    for w in (1, 15, 16, 17, 29):
        np.testing.assert_array_equal(apply_hsv(img[:, :w], g), full[:, :w])
    assert apply_hsv(img[:0], g).shape == (0, 29, 3)


@pytest.mark.parametrize("gains", [[0.015, 0.7, 0.4], [-0.013, -0.6, -0.35], [0.2, 0.5, 0.9], [0.0, -1.2, 0.1]])
def test_worker_and_device_hsv_agree_within_one_level(gains):
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    img[::3] = img[::3, :, :1]
    g = np.array(gains, np.float32)
    dev = hsv_jitter(torch.from_numpy(img).permute(2, 0, 1)[None].float(), torch.from_numpy(g)[None])[0]
    dev8 = dev.permute(1, 2, 0).double().numpy().round()
    assert np.abs(apply_hsv(img, g).astype(np.float64) - dev8).max() <= 1


@pytest.mark.parametrize("signs", [(1, 1), (1, -1), (-1, 1), (-1, -1)])
@pytest.mark.parametrize("gh", [0.0, 0.012, -0.4])
def test_every_gain_sign_branch_matches_the_reference(signs, gh):
    # gs, gv <= 0 takes the constant-K path, positive gains the clipped one, gh == 0 skips the hue term
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)
    img[::3] = img[::3, :, :1]
    g = np.array([gh, 0.6 * signs[0], 0.35 * signs[1]], np.float32)
    assert max_diff(apply_hsv(img, g), reference_hsv(img, g)) <= 1


def test_the_compiled_loop_runs_where_numba_cannot_write_its_cache(tmp_path):
    # a read-only install without a writable home: every numba cache location fails its write probe
    # (numba then refuses `cache=True` at import); the loop must compile per process and give the same bytes
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(9)
    img = rng.integers(0, 256, (9, 23, 3), dtype=np.uint8)
    g = np.array([0.02, 0.5, -0.3], np.float32)
    np.save(tmp_path / "img.npy", img)
    code = (
        "import numpy as np, numba.core.caching as c\n"
        "def refuse(self): raise OSError('read-only')\n"
        "c._CacheLocator.ensure_cache_path = refuse\n"
        "from lucidyolo.data.augment import hsv_kernel\n"
        "assert hsv_kernel.hsv_planes._cache.__class__.__name__ == 'NullCache'\n"
        "from lucidyolo.data.augment.hsv import apply_hsv\n"
        f"np.save({str(tmp_path / 'out.npy')!r}, apply_hsv(np.load({str(tmp_path / 'img.npy')!r}), np.array({g.tolist()}, np.float32)))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), apply_hsv(img, g))
