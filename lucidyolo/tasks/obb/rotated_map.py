"""Rotated-box mAP: exact polygon IoU, the DOTA difficult rule, COCO 101-point and VOC AP.

IoU. Each rotated box ``[cx, cy, w, h, theta]`` becomes its 4-corner polygon
(:func:`~lucidyolo.structures.geometry.rbox_to_corners`) and pairs are
intersected by shapely 2.x's vectorised ``intersection`` / ``area`` (GEOS),
so the IoU is exact polygon IoU, not a raster or Gaussian approximation.
``union = area_a + area_b - inter`` with the areas ``w h`` of the boxes
themselves. Two guards: a pair whose upright envelopes do not overlap is never
handed to shapely (IoU 0, exactly what shapely would say, and it keeps whole
DOTA scenes with thousands of boxes cheap), and a box with ``w <= 0``,
``h <= 0`` or a non-finite number is empty: IoU 0 with everything (no 0/0, no
invalid polygon).
``rbox_to_corners`` returns float32, so corners are computed around the
origin and the centre is added back in float64: the rounding is then relative
to the box size (~6e-8 of it), not to the scene coordinate, which matters for
small objects far from the origin of a 20k-pixel scene.

Matching (per image and class, detections in descending score, at every IoU
threshold ``t`` independently), the DOTA difficult rule:

1. the detection takes the best (highest-IoU) still-unmatched non-difficult
   GT with ``IoU >= t``: a true positive;
2. otherwise, if its IoU with any difficult GT is ``>= t``, it is ignored
   (neither TP nor FP; a difficult GT is never consumed, so it can excuse
   several detections, like a COCO crowd region);
3. otherwise it is a false positive.

Difficult GTs are not in the recall denominator (``npos`` counts the
non-difficult ones). Rule 1 is COCOeval's greedy matching, so with no
difficult GT and upright boxes the numbers equal pycocotools' ``bbox`` AP
(the tests check this to 1e-6). The greedy pass loops over the detections
that reach ``min(t)`` with some non-difficult GT (the others are false
positives or ignored at every threshold and are settled in one vectorised
step), each step vectorised over GTs and thresholds.

Ranking. Per class, the detections of all images are ranked by score with a
stable sort over the concatenation in image order (each image's detections
already in stable score order), i.e. ties keep image order, then row order:
the order pycocotools' ``accumulate`` uses. Before that each image keeps its
top ``max_dets`` detections over all classes (the deployed graph's 300 per
tile); COCOeval caps per image *and class* instead, which is the same whenever
an image has at most ``max_dets`` detections.

AP.

* :func:`rotated_map` (the training/eval figure): COCO's 101-point
  interpolated AP: the precision curve is made monotone non-increasing from
  the right, sampled at recall ``0, 0.01, ..., 1`` (the first ranked position
  reaching each recall; 0 where it is never reached) and averaged; AP per
  threshold ``.50:.05:.95``, mAP50-95 the mean over thresholds. A class with no
  non-difficult GT has NaN AP and is left out of the class mean (COCO's ``-1``
  rule); a class with GT and no detection has AP 0.
* :func:`voc_map50` (DOTA's own task-1 figure for whole scenes): IoU 0.5, no
  detection cap, VOC AP; the 2007 11-point metric by default, which is the
  one DOTA's official evaluation reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import shapely

from lucidyolo.metrics.matches import Matches
from lucidyolo.structures.geometry import rbox_to_corners

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
"""``.50:.05:.95``, built as pycocotools builds its ``iouThrs`` (bit-identical floats)."""

RECALL_POINTS = np.linspace(0.0, 1.0, 101)
"""The 101 recall samples of COCO's interpolated AP (pycocotools' ``recThrs``)."""

VOC07_RECALL_POINTS = np.arange(11) / 10.0
"""``0, 0.1, ..., 1`` of VOC2007's 11-point AP, as exact decimals (``3/10 == 0.3``)."""

DetList = Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]
"""Per image ``(rboxes (N, 5), scores (N,), labels (N,))``."""

