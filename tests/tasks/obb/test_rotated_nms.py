"""Rotated NMS: the fixed point equals the sequential greedy loop; class-wise; batched decode."""

from __future__ import annotations

import math

import pytest
import torch

import lucidyolo.tasks.obb.rotated_nms as rotated_nms_module
from lucidyolo.decode import nms_decode
from lucidyolo.structures.rotated_iou import rotated_iou_matrix
from lucidyolo.tasks.obb.rotated_nms import batched_rotated_nms, rotated_nms, rotated_nms_decode


def _reference(boxes: torch.Tensor, scores: torch.Tensor, thr: float, labels: torch.Tensor | None = None):
    """The textbook loop: by descending score (stable), keep unless a kept box overlaps > thr."""
    order = torch.sort(scores, descending=True, stable=True).indices
    iou = rotated_iou_matrix(boxes[order], boxes[order])
    lab = None if labels is None else labels[order]
    kept: list[int] = []
    for j in range(len(order)):
        if not any(iou[i, j] > thr and (lab is None or lab[i] == lab[j]) for i in kept):
            kept.append(j)
    return order[torch.tensor(kept, dtype=torch.long)]


def _clustered(n: int, g: torch.Generator, spread: float = 8.0) -> torch.Tensor:
    """Boxes around a few centres, so many overlap and suppression chains form."""
    centres = torch.rand(4, 2, generator=g) * 100
    c = centres[torch.randint(0, 4, (n,), generator=g)] + torch.randn(n, 2, generator=g) * spread
    wh = torch.rand(n, 2, generator=g) * 30 + 2
    th = (torch.rand(n, 1, generator=g) - 0.5) * 2 * math.pi
    return torch.cat([c, wh, th], 1)


def test_equals_the_sequential_loop_on_random_sets() -> None:
    g = torch.Generator().manual_seed(0)
    for trial in range(150):
        n = int(torch.randint(1, 100, (1,), generator=g))
        boxes = _clustered(n, g)
        if trial % 5 == 0:  # exact duplicates and zero-size boxes
            boxes[: n // 3] = boxes[0]
            boxes[n // 2 :: 7, 2] = 0
        scores = torch.rand(n, generator=g)
        if trial % 3 == 0:  # ties: the stable order decides, on both sides
            scores = (scores * 4).round() / 4
        thr = float(torch.rand(1, generator=g)) * 0.9
        labels = torch.randint(0, 3, (n,), generator=g)
        assert torch.equal(rotated_nms(boxes, scores, thr), _reference(boxes, scores, thr))
        assert torch.equal(
            batched_rotated_nms(boxes, scores, labels, thr), _reference(boxes, scores, thr, labels)
        )


def test_chain_where_a_suppressed_box_does_not_suppress() -> None:
    # Unit-height boxes of width 2 stepped by 0.6: each overlaps its neighbour with IoU 1.4/2.6 ~ 0.54
    # and the next-but-one with IoU 0.8/3.2 = 0.25. Greedy at 0.5 keeps every other box.
    n = 41
    boxes = torch.tensor([[0.6 * i, 0.0, 2.0, 1.0, 0.0] for i in range(n)])
    scores = torch.linspace(1, 0.1, n)
    kept = rotated_nms(boxes, scores, 0.5)
    assert kept.tolist() == list(range(0, n, 2))
    assert torch.equal(kept, _reference(boxes, scores, 0.5))


def test_class_wise_suppression() -> None:
    box = [50.0, 50.0, 40.0, 10.0, 0.5]
    near = [51.0, 50.0, 40.0, 10.0, 0.5]
    boxes = torch.tensor([box, near, near, box])
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6])
    labels = torch.tensor([0, 0, 1, 1])
    assert rotated_nms(boxes, scores, 0.5).tolist() == [0]
    assert batched_rotated_nms(boxes, scores, labels, 0.5).tolist() == [0, 2]
    assert batched_rotated_nms(boxes, scores, torch.arange(4), 0.5).tolist() == [0, 1, 2, 3]


def test_identical_boxes_keep_the_first_of_equal_scores_and_empty_input() -> None:
    boxes = torch.tensor([[5.0, 5, 10, 4, 0.3]]).repeat(20, 1)
    assert rotated_nms(boxes, torch.ones(20), 0.7).tolist() == [0]
    assert rotated_nms(torch.zeros(0, 5), torch.zeros(0), 0.5).shape == (0,)
    with pytest.raises(ValueError, match="iou_threshold"):
        rotated_nms(boxes, torch.ones(20), -0.1)


