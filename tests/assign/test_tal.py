"""Behaviour of the vectorised TAL / STAL / o2o assigners against a loop oracle and edge cases."""

from __future__ import annotations

import pytest
import torch

from lucidyolo.assign import OneToOneAssigner, TaskAlignedAssigner, o2m_assigner, o2o_assigner
from lucidyolo.structures.box_coder import make_anchors
from tests.assign.reference_assigner import reference_assign


def _random_problem(
    seed: int, batch: int = 2, num_gt: int = 5, num_classes: int = 4, size: int = 64
):
    """Random GTs (some under 8 px) and anchor-centred predictions that always overlap candidates."""
    g = torch.Generator().manual_seed(seed)
    anchors, _ = make_anchors([(size // 8, size // 8), (size // 16, size // 16)], [8, 16])
    a = anchors.shape[0]
    scores = torch.rand(batch, a, num_classes, generator=g) * 0.9 + 0.05
    half = (
        torch.rand(batch, a, 2, generator=g) * 18 + 12
    )  # half sides 12..30 px: covers any STAL centre
    pred = torch.cat([anchors - half, anchors + half], -1)
    centre = torch.rand(batch, num_gt, 2, generator=g) * (size - 16) + 8
    side = torch.rand(batch, num_gt, 2, generator=g) * 36 + 3
    gts = torch.cat([centre - side / 2, centre + side / 2], -1)
    labels = torch.randint(0, num_classes, (batch, num_gt), generator=g)
    mask = torch.rand(batch, num_gt, generator=g) > 0.2
    return scores, pred, anchors, labels, gts, mask


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    ("assigner", "topk", "stal", "single"),
    [
        (TaskAlignedAssigner(topk=10, min_side=None), 10, False, False),
        (o2m_assigner(), 10, True, False),
        (o2o_assigner(), 7, True, True),
    ],
)
def test_vectorised_assigner_matches_loop_oracle(seed, assigner, topk, stal, single) -> None:
    inputs = _random_problem(seed)
    res = assigner(*inputs)
    ref = reference_assign(*inputs, topk=topk, stal=stal, single=single)
    assert res.gt_index.tolist() == ref["gt_index"]
    assert torch.allclose(res.weights, torch.tensor(ref["weights"]), rtol=1e-4, atol=1e-7)
    assert int(res.fg_mask.sum()) > 0  # the case is not vacuous


def test_target_weights_at_iou_001_keep_their_scale() -> None:
    """Regression: t = s * u^6 is ~1e-13 at IoU 0.01; a 1e-9 floor on max t would shrink weights ~1e4x."""
    anchors = torch.tensor([[50.0, 50.0], [52.0, 50.0]])
    gt = torch.tensor([[[40.0, 40.0, 60.0, 60.0]]])  # 400 px^2
    # Prediction: 2x2 box inside the GT -> IoU = 4 / 400 = 0.01.
    pred = torch.tensor([[[49.0, 49.0, 51.0, 51.0], [51.0, 49.0, 53.0, 51.0]]])
    scores = torch.full((1, 2, 1), 0.5)
    res = o2m_assigner()(
        scores,
        pred,
        anchors,
        torch.zeros(1, 1, dtype=torch.long),
        gt,
        torch.ones(1, 1, dtype=torch.bool),
    )
    assert res.fg_mask.all()
    assert res.weights[0].tolist() == pytest.approx([0.01, 0.01], rel=1e-4)


def test_images_without_gt_are_all_background_and_do_not_disturb_others() -> None:
    scores, pred, anchors, labels, gts, mask = _random_problem(3)
    mask[1] = False
    gts_garbage = gts.clone()
    gts_garbage[1] = torch.tensor([1e6, -5.0, 3.0, 1e9])  # padding content must not matter
    both = o2m_assigner()(scores, pred, anchors, labels, gts_garbage, mask)
    alone = o2m_assigner()(scores[:1], pred[:1], anchors, labels[:1], gts[:1], mask[:1])
    assert not both.fg_mask[1].any()
    assert (both.labels[1] == -1).all() and (both.gt_index[1] == -1).all()
    assert (both.weights[1] == 0).all() and (both.boxes[1] == 0).all()
    for x, y in zip(both, alone, strict=True):
        assert torch.equal(x[:1], y)


@pytest.mark.parametrize("assigner", [o2m_assigner(), o2o_assigner()])
def test_batch_with_zero_padded_gts_gives_background(assigner) -> None:
    scores, pred, anchors, *_ = _random_problem(4)
    b, a, _ = scores.shape
    res = assigner(
        scores,
        pred,
        anchors,
        torch.zeros(b, 0, dtype=torch.long),
        torch.zeros(b, 0, 4),
        torch.zeros(b, 0, dtype=torch.bool),
    )
    assert res.labels.shape == (b, a) and (res.labels == -1).all()
    assert res.boxes.shape == (b, a, 4) and res.weights.shape == (b, a)
    assert not res.fg_mask.any() and (res.gt_index == -1).all()


def test_contested_anchor_goes_to_the_gt_with_larger_alignment() -> None:
    anchors = torch.tensor([[20.0, 20.0]])
    # Both GTs contain the anchor; the prediction matches GT 1 exactly.
    gts = torch.tensor([[[0.0, 0.0, 40.0, 40.0], [10.0, 10.0, 30.0, 30.0]]])
    pred = torch.tensor([[[10.0, 10.0, 30.0, 30.0]]])
    scores = torch.tensor([[[0.9, 0.3]]])  # GT 0 has the better class score but far worse IoU
    res = o2m_assigner()(
        scores, pred, anchors, torch.tensor([[0, 1]]), gts, torch.ones(1, 2, dtype=torch.bool)
    )
    assert res.gt_index.tolist() == [[1]] and res.labels.tolist() == [[1]]


def test_candidates_tied_at_zero_alignment_are_still_selected() -> None:
    """With all scores 0, t = 0 everywhere; candidates must still win over non-candidates."""
    anchors, _ = make_anchors([(8, 8)], [8])
    gt = torch.tensor([[[0.0, 0.0, 17.0, 17.0]]])  # candidates: x, y in {4, 12} -> 4 anchors
    res = TaskAlignedAssigner(topk=10)(
        torch.zeros(1, 64, 1),
        torch.zeros(1, 64, 4),
        anchors,
        torch.zeros(1, 1, dtype=torch.long),
        gt,
        torch.ones(1, 1, dtype=torch.bool),
    )
    assert res.fg_mask[0].nonzero().flatten().tolist() == [0, 1, 8, 9]
    assert torch.isfinite(res.weights).all() and (res.weights == 0).all()


def test_o2o_gives_each_gt_at_most_one_anchor_and_each_anchor_at_most_one_gt() -> None:
    scores, pred, anchors, labels, gts, mask = _random_problem(5, batch=3, num_gt=12)
    res = OneToOneAssigner()(scores, pred, anchors, labels, gts, mask)
    for b in range(3):
        owners = res.gt_index[b][res.fg_mask[b]]
        assert owners.unique().numel() == owners.numel()
        assert set(owners.tolist()) <= set(mask[b].nonzero().flatten().tolist())


def test_assignment_has_no_grad_and_runs_in_float32_for_half_inputs() -> None:
    scores, pred, anchors, labels, gts, mask = _random_problem(6)
    scores = scores.half().requires_grad_()
    res = o2m_assigner()(scores, pred.half(), anchors, labels, gts.half(), mask)
    assert not res.weights.requires_grad
    assert res.weights.dtype == torch.float32 and res.boxes.dtype == torch.float32
    assert res.labels.dtype == torch.long and res.gt_index.dtype == torch.long


def test_pair_iou_and_candidacy_are_pluggable_and_targets_keep_the_box_form():
    """A task with another box form passes its overlap and candidacy; selection and targets are shared."""
    from lucidyolo.assign.tal import TaskAlignedAssigner

    # boxes as (cx, cy, r) circles: overlap 1 for identical circles, decreasing with distance
    def circle_iou(gt: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        d = (gt[..., :2] - pred[..., :2]).norm(dim=-1)
        return (1 - d / (gt[..., 2] + pred[..., 2])).clamp(min=0)

    def inside_circle(anchors: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
        return (anchors[None, None] - gt[:, :, None, :2]).norm(dim=-1) < gt[:, :, None, 2]

    anchors = torch.tensor([[10.0, 10.0], [30.0, 10.0], [50.0, 10.0], [90.0, 90.0]])
    gt = torch.tensor([[[12.0, 10.0, 25.0]]])  # (B=1, M=1, D=3)
    pred = torch.tensor([[[10.0, 10.0, 20.0], [30.0, 10.0, 20.0], [50.0, 10.0, 20.0], [90.0, 90.0, 20.0]]])
    scores = torch.full((1, 4, 2), 0.5)
    assigner = TaskAlignedAssigner(topk=2, min_side=None, pair_iou=circle_iou, candidacy=inside_circle)
    out = assigner(scores, pred, anchors, torch.tensor([[1]]), gt, torch.tensor([[True]]))
    # candidates: anchors 0 and 1 (inside r = 25 around x = 12); both kept (top-2), anchor 2 and 3 not
    assert out.fg_mask.tolist() == [[True, True, False, False]]
    assert out.gt_index.tolist() == [[0, 0, -1, -1]] and out.labels.tolist() == [[1, 1, -1, -1]]
    assert out.boxes.shape == (1, 4, 3) and torch.equal(out.boxes[0, 0], gt[0, 0])
