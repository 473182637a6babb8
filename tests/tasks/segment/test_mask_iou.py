"""MeanMaskIoU: hand cases with rectangle masks whose IoUs are exact fractions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lucidyolo.tasks.segment.mask_detections import MaskDetections
from lucidyolo.tasks.segment.mask_iou import MeanMaskIoU, greedy_mask_match

S, HP = 64, 16  # input side, prototype side (stride 4)


def _proto(box: tuple[int, int, int, int]) -> torch.Tensor:
    """+10 over the box's prototype pixels grown by one (the box crop alone shapes the mask)."""
    x0, y0, x1, y1 = box
    out = torch.full((HP, HP), -10.0)
    out[max(y0 // 4 - 1, 0):y1 // 4 + 1, max(x0 // 4 - 1, 0):x1 // 4 + 1] = 10.0
    return out


def batch(gts: list[tuple[tuple[int, int, int, int], int, bool]],
          preds: list[tuple[tuple[int, int, int, int], float, int]]) -> tuple[MaskDetections, dict]:
    """One image: GT ``(rect, label, crowd)`` as 4-point rings; predictions ``(rect, score, label)``
    whose masks are exactly their rectangle (multiples of 4)."""
    m, k = max(len(gts), 1), len(preds) + 2  # two padding rows
    gt = {
        "boxes": torch.zeros(1, m, 4), "labels": torch.zeros(1, m, dtype=torch.long),
        "mask": torch.zeros(1, m, dtype=torch.bool), "crowd": torch.zeros(1, m, dtype=torch.bool),
    }
    pts = []
    for j, (r, label, crowd) in enumerate(gts):
        gt["boxes"][0, j] = torch.tensor(r, dtype=torch.float32)
        gt["labels"][0, j], gt["mask"][0, j], gt["crowd"][0, j] = label, True, crowd
        x0, y0, x1, y1 = r
        pts += [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]
    gt["poly_points"] = torch.tensor(pts, dtype=torch.float32).reshape(-1, 2)
    gt["poly_ring_lengths"] = torch.full((len(gts),), 4, dtype=torch.long)
    gt["poly_ring_image"] = torch.zeros(len(gts), dtype=torch.long)
    gt["poly_ring_slot"] = torch.arange(len(gts))
    rows, coeffs = torch.zeros(1, k, 6), torch.zeros(1, k, k)
    protos = torch.full((1, k, HP, HP), -10.0)
    for j, (r, score, label) in enumerate(preds):
        rows[0, j] = torch.tensor([*r, score, label], dtype=torch.float32)
        coeffs[0, j, j] = 1.0
        protos[0, j] = _proto(r)
    return MaskDetections(rows, coeffs, protos), gt


A, B = (8, 12, 40, 44), (44, 12, 60, 28)  # 32 x 32 and 16 x 16


def score(gts, preds, conf: float = 0.25) -> float:
    metric = MeanMaskIoU()
    metric.update(*batch(gts, preds), conf)
    return metric.compute()


def test_perfect_predictions_give_one():
    assert score([(A, 0, False), (B, 1, False)], [(A, 0.9, 0), (B, 0.8, 1)]) == 1.0


def test_one_of_two_unmatched_gives_half_the_iou():
    # the prediction is the top 32 x 16 half of A: IoU 1/2; B is missed (its only prediction is below conf)
    got = score([(A, 0, False), (B, 0, False)], [((8, 12, 40, 28), 0.9, 0), (B, 0.1, 0)], conf=0.25)
    assert got == pytest.approx(0.5 * 0.5, abs=1e-12)


def test_class_mismatch_counts_zero():
    assert score([(A, 0, False)], [(A, 0.9, 1)]) == 0.0


def test_greedy_order_is_by_score_not_row():
    # row 0 (score 0.5): 32 x 28 of A, IoU 0.875; row 1 (score 0.9): 32 x 20 of A, IoU 0.625.
    # Visiting by score, row 1 takes A first; row 0 finds A taken and B disjoint.
    got = score([(A, 0, False), (B, 0, False)], [((8, 12, 40, 40), 0.5, 0), ((8, 12, 40, 32), 0.9, 0)])
    assert got == pytest.approx(0.625 / 2, abs=1e-12)


def test_each_prediction_takes_the_largest_iou():
    left, right = (8, 12, 24, 44), (24, 12, 40, 44)  # 512 px each
    # 28 x 32 = 896 px: left overlaps 384 (IoU 384/1024), right 512 (IoU 512/896)
    got = score([(left, 0, False), (right, 0, False)], [((12, 12, 40, 44), 0.9, 0)])
    assert got == pytest.approx(512 / 896 / 2, abs=1e-12)


def test_crowd_is_left_out_and_no_gt_is_nan():
    assert score([(A, 0, False), (B, 0, True)], [(A, 0.9, 0)]) == 1.0
    assert math.isnan(score([], [(A, 0.9, 0)]))
    assert math.isnan(score([(B, 0, True)], [(A, 0.9, 0)]))


def test_accumulates_over_batches_and_resets():
    metric = MeanMaskIoU()
    metric.update(*batch([(A, 0, False)], [(A, 0.9, 0)]), 0.25)
    metric.update(*batch([(A, 0, False), (B, 0, False)], []), 0.25)
    assert metric.compute() == pytest.approx(1 / 3)
    metric.reset()
    assert math.isnan(metric.compute())


def test_greedy_mask_match_needs_positive_iou():
    iou = np.array([[0.0, 0.3], [0.6, 0.2]])
    same = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(greedy_mask_match(iou, same), [0.6, 0.0])
