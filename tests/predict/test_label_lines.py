"""The tasks' ``label_lines`` hooks: hand-checked rows, and rows that the YOLO reader parses back to the predictions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import shapely

from lucidyolo.data.yolo import read_label_file
from lucidyolo.tasks.registry import get_task

H, W = 100, 200  # image (height, width): x is divided by 200, y by 100


def read_back(tmp_path: Path, lines: list[str], fields: tuple[str, ...], kpt_shape=None):
    """The lines without their confidence column, read by the YOLO reader as a label file of ``fields``."""
    label = tmp_path / "label.txt"
    label.write_text("".join(" ".join(line.split()[:-1]) + "\n" for line in lines))
    meta = {} if kpt_shape is None else {"num_keypoints": kpt_shape[0], "kpt_dims": kpt_shape[1]}
    return read_label_file(label, fields, 4, (H, W), meta)


def rle(mask: np.ndarray) -> dict:
    from pycocotools import mask as mask_utils

    out = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in out["size"]], "counts": out["counts"].decode("ascii")}


def test_det_row_is_normalised_centre_size_then_the_confidence(tmp_path):
    hook = get_task("det").label_lines
    preds = [
        {"box": [10.0, 20.0, 50.0, 60.0], "score": 0.9, "label": 2, "name": "c"},
        {"box": [0.0, 0.0, 200.0, 100.0], "score": 0.25, "label": 0, "name": "a"},
    ]
    lines = hook(predictions=preds, image_hw=(H, W), class_names=["a", "b", "c"], meta={})
    # centre (30, 40) and size (40, 40) px over a 200 x 100 image
    assert lines == [
        "2 0.150000 0.400000 0.200000 0.400000 0.9",
        "0 0.500000 0.500000 1.000000 1.000000 0.25",
    ]
    back = read_back(tmp_path, lines, ())
    np.testing.assert_allclose(back.boxes, [p["box"] for p in preds], atol=1e-6)
    assert hook(predictions=[], image_hw=(H, W), class_names=[], meta={}) == []


def test_seg_row_is_the_outline_of_the_mask(tmp_path):
    mask = np.zeros((H, W), bool)
    # a 40 x 20 px rectangle: corners (20, 10) and (60, 30) on pixel edges
    mask[10:30, 20:60] = True
    mask[80:82, 150:152] = True  # a second, smaller part: a YOLO row holds one ring, the largest
    preds = [
        {"box": [20.0, 10.0, 152.0, 82.0], "score": 0.5, "label": 1, "name": "b", "mask": rle(mask)}
    ]
    (line,) = get_task("seg").label_lines(
        predictions=preds, image_hw=(H, W), class_names=["a", "b"], meta={}
    )
    label, *coords, conf = line.split()
    assert label == "1" and conf == "0.5"
    corners = {
        (round(float(x) * W, 4), round(float(y) * H, 4))
        for x, y in np.reshape(coords, (-1, 2)).astype(float)
    }
    assert corners == {(20, 10), (60, 10), (60, 30), (20, 30)}
    back = read_back(tmp_path, [line], ("polygons",))
    np.testing.assert_allclose(back.boxes, [[20, 10, 60, 30]], atol=1e-6)


def test_seg_row_of_an_empty_mask_is_its_box(tmp_path):
    preds = [
        {
            "box": [20.0, 10.0, 60.0, 30.0],
            "score": 0.5,
            "label": 0,
            "mask": rle(np.zeros((H, W), bool)),
        }
    ]
    (line,) = get_task("seg").label_lines(
        predictions=preds, image_hw=(H, W), class_names=["a"], meta={}
    )
    np.testing.assert_allclose(
        read_back(tmp_path, [line], ("polygons",)).boxes, [[20, 10, 60, 30]], atol=1e-6
    )


def test_obb_row_is_the_four_corners(tmp_path):
    from lucidyolo.structures.geometry import rbox_to_corners

    rbox = np.array([[100.0, 50.0, 60.0, 20.0, 0.3]])
    quad = rbox_to_corners(rbox)[0].astype(np.float64)  # (4, 2)
    preds = [
        {
            "rbox": rbox[0].tolist(),
            "polygon": quad.tolist(),
            "box": [0, 0, 1, 1],
            "score": 0.7,
            "label": 3,
        }
    ]
    (line,) = get_task("obb").label_lines(
        predictions=preds, image_hw=(H, W), class_names=[], meta={}
    )
    values = line.split()
    assert values[0] == "3" and values[-1] == "0.7" and len(values) == 10
    np.testing.assert_allclose(
        np.reshape(values[1:9], (4, 2)).astype(float) * [W, H], quad, atol=1e-4
    )
    back = read_back(tmp_path, [line], ("rboxes",))
    got = shapely.Polygon(rbox_to_corners(back.rboxes)[0])
    # the same rotated box, 1200 px^2
    assert got.symmetric_difference(shapely.Polygon(quad)).area < 1e-2


def test_keypoint_row_marks_points_below_the_threshold_not_labelled(tmp_path):
    preds = [
        {
            "box": [10.0, 20.0, 50.0, 60.0],
            "score": 0.8,
            "label": 0,
            "keypoints": [[20.0, 30.0, 0.9], [40.0, 50.0, 0.2]],
        }
    ]
    (line,) = get_task("keypoints").label_lines(
        predictions=preds, image_hw=(H, W), class_names=["p"], meta={}
    )
    assert line == (
        "0 0.150000 0.400000 0.200000 0.400000 0.100000 0.300000 2.000000 0.200000 0.500000 0.000000 "
        "0.8"
    )
    back = read_back(tmp_path, [line], ("keypoints",), kpt_shape=(2, 3))
    np.testing.assert_allclose(back.keypoints, [[[20, 30], [40, 50]]], atol=1e-6)
    np.testing.assert_array_equal(back.visibility, [[2, 0]])


def test_cls_rows_are_label_and_score_best_first():
    cls = pytest.importorskip("lucidyolo_cls.task").SPEC
    preds = [
        {"rank": 1, "label": 4, "name": "e", "score": 0.75},
        {"rank": 2, "label": 0, "name": "a", "score": 0.1},
    ]
    assert cls.label_lines(predictions=preds, image_hw=(H, W), class_names=[], meta={}) == [
        "4 0.75",
        "0 0.1",
    ]
    assert cls.coco_results is None  # an image class has no COCO results form: --save-json refuses