GtList = Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]
"""Per image ``(rboxes (M, 5), labels (M,), difficult (M,) bool)``."""

# --------------------------------------------------------------------- IoU


def _corners64(rboxes: np.ndarray) -> np.ndarray:
    """``(N, 5)`` -> ``(N, 4, 2)`` float64 corners, float32 rounding relative to the box size only."""
    centred = rboxes.copy()
    centred[:, :2] = 0.0
    return rbox_to_corners(centred).astype(np.float64) + rboxes[:, None, :2]


def rotated_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact pairwise IoU of rotated boxes (polygon intersection by shapely).

    Args:
        a: ``(N, 5)`` ``cx, cy, w, h, theta`` (theta in radians).
        b: ``(M, 5)`` in the same frame.

    Returns:
        ``(N, M)`` float64 IoU in ``[0, 1]``; 0 for a pair whose union is not
        positive and for any box with ``w <= 0``, ``h <= 0`` or a non-finite value.
    """
    a = np.asarray(a, dtype=np.float64).reshape(-1, 5)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 5)
    out = np.zeros((a.shape[0], b.shape[0]))
    if out.size == 0:
        return out
    # w <= 0 or h <= 0 is an empty box (as in lucidyolo.structures.rotated_iou), not a mirrored one.
    ok_a = np.isfinite(a).all(1) & (a[:, 2] > 0) & (a[:, 3] > 0)
    ok_b = np.isfinite(b).all(1) & (b[:, 2] > 0) & (b[:, 3] > 0)
    area_a, area_b = np.where(ok_a, a[:, 2] * a[:, 3], 0.0), np.where(ok_b, b[:, 2] * b[:, 3], 0.0)
    # Degenerate boxes get a harmless placeholder; they never reach shapely (masked below).
    ca = _corners64(np.where(ok_a[:, None], a, [0.0, 0.0, 1.0, 1.0, 0.0]))
    cb = _corners64(np.where(ok_b[:, None], b, [0.0, 0.0, 1.0, 1.0, 0.0]))
    lo_a, hi_a, lo_b, hi_b = ca.min(1), ca.max(1), cb.min(1), cb.max(1)  # (N, 2), (M, 2)
    # Upright envelopes overlap (strictly: touching polygons have zero intersection anyway).
    cand = (
        (lo_a[:, None, 0] < hi_b[None, :, 0]) & (lo_b[None, :, 0] < hi_a[:, None, 0])
        & (lo_a[:, None, 1] < hi_b[None, :, 1]) & (lo_b[None, :, 1] < hi_a[:, None, 1])
        & ok_a[:, None] & ok_b[None, :]
    )  # fmt: skip
    i, j = np.nonzero(cand)
    if i.size == 0:
        return out
    ua, ia = np.unique(i, return_inverse=True)
    ub, ib = np.unique(j, return_inverse=True)
    poly_a, poly_b = shapely.polygons(ca[ua]), shapely.polygons(cb[ub])  # only boxes in some pair
    inter = shapely.area(shapely.intersection(poly_a[ia], poly_b[ib]))  # (P,)
    union = area_a[i] + area_b[j] - inter
    out[i, j] = np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)
    return np.clip(out, 0.0, 1.0)


# --------------------------------------------------------------- matching


def match_detections(ious: np.ndarray, difficult: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Greedy matching of one image's detections of one class (DOTA difficult rule).

    Args:
        ious: ``(n, m)`` IoU of the detections (rows in descending score) with the GTs.
        difficult: ``(m,)`` bool.
        thresholds: ``(T,)`` IoU thresholds; a match needs ``IoU >= t``.

    Returns:
        ``(T, n)`` int8: 1 true positive, 0 false positive, -1 ignored (its
        best chance was a difficult GT).
    """
    thr = np.asarray(thresholds, dtype=np.float64).reshape(-1)
    n, m = ious.shape
    status = np.zeros((thr.size, n), np.int8)
    if n == 0 or m == 0:
        return status
    difficult = np.asarray(difficult, dtype=bool).reshape(m)
    easy = ious[:, ~difficult]  # (n, me)
    if easy.shape[1]:
        taken = np.zeros((thr.size, easy.shape[1]), bool)  # (T, me) GT already matched at threshold t
        t_idx = np.arange(thr.size)
        # Sequential by nature (a match removes a GT for every later detection); only
        # detections that can match at the lowest threshold need a step.
        for d in np.flatnonzero(easy.max(1) >= thr.min()):
            row = easy[d]  # (me,)
            avail = (row[None] >= thr[:, None]) & ~taken  # (T, me)
            best = np.where(avail, row[None], -1.0).argmax(1)  # (T,) highest IoU, first on ties
            hit = avail[t_idx, best]
            taken[t_idx[hit], best[hit]] = True
            status[hit, d] = 1
    if difficult.any():
        near = ious[:, difficult].max(1)[None] >= thr[:, None]  # (T, n)
        status[(status == 0) & near] = -1
    return status


