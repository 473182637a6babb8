"""evaluate_coco: parity with plain pycocotools on a saved JSON, known answers, edge cases."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from typing import Any

import numpy as np
import pytest
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from lucidyolo.metrics.coco_eval import (
    BOX_STAT_NAMES,
    dets_to_coco_results,
    evaluate_coco,
    save_results_json,
)
from lucidyolo.metrics.mapping import letterbox_boxes


def _plain_pycocotools(gt_path, res_path, iou_type: str = "bbox") -> np.ndarray:
    """What a user types: pycocotools on the two files, nothing of ours."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(str(gt_path))
        coco_dt = coco_gt.loadRes(str(res_path))
        e = COCOeval(coco_gt, coco_dt, iou_type)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return np.asarray(e.stats, dtype=np.float64)


@pytest.mark.parametrize("seed", [0, 1])
def test_saved_json_scored_by_plain_pycocotools_gives_identical_stats(
    tmp_path, coco_factory, dets_factory, seed
):
    gt = coco_factory(seed)
    dets = dets_factory(gt, seed + 10)
    assert any(a["iscrowd"] for a in gt["annotations"]), "fixture must exercise crowd regions"
    ours = evaluate_coco(gt, dets)
    gt_path = tmp_path / "gt.json"
    gt_path.write_text(json.dumps(gt))
    res_path = save_results_json(dets, tmp_path / "results.json")
    theirs = _plain_pycocotools(gt_path, res_path)
    np.testing.assert_allclose(ours.stats_array(), theirs, rtol=0, atol=1e-12)
    assert list(ours.stats) == list(BOX_STAT_NAMES)
    assert 0.05 < ours.stats["AP"] < 0.95  # a non-trivial operating point, not 0 or 1


