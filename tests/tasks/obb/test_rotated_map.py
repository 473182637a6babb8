"""Rotated mAP: polygon IoU, hand-derived AP goldens, the DOTA difficult rule, VOC AP, and pycocotools on upright boxes."""

from __future__ import annotations

import contextlib
import io
import math
from typing import Any

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from lucidyolo.tasks.obb.rotated_map import (
    ap_101,
    ap_voc,
    match_detections,
    rotated_iou,
    rotated_map,
    voc_map50,
)

# ----------------------------------------------------------------- helpers


def _far_boxes(n: int, size: float = 20.0) -> np.ndarray:
    """``n`` disjoint upright boxes on a row, 100 px apart."""
    return np.array([[50.0 + 100.0 * i, 50.0, size, size, 0.0] for i in range(n)])


def _ranked_case(pattern: str, npos: int) -> tuple[list, list]:
    """One image, one class: ``npos`` GTs; detections ranked in ``pattern`` order (T = hits the next unused GT, F = far away)."""
    gts = _far_boxes(npos)
    rows, k = [], 0
    for p in pattern:
        if p == "T":
            rows.append(gts[k])
            k += 1
        else:
            rows.append([5000.0 + 100.0 * len(rows), 5000.0, 20.0, 20.0, 0.0])
    scores = np.linspace(0.9, 0.1, len(pattern))
    dets = [(np.array(rows), scores, np.zeros(len(rows), np.int64))]
    return dets, [(gts, np.zeros(npos, np.int64), np.zeros(npos, bool))]


# --------------------------------------------------------------------- IoU


def test_iou_45_degrees_hand_derived():
    # Unit square vs itself turned 45 deg about its centre: the diamond's 4 tips stick out of the
    # square as right isosceles triangles of height h = (sqrt2 - 1) / 2 (tip at sqrt2/2 from the
    # centre, square edge at 1/2), each of area h^2; inter = 1 - 4 h^2 = 2 (sqrt2 - 1).
    a = np.array([[3.0, 4.0, 1.0, 1.0, 0.0]])
    b = np.array([[3.0, 4.0, 1.0, 1.0, math.pi / 4]])
    inter = 2 * (math.sqrt(2) - 1)
    assert rotated_iou(a, b)[0, 0] == pytest.approx(inter / (2 - inter), abs=1e-6)
    assert rotated_iou(b, b)[0, 0] == pytest.approx(1.0, abs=1e-6)


def test_iou_upright_and_guards():
    a = np.array([[0.0, 0.0, 2.0, 2.0, 0.0]])
    b = np.array([
        [1.0, 0.0, 2.0, 2.0, 0.0],  # half overlap: inter 2, union 6
        [10.0, 0.0, 2.0, 2.0, 0.0],  # disjoint
        [0.0, 0.0, 0.0, 2.0, 0.0],  # zero area
        [np.nan, 0.0, 2.0, 2.0, 0.0],  # non-finite
        [2.0, 0.0, 2.0, 2.0, 0.0],  # touching edge
        [0.0, 0.0, -2.0, 2.0, 0.0],  # inverted: empty, not mirrored
    ])  # fmt: skip
    iou = rotated_iou(a, b)
    np.testing.assert_allclose(iou, [[1 / 3, 0.0, 0.0, 0.0, 0.0, 0.0]], atol=1e-12)
    assert rotated_iou(np.zeros((0, 5)), b).shape == (0, 6)
    assert rotated_iou(a, np.zeros((0, 5))).shape == (1, 0)


def test_iou_symmetric_and_far_from_origin():
    rng = np.random.default_rng(3)
    a = np.column_stack([rng.uniform(0, 50, (20, 2)), rng.uniform(5, 30, (20, 2)), rng.uniform(-1, 2, 20)])
    b = a + np.column_stack([rng.normal(0, 3, (20, 2)), np.zeros((20, 3))])
    iou = rotated_iou(a, b)
    np.testing.assert_allclose(iou, rotated_iou(b, a).T, atol=1e-12)
    # Far from the origin (a 20k-px DOTA scene) the float32 corner rounding stays relative to the box size.
    shift = np.array([20000.0, 15000.0, 0, 0, 0])
    np.testing.assert_allclose(rotated_iou(a + shift, b + shift), iou, atol=1e-6)


