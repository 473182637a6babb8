"""A deliberately naive, loop-based TAL/STAL/o2o assigner used only as a test oracle.

It follows the spec text step by step per image, per GT and per anchor in plain
Python floats, so it shares no code (and no vectorisation tricks) with
``lucidyolo.assign``.
"""

from __future__ import annotations

from torch import Tensor


def _iou(a: list[float], b: list[float]) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    area_a = max(0.0, a[2] - a[0]) * max(0.0, a[3] - a[1])
    area_b = max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])
    return inter / (area_a + area_b - inter + 1e-7)


def reference_assign(
    scores: Tensor,
    boxes: Tensor,
    anchors: Tensor,
    labels: Tensor,
    gts: Tensor,
    mask: Tensor,
    topk: int,
    stal: bool,
    single: bool,
) -> dict[str, list]:
    """Returns per image: ``gt_index`` list over anchors (-1 background) and ``weights`` list."""
    out = {"gt_index": [], "weights": []}
    num_anchors = anchors.shape[0]
    for b in range(scores.shape[0]):
        claims: dict[int, list[tuple[float, int]]] = {}  # anchor -> [(t, g)]
        table: dict[tuple[int, int], tuple[float, float]] = {}  # (g, a) -> (t, iou)
        for g in range(gts.shape[1]):
            if not bool(mask[b, g]):
                continue
            x1, y1, x2, y2 = gts[b, g].tolist()
            cx1, cy1, cx2, cy2 = x1, y1, x2, y2
            if stal:
                if x2 - x1 < 8:
                    cx1, cx2 = (x1 + x2) / 2 - 8, (x1 + x2) / 2 + 8
                if y2 - y1 < 8:
                    cy1, cy2 = (y1 + y2) / 2 - 8, (y1 + y2) / 2 + 8
            ranked = []
            for a in range(num_anchors):
                ax, ay = anchors[a].tolist()
                u = _iou(boxes[b, a].tolist(), [x1, y1, x2, y2])
                t = float(scores[b, a, int(labels[b, g])]) * u**6
                table[(g, a)] = (t, u)
                inside = cx1 <= ax <= cx2 and cy1 <= ay <= cy2
                ranked.append((t if inside else -1.0, a, inside))
            ranked.sort(key=lambda r: -r[0])
            for t, a, inside in ranked[:topk]:
                if inside:
                    claims.setdefault(a, []).append((t, g))
        owner = {}
        for a, lst in claims.items():
            best_t = max(t for t, _ in lst)
            owner[a] = min(g for t, g in lst if t == best_t)
        if single:
            per_gt: dict[int, list[int]] = {}
            for a, g in owner.items():
                per_gt.setdefault(g, []).append(a)
            owner = {}
            for g, anchors_of_g in per_gt.items():
                best = max(table[(g, a)][0] for a in anchors_of_g)
                owner[min(a for a in anchors_of_g if table[(g, a)][0] == best)] = g
        gt_index = [-1] * num_anchors
        weights = [0.0] * num_anchors
        for g in set(owner.values()):
            mine = [a for a, og in owner.items() if og == g]
            max_t = max(table[(g, a)][0] for a in mine)
            max_u = max(table[(g, a)][1] for a in mine)
            for a in mine:
                gt_index[a] = g
                weights[a] = table[(g, a)][0] * max_u / max(max_t, 1.1754943508222875e-38)
        out["gt_index"].append(gt_index)
        out["weights"].append(weights)
    return out
