"""The COCO GT built from any source is what pycocotools expects."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from lucidyolo.data.coco_gt import build_coco_gt
from lucidyolo.data.layouts import open_source
from tests.task_fields import fields_of


def _perfect_ap(gt: dict, iou_type: str) -> float:
    coco = COCO()
    coco.dataset = gt
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
        dets = [dict(a, score=1.0) for a in gt["annotations"]]
        res = coco.loadRes(dets)
        ev = COCOeval(coco, res, iou_type)
        if iou_type == "keypoints":
            ev.params.kpt_oks_sigmas = np.full(len(gt["categories"][0]["keypoints"]), 0.05)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return float(ev.stats[0])


@pytest.mark.parametrize(("task", "iou_type"), [("det", "bbox"), ("seg", "segm"), ("pose", "keypoints")])
def test_yolo_root_gt_scores_perfectly_against_itself(synth, task, iou_type):
    src = open_source(synth(task, "yolo"), "val", fields_of(task))
    gt = build_coco_gt(src)
    assert len(gt["images"]) == len(src)
    assert len(gt["annotations"]) == src.num_instances
    assert [c["id"] for c in gt["categories"]] == src.category_ids
    assert _perfect_ap(gt, iou_type) == pytest.approx(1.0)


def test_coco_source_reuses_its_annotation_file_with_crowd(synth):
    src = open_source(synth("det", "coco"), "val", fields_of("det"))
    gt = build_coco_gt(src)
    assert gt["images"][0]["file_name"].endswith(".jpg")
    assert len(gt["annotations"]) == src.num_instances
    built = build_coco_gt(src, use_ann_file=False)
    a = sorted(tuple(np.round(x["bbox"], 1)) for x in gt["annotations"])
    b = sorted(tuple(np.round(x["bbox"], 1)) for x in built["annotations"])
    assert np.allclose(a, b, atol=0.1)


def test_obb_gt_carries_rboxes_and_difficult(synth):
    src = open_source(synth("obb", "coco"), "val", fields_of("obb"))
    gt = build_coco_gt(src, use_ann_file=False)
    assert all(len(a["rbox"]) == 5 and a["difficult"] == 0 for a in gt["annotations"])