def test_pair_chunking_does_not_change_the_result(monkeypatch) -> None:
    g = torch.Generator().manual_seed(1)
    boxes, scores = _clustered(300, g, spread=4.0), torch.rand(300, generator=g)
    labels = torch.randint(0, 2, (300,), generator=g)
    whole = batched_rotated_nms(boxes, scores, labels, 0.3)
    monkeypatch.setattr(rotated_nms_module, "_PAIR_CHUNK", 17)
    assert torch.equal(batched_rotated_nms(boxes, scores, labels, 0.3), whole)
    assert torch.equal(whole, _reference(boxes, scores, 0.3, labels))


def test_decode_of_axis_aligned_boxes_equals_nms_decode() -> None:
    torch.manual_seed(0)
    b, a, c = 3, 400, 4
    xy = torch.rand(b, a, 2) * 200
    wh = 10 + torch.rand(b, a, 2) * 40
    rboxes = torch.cat((xy + wh / 2, wh, torch.zeros(b, a, 1)), -1)
    logits = torch.randn(b, a, c) * 2
    dets, kept = rotated_nms_decode(rboxes, logits, conf=0.3, iou=0.5, max_det=50)
    ref_dets, ref_kept = nms_decode(torch.cat((xy, xy + wh), -1), logits, conf=0.3, iou=0.5, max_det=50)
    assert torch.equal(kept, ref_kept)
    assert (kept >= 0).sum(1).tolist() == [50, 50, 50]  # the cap was exercised
    torch.testing.assert_close(dets[..., 5:], ref_dets[..., 4:])
    valid = kept >= 0
    rows = rboxes.gather(1, kept.clamp(min=0)[..., None].expand(-1, -1, 5))
    torch.testing.assert_close(dets[..., :5][valid], rows[valid])


def test_decode_matches_per_image_class_wise_nms_with_padding() -> None:
    g = torch.Generator().manual_seed(2)
    b, a, c = 2, 150, 3
    rboxes = torch.stack([_clustered(a, g) for _ in range(b)])
    logits = torch.randn(b, a, c, generator=g) * 2
    logits[1] = -20  # the second image has no candidate at all
    conf, iou, max_det = 0.9, 0.2, 60
    dets, kept = rotated_nms_decode(rboxes, logits, conf=conf, iou=iou, max_det=max_det)
    assert dets.shape == (b, max_det, 7) and kept.shape == (b, max_det) and kept.dtype == torch.long
    best, cls = logits.sigmoid().max(-1)
    m = best[0] >= conf
    idx = m.nonzero().squeeze(1)
    ref = idx[_reference(rboxes[0, m], best[0, m], iou, cls[0, m])][:max_det]
    count = len(ref)
    assert 10 < count < max_det, count  # padding rows exist
    assert kept[0, :count].tolist() == ref.tolist()
    torch.testing.assert_close(dets[0, :count, :5], rboxes[0, ref])
    torch.testing.assert_close(dets[0, :count, 5], best[0, ref])
    torch.testing.assert_close(dets[0, :count, 6], cls[0, ref].float())
    assert (kept[0, count:] == -1).all() and (dets[0, count:] == 0).all()
    assert (kept[1] == -1).all() and (dets[1] == 0).all()


def test_pre_nms_topk_changes_nothing_while_enough_boxes_survive() -> None:
    g = torch.Generator().manual_seed(3)
    rboxes = torch.stack([_clustered(500, g, spread=30.0) for _ in range(2)])
    logits = torch.randn(2, 500, 4, generator=g)
    full = rotated_nms_decode(rboxes, logits, max_det=20, pre_nms_topk=None)
    capped = rotated_nms_decode(rboxes, logits, max_det=20, pre_nms_topk=100)
    assert (full[1] >= 0).all()
    assert torch.equal(full[0], capped[0]) and torch.equal(full[1], capped[1])
    few = rotated_nms_decode(rboxes, logits, max_det=20, pre_nms_topk=3)
    assert ((few[1] >= 0).sum(1) <= 3).all()


def test_decode_empty_inputs() -> None:
    dets, kept = rotated_nms_decode(torch.rand(2, 10, 5), torch.full((2, 10, 3), -20.0))
    assert dets.shape == (2, 300, 7) and (kept == -1).all() and (dets == 0).all()
    dets, kept = rotated_nms_decode(torch.rand(2, 0, 5), torch.zeros(2, 0, 3))
    assert dets.shape == (2, 300, 7) and (kept == -1).all()