# -------------------------------------------------------------- AP goldens


def test_perfect_detections_give_one():
    rng = np.random.default_rng(0)
    dets, gts = [], []
    for _ in range(3):
        n = 5
        rb = np.column_stack([rng.uniform(0, 500, (n, 2)), rng.uniform(10, 40, (n, 2)), rng.uniform(-0.7, 2.3, n)])
        lab = rng.integers(0, 3, n)
        gts.append((rb, lab, np.zeros(n, bool)))
        dets.append((rb.copy(), rng.uniform(0.1, 1.0, n), lab))
    r = rotated_map(dets, gts, num_classes=3)
    assert (r.map50_95, r.map50, r.map75) == (pytest.approx(1.0), pytest.approx(1.0), pytest.approx(1.0))
    assert voc_map50(dets, gts, 3).map50 == pytest.approx(1.0)
    assert voc_map50(dets, gts, 3, use_07_metric=False).map50 == pytest.approx(1.0)


def test_fp_then_tp_101_point_by_hand():
    # 2 GTs; ranked FP, TP (second GT missed). tp = [0, 1], fp = [1, 1]
    # recall = [0, .5], precision = [0, .5]; envelope = [.5, .5].
    # Recall points 0 .. .50 (51 of them) first reached at ranks 1, 2 -> .5; .51 .. 1 never -> 0.
    # AP = 51 * .5 / 101 = 25.5 / 101.
    dets, gts = _ranked_case("FT", npos=2)
    r = rotated_map(dets, gts, num_classes=1)
    assert r.map50_95 == pytest.approx(25.5 / 101, abs=1e-12)
    assert r.map50 == pytest.approx(25.5 / 101, abs=1e-12)
    # TP first: precision [1, .5], envelope [1, .5]; recall 0 .. .50 reached at rank 1 -> 1: AP = 51 / 101.
    dets, gts = _ranked_case("TF", npos=2)
    assert rotated_map(dets, gts, num_classes=1).map50_95 == pytest.approx(51 / 101, abs=1e-12)


def test_longer_ranking_all_three_ap_rules_by_hand():
    # 4 GTs, ranked T F T T F: tp = 1 1 2 3 3, fp = 0 1 1 1 2
    # recall    = .25 .25 .50 .75 .75
    # precision = 1   .5  2/3 .75 .6      envelope = 1 .75 .75 .75 .6
    dets, gts = _ranked_case("TFTTF", npos=4)
    # 101-point: recall 0 .. .25 (26 points) at rank 1 -> 1; .26 .. .50 (25) at rank 3 -> .75;
    # .51 .. .75 (25) at rank 4 -> .75; .76 .. 1 -> 0.  AP = (26 + 50 * .75) / 101 = 63.5 / 101.
    assert rotated_map(dets, gts, 1).map50 == pytest.approx(63.5 / 101, abs=1e-12)
    # VOC07 11-point: max precision at recall >= t: t = 0, .1, .2 -> 1; t = .3 .. .7 -> max(2/3, .75, .6) = .75;
    # t = .8, .9, 1 -> 0.  AP = (3 + 5 * .75) / 11 = 6.75 / 11.
    assert voc_map50(dets, gts, 1).map50 == pytest.approx(6.75 / 11, abs=1e-12)
    # All-point: recall steps 0->.25 at envelope 1, .25->.5 at .75, .5->.75 at .75: .25 + .1875 + .1875.
    assert voc_map50(dets, gts, 1, use_07_metric=False).map50 == pytest.approx(0.625, abs=1e-12)


def test_ap_functions_direct():
    status = np.array([[1, 0, 1, 1, 0]], np.int8)
    assert ap_101(status, 4)[0] == pytest.approx(63.5 / 101)
    assert ap_voc(status[0], 4) == pytest.approx(6.75 / 11)
    # Ignored rows change nothing.
    with_ignored = np.array([[-1, 1, 0, -1, 1, 1, -1, 0]], np.int8)
    assert ap_101(with_ignored, 4)[0] == pytest.approx(63.5 / 101)
    assert ap_voc(with_ignored[0], 4) == pytest.approx(6.75 / 11)
    assert ap_voc(with_ignored[0], 4, use_07_metric=False) == pytest.approx(0.625)
    assert ap_101(np.zeros((2, 0), np.int8), 3).tolist() == [0.0, 0.0]