def _as_image(
    det: tuple[np.ndarray, np.ndarray, np.ndarray], gt: tuple[np.ndarray, np.ndarray, np.ndarray], num_classes: int
) -> tuple[np.ndarray, ...]:
    drb = np.asarray(det[0], dtype=np.float64).reshape(-1, 5)
    dsc = np.asarray(det[1], dtype=np.float64).reshape(-1)
    dlb = np.asarray(det[2]).reshape(-1).astype(np.int64)
    grb = np.asarray(gt[0], dtype=np.float64).reshape(-1, 5)
    glb = np.asarray(gt[1]).reshape(-1).astype(np.int64)
    gdf = np.zeros(glb.shape, bool) if gt[2] is None else np.asarray(gt[2], dtype=bool).reshape(-1)
    if not (drb.shape[0] == dsc.size == dlb.size and grb.shape[0] == glb.size == gdf.size):
        raise ValueError(
            f"ragged image: {drb.shape[0]} det boxes, {dsc.size} scores, {dlb.size} labels; "
            f"{grb.shape[0]} GT boxes, {glb.size} labels, {gdf.size} difficult flags"
        )
    for what, lab in (("detection", dlb), ("ground-truth", glb)):
        if lab.size and (lab.min() < 0 or lab.max() >= num_classes):
            raise ValueError(f"{what} label outside [0, {num_classes}): {sorted(set(lab.tolist()))}")
    return drb, dsc, dlb, grb, glb, gdf


