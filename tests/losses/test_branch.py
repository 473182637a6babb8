"""Per-branch loss: term definitions, normalisation, stride units and numerical safety."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lucidyolo.assign import Assignment
from lucidyolo.losses import BranchLoss
from lucidyolo.structures.box_iou import box_ciou


def _one_positive(weight: float, stride: float = 16.0):
    """Three anchors, one positive (anchor 1) with a GT 40x40 box and the given weight."""
    strides = torch.tensor([8.0, stride, 32.0])
    gt = torch.tensor([20.0, 20.0, 60.0, 60.0])
    assignment = Assignment(
        labels=torch.tensor([[-1, 2, -1]]),
        boxes=torch.stack([torch.zeros(4), gt, torch.zeros(4)])[None],
        weights=torch.tensor([[0.0, weight, 0.0]]),
        fg_mask=torch.tensor([[False, True, False]]),
        gt_index=torch.tensor([[-1, 0, -1]]),
    )
    pred = torch.stack(
        [torch.tensor([0.0, 0.0, 8.0, 8.0]), gt.clone(), torch.tensor([5.0, 5.0, 1.0, 1.0])]
    )[None]
    logits = torch.full((1, 3, 4), -3.0)
    return logits, pred, strides, assignment


def test_perfect_box_gives_zero_box_and_l1_terms() -> None:
    logits, pred, strides, assignment = _one_positive(0.7)
    terms = BranchLoss()(logits, pred, strides, assignment)
    assert terms["box"].item() == pytest.approx(0.0, abs=1e-6)
    assert terms["l1"].item() == 0.0


def test_l1_is_measured_in_stride_units() -> None:
    """Shifting the positive by one stride in x moves x1 and x2 by one unit each: l1 += 2 w / W."""
    weight, stride = 2.5, 16.0
    logits, pred, strides, assignment = _one_positive(weight, stride)
    pred[0, 1, [0, 2]] += stride
    terms = BranchLoss()(logits, pred, strides, assignment)
    assert terms["l1"].item() == pytest.approx(2 * weight / weight)  # W = max(sum w, 1) = 2.5
    # Below 1, W is floored at 1: l1 = 2 w.
    logits, pred, strides, assignment = _one_positive(0.25, stride)
    pred[0, 1, [0, 2]] += stride
    assert BranchLoss()(logits, pred, strides, assignment)["l1"].item() == pytest.approx(0.5)


def test_cls_term_is_bce_against_weighted_one_hot_over_all_anchors() -> None:
    weight = 0.6
    logits, pred, strides, assignment = _one_positive(weight)
    logits = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(0))
    target = torch.zeros(1, 3, 4)
    target[0, 1, 2] = weight
    expected = F.binary_cross_entropy_with_logits(logits, target, reduction="sum") / 1.0
    assert BranchLoss()(logits, pred, strides, assignment)["cls"].item() == pytest.approx(
        expected.item(), rel=1e-6
    )


def test_box_term_is_weighted_one_minus_ciou_and_total_applies_the_gains() -> None:
    weight = 3.0
    logits, pred, strides, assignment = _one_positive(weight)
    pred[0, 1] += torch.tensor([3.0, -2.0, 7.0, 1.0])
    terms = BranchLoss(box_gain=7.5, cls_gain=0.5, l1_gain=6.0)(logits, pred, strides, assignment)
    ciou = box_ciou(pred[0, 1], assignment.boxes[0, 1])
    assert terms["box"].item() == pytest.approx((weight * (1 - ciou) / weight).item(), rel=1e-6)
    expected_total = 7.5 * terms["box"] + 0.5 * terms["cls"] + 6.0 * terms["l1"]
    assert terms["total"].item() == pytest.approx(expected_total.item(), rel=1e-6)
    assert terms["num_fg"].item() == 1


def test_background_only_batch_has_finite_loss_and_gradients() -> None:
    logits = torch.randn(2, 5, 3, requires_grad=True)
    pred = torch.randn(2, 5, 4).mul(30).requires_grad_()  # includes inverted boxes
    assignment = Assignment(
        labels=torch.full((2, 5), -1),
        boxes=torch.zeros(2, 5, 4),
        weights=torch.zeros(2, 5),
        fg_mask=torch.zeros(2, 5, dtype=torch.bool),
        gt_index=torch.full((2, 5), -1),
    )
    terms = BranchLoss()(logits, pred, torch.full((5,), 8.0), assignment)
    terms["total"].backward()
    assert terms["box"].item() == 0 and terms["l1"].item() == 0
    assert terms["cls"].item() == pytest.approx(F.softplus(logits.detach()).sum().item(), rel=1e-6)
    assert torch.isfinite(logits.grad).all() and torch.isfinite(pred.grad).all()
    assert (pred.grad == 0).all()