def test_iou_threshold_sweep_by_hand():
    # One GT [0, 10] x [0, 10]; one detection shifted by 2 px in x: inter 80, union 120, IoU 2/3.
    # TP at thresholds .50 .55 .60 .65 (AP 1), FP from .70 on (AP 0): AP50-95 = 4 / 10; AP75 = 0.
    gts = [(np.array([[5.0, 5.0, 10.0, 10.0, 0.0]]), np.array([0]), np.array([False]))]
    dets = [(np.array([[7.0, 5.0, 10.0, 10.0, 0.0]]), np.array([0.9]), np.array([0]))]
    r = rotated_map(dets, gts, 1)
    assert r.map50_95 == pytest.approx(0.4)
    assert r.map50 == pytest.approx(1.0)
    assert r.map75 == pytest.approx(0.0)
    np.testing.assert_allclose(r.ap[:, 0], [1, 1, 1, 1, 0, 0, 0, 0, 0, 0])


def test_max_dets_caps_per_image():
    # 3 FPs above one TP in one image: with max_dets=3 the TP is cut (AP 0); without a cap the TP is rank 4.
    dets, gts = _ranked_case("FFFT", npos=1)
    assert rotated_map(dets, gts, 1, max_dets=3).map50 == 0.0
    # Uncapped: rank 4, precision 1/4, recall 1 -> every recall point at .25.
    assert rotated_map(dets, gts, 1, max_dets=None).map50 == pytest.approx(0.25)


def test_class_without_gt_is_left_out_and_label_checks():
    dets, gts = _ranked_case("TF", npos=2)
    extra = (np.array([[900.0, 900.0, 10.0, 10.0, 0.0]]), np.array([0.95]), np.array([1]))  # class 1, no GT
    both = [(np.concatenate([dets[0][0], extra[0]]), np.concatenate([dets[0][1], extra[1]]),
             np.concatenate([dets[0][2], extra[2]]))]  # fmt: skip
    r = rotated_map(both, gts, num_classes=3)
    assert np.isnan(r.ap50_95[1]) and np.isnan(r.ap50_95[2])
    assert r.map50_95 == pytest.approx(51 / 101)
    assert r.npos.tolist() == [2, 0, 0]
    # Nothing scorable: NaN, not an exception.
    empty = rotated_map([(np.zeros((0, 5)), np.zeros(0), np.zeros(0))], [(np.zeros((0, 5)), np.zeros(0), np.zeros(0, bool))], 2)
    assert np.isnan(empty.map50_95)
    with pytest.raises(ValueError, match="label outside"):
        rotated_map(both, gts, num_classes=1)
    with pytest.raises(ValueError, match="images"):
        rotated_map(both, gts + gts, num_classes=2)


# ---------------------------------------------------------- difficult rule


def test_match_difficult_rule_statuses():
    # GTs: 0 easy, 1 difficult. Detections (score order):
    #   d0 IoU .9 with easy 0 -> TP; d1 duplicate on easy 0 (.8), also .6 with the difficult -> ignored;
    #   d2 only on the difficult (.7) -> ignored; d3 duplicate on easy 0 only -> FP; d4 nothing -> FP.
    ious = np.array([[0.9, 0.0], [0.8, 0.6], [0.0, 0.7], [0.85, 0.0], [0.1, 0.2]])
    status = match_detections(ious, np.array([False, True]), np.array([0.5, 0.75]))
    assert status[0].tolist() == [1, -1, -1, 0, 0]
    # At .75 the difficult is only reached by nothing (.6, .7 < .75): d1, d2 become FP.
    assert status[1].tolist() == [1, 0, 0, 0, 0]


