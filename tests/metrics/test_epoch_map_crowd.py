"""EpochMAP with crowd regions equals plain pycocotools on the same COCO JSON and detections.

The ground truth is written by hand in COCO form (non-contiguous category ids,
crowd regions, a category whose only box is a crowd); the metric gets the same
boxes as padded batches with ``gt_crowd``. pycocotools reads the files as a user
would, so nothing of ours is on the reference side.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from lucidyolo.metrics.epoch_map import EpochMAP

CATEGORY_IDS = [1, 4, 9]  # contiguous labels 0, 1, 2 on the metric's side


def _ann(k: int, image: int, cat: int, x: float, y: float, w: float, h: float, crowd: int = 0) -> dict:
    # area = w * h, as the metric writes it, so the small/medium/large ranges agree too
    return {"id": k, "image_id": image, "category_id": cat, "bbox": [x, y, w, h], "area": w * h, "iscrowd": crowd}


GT = {
    "images": [{"id": i, "width": 320, "height": 320, "file_name": f"{i}.jpg"} for i in (11, 12, 13, 14)],
    "categories": [{"id": c, "name": f"c{c}"} for c in CATEGORY_IDS],
    "annotations": [
        # image 11: two people, a crowd of people behind them, one dog
        _ann(1, 11, 1, 10, 10, 40, 80),
        _ann(2, 11, 1, 60, 12, 36, 76),
        _ann(3, 11, 1, 120, 0, 200, 120, crowd=1),
        _ann(4, 11, 4, 20, 200, 60, 50),
        # image 12: a person standing inside a crowd region, a crowd of dogs
        _ann(5, 12, 1, 40, 40, 30, 60),
        _ann(6, 12, 1, 0, 0, 200, 200, crowd=1),
        _ann(7, 12, 4, 220, 220, 90, 90, crowd=1),
        # image 13: category 9 exists only as a crowd (no positives anywhere)
        _ann(8, 13, 9, 50, 50, 100, 100, crowd=1),
        _ann(9, 13, 4, 200, 10, 50, 40),
        # image 14: no ground truth at all
    ],
}

DETS = [
    # image 11
    {"image_id": 11, "category_id": 1, "bbox": [11, 11, 39, 78], "score": 0.95},  # TP on ann 1
    {"image_id": 11, "category_id": 1, "bbox": [150, 20, 30, 60], "score": 0.9},  # inside the crowd: ignored
    {"image_id": 11, "category_id": 1, "bbox": [62, 14, 30, 70], "score": 0.6},  # TP on ann 2 (IoU ~0.76)
    {"image_id": 11, "category_id": 1, "bbox": [100, 100, 60, 60], "score": 0.7},  # IoA 0.22 with crowd: FP
    {"image_id": 11, "category_id": 1, "bbox": [12, 12, 38, 76], "score": 0.5},  # duplicate of ann 1: FP
    {"image_id": 11, "category_id": 4, "bbox": [22, 205, 55, 45], "score": 0.8},  # TP on ann 4
    {"image_id": 11, "category_id": 4, "bbox": [200, 10, 40, 40], "score": 0.75},  # dog on the person crowd: FP
    # image 12
    {"image_id": 12, "category_id": 1, "bbox": [41, 42, 29, 57], "score": 0.85},  # TP on ann 5, not the crowd
    {"image_id": 12, "category_id": 1, "bbox": [100, 100, 50, 50], "score": 0.8},  # in the crowd: ignored
    {"image_id": 12, "category_id": 1, "bbox": [205, 5, 40, 40], "score": 0.4},  # outside the crowd: FP
    {"image_id": 12, "category_id": 4, "bbox": [230, 230, 40, 40], "score": 0.65},  # in the dog crowd: ignored
    # image 13
    {"image_id": 13, "category_id": 9, "bbox": [60, 60, 50, 50], "score": 0.9},  # class with no positives
    {"image_id": 13, "category_id": 4, "bbox": [60, 60, 40, 40], "score": 0.55},  # FP
    {"image_id": 13, "category_id": 4, "bbox": [195, 12, 50, 40], "score": 0.3},  # TP on ann 9 (low score)
    # image 14
    {"image_id": 14, "category_id": 1, "bbox": [0, 0, 20, 20], "score": 0.35},  # FP
]


def _pycocotools_stats(tmp_path) -> np.ndarray:
    """What a user types: pycocotools on the two JSON files."""
    gt_path, res_path = tmp_path / "gt.json", tmp_path / "res.json"
    gt_path.write_text(json.dumps(GT))
    res_path.write_text(json.dumps(DETS))
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(str(gt_path))
        e = COCOeval(coco_gt, coco_gt.loadRes(str(res_path)), "bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
    return np.asarray(e.stats, dtype=np.float64)


def _padded_batch(image_ids: list[int], k: int = 8, m: int = 5) -> dict[str, torch.Tensor]:
    """The metric's inputs for these images: padded xyxy GT with crowd flags, score-0 padding rows."""
    label = {c: i for i, c in enumerate(CATEGORY_IDS)}
    b = len(image_ids)
    dets = torch.zeros(b, k, 6)
    gt_boxes, gt_labels = torch.zeros(b, m, 4), torch.zeros(b, m, dtype=torch.long)
    gt_mask, gt_crowd = torch.zeros(b, m, dtype=torch.bool), torch.zeros(b, m, dtype=torch.bool)
    for row, image in enumerate(image_ids):
        anns = [a for a in GT["annotations"] if a["image_id"] == image]
        for j, a in enumerate(anns):
            x, y, w, h = a["bbox"]
            gt_boxes[row, j] = torch.tensor([x, y, x + w, y + h])
            gt_labels[row, j] = label[a["category_id"]]
            gt_mask[row, j] = True
            gt_crowd[row, j] = bool(a["iscrowd"])
        for j, d in enumerate(d for d in DETS if d["image_id"] == image):
            x, y, w, h = d["bbox"]
            dets[row, j] = torch.tensor([x, y, x + w, y + h, d["score"], label[d["category_id"]]])
    return dict(dets=dets, gt_boxes=gt_boxes, gt_labels=gt_labels, gt_mask=gt_mask,
                image_ids=torch.tensor(image_ids), gt_crowd=gt_crowd)


