"""Rotated branch terms: the aspect weight of the spec, the angle term's period, a zero loss at a perfect match."""

from __future__ import annotations

import math

import pytest
import torch

from lucidyolo.assign.assignment import Assignment
from lucidyolo.tasks.obb.rotated_loss import RotatedBranchLoss, aspect_weight


@pytest.mark.parametrize(("ratio", "expected"), [(1, 1.0), (2, 0.948), (5, 0.750), (10, 0.555), (20, 0.369)])
def test_aspect_weight_matches_the_spec_table(ratio, expected):
    w = aspect_weight(torch.tensor([[0.0, 0.0, 10.0 * ratio, 10.0, 0.0]]))
    assert abs(float(w) - expected) < 6e-4


def _assignment(target: torch.Tensor) -> Assignment:
    a = target.shape[1]
    return Assignment(labels=torch.zeros(1, a, dtype=torch.long), boxes=target, weights=torch.ones(1, a),
                      fg_mask=torch.ones(1, a, dtype=torch.bool), gt_index=torch.zeros(1, a, dtype=torch.long))


def test_angle_term_is_zero_at_a_quarter_turn_and_peaks_at_an_eighth():
    loss = RotatedBranchLoss()
    target = torch.tensor([[[50.0, 50.0, 40.0, 10.0, 0.3]]])
    strides = torch.tensor([8.0])
    for shift, expected in ((0.0, 0.0), (math.pi / 2, 0.0), (math.pi / 4, 1.0)):
        pred = target.clone()
        pred[..., 4] += shift
        terms = loss.box_terms(pred, target, strides, torch.ones(1, 1), torch.tensor(1.0))
        assert abs(float(terms["angle"]) - expected * float(aspect_weight(target))) < 1e-5


def test_perfect_prediction_has_near_zero_box_terms_and_all_terms_logged():
    loss = RotatedBranchLoss()
    target = torch.tensor([[[50.0, 50.0, 40.0, 10.0, 0.3], [20.0, 30.0, 12.0, 6.0, -0.5]]])
    logits = torch.full((1, 2, 3), -10.0)
    logits[..., 0] = 10.0
    terms = loss(logits, target.clone(), torch.tensor([8.0, 16.0]), _assignment(target))
    assert set(terms) == {"box", "cls", "l1", "angle", "total", "num_fg"}
    assert float(terms["box"]) < 1e-3 and float(terms["l1"]) == 0.0 and float(terms["angle"]) < 1e-10
    assert all(t.dtype == torch.float32 for t in terms.values())
