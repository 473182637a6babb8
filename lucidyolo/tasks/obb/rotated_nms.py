"""Greedy NMS for rotated boxes (exact polygon IoU), single-class, class-wise and batched decode.

Semantics are those of the textbook sequential loop: visit the boxes by
descending score and keep a box unless its IoU with an already kept box is
``> iou_threshold``. The loop is replaced by a fixed point over a precomputed
suppression relation, so the work is a few vectorised passes, not one Python
step per box:

1. Sort by score (stable, so equal scores keep their input order). With boxes
   at sorted positions ``0..N-1``, ``S[i, j]`` (``i < j``) says box ``i``
   would suppress box ``j``: same group (class, image) and IoU above the
   threshold.
2. From ``keep = all True``, iterate ``keep[j] = not any_i (S[i, j] and keep[i])``
   until it stops changing.

Why the fixed point is the greedy answer. Write ``g`` for the greedy result:
``g[j] = not any_{i<j} (S[i, j] and g[i])`` (box ``j`` survives iff no kept
earlier box suppresses it), which defines ``g`` uniquely by induction on ``j``.
(a) Any fixed point ``k`` satisfies the same recursion, so ``k = g``: ``k[0]``
and ``g[0]`` are both True (nothing precedes box 0), and if ``k[i] = g[i]`` for
every ``i < j`` then ``k[j] = g[j]`` because the recursion for ``j`` reads only
those. So stopping at the first iterate that does not change is exact.
(b) The iteration does reach it: if ``keep_t`` agrees with ``g`` on positions
``< t``, then ``keep_{t+1}`` agrees on positions ``< t + 1`` (position ``t``
reads only positions ``< t``). Hence at most ``N + 1`` passes. More finely, a
box settles one pass after every box that can suppress it has, so the count is
the longest chain of ``S`` plus about two: a handful in practice.

The relation is stored sparsely, as the list of ``(i, j)`` pairs with
``S[i, j]`` (the fixed point then scatters over that list): no ``N x N`` table
is built. Candidate pairs come from a sweep over the x-extent of each box's
enclosing circle within its group (sort by the left end, ``searchsorted`` the
right end, see :func:`_suppression_pairs`), so boxes far apart are never
paired; the candidates that pass the circle test and the exact IoU test are
the suppression pairs. Boxes of different classes (or images) never suppress
each other because the group enters the sweep as an integer key, a class mask
on ``S``, not as a coordinate offset (which would cost float32 precision).
"""

from __future__ import annotations

from bisect import bisect_right

import torch
from torch import Tensor

from lucidyolo.structures.rotated_iou import rotated_iou_pairs

# Candidate pairs per sweep step (int64 index arrays of this length, a few at a time).
_PAIR_CHUNK = 1 << 20


