"""End-to-end top-k decode: best class, score order, padding, index gathering."""

from __future__ import annotations

import torch

from lucidyolo.decode import e2e_topk


def test_topk_picks_best_class_and_sorts_by_score() -> None:
    torch.manual_seed(0)
    boxes = torch.rand(2, 50, 4) * 100
    logits = torch.randn(2, 50, 5)
    dets, index = e2e_topk(boxes, logits, k=10)
    assert dets.shape == (2, 10, 6) and index.shape == (2, 10)
    best, cls = logits.sigmoid().max(-1)
    for b in range(2):  # reference: a plain sort per image
        order = best[b].argsort(descending=True)[:10]
        torch.testing.assert_close(index[b], order)
        torch.testing.assert_close(dets[b, :, :4], boxes[b, order])
        torch.testing.assert_close(dets[b, :, 4], best[b, order])
        torch.testing.assert_close(dets[b, :, 5], cls[b, order].float())


def test_fewer_anchors_than_k_pads_with_zero_rows_and_minus_one_index() -> None:
    boxes = torch.rand(1, 3, 4) + 1
    logits = torch.tensor([[[0.0, 2.0], [3.0, -1.0], [-5.0, -6.0]]])
    dets, index = e2e_topk(boxes, logits, k=6)
    assert index[0].tolist() == [1, 0, 2, -1, -1, -1]
    assert dets[0, :3, 5].tolist() == [0.0, 1.0, 0.0]
    assert (dets[0, 3:] == 0).all()


def test_kept_index_gathers_task_outputs() -> None:
    torch.manual_seed(1)
    logits = torch.randn(2, 20, 3)
    angle = torch.randn(2, 20, 1)
    _, index = e2e_topk(torch.rand(2, 20, 4), logits, k=5)
    gathered = angle.gather(1, index.unsqueeze(-1))
    assert torch.equal(gathered[0, 0], angle[0, index[0, 0]])
