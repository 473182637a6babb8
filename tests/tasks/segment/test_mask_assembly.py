"""Mask assembly: hand-computed rectangles, a grid_sample reference, RLE round trips, loadRes."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

from lucidyolo.tasks.segment.mask_assembly import (
    encode_rle,
    gt_instance_rles,
    mask_results,
    masks_in_input,
    masks_in_original,
)
from lucidyolo.tasks.segment.mask_detections import MaskDetections

# pycocotools' single-RLE decode (used by the tests only) trips a numpy 2 deprecation
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword")


def _det(rows: list[list[float]], coeffs: list[list[float]], protos: torch.Tensor) -> MaskDetections:
    return MaskDetections(torch.tensor(rows, dtype=torch.float32), torch.tensor(coeffs, dtype=torch.float32), protos)


def _expected(h: int, w: int, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    out = np.zeros((h, w), dtype=bool)
    out[rows[0]:rows[1], cols[0]:cols[1]] = True
    return out


def test_one_prototype_pixel_per_original_pixel_gives_the_exact_rectangle():
    # 64x64 input, 16x16 prototypes (stride 4). Prototype 0 is +10 on proto rows [4, 8),
    # cols [2, 10) and -10 elsewhere. Letterbox scale 4, pad (8, 4): original pixel u has
    # its centre at input 4u + 10, i.e. exactly on prototype pixel centre j = u + 2 (rows:
    # 4v + 6 -> i = v + 1), so every sampled logit is a prototype value (+-10).
    protos = torch.full((2, 16, 16), -10.0)
    protos[0, 4:8, 2:10] = 10.0
    big_box = [0.0, 0.0, 64.0, 64.0]
    # box x2 = 26 is exactly the centre 4*4 + 10 of column u = 4: half-open, so u = 4 is out
    cut_box = [4.0, 0.0, 26.0, 64.0]
    det = _det(
        [[*big_box, 0.9, 0], [0, 0, 0, 0, 0, 0], [*cut_box, 0.5, 1]],  # middle row is padding
        [[1, 0], [0, 0], [1, 0]],
        protos,
    )
    masks = masks_in_original(det, (4.0, 8.0, 4.0), (14, 12))
    assert masks.shape == (2, 14, 12) and masks.dtype == bool
    # rect: u = j - 2 in [0, 8), v = i - 1 in [3, 7)
    np.testing.assert_array_equal(masks[0], _expected(14, 12, (3, 7), (0, 8)))
    # the box keeps centres 4u + 10 in [4, 26): u in [0, 4)
    np.testing.assert_array_equal(masks[1], _expected(14, 12, (3, 7), (0, 4)))


@pytest.mark.parametrize(
    ("band", "box", "rows", "cols"),
    [
        # +10 on proto rows [4, 8) over every column: the logit changes sign where the
        # bilinear weight crosses 1/2, at the proto pixel edges, input y = 16 and y = 32.
        # Original v has centre y = (v + 0.5) * 0.5 + 8, inside (16, 32) for v in [16, 47].
        # The box keeps x = (u + 0.5) * 0.5 in [12, 36): u in [24, 71].
        ("rows", [12.0, 0.0, 36.0, 64.0], (16, 48), (24, 72)),
        # +10 on proto cols [2, 10) over every row: sign change at input x = 8 and 40,
        # x = (u + 0.5) * 0.5 in (8, 40): u in [16, 79]. The box keeps y in [20, 28):
        # (v + 0.5) * 0.5 + 8 in [20, 28) for v in [24, 39].
        ("cols", [0.0, 20.0, 64.0, 28.0], (24, 40), (16, 80)),
    ],
)
def test_downscaled_letterbox_edges_fall_on_prototype_pixel_edges(band, box, rows, cols):
    protos = torch.full((1, 16, 16), -10.0)
    if band == "rows":
        protos[0, 4:8, :] = 10.0
    else:
        protos[0, :, 2:10] = 10.0
    det = _det([[*box, 0.7, 0]], [[1.0]], protos)
    # original 96 x 128 letterboxed at scale 0.5 into 64 x 64: 48 rows, pad_y = 8
    masks = masks_in_original(det, (0.5, 0.0, 8.0), (96, 128))
    np.testing.assert_array_equal(masks[0], _expected(96, 128, rows, cols))


def test_masks_in_input_is_the_identity_letterbox():
    g = torch.Generator().manual_seed(3)
    protos = torch.randn(4, 12, 16, generator=g)
    det = _det([[3.2, 5.1, 40.7, 33.3, 0.8, 2], [10, 0, 64, 48, 0.3, 0]], torch.randn(2, 4, generator=g).tolist(), protos)
    np.testing.assert_array_equal(masks_in_input(det, 48, 64), masks_in_original(det, (1.0, 0.0, 0.0), (48, 64)))


def _reference_masks(det: MaskDetections, letterbox, orig_hw, input_hw) -> tuple[np.ndarray, np.ndarray]:
    """grid_sample at every original pixel centre (float64), then the box crop: ``(masks, |logit|)``."""
    scale, pad_x, pad_y = letterbox
    h, w = orig_hw
    hin, win = input_hw
    keep = det.rows[:, 4] > 0
    rows, coeffs = det.rows[keep].double(), det.coeffs[keep].double()
    logits = torch.einsum("np,pij->nij", coeffs, det.protos.double())  # (N, Hp, Wp)
    x = (torch.arange(w, dtype=torch.float64) + 0.5) * scale + pad_x  # (w,) input frame
    y = (torch.arange(h, dtype=torch.float64) + 0.5) * scale + pad_y
    # align_corners=False: normalised g <-> pixel (g + 1) * size / 2 - 0.5, and input x sits at
    # prototype x / s - 0.5 with s = input / proto size, so g = 2 x / input - 1
    gy, gx = torch.meshgrid(2 * y / hin - 1, 2 * x / win - 1, indexing="ij")
    grid = torch.stack([gx, gy], dim=-1)[None]  # (1, h, w, 2)
    up = F.grid_sample(logits[None], grid, mode="bilinear", padding_mode="border", align_corners=False)[0]
    inside = (
        (x[None, None, :] >= rows[:, 0, None, None]) & (x[None, None, :] < rows[:, 2, None, None])
        & (y[None, :, None] >= rows[:, 1, None, None]) & (y[None, :, None] < rows[:, 3, None, None])
    )
    return ((up > 0) & inside).numpy(), up.abs().numpy()


@pytest.mark.parametrize(
    ("letterbox", "orig_hw", "input_hw", "proto_hw"),
    [
        ((0.37, 1.5, 6.25), (100, 130), (48, 64), (12, 16)),  # downscale, non-square
        ((1.75, 0.0, 12.0), (20, 36), (64, 64), (16, 16)),  # upscale
        ((1.0, 0.0, 0.0), (64, 64), (64, 64), (16, 16)),  # input frame
    ],
)
def test_agrees_with_grid_sample_at_every_pixel(letterbox, orig_hw, input_hw, proto_hw):
    g = torch.Generator().manual_seed(sum(orig_hw))
    k, p = 7, 5
    protos = torch.randn(p, *proto_hw, generator=g) * 3
    hin, win = input_hw
    xy = torch.rand(k, 2, generator=g) * torch.tensor([win, hin]) * 0.7
    wh = torch.rand(k, 2, generator=g) * torch.tensor([win, hin]) * 0.6 + 2
    boxes = torch.cat([xy - 5, xy + wh], dim=1)  # some start left/above the image
    scores = torch.rand(k, 1, generator=g) + 0.05
    scores[3] = 0.0  # padding inside the block
    rows = torch.cat([boxes, scores, torch.randint(0, 3, (k, 1), generator=g).float()], dim=1)
    det = MaskDetections(rows, torch.randn(k, p, generator=g), protos)
    got = masks_in_original(det, letterbox, orig_hw, stride=hin / proto_hw[0])
    ref, mag = _reference_masks(det, letterbox, orig_hw, input_hw)
    assert got.shape == ref.shape == (k - 1, *orig_hw)
    clear = mag >= 1e-4  # float32 vs float64 may differ only where the logit is ~0
    assert clear.mean() > 0.99
    np.testing.assert_array_equal(got[clear], ref[clear])
    assert ref.sum() > 100  # the cases are not trivially empty


def test_rle_round_trip_and_json_counts():
    g = torch.Generator().manual_seed(5)
    det = MaskDetections(
        torch.tensor([[0, 0, 30, 20, 0.9, 0], [5, 5, 60, 60, 0.4, 1], [0, 0, 0, 0, 0, 0]]),
        torch.randn(3, 3, generator=g),
        torch.randn(3, 16, 16, generator=g),
    )
    masks = masks_in_original(det, (0.8, 2.0, 7.0), (70, 75))
    rles = encode_rle(masks)
    assert len(rles) == 2
    for m, r in zip(masks, rles, strict=True):
        assert isinstance(r["counts"], str) and r["size"] == [70, 75]
        np.testing.assert_array_equal(mask_utils.decode(r).astype(bool), m)
        assert int(mask_utils.area(r)) == int(m.sum())
    # a plain C-ordered array encodes the same
    assert encode_rle(np.ascontiguousarray(masks)) == rles
    assert encode_rle(np.zeros((0, 4, 5), dtype=bool)) == []


def test_mask_results_load_into_pycocotools_for_bbox_and_segm():
    g = torch.Generator().manual_seed(6)
    det = MaskDetections(
        torch.tensor([[4, 6, 40, 50, 0.9, 1], [0, 0, 0, 0, 0, 0], [20, 10, 64, 30, 0.3, 0]]),
        torch.randn(3, 4, generator=g),
        torch.randn(4, 16, 16, generator=g),
    )
    letterbox, orig_hw = (0.5, 0.0, 16.0), (64, 128)
    results = mask_results(det, 42, [7, 9], letterbox, orig_hw)
    assert [r["category_id"] for r in results] == [9, 7]
    assert [r["score"] for r in results] == pytest.approx([0.9, 0.3])
    masks = masks_in_original(det, letterbox, orig_hw)
    for r, m in zip(results, masks, strict=True):
        np.testing.assert_array_equal(mask_utils.decode(r["segmentation"]).astype(bool), m)
        x, y, w, h = r["bbox"]  # every mask pixel centre lies in its (unletterboxed) box
        ys, xs = np.nonzero(m)
        assert xs.size
        assert x <= xs.min() + 0.5 and xs.max() + 0.5 < x + w
        assert y <= ys.min() + 0.5 and ys.max() + 0.5 < y + h
    gt = COCO()
    gt.dataset = {"images": [{"id": 42, "height": 64, "width": 128}],
                  "categories": [{"id": 7, "name": "a"}, {"id": 9, "name": "b"}], "annotations": []}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        loaded = gt.loadRes([dict(r) for r in results])
    anns = loaded.loadAnns(loaded.getAnnIds())
    assert len(anns) == 2 and all("segmentation" in a and a["area"] >= 0 for a in anns)
    assert mask_utils.area([a["segmentation"] for a in anns]).tolist() == [int(m.sum()) for m in masks]


def test_gt_rles_union_rings_and_crowd_boxes():
    # image 0: slot 0 has two rectangles, slot 1 is padding, slot 2 a triangle;
    # image 1: slot 0 crowd (box polygon), slot 1 has no rings, slot 2 a 2-point ring only
    rings = [
        ([[2, 2], [10, 2], [10, 6], [2, 6]], 0, 0),
        ([[20, 20], [30, 20], [30, 24], [20, 24]], 0, 0),
        ([[0, 30], [16, 30], [0, 46]], 0, 2),
        ([[4, 4], [8, 8]], 1, 2),
    ]
    pts = torch.tensor([p for r, _, _ in rings for p in r], dtype=torch.float32)
    gt = {
        "mask": torch.tensor([[True, False, True], [True, True, True]]),
        "crowd": torch.tensor([[False, False, False], [True, False, False]]),
        "boxes": torch.tensor([[[2, 2, 30, 24], [0, 0, 0, 0], [0, 30, 16, 46]],
                               [[8, 12, 24, 20], [1, 1, 5, 5], [4, 4, 8, 8]]], dtype=torch.float32),
        "poly_points": pts,
        "poly_ring_lengths": torch.tensor([len(r) for r, _, _ in rings]),
        "poly_ring_image": torch.tensor([i for _, i, _ in rings]),
        "poly_ring_slot": torch.tensor([s for _, _, s in rings]),
    }
    out = gt_instance_rles(gt, 48, 40)
    assert [len(x) for x in out] == [2, 3]
    m = [[mask_utils.decode(r).astype(bool) for r in img] for img in out]
    np.testing.assert_array_equal(m[0][0], _expected(48, 40, (2, 6), (2, 10)) | _expected(48, 40, (20, 24), (20, 30)))
    assert m[0][1].sum() == pytest.approx(16 * 16 / 2, abs=16)  # the triangle, about half a 16x16 square
    np.testing.assert_array_equal(m[1][0], _expected(48, 40, (12, 20), (8, 24)))  # crowd: its box
    assert not m[1][1].any() and not m[1][2].any()
    assert all(r["size"] == [48, 40] for img in out for r in img)