def _suppression_pairs(
    boxes: Tensor, active: Tensor, groups: Tensor | None, iou_threshold: float
) -> tuple[Tensor, Tensor]:
    """Flat ``(suppressor, suppressed)`` positions of every pair with ``S[i, j]``.

    Candidate pairs are the boxes of one group (row and class) whose
    enclosing circles overlap in x. A sweep finds them without an ``N x N``
    table: sorted by ``(group, left end)``, the partners of a box are the run of
    boxes after it whose left end is ``<=`` its right end, found with
    ``searchsorted``. To search on ``(group, value)`` with one sorted key, the
    left and right ends are replaced by their integer ranks among all ends
    (lefts first on ties, so ``<=`` is kept) and the key is
    ``group * (2M) + rank``, exact in int64.

    Args:
        boxes: ``(B, K, 5)`` float boxes, each row sorted by descending score.
        active: ``(B, K)`` bool, boxes that can suppress or be suppressed.
        groups: ``(B, K)`` long class ids or None; rows (images) never mix.
        iou_threshold: suppress above this IoU.

    Returns:
        Two ``(S,)`` long tensors of flat positions ``row * K + position``,
        the first always the earlier (higher-scored) box of its pair.
    """
    b, k = active.shape
    dev = boxes.device
    pos = active.flatten().nonzero().squeeze(1)  # (M,) flat positions taking part
    m = pos.numel()
    empty = pos.new_zeros(0)
    if m < 2:
        return empty, empty
    flat_boxes = boxes.reshape(-1, 5)[pos]
    wh = flat_boxes[:, 2:4].clamp(min=0)
    radius = 0.5 * torch.hypot(wh[:, 0], wh[:, 1]) * (1 + 1e-5)  # slack against rounding
    gid = torch.div(pos, k, rounding_mode="floor")  # the row (image)
    if groups is not None:
        lab = groups.flatten()[pos]
        lab = lab - lab.min()
        gid = gid * (int(lab.max()) + 1) + lab
    ends = torch.cat((flat_boxes[:, 0] - radius, flat_boxes[:, 0] + radius))  # lefts, then rights
    rank = torch.empty(2 * m, dtype=torch.long, device=dev)
    rank[torch.sort(ends, stable=True).indices] = torch.arange(2 * m, device=dev)
    key_left = gid * (2 * m) + rank[:m]
    key_right = gid * (2 * m) + rank[m:]
    key_sorted, by_key = key_left.sort()
    end = torch.searchsorted(key_sorted, key_right[by_key], right=True)  # (M,) per sorted slot
    count = (end - torch.arange(m, device=dev) - 1).clamp(min=0)
    cum_host = torch.cumsum(count, 0).tolist()
    total = cum_host[-1]
    sup_parts, sub_parts = [empty], [empty]
    start, done = 0, 0
    while done < total:
        # Slots [start, stop) hold at most _PAIR_CHUNK pairs (or a single slot).
        stop = min(max(bisect_right(cum_host, done + _PAIR_CHUNK), start + 1), m)
        c = count[start:stop]
        first = torch.cumsum(c, 0) - c
        qi = torch.repeat_interleave(torch.arange(start, stop, device=dev), c)
        qj = qi + 1 + torch.arange(qi.numel(), device=dev) - torch.repeat_interleave(first, c)
        i, j = by_key[qi], by_key[qj]  # indices into the active list
        near = (flat_boxes[i, :2] - flat_boxes[j, :2]).square().sum(1) <= (radius[i] + radius[j]).square()
        i, j = i[near], j[near]
        over = rotated_iou_pairs(flat_boxes[i], flat_boxes[j]) > iou_threshold
        i, j = i[over], j[over]
        # pos is increasing, so the smaller index is the higher-scored box.
        sup_parts.append(pos[torch.minimum(i, j)])
        sub_parts.append(pos[torch.maximum(i, j)])
        done = cum_host[stop - 1]
        start = stop
    return torch.cat(sup_parts), torch.cat(sub_parts)


def _greedy_keep(boxes: Tensor, valid: Tensor, groups: Tensor | None, iou_threshold: float) -> Tensor:
    """Greedy NMS survivors of score-sorted rows: ``(B, K, 5), (B, K) -> (B, K)`` bool.

    ``valid`` marks real candidates (padding and below-threshold entries are
    never kept). Boxes with no area have IoU 0 with everything: kept, never
    suppressing; so are non-finite boxes (their IoU compares False, as in
    torchvision).
    """
    if iou_threshold < 0:
        raise ValueError(f"iou_threshold must be >= 0, got {iou_threshold}")
    boxes = boxes.float()
    finite = torch.isfinite(boxes).all(-1)
    active = valid & finite & (boxes[..., 2] > 0) & (boxes[..., 3] > 0)
    sup, sub = _suppression_pairs(boxes, active, groups, iou_threshold)
    keep = valid.flatten().clone()
    for _ in range(keep.numel() + 1):  # see the module docstring: bounded and exact
        suppressed = torch.zeros_like(keep)
        suppressed[sub[keep[sup]]] = True
        new = valid.flatten() & ~suppressed
        if torch.equal(new, keep):
            break
        keep = new
    return keep.view_as(valid)