def test_perfect_predictions_score_one(random_coco):
    dets = [
        {"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 1.0}
        for a in random_coco["annotations"]
        if not a["iscrowd"]
    ]
    r = evaluate_coco(random_coco, dets)
    for name in ("AP", "AP50", "AP75", "APs", "APm", "APl", "AR10", "AR100", "ARs", "ARm", "ARl"):
        assert r.stats[name] == pytest.approx(1.0, abs=1e-12), name
    assert all(c.ap == pytest.approx(1.0) for c in r.per_class if c.num_gt)


HAND_GT: dict[str, Any] = {
    "images": [{"id": 7, "width": 200, "height": 200}],
    "categories": [{"id": 3, "name": "car"}, {"id": 5, "name": "bus"}],
    "annotations": [
        {"id": 1, "image_id": 7, "category_id": 3, "bbox": [10, 10, 50, 50], "area": 2500, "iscrowd": 0},
        {"id": 2, "image_id": 7, "category_id": 3, "bbox": [100, 100, 60, 60], "area": 3600, "iscrowd": 0},
        {"id": 3, "image_id": 7, "category_id": 3, "bbox": [0, 150, 45, 45], "area": 2025, "iscrowd": 1},
    ],
}
HAND_DETS: list[dict[str, Any]] = [
    {"image_id": 7, "category_id": 3, "bbox": [10, 10, 50, 50], "score": 0.9},  # TP
    {"image_id": 7, "category_id": 3, "bbox": [2, 152, 40, 40], "score": 0.85},  # on the crowd: ignored
    {"image_id": 7, "category_id": 3, "bbox": [150, 0, 40, 40], "score": 0.8},  # FP (medium)
    {"image_id": 7, "category_id": 3, "bbox": [100, 100, 60, 60], "score": 0.7},  # TP
]


def test_hand_built_case_gives_closed_form_ap():
    # PR after ignoring the crowd hit: (P, R) = (1, .5), (.5, .5), (2/3, 1); interpolated
    # precision is 1 on the 51 recall points 0..0.50 and 2/3 on the 50 points .51..1.
    expected = (51 * 1.0 + 50 * (2 / 3)) / 101
    r = evaluate_coco(HAND_GT, HAND_DETS)
    assert r.stats["AP"] == pytest.approx(expected, abs=1e-12)
    assert r.stats["AP50"] == pytest.approx(expected, abs=1e-12)
    assert r.stats["AR1"] == pytest.approx(0.5)
    assert r.stats["AR100"] == pytest.approx(1.0)
    assert r.stats["APs"] == -1.0  # no small ground truth: pycocotools' "undefined"
    car, bus = r.per_class
    assert (car.category_id, car.name, car.num_gt) == (3, "car", 2)
    assert car.ap == pytest.approx(expected, abs=1e-12)
    assert (bus.num_gt, bus.ap) == (0, -1.0)


def test_crowd_detection_would_be_a_false_positive_without_the_crowd_flag():
    gt = copy.deepcopy(HAND_GT)
    gt["annotations"] = gt["annotations"][:2]  # drop the crowd region
    r = evaluate_coco(gt, HAND_DETS)
    assert r.stats["AP"] < (51 + 50 * (2 / 3)) / 101 - 0.05


def test_zero_detections_give_zero_not_a_crash(random_coco):
    r = evaluate_coco(random_coco, [])
    assert r.num_detections == 0
    for name in ("AP", "AP50", "AP75", "AR1", "AR10", "AR100"):
        assert r.stats[name] == 0.0, name
    assert all(v in (0.0, -1.0) for v in r.stats.values())


def test_unknown_category_id_is_refused_not_silently_dropped():
    dets = [dict(HAND_DETS[0], category_id=0)]  # a contiguous label instead of the dataset id
    with pytest.raises(ValueError, match="category_id"):
        evaluate_coco(HAND_GT, dets)


def test_unknown_image_id_is_refused():
    with pytest.raises(ValueError, match="image_id"):
        evaluate_coco(HAND_GT, [dict(HAND_DETS[0], image_id=99)])


def test_ground_truth_and_detections_are_not_mutated(random_coco, dets_factory):
    dets = dets_factory(random_coco, 3)
    gt_before, dets_before = copy.deepcopy(random_coco), copy.deepcopy(dets)
    evaluate_coco(random_coco, dets)
    assert random_coco == gt_before
    assert dets == dets_before


@pytest.mark.parametrize("backend", ["pycocotools", "faster_coco_eval"])
def test_pycocotools_prints_are_captured_not_shown(capsys, backend):
    if backend == "faster_coco_eval":
        pytest.importorskip("faster_coco_eval", reason="the fast-eval extra is not installed")
    r = evaluate_coco(HAND_GT, HAND_DETS, backend=backend)
    assert r.backend == backend
    out = capsys.readouterr().out
    assert out == ""
    assert "Average Precision" in r.log
    assert set(r.timings) == {"index", "load_results", "evaluate", "accumulate", "summarize", "total"}
    assert r.timings["total"] >= r.timings["evaluate"] > 0


def test_result_to_dict_is_json_serialisable():
    d = evaluate_coco(HAND_GT, HAND_DETS).to_dict()
    back = json.loads(json.dumps(d))
    assert back["stats"]["AR100"] == 1.0
    assert back["per_class"][0]["name"] == "car"


def test_dets_to_coco_results_inverts_letterbox_and_maps_category_ids():
    orig_hw = (300, 480)  # H, W
    scale, pad_x, pad_y = 640 / 480, 0.0, 120.0
    orig = np.array([[10.0, 20.0, 110.0, 220.0], [400.0, 5.5, 470.25, 290.0]])
    net = letterbox_boxes(orig, scale, pad_x, pad_y)
    dets = np.zeros((5, 6))  # 2 valid rows + 3 padding rows (score 0)
    dets[:2, :4] = net
    dets[:2, 4] = [0.9, 0.4]
    dets[:2, 5] = [0, 2]
    out = dets_to_coco_results(torch.tensor(dets), 42, [1, 3, 7], scale, pad_x, pad_y, orig_hw)
    assert len(out) == 2
    assert [d["category_id"] for d in out] == [1, 7]
    assert [d["image_id"] for d in out] == [42, 42]
    assert [d["score"] for d in out] == [0.9, 0.4]
    expect_xywh = np.concatenate([orig[:, :2], orig[:, 2:] - orig[:, :2]], axis=1)
    np.testing.assert_allclose([d["bbox"] for d in out], expect_xywh, rtol=0, atol=1e-9)
    json.dumps(out)  # plain Python numbers only


def test_dets_to_coco_results_clips_to_the_original_image():
    # a box reaching into the bottom padding band and past the right edge
    dets = np.array([[600.0, 100.0, 700.0, 600.0, 0.5, 0.0]])
    out = dets_to_coco_results(dets, 1, [1], scale=1.0, pad_x=0.0, pad_y=0.0, orig_hw=(480, 640))
    assert out[0]["bbox"] == [600.0, 100.0, 40.0, 380.0]


def test_dets_to_coco_results_refuses_out_of_range_class():
    with pytest.raises(ValueError, match="class index"):
        dets_to_coco_results(np.array([[0, 0, 5, 5, 0.5, 3]]), 1, [1, 2, 3])


@pytest.mark.realdata
def test_coco128_parity_with_plain_pycocotools_on_real_annotations(tmp_path, real_data, dets_factory):
    gt_path = real_data / "coco128_coco" / "annotations" / "instances_train2017.json"
    gt = json.loads(gt_path.read_text())
    assert any(a["iscrowd"] for a in gt["annotations"])
    dets = dets_factory(gt, 5)
    ours = evaluate_coco(gt, dets)
    theirs = _plain_pycocotools(gt_path, save_results_json(dets, tmp_path / "r.json"))
    np.testing.assert_allclose(ours.stats_array(), theirs, rtol=0, atol=1e-12)
    assert len(ours.per_class) == len(gt["categories"])


@pytest.mark.realdata
def test_coco128_segm_parity_with_plain_pycocotools(tmp_path, real_data):
    gt_path = real_data / "coco128_coco" / "annotations" / "instances_train2017.json"
    gt = json.loads(gt_path.read_text())
    with contextlib.redirect_stdout(io.StringIO()):
        index = COCO(str(gt_path))
    rng = np.random.default_rng(0)
    dets = []
    for a in gt["annotations"]:
        if a["iscrowd"] or rng.random() < 0.2:
            continue
        rle = index.annToRLE(a)
        rle = {"size": rle["size"], "counts": rle["counts"].decode("ascii")}
        dets.append(
            {"image_id": a["image_id"], "category_id": a["category_id"], "segmentation": rle,
             "score": float(rng.uniform(0.1, 1))}
        )
    ours = evaluate_coco(gt, dets, iou_type="segm")
    theirs = _plain_pycocotools(gt_path, save_results_json(dets, tmp_path / "r.json"), "segm")
    np.testing.assert_allclose(ours.stats_array(), theirs, rtol=0, atol=1e-12)
    assert 0.5 < ours.stats["AP"] < 1.0  # 80% recall of exact masks
