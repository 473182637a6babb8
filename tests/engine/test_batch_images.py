"""Batch images: each task's ``target_rows`` drawn back by its ``draw`` lands on the pixels the labels name.

Hand-derived cases on a black 128 px image: an upright box, a rotated box at 0 and
90 degrees, a square polygon, keypoints with and without a declared skeleton, a class label.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lucidyolo.predict.draw import SIDE_COLOURS, caption, class_colour
from lucidyolo.tasks.registry import get_task

S = 128
NAMES = ["circle", "square", "triangle", "hexagon"]


def _black() -> np.ndarray:
    return np.zeros((S, S, 3), np.uint8)


def _det_gt(boxes: list[list[float]], labels: list[int]) -> dict[str, torch.Tensor]:
    """One image with the given boxes plus one padding slot (mask False) that must give no row."""
    m = len(boxes) + 1
    b = torch.zeros(1, m, 4)
    b[0, : len(boxes)] = torch.tensor(boxes)
    lab = torch.zeros(1, m, dtype=torch.long)
    lab[0, : len(labels)] = torch.tensor(labels)
    mask = torch.zeros(1, m, dtype=torch.bool)
    mask[0, : len(boxes)] = True
    return {
        "boxes": b,
        "labels": lab,
        "mask": mask,
        "difficult": torch.zeros(1, m, dtype=torch.bool),
    }


def test_a_target_box_is_drawn_back_on_its_own_pixels():
    spec = get_task("det")
    gt = _det_gt([[20.0, 30.0, 60.0, 90.0]], [1])
    rows = spec.target_rows(gt=gt, image_hw=(S, S), class_names=NAMES, meta={})
    assert len(rows) == 1 and len(rows[0]) == 1
    row = rows[0][0]
    assert row["box"] == [20.0, 30.0, 60.0, 90.0] and row["label"] == 1 and row["name"] == "square"
    assert math.isnan(row["score"])
    drawn = np.asarray(spec.draw(image=_black(), predictions=rows[0], class_names=NAMES, meta={}))
    on = (drawn == np.array(class_colour(1), np.uint8)).all(-1)  # (H, W)
    ys, xs = np.nonzero(on)
    # 1 px outline at 128 px (width max(1, round(128 / 320))); the caption bar sits above, 11 px tall
    assert ys.min() == 30 - 11 and ys.max() == 90 and xs.min() == 20
    assert np.flatnonzero(on[90]).tolist() == list(
        range(20, 61)
    )  # the bottom edge, x1..x2 inclusive
    assert on[31:91, 20].all() and on[31:91, 60].all()  # both sides below the caption
    assert not on[31:90, 21:60].any()  # the inside stays as it was


def test_a_label_is_captioned_by_its_name_alone():
    assert caption("circle", float("nan")) == "circle"
    assert caption("circle", 0.5) == "circle 0.50"


@pytest.mark.parametrize(
    ("theta", "corners", "envelope"),
    [
        (0.0, [[44, 54], [84, 54], [84, 74], [44, 74]], [44, 54, 84, 74]),
        # a quarter turn: the 40 px side runs down the image, the 20 px side across it
        (math.pi / 2, [[74, 44], [74, 84], [54, 84], [54, 44]], [54, 44, 74, 84]),
    ],
)
def test_a_target_rotated_box_gives_its_corners_and_envelope(theta, corners, envelope):
    spec = get_task("obb")
    gt = _det_gt([[0.0, 0.0, 1.0, 1.0]], [2])
    gt["rboxes"] = torch.zeros(1, 2, 5)
    gt["rboxes"][0, 0] = torch.tensor([64.0, 64.0, 40.0, 20.0, theta])
    (row,) = spec.target_rows(gt=gt, image_hw=(S, S), class_names=NAMES, meta={})[0]
    assert np.allclose(row["polygon"], corners, atol=1e-4) and np.allclose(
        row["box"], envelope, atol=1e-4
    )
    drawn = np.asarray(spec.draw(image=_black(), predictions=[row], class_names=NAMES, meta={}))
    on = (drawn == np.array(class_colour(2), np.uint8)).all(-1)
    x1, y1, x2, y2 = envelope
    assert on[y2, x1 + 2 : x2 - 1].all()  # the lowest edge, drawn as a line between two corners
    assert not on[y1 + 2 : y2 - 1, x1 + 2 : x2 - 1].any()


def test_a_target_polygon_becomes_the_mask_of_the_pixels_inside_it():
    from pycocotools import mask as mask_utils

    spec = get_task("seg")
    gt = _det_gt([[20.0, 20.0, 60.0, 60.0]], [0])
    gt.update(
        {
            "poly_points": torch.tensor([[20.0, 20.0], [60.0, 20.0], [60.0, 60.0], [20.0, 60.0]]),
            "poly_ring_lengths": torch.tensor([4]),
            "poly_ring_image": torch.tensor([0]),
            "poly_ring_slot": torch.tensor([0]),
        }
    )
    (row,) = spec.target_rows(gt=gt, image_hw=(S, S), class_names=NAMES, meta={})[0]
    m = mask_utils.decode(row["mask"]).astype(bool)
    assert m.shape == (S, S) and m.sum() == 40 * 40  # pixel centres 20.5 .. 59.5 on both axes
    assert m[20:60, 20:60].all()
    drawn = np.asarray(spec.draw(image=_black(), predictions=[row], class_names=NAMES, meta={}))
    assert (drawn[40, 40] > 0).any() and not drawn[
        100, 100
    ].any()  # filled inside, untouched far outside


def test_target_keypoints_show_labelled_points_and_the_datas_skeleton():
    spec = get_task("keypoints")
    gt = _det_gt([[0.0, 0.0, 10.0, 10.0]], [0])
    kp = torch.zeros(1, 2, 3, 2)
    kp[0, 0] = torch.tensor([[20.0, 100.0], [100.0, 100.0], [60.0, 60.0]])
    vis = torch.zeros(1, 2, 3, dtype=torch.long)
    vis[0, 0] = torch.tensor([2, 1, 0])  # visible, occluded (labelled), absent
    gt.update({"keypoints": kp, "visibility": vis})
    (row,) = spec.target_rows(gt=gt, image_hw=(S, S), class_names=NAMES, meta={})[0]
    assert row["keypoints"] == [[20.0, 100.0, 1.0], [100.0, 100.0, 1.0], [60.0, 60.0, 0.0]]
    white = np.array(SIDE_COLOURS["centre"], np.uint8)  # no flip_idx: every point is a centre point
    limb = np.asarray(
        spec.draw(image=_black(), predictions=[row], class_names=NAMES, meta={"skeleton": [[0, 1]]})
    )
    bare = np.asarray(
        spec.draw(image=_black(), predictions=[row], class_names=NAMES, meta={"skeleton": []})
    )
    assert (limb[100, 60] == white).all() and not bare[100, 60].any()  # the limb's midpoint
    assert (bare[100, 20] == white).all() and (
        bare[100, 100] == white
    ).all()  # both labelled points
    assert not bare[60, 60].any()  # the absent point is not drawn


def test_a_class_label_is_one_row_and_an_unknown_class_none():
    import importlib.util

    if importlib.util.find_spec("lucidyolo_cls") is None:
        pytest.skip("the cls plugin is not installed")
    spec = get_task("cls")
    rows = spec.target_rows(
        gt={"image_class": torch.tensor([2, -1])}, image_hw=(S, S), class_names=NAMES, meta={}
    )
    assert [[(r["label"], r["name"]) for r in image] for image in rows] == [[(2, "triangle")], []]
    spec.draw(
        image=_black(), predictions=rows[0], class_names=NAMES, meta={}
    )  # a label draws without a score


def test_the_grid_puts_tiles_row_major_and_scales_them_to_fit():
    from PIL import Image

    from lucidyolo.engine.run.batch_images import grid

    tiles = [Image.new("RGB", (10, 10), (k * 40, 0, 0)) for k in range(5)]
    g = grid(tiles)
    assert g.size == (30, 20)  # 3 columns (ceil sqrt 5) x 2 rows
    assert (
        g.getpixel((15, 5)) == (40, 0, 0)
        and g.getpixel((5, 15)) == (120, 0, 0)
        and g.getpixel((25, 15)) == (114, 114, 114)
    )
    small = grid(tiles, max_side=15)  # 5 px tiles
    assert small.size == (15, 10) and small.getpixel((12, 2)) == (80, 0, 0)


def test_plot_batches_zero_or_a_task_without_target_rows_draws_nothing(tmp_path):
    from lucidyolo.engine.run.batch_images import BatchImages, batch_images_callback

    kwargs = {
        "draw": print,
        "target_rows": print,
        "predict": None,
        "class_names": NAMES,
        "meta": {},
    }
    assert batch_images_callback(0, tmp_path, **kwargs) is None
    assert batch_images_callback(2, tmp_path, **{**kwargs, "target_rows": None}) is None
    assert isinstance(batch_images_callback(2, tmp_path, **kwargs), BatchImages)


def test_a_coco_skeleton_is_read_zero_based_and_impossible_limbs_are_left_out():
    from lucidyolo.tasks.keypoints.fields import keypoint_skeleton

    data = {
        "categories": [
            {"id": 3, "keypoints": ["a", "b", "c"], "skeleton": [[1, 2], [2, 3], [3, 4], ["x", 1]]}
        ]
    }
    assert keypoint_skeleton(data, [3], 3) == [[0, 1], [1, 2]]
    assert keypoint_skeleton({"categories": [{"id": 3, "keypoints": ["a"]}]}, [3], 1) is None


def test_keypoints_draw_an_image_without_predictions():
    """An early epoch's batch may hold no prediction above the threshold: the image comes back as it was."""
    drawn = np.asarray(
        get_task("keypoints").draw(image=_black(), predictions=[], class_names=NAMES, meta={})
    )
    assert drawn.shape == (S, S, 3) and not drawn.any()
