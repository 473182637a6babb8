"""A :class:`~lucidyolo.metrics.matches.Matches` read from pycocotools' own matching.

``COCOeval.evaluate`` leaves, per image and category, ``dtMatches`` (the GT id
each detection took at every IoU threshold), ``dtIgnore`` (crowd regions and
out-of-range areas), ``dtScores`` and ``gtIgnore``. Area ``all`` at the largest
``maxDets`` is what AP50 uses, so reading it at IoU 0.5 gives exactly the
matches behind the reported AP50.

faster-coco-eval keeps no ``evalImgs`` (that is part of its speed); with it,
the matches come from one pycocotools ``evaluate`` restricted to IoU 0.5 and
area ``all``: the same protocol (their parity is a test), one threshold
instead of ten.

Cross-class overlaps (:attr:`Matches.confused`) use the same object's IoU
(``computeIoU`` for ``bbox`` / ``segm``, ``computeOks`` for ``keypoints``)
between each image's unmatched detections and its non-crowd ground truths of
every class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lucidyolo.metrics.matches import Matches

_ANY_CAT = -987654321
"""A category key no dataset uses: the image's detections / GTs of every class, for cross-class IoU."""


def pycocotools_eval_at_50(
    coco_gt: Any, coco_dt: Any, iou_type: str, sigmas: np.ndarray | None, max_dets: int
) -> Any:
    """A pycocotools ``COCOeval`` that ran ``evaluate`` at IoU 0.5, area ``all``, ``max_dets``."""
    from pycocotools.cocoeval import COCOeval

    e = COCOeval(coco_gt, coco_dt, iouType=iou_type)
    if sigmas is not None:
        e.params.kpt_oks_sigmas = sigmas
    e.params.iouThrs = np.array([0.5])
    e.params.areaRng = [e.params.areaRng[0]]
    e.params.areaRngLbl = ["all"]
    e.params.maxDets = [max_dets]
    e.evaluate()
    return e


def matches_from_cocoeval(e: Any, coco_gt: Any, iou_threshold: float = 0.5) -> Matches:
    """Read one ``COCOeval`` (pycocotools, after ``evaluate``) at ``iou_threshold``, area ``all``.

    Classes are the positions of ``e.params.catIds`` (sorted category ids);
    names from the ground truth's categories.
    """
    p = e.params
    t = int(np.argmin(np.abs(np.asarray(p.iouThrs) - iou_threshold)))
    cat_ids = list(p.catIds)
    n_img = len(p.imgIds)
    n_area = len(p.areaRng)
    all_rng = list(p.areaRng[0])
    scores: list[np.ndarray] = []
    classes: list[np.ndarray] = []
    tp: list[np.ndarray] = []
    ignored: list[np.ndarray] = []
    dt_ids: list[list[int]] = []
    dt_img: list[np.ndarray] = []
    num_gt = np.zeros(len(cat_ids), np.int64)
    for k in range(len(cat_ids)):
        # evalImgs is [category][area][image]; area 0 is "all"
        for entry in e.evalImgs[k * n_area * n_img : k * n_area * n_img + n_img]:
            if entry is None:
                continue
            if list(entry["aRng"]) != all_rng:
                raise RuntimeError("COCOeval evalImgs are not laid out category, area, image")
            d = len(entry["dtIds"])
            num_gt[k] += int(np.sum(np.asarray(entry["gtIgnore"]) == 0))
            if d == 0:
                continue
            scores.append(np.asarray(entry["dtScores"], np.float64))
            classes.append(np.full(d, k, np.int64))
            tp.append(np.asarray(entry["dtMatches"])[t] > 0)
            ignored.append(np.asarray(entry["dtIgnore"])[t].astype(bool))
            dt_ids.append(list(entry["dtIds"]))
            dt_img.append(np.full(d, entry["image_id"], np.int64))
    if scores:
        s, c, m, ig = (np.concatenate(x) for x in (scores, classes, tp, ignored))
        ids = [i for chunk in dt_ids for i in chunk]
        img = np.concatenate(dt_img)
    else:
        s, c, m, ig = np.zeros(0), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, bool)
        ids, img = [], np.zeros(0, np.int64)
    confused = _cross_class(e, cat_ids, ids, img, c, ~m & ~ig, iou_threshold)
    names = [str(coco_gt.cats[cid].get("name", cid)) for cid in cat_ids]
    return Matches(scores=s, classes=c, tp=m, ignored=ig, confused=confused, num_gt=num_gt,
                   names=tuple(names), iou_threshold=float(p.iouThrs[t]))  # fmt: skip


def _cross_class(
    e: Any,
    cat_ids: Sequence[int],
    ids: list[int],
    img: np.ndarray,
    classes: np.ndarray,
    unmatched: np.ndarray,
    thr: float,
) -> np.ndarray:
    """``(D,)`` class of the other-class non-crowd GT each unmatched detection overlaps most (>= thr), else -1."""
    out = np.full(len(ids), -1, np.int64)
    if not unmatched.any() or len(cat_ids) < 2:
        return out
    p = e.params
    compute = e.computeIoU if p.iouType in ("bbox", "segm") else e.computeOks  # OKS for points
    cat_index = {cid: k for k, cid in enumerate(cat_ids)}
    rows = np.flatnonzero(unmatched)
    saved = (p.catIds, p.maxDets, p.useCats)
    try:
        p.useCats, p.maxDets = 1, [len(ids) + 1]  # every detection; per class as the metric
        for image in np.unique(img[rows]).tolist():
            r = rows[img[rows] == image]
            gts = [g for cid in cat_ids for g in e._gts[image, cid] if not g.get("ignore", 0)]
            if not gts:
                continue
            dts = [
                e.cocoDt.anns[ids[j]] for j in r.tolist()
            ]  # as COCOeval prepared them (segm: RLE)
            order = np.argsort(
                [-d["score"] for d in dts], kind="mergesort"
            )  # compute() sorts the same way
            e._gts[image, _ANY_CAT], e._dts[image, _ANY_CAT] = gts, [dts[i] for i in order]
            try:
                iou = np.asarray(compute(image, _ANY_CAT), dtype=np.float64).reshape(
                    len(dts), len(gts)
                )
            finally:
                del e._gts[image, _ANY_CAT], e._dts[image, _ANY_CAT]
            gt_cls = np.array([cat_index[g["category_id"]] for g in gts], np.int64)
            iou = np.where(
                gt_cls[None, :] == classes[r[order]][:, None], -1.0, iou
            )  # other classes only
            best = iou.argmax(axis=1)
            hit = iou[np.arange(len(dts)), best] >= thr
            out[r[order][hit]] = gt_cls[best[hit]]
    finally:
        p.catIds, p.maxDets, p.useCats = saved
    return out
