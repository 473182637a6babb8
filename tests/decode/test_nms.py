"""NMS decode over a batch: class-wise suppression, per-image isolation, padding, counts."""

from __future__ import annotations

import torch
from torchvision.ops import nms

from lucidyolo.decode import nms_decode


def _logit(p: float) -> float:
    return float(torch.logit(torch.tensor(p)))


def test_suppresses_same_class_overlap_but_keeps_other_class_and_other_image() -> None:
    box = [10.0, 10.0, 50.0, 50.0]
    shifted = [12.0, 12.0, 52.0, 52.0]  # IoU ~0.82 with box
    boxes = torch.tensor([[box, shifted, shifted], [shifted, box, [0.0, 0.0, 1.0, 1.0]]])
    lo = -20.0
    logits = torch.full((2, 3, 2), lo)
    logits[0, 0, 0], logits[0, 1, 0], logits[0, 2, 1] = _logit(0.9), _logit(0.8), _logit(0.7)
    logits[1, 0, 0], logits[1, 1, 0], logits[1, 2, 0] = _logit(0.6), _logit(0.5), _logit(0.0005)
    dets, kept = nms_decode(boxes, logits, conf=0.001, iou=0.7, max_det=4)
    counts = (kept >= 0).sum(1)
    assert counts.tolist() == [2, 1]
    assert kept.tolist() == [[0, 2, -1, -1], [0, -1, -1, -1]]  # the anchor each row came from
    assert dets.shape == (2, 4, 6)
    torch.testing.assert_close(dets[0, 0], torch.tensor([*box, 0.9, 0.0]))
    torch.testing.assert_close(dets[0, 1], torch.tensor([*shifted, 0.7, 1.0]))
    torch.testing.assert_close(dets[1, 0], torch.tensor([*shifted, 0.6, 0.0]))
    assert (dets[0, 2:] == 0).all() and (dets[1, 1:] == 0).all()


def test_matches_per_image_reference_and_caps_at_max_det() -> None:
    torch.manual_seed(0)
    b, a, c = 3, 400, 4
    xy = torch.rand(b, a, 2) * 200
    boxes = torch.cat((xy, xy + 10 + torch.rand(b, a, 2) * 40), dim=-1)
    logits = torch.randn(b, a, c) * 2
    dets, kept = nms_decode(boxes, logits, conf=0.3, iou=0.5, max_det=50)
    counts = (kept >= 0).sum(1)
    rows_of = kept.clamp(min=0)
    valid = kept >= 0  # gathering the raw boxes by the kept index gives back each row's box
    torch.testing.assert_close(boxes.gather(1, rows_of[..., None].expand(-1, -1, 4))[valid], dets[..., :4][valid])
    best, cls = logits.sigmoid().max(-1)
    for i in range(b):  # reference: per image, per class torchvision nms
        rows = []
        for k in range(c):
            m = (cls[i] == k) & (best[i] >= 0.3)
            keep = nms(boxes[i, m], best[i, m], 0.5)
            rows.append(torch.cat((boxes[i, m][keep], best[i, m][keep, None], torch.full((len(keep), 1), float(k))), 1))
        ref = torch.cat(rows)
        ref = ref[ref[:, 4].argsort(descending=True)][:50]
        assert counts[i] == len(ref)
        torch.testing.assert_close(dets[i, : len(ref)], ref)
    assert (counts == 50).any()  # the cap was exercised


def test_empty_input_gives_zero_rows() -> None:
    dets, kept = nms_decode(torch.rand(2, 10, 4), torch.full((2, 10, 3), -20.0))
    assert dets.shape == (2, 300, 6) and (kept == -1).all() and (dets == 0).all()


def test_grouped_nms_keeps_what_torchvisions_batched_nms_keeps():
    from torchvision.ops import batched_nms

    from lucidyolo.decode.nms import grouped_nms

    g = torch.Generator().manual_seed(3)
    xy = torch.rand(5000, 2, generator=g) * 300
    boxes = torch.cat([xy, xy + torch.rand(5000, 2, generator=g) * 60 + 2], 1)
    scores = torch.rand(5000, generator=g)  # distinct: the order of survivors is unique
    groups = torch.randint(0, 120, (5000,), generator=g)
    want = batched_nms(boxes, scores, groups, 0.5)  # the oracle: torchvision's own
    got = grouped_nms(boxes, scores, groups, 0.5)
    assert torch.equal(got, want)
    assert grouped_nms(boxes[:0], scores[:0], groups[:0], 0.5).numel() == 0


def test_the_pre_nms_cap_changes_no_row_while_max_det_boxes_survive_it():
    from lucidyolo.decode.nms import nms_decode

    g = torch.Generator().manual_seed(4)
    b, a, c = 2, 4000, 5
    xy = torch.rand(b, a, 2, generator=g) * 600
    boxes = torch.cat([xy, xy + torch.rand(b, a, 2, generator=g) * 40 + 2], -1)
    logits = torch.randn(b, a, c, generator=g)  # an untrained model: every anchor above 0.001
    full, full_idx = nms_decode(boxes, logits, pre_nms_topk=None)
    capped, capped_idx = nms_decode(boxes, logits, pre_nms_topk=1000)
    assert (full[..., 4] > 0).sum(1).tolist() == [300, 300]
    assert torch.equal(capped, full) and torch.equal(capped_idx, full_idx)
    # a cap below what max_det needs returns fewer rows, never other ones
    few, _ = nms_decode(boxes, logits, pre_nms_topk=50)
    n = int((few[0, :, 4] > 0).sum())
    assert 0 < n <= 50 and set(few[0, :n, 4].tolist()) <= set(full[0, :, 4].tolist())
