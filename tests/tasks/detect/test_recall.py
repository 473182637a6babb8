"""Greedy recall at IoU 0.5 (det gate metric): golden cases and a reference implementation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lucidyolo.tasks.detect.recall import RecallAtIoU, greedy_match, recall_counts

GOLDEN = json.loads((Path(__file__).parent / "recall_golden.json").read_text())


def _pad(rows: list[list[float]], width: int, n: int) -> torch.Tensor:
    out = torch.zeros(n, width)
    if rows:
        out[: len(rows)] = torch.tensor(rows, dtype=torch.float32)
    return out


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[c["name"] for c in GOLDEN["cases"]])
def test_golden_recall_cases(case):
    k = max(len(case["dets"]), 1) + 2  # extra padding rows
    m = max(len(case["gts"]), 1) + 1
    dets = _pad(case["dets"], 6, k)[None]  # (1, K, 6)
    gts = _pad(case["gts"], 5, m)
    mask = torch.zeros(1, m, dtype=torch.bool)
    mask[0, : len(case["gts"])] = True
    matched, total = recall_counts(dets, gts[None, :, :4], gts[None, :, 4].long(), mask)
    assert abs(matched - case["matched"]) <= GOLDEN["tolerance"]
    assert total == case["total"]


def _reference_matched(dets: np.ndarray, gts: np.ndarray, thr: float = 0.5) -> int:
    """Plain-Python greedy matching, written independently of the module."""

    def iou(a, b):
        iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = iw * ih
        union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
        return inter / union if union > 0 else 0.0

    taken = [False] * len(gts)
    order = sorted(range(len(dets)), key=lambda i: -dets[i][4])  # sorted() is stable
    for i in order:
        if dets[i][4] <= 0:
            continue
        best, best_j = -1.0, -1
        for j, g in enumerate(gts):
            if taken[j] or int(g[4]) != int(dets[i][5]):
                continue
            v = iou(dets[i], g)
            if v >= thr and v > best:
                best, best_j = v, j
        if best_j >= 0:
            taken[best_j] = True
    return sum(taken)


@pytest.mark.parametrize("seed", range(6))
def test_matches_independent_reference_on_crowded_random_images(seed):
    rng = np.random.default_rng(seed)
    b, k, m = 3, 40, 12
    # a few clusters so detections compete for the same ground truth
    centres = rng.uniform(20, 80, (b, 4, 2))
    gt_c = centres[:, rng.integers(0, 4, m)] + rng.normal(0, 3, (b, m, 2))
    gt_wh = rng.uniform(8, 20, (b, m, 2))
    gts = np.concatenate([gt_c - gt_wh / 2, gt_c + gt_wh / 2, rng.integers(0, 2, (b, m, 1))], -1)
    det_c = centres[:, rng.integers(0, 4, k)] + rng.normal(0, 3, (b, k, 2))
    det_wh = rng.uniform(8, 20, (b, k, 2))
    scores = np.round(rng.uniform(0, 1, (b, k, 1)), 1)  # ties on purpose
    scores[:, -5:] = 0  # padding
    dets = np.concatenate([det_c - det_wh / 2, det_c + det_wh / 2, scores, rng.integers(0, 2, (b, k, 1))], -1)
    mask = rng.random((b, m)) < 0.8
    dets_t = torch.tensor(dets, dtype=torch.float64)
    matched, total = recall_counts(
        dets_t, torch.tensor(gts[..., :4]), torch.tensor(gts[..., 4]).long(), torch.tensor(mask)
    )
    expected = sum(_reference_matched(dets[i], gts[i][mask[i]]) for i in range(b))
    assert total == int(mask.sum())
    assert matched == expected
    assert 0 < matched < total  # the random scene is neither trivial nor hopeless


def test_greedy_match_returns_which_gt_were_found():
    hits = greedy_match(
        torch.tensor([[0.0, 0, 10, 10], [50, 50, 60, 60]]),
        torch.tensor([0.9, 0.8]),
        torch.tensor([0, 0]),
        torch.tensor([[50.0, 50, 60, 60], [100, 100, 110, 110], [0, 0, 10, 10]]),
        torch.tensor([0, 0, 0]),
    )
    assert hits.tolist() == [True, False, True]


def test_accumulator_sums_batches_and_is_nan_without_ground_truth():
    acc = RecallAtIoU()
    assert math.isnan(acc.compute())
    dets = torch.tensor([[[0.0, 0, 10, 10, 0.9, 0]]])
    gts = torch.tensor([[[0.0, 0, 10, 10], [20, 20, 30, 30]]])
    labels = torch.zeros(1, 2, dtype=torch.long)
    acc.update(dets, gts, labels, torch.ones(1, 2, dtype=torch.bool))
    acc.update(dets, gts[:, :1], labels[:, :1], torch.ones(1, 1, dtype=torch.bool))
    assert (acc.matched, acc.total) == (2, 3)
    assert acc.compute() == pytest.approx(2 / 3)
    acc.reset()
    assert math.isnan(acc.compute())
