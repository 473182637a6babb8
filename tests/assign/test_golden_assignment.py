"""Golden assignment cases (tests/assign/golden_assignment.json), derived by hand.

- 6x6 GT at (13..19)^2 on a stride-8 grid (centres 4, 12, 20, ...): no centre
  inside -> 0 TAL candidates; STAL widens it to 16x16 around (16, 16) ->
  x, y in {12, 20} -> 4 candidates (row-major indices 9, 10, 17, 18).
- 6x20 GT: only the short side is replaced, centred: 16x20.
- Three separated GTs, every anchor predicting a 32x32 box at its centre with
  score 0.5: each GT has >= 25 candidates and no shared ones, so o2m (top-10)
  gives 10 each. o2o keeps one anchor per GT: the best IoU is a 32x32 box
  fully inside the GT (IoU = 1024 / GT area: 0.64, 0.64, 1024/1936); ties go to
  the lowest anchor index, the stride-8 anchors (28, 28) -> 63,
  (116, 28) -> 74, (60, 116) -> 287.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from lucidyolo.assign import TaskAlignedAssigner, o2m_assigner, o2o_assigner, stal_candidacy_boxes
from lucidyolo.structures.box_coder import make_anchors

GOLDEN = json.loads((Path(__file__).parent / "golden_assignment.json").read_text())
TOL = GOLDEN["tolerance"]["weights_abs"]


def test_small_gt_has_no_tal_candidates_but_four_stal_candidates() -> None:
    case = GOLDEN["small_square_between_stride8_centres"]
    anchors, _ = make_anchors([tuple(s) for s in case["feature_sizes"]], case["strides"])
    gt = torch.tensor([[case["gt_box"]]])
    mask = torch.ones(1, 1, dtype=torch.bool)
    tal = TaskAlignedAssigner(min_side=None).candidates(anchors, gt, mask)
    stal = TaskAlignedAssigner().candidates(anchors, gt, mask)
    assert int(tal.sum()) == case["tal_candidates"]
    assert int(stal.sum()) == case["stal_candidates"]
    assert stal[0, 0].nonzero().flatten().tolist() == case["stal_candidate_anchors"]


def test_stal_small_gt_gets_positives_with_weights_from_the_original_box() -> None:
    case = GOLDEN["small_square_between_stride8_centres"]
    anchors, _ = make_anchors([tuple(s) for s in case["feature_sizes"]], case["strides"])
    gt = torch.tensor([[case["gt_box"]]])
    pred = torch.cat([anchors - 4, anchors + 4], -1)[None]  # 8x8 boxes on each anchor
    res = o2m_assigner()(
        torch.full((1, 64, 1), 0.5),
        pred,
        anchors,
        torch.zeros(1, 1, dtype=torch.long),
        gt,
        torch.ones(1, 1, dtype=torch.bool),
    )
    assert res.fg_mask[0].nonzero().flatten().tolist() == case["stal_candidate_anchors"]
    # Targets are the original 6x6 box, not the 16x16 surrogate.
    assert torch.equal(res.boxes[0, 9], gt[0, 0])
    # 8x8 box at (12, 12) vs the 6x6 GT: intersection 3x3 -> IoU 9 / (64 + 36 - 9); all four are symmetric.
    expected = 9 / 91
    assert torch.allclose(res.weights[0, res.fg_mask[0]], torch.full((4,), expected), atol=TOL)


def test_thin_gt_gets_a_16_px_surrogate_only_on_its_short_side() -> None:
    case = GOLDEN["thin_box_surrogate"]
    out = stal_candidacy_boxes(torch.tensor(case["gt_box"]))
    assert out.tolist() == case["surrogate"]


def _three_separated() -> tuple[dict, tuple[torch.Tensor, ...]]:
    case = GOLDEN["three_separated"]
    anchors, _ = make_anchors([tuple(s) for s in case["feature_sizes"]], case["strides"])
    half = case["pred_box_side"] / 2
    a = anchors.shape[0]
    scores = torch.full((1, a, case["num_classes"]), case["pred_score"])
    pred = torch.cat([anchors - half, anchors + half], -1)[None]
    labels = torch.tensor([case["gt_labels"]])
    gts = torch.tensor([case["gt_boxes"]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    return case, (scores, pred, anchors, labels, gts, mask)


def test_three_separated_gts_give_ten_o2m_positives_each() -> None:
    case, inputs = _three_separated()
    res = o2m_assigner()(*inputs)
    assert int(res.fg_mask.sum()) == case["o2m_positives"]
    counts = torch.bincount(res.gt_index[res.fg_mask], minlength=3)
    assert counts.max() <= case["o2m_max_per_gt"]
    assert counts.tolist() == [10, 10, 10]
    assert torch.equal(res.labels[res.fg_mask], inputs[3][0, res.gt_index[res.fg_mask]])
    # The best positive of every GT carries exactly that GT's max IoU (t / max t = 1).
    for g, w in enumerate(case["o2o_weight_per_gt"]):
        assert res.weights[0][res.gt_index[0] == g].max().item() == pytest.approx(w, abs=TOL)


def test_three_separated_gts_give_one_o2o_positive_each_at_the_best_anchor() -> None:
    case, inputs = _three_separated()
    res = o2o_assigner()(*inputs)
    assert int(res.fg_mask.sum()) == case["o2o_positives"]
    fg = res.fg_mask[0].nonzero().flatten()
    order = res.gt_index[0, fg].argsort()
    assert fg[order].tolist() == case["o2o_anchor_per_gt"]
    assert res.weights[0, fg[order]].tolist() == pytest.approx(case["o2o_weight_per_gt"], abs=TOL)
    assert torch.equal(res.boxes[0, fg[order]], inputs[4][0])
