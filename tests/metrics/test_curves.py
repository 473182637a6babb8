"""Curves and confusion matrices from the metric's own matches: PR area = reported AP50, diagonal = TP."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from lucidyolo.metrics.coco_eval import evaluate_coco
from lucidyolo.metrics.curves import compute_curves, confidence_curves, confusion_matrix
from lucidyolo.metrics.matches import Matches
from lucidyolo.tasks.obb.rotated_map import rotated_map, rotated_matches
from tests.metrics.coco_random_case import only_iou_type, random_coco_case
from tests.tasks.obb.test_rotated_map import _random_upright_set, _to_rbox

BACKENDS = ["pycocotools", "faster_coco_eval"]


def _score(seed: int, iou_type: str, backend: str):
    gt, res = random_coco_case(seed)
    kw = (
        {"kpt_oks_sigmas": [0.06] * (len(res[0]["keypoints"]) // 3)}
        if iou_type == "keypoints"
        else {}
    )
    return (
        gt,
        only_iou_type(res, iou_type),
        evaluate_coco(
            gt, only_iou_type(res, iou_type), iou_type=iou_type, matches=True, backend=backend, **kw
        ),
        kw,
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("iou_type", ["bbox", "segm", "keypoints"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pr_area_is_the_reported_ap50_per_class(seed, iou_type, backend):
    _, _, result, _ = _score(seed, iou_type, backend)
    curves = compute_curves(result.matches)
    assert [c.name for c in result.per_class] == list(curves.matches.names)
    for k, cls in enumerate(result.per_class):
        if cls.ap50 < 0:  # no ground truth: undefined on both sides
            assert np.isnan(curves.ap[k])
        else:
            assert curves.ap[k] == pytest.approx(cls.ap50, abs=1e-9)
            assert curves.precision[k].mean() == pytest.approx(
                cls.ap50, abs=1e-9
            )  # the drawn curve's area
    assert curves.map == pytest.approx(result.stats["AP50"], abs=1e-9)


@pytest.mark.parametrize("iou_type", ["bbox", "segm", "keypoints"])
def test_confusion_diagonal_is_the_metrics_true_positives(iou_type):
    gt, dets, result, kw = _score(4, iou_type, "faster_coco_eval")
    # the oracle: pycocotools run here, its own evalImgs counted at IoU 0.5, area all
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = {**gt, "annotations": [dict(a) for a in gt["annotations"]]}
        coco.createIndex()
        e = COCOeval(coco, coco.loadRes([dict(d) for d in dets]), iouType=iou_type)
        if kw:
            e.params.kpt_oks_sigmas = np.asarray(kw["kpt_oks_sigmas"])
        e.evaluate()
    n_img, n_area = len(e.params.imgIds), len(e.params.areaRng)
    tp = [
        sum(int(np.sum((ev["dtMatches"][0] > 0) & ~ev["dtIgnore"][0].astype(bool)))
            for ev in e.evalImgs[k * n_area * n_img: k * n_area * n_img + n_img] if ev is not None)
        for k in range(len(e.params.catIds))
    ]  # fmt: skip
    cm = confusion_matrix(result.matches, 0.0)
    assert np.diag(cm)[:-1].tolist() == tp and sum(tp) > 0
    curves = compute_curves(result.matches)
    kept = result.matches.scores >= curves.best_conf
    assert np.diag(curves.confusion)[:-1].sum() == int((result.matches.tp & kept).sum())


def test_cross_class_confusion_by_hand():
    gt = {"images": [{"id": 1}], "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0},
                          {"id": 2, "image_id": 1, "category_id": 2, "bbox": [50, 50, 20, 20], "area": 400, "iscrowd": 0}]}  # fmt: skip
    dets = [{"image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20], "score": 0.9},  # TP a
            {"image_id": 1, "category_id": 1, "bbox": [51, 50, 20, 20], "score": 0.8},  # says a on the b (IoU 0.90)
            {"image_id": 1, "category_id": 2, "bbox": [80, 80, 10, 10], "score": 0.7}]  # b on nothing  # fmt: skip
    for backend in BACKENDS:
        m = evaluate_coco(gt, dets, matches=True, backend=backend).matches
        assert m.tp.tolist() == [True, False, False] and m.confused.tolist() == [-1, 1, -1]
        # rows true (a, b, background), columns predicted
        assert confusion_matrix(m, 0.0).tolist() == [[1, 0, 0], [1, 0, 0], [0, 1, 0]]
        assert confusion_matrix(m, 0.75).tolist() == [[1, 0, 0], [1, 0, 0], [0, 0, 0]]
        assert confusion_matrix(m, 0.85).tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 0]]


def test_confidence_curves_and_best_threshold_by_hand():
    # class 0: ranked TP, FP, TP with 3 GT; class 1: one FP, 1 GT; class 2: no GT (left out of every mean)
    m = Matches.build([0.9, 0.6, 0.3, 0.5, 0.8], [0, 0, 0, 1, 2], [1, 0, 1, 0, 0], [3, 1, 0])
    conf = np.array([0.0, 0.4, 0.7, 0.95])
    p, r, f1 = confidence_curves(m, conf)
    assert p[0].tolist() == pytest.approx([2 / 3, 1 / 2, 1.0, 0.0])
    assert r[0].tolist() == pytest.approx([2 / 3, 1 / 3, 1 / 3, 0.0])
    assert f1[0].tolist() == pytest.approx([2 / 3, 0.4, 0.5, 0.0])
    assert p[1].tolist() == [0.0] * 4 and r[1].tolist() == [0.0] * 4 and np.isnan(p[2]).all()
    curves = compute_curves(m, conf)
    assert curves.best_conf == 0.0 and curves.mean_precision == pytest.approx(1 / 3)
    assert curves.mean_recall == pytest.approx(1 / 3) and curves.mean_f1 == pytest.approx(1 / 3)
    # AP of class 0 by hand: precision envelope 1 up to recall 1/3, 2/3 up to 2/3, then 0 (recall 1 never reached)
    assert curves.ap[0] == pytest.approx((34 * 1.0 + 33 * (2 / 3)) / 101)
    assert curves.confusion.tolist() == [[2, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 0]]


def test_matches_refuse_ragged_arrays():
    with pytest.raises(ValueError, match="Matches.tp has shape"):
        Matches.build([0.5, 0.4], [0, 0], [True], [1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rotated_matches_pr_area_is_rotated_ap50_and_equal_to_pycocotools_upright(seed):
    num_classes = 4
    images = _random_upright_set(seed, num_classes=num_classes)
    dets = [(_to_rbox(dxy, dwh), score, dlab) for _, (dxy, dwh, score, dlab) in images]
    gts = [(_to_rbox(xy, wh), glab, np.zeros(len(glab), bool)) for (xy, wh, glab), _ in images]
    m = rotated_matches(dets, gts, num_classes, max_dets=100)
    curves = compute_curves(m)
    ref = rotated_map(dets, gts, num_classes, max_dets=100)
    np.testing.assert_allclose(curves.ap, ref.ap50, atol=1e-9)
    # upright rotated boxes are COCO boxes: the same matches, cross-class confusions included
    coco_gt = {"images": [{"id": i + 1} for i in range(len(images))],
               "categories": [{"id": c, "name": str(c)} for c in range(num_classes)],
               "annotations": [{"id": 1000 * i + j + 1, "image_id": i + 1, "category_id": int(glab[j]),
                                "bbox": [*map(float, xy[j]), *map(float, wh[j])], "area": float(wh[j].prod()),
                                "iscrowd": 0}
                               for i, ((xy, wh, glab), _) in enumerate(images) for j in range(len(glab))]}  # fmt: skip
    coco_dets = [{"image_id": i + 1, "category_id": int(dlab[j]), "bbox": [*map(float, dxy[j]), *map(float, dwh[j])],
                  "score": float(score[j])}
                 for i, (_, (dxy, dwh, score, dlab)) in enumerate(images) for j in range(len(dlab))]  # fmt: skip
    c = evaluate_coco(coco_gt, coco_dets, matches=True, backend="pycocotools").matches
    assert m.num_gt.tolist() == c.num_gt.tolist()
    cm_rot, cm_coco = confusion_matrix(m, 0.0), confusion_matrix(c, 0.0)
    assert cm_rot.tolist() == cm_coco.tolist() and cm_rot[:-1, :-1].sum() > np.trace(
        cm_rot[:-1, :-1]
    )


def test_difficult_detections_are_ignored_not_false():
    g = np.array([[100.0, 100.0, 30.0, 20.0, 0.0]])
    m = rotated_matches(
        [(g.copy(), np.array([0.9]), np.array([0]))], [(g, np.array([0]), np.array([True]))], 1
    )
    assert m.ignored.tolist() == [True] and m.num_gt.tolist() == [0]
    assert confusion_matrix(m, 0.0).tolist() == [[0, 0], [0, 0]]
