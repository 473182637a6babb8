"""PR, F1, precision and recall curves and the confusion matrix of one :class:`Matches`.

Everything is numpy over the split's detections (one loop over classes, none
over detections).

* **PR curve** per class: COCO's 101-point interpolation (the metric's own AP
  rule): precision ``tp / (tp + fp + eps)`` of the ranked detections (ties in
  array order, stable), made non-increasing from the right, read at the first
  rank reaching each recall ``0, 0.01, ..., 1`` (0 where never reached). Its
  mean is the class's AP at the matching IoU, equal to the metric's AP50.
* **Confidence curves** per class on a grid of thresholds ``x``: precision and
  recall of the detections with ``score >= x`` and their F1. Where no
  detection of a class is left, precision is 0 (never a flattering 1 for a
  class the model does not predict) and F1 0.
* **Best confidence**: the grid point with the highest mean F1 over the
  classes that have ground truth (the first, lowest, on ties); the
  ``precision`` / ``recall`` of ``results.csv`` and the per-class P / R of the
  eval report are read there.
* **Confusion matrix** at a confidence: rows the true class, columns the
  predicted class, index ``C`` the background. ``[c, c]`` the true positives
  of class ``c`` (the metric's matches); ``[k, c]`` unmatched detections of
  ``c`` whose best other-class overlap is a ground truth of ``k``
  (:attr:`Matches.confused`); ``[C, c]`` the other false positives;
  ``[k, C]`` the ground truths of ``k`` left (``num_gt - TP - confusions``,
  at least 0). Ignored detections (crowd, difficult) are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lucidyolo.metrics.matches import Matches

RECALL_POINTS = np.linspace(0.0, 1.0, 101)
"""COCO's 101 recall samples (pycocotools' ``recThrs``, bit-identical)."""

CONF_GRID = np.linspace(0.0, 1.0, 1001)
"""Confidence thresholds of the F1 / P / R curves."""


@dataclass(frozen=True)
class Curves:
    """Every curve of one :class:`Matches` (``C`` classes, ``N`` confidences).

    Attributes:
        recall: ``(101,)`` the PR curves' recall samples.
        precision: ``(C, 101)`` interpolated precision per class (NaN rows for
            a class without ground truth).
        ap: ``(C,)`` mean of each row (the AP at the IoU threshold; NaN
            without ground truth).
        conf: ``(N,)`` confidence grid.
        p_conf, r_conf, f1_conf: ``(C, N)`` precision, recall, F1 against
            confidence (NaN rows for a class without ground truth).
        best_index: index into ``conf`` of the best mean F1.
        confusion: ``(C + 1, C + 1)`` int64 counts at ``conf[best_index]``.
        matches: the input.
    """

    recall: np.ndarray
    precision: np.ndarray
    ap: np.ndarray
    conf: np.ndarray
    p_conf: np.ndarray
    r_conf: np.ndarray
    f1_conf: np.ndarray
    best_index: int
    confusion: np.ndarray
    matches: Matches

    @property
    def has_gt(self) -> np.ndarray:
        """``(C,)`` bool: classes with ground truth (the ones every mean runs over)."""
        return self.matches.num_gt > 0

    @property
    def best_conf(self) -> float:
        return float(self.conf[self.best_index])

    def _mean(self, rows: np.ndarray) -> float:
        ok = self.has_gt
        return float(rows[ok].mean()) if ok.any() else float("nan")

    @property
    def map(self) -> float:
        """Mean AP over classes with ground truth."""
        return self._mean(self.ap)

    @property
    def precision_at_best(self) -> np.ndarray:
        """``(C,)`` precision per class at the best confidence."""
        return self.p_conf[:, self.best_index]

    @property
    def recall_at_best(self) -> np.ndarray:
        """``(C,)`` recall per class at the best confidence."""
        return self.r_conf[:, self.best_index]

    @property
    def mean_precision(self) -> float:
        return self._mean(self.precision_at_best)

    @property
    def mean_recall(self) -> float:
        return self._mean(self.recall_at_best)

    @property
    def mean_f1(self) -> float:
        return self._mean(self.f1_conf[:, self.best_index])

    def summary(self) -> dict[str, Any]:
        """JSON-able numbers: best confidence, mean P / R / F1 there, and per class AP, P, R."""
        names = self.matches.names
        return {
            "iou_threshold": self.matches.iou_threshold,
            "best_conf": self.best_conf,
            "precision": self.mean_precision,
            "recall": self.mean_recall,
            "f1": self.mean_f1,
            "map": self.map,
            "per_class": [
                {"class": i, "name": names[i], "num_gt": int(self.matches.num_gt[i]),
                 "ap": _num(self.ap[i]), "precision": _num(self.precision_at_best[i]),
                 "recall": _num(self.recall_at_best[i])}
                for i in range(self.matches.num_classes)
            ],
        }  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """:meth:`summary` plus every curve and the confusion matrix (``K_curves.json``)."""
        return {
            **self.summary(),
            "names": list(self.matches.names),
            "pr_recall": self.recall.tolist(),
            "pr_precision": _rows(self.precision),
            "conf": self.conf.tolist(),
            "precision_conf": _rows(self.p_conf),
            "recall_conf": _rows(self.r_conf),
            "f1_conf": _rows(self.f1_conf),
            "confusion_matrix": self.confusion.tolist(),
            "confusion_axes": "rows: true class, columns: predicted class; the last of each is the background",
        }


def _num(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _rows(a: np.ndarray) -> list[list[float | None]]:
    return [[_num(v) for v in row] for row in a.tolist()]


def _ranked(m: Matches, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Class ``c``'s counted detections ranked by score (stable): ``(scores (n,), tp (n,))``."""
    sel = (m.classes == c) & ~m.ignored
    s, t = m.scores[sel], m.tp[sel]
    order = np.argsort(-s, kind="mergesort")
    return s[order], t[order]


