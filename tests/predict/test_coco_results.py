"""The tasks' ``coco_results`` hooks: pycocotools loads them, and scores them 1.0 against ground truth they equal."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from lucidyolo.tasks.registry import get_task

H, W = 100, 200


def _coco(images: list[int], annotations: list[dict], categories: int, keypoints: int = 0) -> COCO:
    gt = COCO()
    cats = [{"id": c, "name": str(c)} for c in range(categories)]
    for c in cats if keypoints else ():
        c["keypoints"], c["skeleton"] = [f"k{i}" for i in range(keypoints)], []
    gt.dataset = {
        "images": [{"id": i, "height": H, "width": W} for i in images],
        "annotations": [{"id": n + 1, "iscrowd": 0, **a} for n, a in enumerate(annotations)],
        "categories": cats,
    }
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
    return gt


def _ap50(gt: COCO, results: list[dict], iou_type: str) -> float:
    with contextlib.redirect_stdout(io.StringIO()):
        e = COCOeval(gt, gt.loadRes(results), iou_type)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return float(e.stats[1])


BOXES = [[10.0, 20.0, 50.0, 60.0], [120.0, 10.0, 190.0, 90.0]]


def _det_predictions() -> list[dict]:
    return [
        {"box": b, "score": s, "label": c, "name": str(c)}
        for b, s, c in zip(BOXES, (0.9, 0.6), (0, 1), strict=True)
    ]


def _xywh(b: list[float]) -> list[float]:
    return [b[0], b[1], b[2] - b[0], b[3] - b[1]]


def test_det_results_are_xywh_boxes_that_score_one_against_themselves():
    preds = _det_predictions() + [
        {"box": [0.0, 0.0, 5.0, 5.0], "score": 0.0, "label": 0}
    ]  # rounded to 0: dropped
    results = get_task("det").coco_results(
        predictions=preds, image_id=7, image_hw=(H, W), class_names=["a", "b"], meta={}
    )
    assert results == [
        {"image_id": 7, "category_id": 0, "bbox": _xywh(BOXES[0]), "score": 0.9},
        {"image_id": 7, "category_id": 1, "bbox": _xywh(BOXES[1]), "score": 0.6},
    ]
    gt = _coco(
        [7],
        [
            {"image_id": 7, "category_id": c, "bbox": _xywh(b), "area": _xywh(b)[2] * _xywh(b)[3]}
            for b, c in zip(BOXES, (0, 1), strict=True)
        ],
        2,
    )
    assert _ap50(gt, results, "bbox") == pytest.approx(1.0)


def test_seg_results_carry_the_rle_and_score_one_against_their_masks():
    from pycocotools import mask as mask_utils

    masks = np.zeros((2, H, W), np.uint8)
    masks[0, 20:60, 10:50] = 1
    masks[1, 10:90, 120:150] = 1
    rles = [mask_utils.encode(np.asfortranarray(m)) for m in masks]
    for r in rles:
        r["counts"] = r["counts"].decode("ascii")
    preds = [{**p, "mask": r} for p, r in zip(_det_predictions(), rles, strict=True)]
    results = get_task("seg").coco_results(
        predictions=preds, image_id=3, image_hw=(H, W), class_names=["a", "b"], meta={}
    )
    assert [r["segmentation"] for r in results] == rles and [r["bbox"] for r in results] == [
        _xywh(b) for b in BOXES
    ]
    gt = _coco(
        [3],
        [
            {
                "image_id": 3,
                "category_id": c,
                "segmentation": r,
                "area": float(m.sum()),
                "bbox": _xywh(b),
            }
            for r, m, b, c in zip(rles, masks, BOXES, (0, 1), strict=True)
        ],
        2,
    )
    assert _ap50(gt, results, "segm") == pytest.approx(1.0)


def test_obb_results_hold_the_envelope_the_quadrilateral_and_the_rotated_box():
    from lucidyolo.structures.geometry import rbox_to_corners, rboxes_to_xyxy

    rbox = np.array([[100.0, 50.0, 60.0, 20.0, 0.3]])
    quad, env = rbox_to_corners(rbox)[0].astype(float), rboxes_to_xyxy(rbox)[0].astype(float)
    preds = [
        {
            "rbox": rbox[0].tolist(),
            "polygon": quad.tolist(),
            "box": env.tolist(),
            "score": 0.7,
            "label": 0,
        }
    ]
    (r,) = get_task("obb").coco_results(
        predictions=preds, image_id=1, image_hw=(H, W), class_names=["a"], meta={}
    )
    assert r["bbox"] == pytest.approx(_xywh(env.tolist())) and r["rbox"] == pytest.approx(
        rbox[0].tolist()
    )
    np.testing.assert_allclose(np.reshape(r["segmentation"], (4, 2)), quad)
    loaded = _coco([1], [], 1).loadRes([r])
    assert loaded.loadAnns(loaded.getAnnIds())[0]["area"] == pytest.approx(
        r["bbox"][2] * r["bbox"][3]
    )


def test_keypoint_results_score_one_against_their_points():
    rng = np.random.default_rng(0)
    k = 17  # pycocotools scores person points (17 sigmas)
    points = [
        np.column_stack(
            [rng.uniform(b[0], b[2], k), rng.uniform(b[1], b[3], k), rng.uniform(0.1, 1, k)]
        )
        for b in BOXES
    ]
    preds = [
        {**p, "label": 0, "keypoints": pts.tolist()}
        for p, pts in zip(_det_predictions(), points, strict=True)
    ]
    results = get_task("keypoints").coco_results(
        predictions=preds, image_id=5, image_hw=(H, W), class_names=["p"], meta={"num_keypoints": k}
    )
    np.testing.assert_allclose(np.reshape(results[0]["keypoints"], (k, 3)), points[0])
    gt = _coco(
        [5],
        [
            {
                "image_id": 5,
                "category_id": 0,
                "bbox": _xywh(b),
                "area": _xywh(b)[2] * _xywh(b)[3],
                "num_keypoints": k,
                "keypoints": np.column_stack([pts[:, :2], np.full(k, 2.0)]).ravel().tolist(),
            }
            for b, pts in zip(BOXES, points, strict=True)
        ],
        1,
        keypoints=k,
    )
    assert _ap50(gt, results, "keypoints") == pytest.approx(1.0)