def _epoch_map(with_crowd: bool) -> EpochMAP:
    metric = EpochMAP(num_classes=len(CATEGORY_IDS))
    for ids in ([11, 12], [13, 14]):  # two batches, as validation would deliver them
        batch = _padded_batch(ids)
        if not with_crowd:
            batch.pop("gt_crowd")
        metric.update(**batch)
    metric.compute()
    return metric


def test_epoch_map_with_crowds_equals_pycocotools_on_the_json(tmp_path):
    expected = _pycocotools_stats(tmp_path)
    metric = _epoch_map(with_crowd=True)
    assert metric.last_result is not None
    # Coordinates are integers (exact in float32), so both sides run pycocotools'
    # arithmetic on identical boxes; scores round in float32 but only their order
    # within a class matters to AP, and no two scores of a class tie. Equal to the
    # last bit; 1e-12 is slack.
    np.testing.assert_allclose(metric.last_result.stats_array(), expected, rtol=0, atol=1e-12)
    assert 0.3 < expected[0] < 0.9  # a non-trivial mAP50-95: neither all hits nor all misses
    # the class that exists only as a crowd has no positives: undefined, left out of the mean
    assert [c.ap for c in metric.last_result.per_class][2] == -1.0


def test_without_crowd_flags_the_same_boxes_score_lower():
    # Crowd boxes become positives nobody can match and detections on them false
    # positives: the flag, not the boxes, is what the equality above depends on.
    with_crowd, without = _epoch_map(True).last_result, _epoch_map(False).last_result
    assert with_crowd is not None and without is not None
    assert without.stats["AP"] < with_crowd.stats["AP"] - 0.05
    assert without.stats["AP50"] < with_crowd.stats["AP50"] - 0.05