def pr_curve(m: Matches) -> tuple[np.ndarray, np.ndarray]:
    """COCO 101-point interpolated precision per class: ``(precision (C, 101), ap (C,))``."""
    c_n = m.num_classes
    prec = np.full((c_n, RECALL_POINTS.size), np.nan)
    for c in range(c_n):
        npos = int(m.num_gt[c])
        if npos == 0:
            continue
        _, tp = _ranked(m, c)
        if tp.size == 0:
            prec[c] = 0.0
            continue
        tps = np.cumsum(tp, dtype=np.float64)
        fps = np.cumsum(~tp, dtype=np.float64)
        rc = tps / npos
        pr = tps / (tps + fps + np.spacing(1))  # pycocotools' own guard, kept for bit parity
        env = np.maximum.accumulate(pr[::-1])[::-1]
        idx = np.searchsorted(rc, RECALL_POINTS, side="left")
        prec[c] = np.where(idx < rc.size, env[np.minimum(idx, rc.size - 1)], 0.0)
    return prec, prec.mean(axis=1)


def confidence_curves(
    m: Matches, conf: np.ndarray = CONF_GRID
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall and F1 per class against ``conf (N,)``: three ``(C, N)`` arrays."""
    c_n = m.num_classes
    p = np.full((c_n, conf.size), np.nan)
    r = np.full((c_n, conf.size), np.nan)
    for c in range(c_n):
        npos = int(m.num_gt[c])
        if npos == 0:
            continue
        s, tp = _ranked(m, c)
        # detections kept at threshold x: the first k ranks, k = #(score >= x)
        k = s.size - np.searchsorted(s[::-1], conf, side="left")  # (N,)
        tps = np.concatenate([[0], np.cumsum(tp)])[k]
        p[c] = np.where(k > 0, tps / np.maximum(k, 1), 0.0)
        r[c] = tps / npos
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
    f1[np.isnan(p)] = np.nan
    return p, r, f1


def confusion_matrix(m: Matches, conf: float) -> np.ndarray:
    """``(C + 1, C + 1)`` int64 counts at confidence ``conf`` (rows true, columns predicted, last: background)."""
    c_n = m.num_classes
    cm = np.zeros((c_n + 1, c_n + 1), np.int64)
    kept = (m.scores >= conf) & ~m.ignored
    tp = kept & m.tp
    np.add.at(cm, (m.classes[tp], m.classes[tp]), 1)
    fp = kept & ~m.tp
    true_row = np.where(m.confused[fp] >= 0, m.confused[fp], c_n)
    np.add.at(cm, (true_row, m.classes[fp]), 1)
    # ground truths neither matched nor taken by a confusion: missed (background column)
    cm[:c_n, c_n] = np.maximum(m.num_gt - cm[:c_n, :c_n].sum(axis=1), 0)
    return cm


def compute_curves(m: Matches, conf: np.ndarray = CONF_GRID) -> Curves:
    """Every curve of ``m`` and its confusion matrix at the best mean-F1 confidence."""
    prec, ap = pr_curve(m)
    p, r, f1 = confidence_curves(m, conf)
    ok = m.num_gt > 0
    mean_f1 = f1[ok].mean(axis=0) if ok.any() else np.zeros(conf.size)
    best = int(np.argmax(mean_f1))
    return Curves(
        recall=RECALL_POINTS.copy(), precision=prec, ap=ap, conf=conf, p_conf=p, r_conf=r, f1_conf=f1,
        best_index=best, confusion=confusion_matrix(m, float(conf[best])), matches=m,
    )  # fmt: skip
