"""IoU and CIoU against torchvision's independent implementations and edge cases."""

from __future__ import annotations

import pytest
import torch
from torchvision.ops import box_iou as tv_box_iou
from torchvision.ops import complete_box_iou as tv_complete_box_iou

from lucidyolo.structures.box_iou import box_ciou, box_iou


def _random_boxes(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g, dtype=torch.float64) * 100
    wh = torch.rand(n, 2, generator=g, dtype=torch.float64) * 60 + 1
    return torch.cat([xy, xy + wh], -1)


def test_box_iou_broadcasts_to_torchvision_pairwise_table() -> None:
    a, b = _random_boxes(7, 0), _random_boxes(9, 1)
    ours = box_iou(a[:, None], b[None])  # (7, 9)
    assert torch.allclose(ours, tv_box_iou(a, b), atol=1e-6)


def test_ciou_matches_torchvision_complete_iou() -> None:
    a, b = _random_boxes(64, 2), _random_boxes(64, 3)
    ours = box_ciou(a, b)
    ref = tv_complete_box_iou(a, b, eps=1e-7).diagonal()
    assert torch.allclose(ours, ref, atol=1e-6)


def test_ciou_is_one_for_identical_boxes_and_penalises_centre_offset() -> None:
    box = torch.tensor([[10.0, 10.0, 50.0, 30.0]])
    assert box_ciou(box, box).item() == pytest.approx(1.0, abs=1e-6)
    shifted = box + torch.tensor([100.0, 0.0, 100.0, 0.0])  # disjoint: IoU 0, penalty > 0
    assert box_ciou(shifted, box).item() < 0


def test_ciou_is_finite_with_finite_gradients_for_inverted_predictions() -> None:
    pred = torch.tensor([[30.0, 30.0, 10.0, 10.0], [5.0, 5.0, 5.0, 5.0]], requires_grad=True)
    target = torch.tensor([[0.0, 0.0, 20.0, 20.0], [0.0, 0.0, 10.0, 10.0]])
    value = box_ciou(pred, target)
    value.sum().backward()
    assert torch.isfinite(value).all() and torch.isfinite(pred.grad).all()
    assert (box_iou(pred.detach(), target) == 0).all()