def test_match_takes_best_unmatched_easy_first():
    # d0 prefers GT 1 (.9); d1 then takes GT 0 (.6) although GT 1 is its best (.95, already taken).
    ious = np.array([[0.7, 0.9, 0.8], [0.6, 0.95, 0.0]])
    difficult = np.array([False, False, True])
    assert match_detections(ious, difficult, np.array([0.5]))[0].tolist() == [1, 1]
    # An easy unmatched GT wins over a higher-IoU difficult one.
    assert match_detections(np.array([[0.55, 0.0, 0.99]]), difficult, np.array([0.5]))[0].tolist() == [1]


def test_detection_on_difficult_gt_is_ignored_not_fp():
    # 2 easy GTs + 1 difficult GT; detections ranked: TP, D (on the difficult), FP, TP.
    easy = _far_boxes(2)
    hard = np.array([[500.0, 50.0, 20.0, 20.0, 0.0]])
    gt_boxes = np.concatenate([easy, hard])
    far = np.array([[5000.0, 5000.0, 20.0, 20.0, 0.0]])
    rows = np.concatenate([easy[:1], hard, far, easy[1:]])
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    labels = np.zeros(4, np.int64)
    gts = [(gt_boxes, np.zeros(3, np.int64), np.array([False, False, True]))]
    with_d = rotated_map([(rows, scores, labels)], gts, 1)
    keep = [0, 2, 3]
    without_d = rotated_map([(rows[keep], scores[keep], labels[keep])], gts, 1)
    assert with_d.npos.tolist() == [2]  # the difficult GT is not in the recall denominator
    assert with_d.map50_95 == pytest.approx(without_d.map50_95, abs=1e-12)
    # Ranked T F T over 2 GTs: recall .5 .5 1, precision 1 .5 2/3, envelope 1 2/3 2/3:
    # points 0 .. .5 (51) -> 1, .51 .. 1 (50) -> 2/3: AP = (51 + 100/3) / 101.
    assert with_d.map50 == pytest.approx((51 + 100 / 3) / 101, abs=1e-12)
    assert voc_map50([(rows, scores, labels)], gts, 1).map50 == pytest.approx(
        voc_map50([(rows[keep], scores[keep], labels[keep])], gts, 1).map50, abs=1e-12
    )
    # Were the same GT not difficult, the detection would be a TP and npos 3.
    gts_easy = [(gt_boxes, np.zeros(3, np.int64), np.zeros(3, bool))]
    assert rotated_map([(rows, scores, labels)], gts_easy, 1).npos.tolist() == [3]


def test_class_with_only_difficult_gt_is_excluded():
    dets, gts = _ranked_case("T", npos=1)
    hard = (np.array([[700.0, 700.0, 20.0, 20.0, 0.0]]), np.array([1]), np.array([True]))
    gts2 = [(np.concatenate([gts[0][0], hard[0]]), np.concatenate([gts[0][1], hard[1]]),
             np.concatenate([gts[0][2], hard[2]]))]  # fmt: skip
    r = rotated_map(dets, gts2, 2)
    assert np.isnan(r.ap50_95[1]) and r.map50_95 == pytest.approx(1.0)


# ------------------------------------------- pycocotools golden (theta = 0)


def _random_upright_set(seed: int, n_images: int = 10, num_classes: int = 4):
    """GT and noisy detections as upright boxes on a 1/16 px grid (exact in float32 and float64)."""
    rng = np.random.default_rng(seed)
    q = lambda x: np.round(np.asarray(x) * 16) / 16  # noqa: E731
    images = []
    for i in range(n_images):
        m = int(rng.integers(0, 12)) if i else 0  # image 0 has no GT (its detections are all FPs)
        xy, wh = q(rng.uniform(0, 400, (m, 2))), q(rng.uniform(8, 120, (m, 2)))
        glab = rng.integers(0, num_classes - 1, m)  # the last class never has GT
        src = rng.integers(0, max(m, 1), int(rng.integers(0, 3 * m + 1))) if m else np.zeros(0, np.int64)
        jit = q(rng.normal(0, 0.07, (src.size, 4)) * np.concatenate([wh[src], wh[src]], 1)) if m else np.zeros((0, 4))
        dxy = xy[src] + jit[:, :2] if m else np.zeros((0, 2))
        dwh = np.maximum(wh[src] + jit[:, 2:], 1.0) if m else np.zeros((0, 2))
        dlab = np.where(rng.random(src.size) < 0.1, rng.integers(0, num_classes, src.size), glab[src] if m else 0)
        nf = int(rng.integers(0, 8))
        fxy, fwh = q(rng.uniform(0, 400, (nf, 2))), q(rng.uniform(5, 80, (nf, 2)))
        dxy, dwh = np.concatenate([dxy, fxy]), np.concatenate([dwh, fwh])
        dlab = np.concatenate([dlab, rng.integers(0, num_classes, nf)]).astype(np.int64)
        score = np.round(rng.uniform(0.05, 1.0, dlab.size) * 20) / 20  # many ties, across and within images
        assert dlab.size <= 100
        images.append(((xy, wh, glab), (dxy, dwh, score, dlab)))
    return images