def rotated_nms(rboxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Greedy NMS of rotated boxes with exact IoU.

    Args:
        rboxes: ``(N, 5)`` ``cx, cy, w, h, theta``.
        scores: ``(N,)``.
        iou_threshold: suppress a box whose IoU with a kept, higher-scored box
            is above this (``>= 0``).

    Returns:
        ``(K,)`` long indices into the input of the kept boxes, by descending
        score (equal scores in input order).
    """
    return batched_rotated_nms(rboxes, scores, None, iou_threshold)


def batched_rotated_nms(
    rboxes: Tensor, scores: Tensor, labels: Tensor | None, iou_threshold: float
) -> Tensor:
    """Class-wise greedy NMS of rotated boxes: boxes of different labels never suppress each other.

    Args:
        rboxes: ``(N, 5)`` ``cx, cy, w, h, theta``.
        scores: ``(N,)``.
        labels: ``(N,)`` integer class (or any group id); None for one group.
        iou_threshold: suppression threshold (``>= 0``).

    Returns:
        ``(K,)`` long indices of the kept boxes, by descending score.
    """
    order = torch.sort(scores, descending=True, stable=True).indices
    groups = None if labels is None else labels[order][None].long()
    valid = torch.ones(1, order.numel(), dtype=torch.bool, device=rboxes.device)
    keep = _greedy_keep(rboxes[order][None], valid, groups, iou_threshold)[0]
    return order[keep]


def rotated_nms_decode(
    rboxes: Tensor,
    logits: Tensor,
    conf: float = 0.001,
    iou: float = 0.7,
    max_det: int = 300,
    pre_nms_topk: int | None = 30000,
) -> tuple[Tensor, Tensor]:
    """Class-wise rotated NMS over a batch, padded to a fixed number of rows.

    The rotated twin of :func:`~lucidyolo.decode.nms.nms_decode`: best class
    per anchor, ``score >= conf``, class-wise NMS per image, the first
    ``max_det`` survivors of each image by descending score.

    ``pre_nms_topk`` caps the candidates per image (highest best-class scores
    first) to bound the work. Greedy NMS decides each box from the higher-scored
    ones only, so the cap never changes a row unless fewer than ``max_det``
    boxes survive among the top ``pre_nms_topk``; the default is above the
    anchor count of common input sizes. None: no cap.

    Args:
        rboxes: ``(B, A, 5)`` decoded ``cx, cy, w, h, theta`` in pixels.
        logits: ``(B, A, C)`` class logits.
        conf: keep anchors whose best sigmoid score is ``>= conf``.
        iou: suppress a box overlapping a higher-scored box of the same class
            and image by more than this rotated IoU.
        max_det: rows per image.
        pre_nms_topk: candidates per image entering NMS, or None for all.

    Returns:
        dets: ``(B, max_det, 7)`` rows ``[cx, cy, w, h, theta, score, class]``
            sorted by decreasing score, zero rows as padding.
        kept_index: ``(B, max_det)`` long anchor index of each row (``-1`` on
            padding rows), as :func:`~lucidyolo.decode.nms.nms_decode` returns it.
    """
    b, a, _ = logits.shape
    best, cls = logits.sigmoid().max(dim=-1)  # (B, A)
    kk = a if pre_nms_topk is None else min(pre_nms_topk, a)
    # A stable sort rather than topk: equal scores keep anchor order, as in batched_rotated_nms.
    score, anchor = best.float().sort(dim=1, descending=True, stable=True)
    score, anchor = score[:, :kk], anchor[:, :kk]  # (B, kk)
    boxes = rboxes.gather(1, anchor[..., None].expand(b, kk, 5)).float()  # (B, kk, 5)
    labels = cls.gather(1, anchor)
    valid = score >= conf
    keep = _greedy_keep(boxes, valid, labels, iou)  # (B, kk)
    rank = torch.cumsum(keep, dim=1) - 1  # row of each survivor in its image
    img, pos = (keep & (rank < max_det)).nonzero(as_tuple=True)
    row = rank[img, pos]
    dets = rboxes.new_zeros(b, max_det, 7, dtype=torch.float32)
    dets[img, row] = torch.cat(
        (boxes[img, pos], score[img, pos, None], labels[img, pos, None].float()), dim=1
    )
    kept = torch.full((b, max_det), -1, dtype=torch.long, device=rboxes.device)
    kept[img, row] = anchor[img, pos]
    return dets.to(rboxes.dtype), kept