def match_voc(ious: np.ndarray, difficult: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """VOC / DOTA task-1 matching of one image's detections of one class at one threshold.

    The classic rule DOTA's published figures come from, which differs from
    :func:`match_detections` in two ways: each detection looks only at its
    highest-IoU GT (difficult ones included), and needs ``IoU > t`` (strict).
    That GT difficult: ignored; already taken: a false positive (a duplicate);
    else a true positive.

    Args:
        ious: ``(n, m)`` IoU, rows in descending score.
        difficult: ``(m,)`` bool.
        thresholds: ``(1,)`` the IoU threshold.

    Returns:
        ``(1, n)`` int8 status as :func:`match_detections`.
    """
    t = float(np.asarray(thresholds).reshape(-1)[0])
    n, m = ious.shape
    status = np.zeros((1, n), np.int8)
    if n == 0 or m == 0:
        return status
    difficult = np.asarray(difficult, dtype=bool).reshape(m)
    best = ious.argmax(1)  # (n,) first on ties
    over = ious[np.arange(n), best] > t
    status[0, over & difficult[best]] = -1
    taken = np.zeros(m, bool)
    # Sequential by nature: the first (highest-scored) detection on a GT takes it.
    for d in np.flatnonzero(over & ~difficult[best]):
        if not taken[best[d]]:
            taken[best[d]] = True
            status[0, d] = 1
    return status


def _evaluate(
    dets: DetList, gts: GtList, num_classes: int, thresholds: np.ndarray, max_dets: int | None,
    matcher: Any = match_detections,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Per class: the ranked ``(T, n_c)`` status of its detections over all images, and ``npos (C,)``."""
    if len(dets) != len(gts):
        raise ValueError(f"{len(dets)} detection images but {len(gts)} ground-truth images")
    scores: list[list[np.ndarray]] = [[] for _ in range(num_classes)]
    status: list[list[np.ndarray]] = [[] for _ in range(num_classes)]
    npos = np.zeros(num_classes, np.int64)
    for det, gt in zip(dets, gts, strict=True):
        drb, dsc, dlb, grb, glb, gdf = _as_image(det, gt, num_classes)
        order = np.argsort(-dsc, kind="stable")
        if max_dets is not None:
            order = order[: int(max_dets)]
        drb, dsc, dlb = drb[order], dsc[order], dlb[order]
        npos += np.bincount(glb[~gdf], minlength=num_classes)
        for c in np.unique(dlb).tolist():  # a class with GT only adds to npos
            di, gi = dlb == c, glb == c
            scores[c].append(dsc[di])
            status[c].append(matcher(rotated_iou(drb[di], grb[gi]), gdf[gi], thresholds))
    ranked = []
    for c in range(num_classes):
        if not scores[c]:
            ranked.append(np.zeros((thresholds.size, 0), np.int8))
            continue
        # Stable over the image-order concatenation: ties keep image order (pycocotools' rule).
        order = np.argsort(-np.concatenate(scores[c]), kind="stable")
        ranked.append(np.concatenate(status[c], axis=1)[:, order])
    return ranked, npos


# --------------------------------------------------------------------- AP


def _pr_curves(status: np.ndarray, npos: int) -> tuple[np.ndarray, np.ndarray]:
    """``(T, n)`` ranked status -> recall, precision ``(T, n)``.

    Ignored rows stay in place and repeat the previous point, which changes no
    AP below (neither the envelope nor the first position reaching a recall).
    """
    tp = np.cumsum(status == 1, axis=1)
    fp = np.cumsum(status == 0, axis=1)
    return tp / npos, tp / np.maximum(tp + fp, 1)  # precision 0 before anything counts


def ap_101(status: np.ndarray, npos: int) -> np.ndarray:
    """COCO 101-point interpolated AP of ranked detections, per threshold.

    Args:
        status: ``(T, n)`` int8 ranked status (1 TP, 0 FP, -1 ignored).
        npos: non-difficult GTs of the class (``> 0``).

    Returns:
        ``(T,)`` AP.
    """
    t, n = status.shape
    if n == 0:
        return np.zeros(t)
    rc, pr = _pr_curves(status, npos)
    env = np.maximum.accumulate(pr[:, ::-1], axis=1)[:, ::-1]  # monotone non-increasing from the right
    out = np.empty(t)
    for k in range(t):
        idx = np.searchsorted(rc[k], RECALL_POINTS, side="left")  # first position reaching each recall
        out[k] = np.where(idx < n, env[k, np.minimum(idx, n - 1)], 0.0).mean()
    return out


def ap_voc(status: np.ndarray, npos: int, use_07_metric: bool = True) -> float:
    """VOC AP of one class's ranked detections at one threshold.

    Args:
        status: ``(n,)`` ranked status (1 TP, 0 FP, -1 ignored).
        npos: non-difficult GTs (``> 0``).
        use_07_metric: VOC2007 11-point (mean over ``t = 0, 0.1, ..., 1`` of the
            maximum precision at recall ``>= t``, 0 where not reached); else the
            area under the monotone precision envelope (all points).
    """
    s = np.asarray(status).reshape(-1)
    s = s[s != -1]
    if s.size == 0:
        return 0.0
    rc, pr = (x[0] for x in _pr_curves(s[None], npos))
    if use_07_metric:
        reached = rc[None] >= VOC07_RECALL_POINTS[:, None]  # (11, n)
        return float(np.where(reached, pr[None], 0.0).max(1).mean())
    mrec = np.concatenate([[0.0], rc, [1.0]])
    mpre = np.concatenate([[0.0], pr, [0.0]])
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    step = np.flatnonzero(mrec[1:] != mrec[:-1])
    return float(np.sum((mrec[step + 1] - mrec[step]) * mpre[step + 1]))


def _class_mean(ap: np.ndarray) -> float:
    """Mean over classes with a value (NaN if none), without numpy's empty-slice warning."""
    ok = np.isfinite(ap)
    return float(ap[ok].mean()) if ok.any() else float("nan")


@dataclass(frozen=True)
class RotatedAP:
    """Result of :func:`rotated_map` (C classes, T thresholds).

    Attributes:
        map50_95: mean over present classes of ``ap50_95`` (NaN if no class has GT).
        map50: the same at IoU 0.5 (NaN if 0.5 is not among the thresholds).
        map75: the same at IoU 0.75 (NaN if absent).
        ap: ``(T, C)`` AP per threshold and class; NaN for a class with no non-difficult GT.
        ap50_95: ``(C,)`` mean of ``ap`` over thresholds.
        ap50: ``(C,)`` row of ``ap`` at 0.5 (NaN if absent).
        npos: ``(C,)`` non-difficult GT count per class.
        iou_thresholds: ``(T,)``.
    """

    map50_95: float
    map50: float
    map75: float
    ap: np.ndarray
    ap50_95: np.ndarray
    ap50: np.ndarray
    npos: np.ndarray
    iou_thresholds: np.ndarray


def rotated_map(
    dets: DetList,
    gts: GtList,
    num_classes: int,
    iou_thresholds: np.ndarray | Sequence[float] | None = None,
    max_dets: int | None = 300,
) -> RotatedAP:
    """Rotated mAP over a set of images (tiles or whole scenes), COCO 101-point AP.

    Args:
        dets: per image ``(rboxes (N, 5), scores (N,), labels (N,))``, labels in ``[0, C)``.
        gts: per image ``(rboxes (M, 5), labels (M,), difficult (M,) bool)``
            (``difficult`` may be ``None``: none), same frame as ``dets``.
        num_classes: C.
        iou_thresholds: ``(T,)``; ``None`` is :data:`IOU_THRESHOLDS` (.50:.05:.95).
        max_dets: detections kept per image (top scores over all classes);
            ``None`` keeps all.

    Returns:
        :class:`RotatedAP`.
    """
    thr = IOU_THRESHOLDS if iou_thresholds is None else np.asarray(iou_thresholds, dtype=np.float64).reshape(-1)
    ranked, npos = _evaluate(dets, gts, int(num_classes), thr, max_dets)
    ap = np.full((thr.size, int(num_classes)), np.nan)
    for c, status in enumerate(ranked):
        if npos[c] > 0:
            ap[:, c] = ap_101(status, int(npos[c]))

    def row(t: float) -> np.ndarray:
        k = np.flatnonzero(np.isclose(thr, t, rtol=0.0, atol=1e-9))
        return ap[k[0]] if k.size else np.full(int(num_classes), np.nan)

    ap50_95 = ap.mean(0) if thr.size else np.full(int(num_classes), np.nan)
    ap50 = row(0.5)
    return RotatedAP(
        map50_95=_class_mean(ap50_95), map50=_class_mean(ap50), map75=_class_mean(row(0.75)),
        ap=ap, ap50_95=ap50_95, ap50=ap50, npos=npos, iou_thresholds=thr,
    )  # fmt: skip


@dataclass(frozen=True)
class VOCAP:
    """Result of :func:`voc_map50`.

    Attributes:
        map50: mean over classes with non-difficult GT (NaN if none).
        ap50: ``(C,)`` per class; NaN for a class with no non-difficult GT.
        npos: ``(C,)`` non-difficult GT count per class.
        use_07_metric: the AP rule used.
    """

    map50: float
    ap50: np.ndarray
    npos: np.ndarray
    use_07_metric: bool


def voc_map50(dets: DetList, gts: GtList, num_classes: int, use_07_metric: bool = True) -> VOCAP:
    """DOTA-style VOC mAP at IoU 0.5 (the figure DOTA's task-1 evaluation publishes).

    DOTA's classic matching (:func:`match_voc`: the highest-IoU GT only, IoU >
    0.5, a duplicate is a false positive, a difficult best GT is ignored), no
    cap on detections per image (whole scenes carry thousands), and VOC AP.

    The default is the VOC2007 11-point metric: DOTA's official evaluation and
    the figures published against it use it, and the point of this number is
    to compare with those figures. The 11 recall points are the exact decimals
    ``i / 10``. ``use_07_metric=False`` gives the all-point area under the
    monotone precision envelope (VOC2010+), which is closer to the 101-point
    AP of :func:`rotated_map`.

    Args:
        dets: per image ``(rboxes (N, 5), scores (N,), labels (N,))``.
        gts: per image ``(rboxes (M, 5), labels (M,), difficult (M,) bool)``.
        num_classes: C.
        use_07_metric: 11-point (``True``) or all-point AP.

    Returns:
        :class:`VOCAP`.
    """
    ranked, npos = _evaluate(dets, gts, int(num_classes), np.array([0.5]), None, matcher=match_voc)
    ap50 = np.full(int(num_classes), np.nan)
    for c, status in enumerate(ranked):
        if npos[c] > 0:
            ap50[c] = ap_voc(status[0], int(npos[c]), use_07_metric)
    return VOCAP(map50=_class_mean(ap50), ap50=ap50, npos=npos, use_07_metric=bool(use_07_metric))


def rotated_matches(
    dets: DetList, gts: GtList, num_classes: int, max_dets: int | None = 300, threshold: float = 0.5,
    names: Sequence[str] | None = None,
) -> Matches:
    """What :func:`rotated_map` matches at IoU ``threshold``, as a :class:`~lucidyolo.metrics.matches.Matches`.

    The same per-image cap, ranking and :func:`match_detections` as
    :func:`rotated_map` (so its AP50 is the PR curve's area); a detection
    excused by a difficult GT is ``ignored``; difficult GTs are not counted.
    :attr:`~lucidyolo.metrics.matches.Matches.confused` is the class of the
    non-difficult other-class GT an unmatched detection overlaps most (exact
    polygon IoU ``>= threshold``).

    Args:
        dets, gts: as :func:`rotated_map`.
        num_classes: C.
        max_dets: detections kept per image (``None``: all).
        threshold: the IoU a match needs.
        names: class names (default ``"0"``, ``"1"``, ...).
    """
    if len(dets) != len(gts):
        raise ValueError(f"{len(dets)} detection images but {len(gts)} ground-truth images")
    thr = np.array([float(threshold)])
    parts: list[tuple[np.ndarray, ...]] = []
    npos = np.zeros(int(num_classes), np.int64)
    for det, gt in zip(dets, gts, strict=True):
        drb, dsc, dlb, grb, glb, gdf = _as_image(det, gt, int(num_classes))
        order = np.argsort(-dsc, kind="stable")
        if max_dets is not None:
            order = order[: int(max_dets)]
        drb, dsc, dlb = drb[order], dsc[order], dlb[order]
        npos += np.bincount(glb[~gdf], minlength=int(num_classes))
        iou = rotated_iou(drb, grb)  # (n, m) every class: the matching reads its own class's columns
        status = np.zeros(dsc.size, np.int8)
        for c in np.unique(dlb).tolist():
            di, gi = dlb == c, glb == c
            status[di] = match_detections(iou[np.ix_(di, gi)], gdf[gi], thr)[0]
        other = np.where((glb[None, :] != dlb[:, None]) & ~gdf[None, :], iou, -1.0)  # (n, m)
        confused = np.full(dsc.size, -1, np.int64)
        if other.shape[1]:
            best = other.argmax(1)
            hit = (other[np.arange(dsc.size), best] >= thr[0]) & (status == 0)
            confused[hit] = glb[best[hit]]
        parts.append((dsc, dlb, status == 1, status == -1, confused))
    cols = [np.concatenate([p[k] for p in parts]) if parts else np.zeros(0) for k in range(5)]
    return Matches.build(cols[0], cols[1], cols[2], npos, ignored=cols[3], confused=cols[4], names=names,
                         iou_threshold=float(threshold))  # fmt: skip