def _to_rbox(xy: np.ndarray, wh: np.ndarray) -> np.ndarray:
    return np.column_stack([xy + wh / 2, wh, np.zeros(len(xy))]).reshape(-1, 5)


def _pycoco(images, num_classes: int) -> COCOeval:
    gt: dict[str, Any] = {"images": [{"id": i + 1} for i in range(len(images))],
          "categories": [{"id": c + 1, "name": str(c)} for c in range(num_classes)], "annotations": []}  # fmt: skip
    results = []
    for i, ((xy, wh, glab), (dxy, dwh, score, dlab)) in enumerate(images):
        for j in range(len(glab)):
            gt["annotations"].append({
                "id": len(gt["annotations"]) + 1, "image_id": i + 1, "category_id": int(glab[j]) + 1,
                "bbox": [*map(float, xy[j]), *map(float, wh[j])], "area": float(wh[j].prod()), "iscrowd": 0,
            })  # fmt: skip
        for j in range(len(dlab)):
            results.append({"image_id": i + 1, "category_id": int(dlab[j]) + 1,
                            "bbox": [*map(float, dxy[j]), *map(float, dwh[j])], "score": float(score[j])})  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = gt
        coco.createIndex()
        e = COCOeval(coco, coco.loadRes(results), iouType="bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
    return e


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_upright_matches_pycocotools(seed: int):
    num_classes = 4
    images = _random_upright_set(seed, num_classes=num_classes)
    dets = [(_to_rbox(dxy, dwh), score, dlab) for _, (dxy, dwh, score, dlab) in images]
    gts = [(_to_rbox(xy, wh), glab, np.zeros(len(glab), bool)) for (xy, wh, glab), _ in images]
    ours = rotated_map(dets, gts, num_classes, max_dets=100)
    e = _pycoco(images, num_classes)
    # stats[0..2]: AP@[.5:.95], AP50, AP75 at area "all", maxDets 100.
    assert ours.map50_95 == pytest.approx(e.stats[0], abs=1e-6)
    assert ours.map50 == pytest.approx(e.stats[1], abs=1e-6)
    assert ours.map75 == pytest.approx(e.stats[2], abs=1e-6)
    prec = e.eval["precision"][:, :, :, 0, -1]  # (T, R, K) area all, maxDets 100
    for c in range(num_classes):
        p = prec[:, :, c]
        if (p > -1).any():
            assert ours.ap50_95[c] == pytest.approx(p[p > -1].mean(), abs=1e-6)
            assert ours.ap50[c] == pytest.approx(p[0].mean(), abs=1e-6)
        else:
            assert np.isnan(ours.ap50_95[c])
    assert 0.05 < ours.map50_95 < 0.95  # a non-trivial case


def test_voc_matching_is_dotas_classic_rule():
    from lucidyolo.tasks.obb.rotated_map import match_voc

    # Detections in score order vs GTs [easy0, easy1, difficult2].
    ious = np.array([
        [0.9, 0.6, 0.0],  # best easy0 -> TP
        [0.8, 0.7, 0.0],  # best easy0 again: a duplicate is an FP, although easy1 is free (match_detections: TP)
        [0.0, 0.6, 0.7],  # best is the difficult GT -> ignored, although easy1 overlaps > 0.5
        [0.0, 0.5, 0.0],  # IoU exactly 0.5 is not > 0.5 -> FP
    ])
    got = match_voc(ious, np.array([False, False, True]), np.array([0.5]))
    assert got.tolist() == [[1, 0, -1, 0]]
