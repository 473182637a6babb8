"""COCO evaluation through pycocotools, in memory, with the numbers a user gets from a file.

``evaluate_coco`` runs pycocotools' ``COCO`` / ``COCOeval`` on a ground-truth
dict and a list of detections in the COCO results format. It goes through the
same ``COCO.loadRes`` path a user takes with ``COCO.loadRes("results.json")``,
so dumping the detections with :func:`save_results_json` and scoring the file
with plain pycocotools gives identical stats (pinned by a test to 1e-12).

What this module adds around pycocotools:

* pycocotools' prints are captured (``CocoResult.log``) instead of spamming
  the console;
* zero detections do not crash (``loadRes`` indexes ``anns[0]``): an empty
  results set is built directly and every stat whose area range has ground
  truth is 0, exactly what COCOeval yields for a model that finds nothing;
* detections on image ids or category ids the ground truth does not know are
  refused (pycocotools would silently drop unknown categories, which turns a
  label-mapping bug into a plausible-looking low mAP);
* the caller's ground-truth dict is never mutated (COCOeval writes ``ignore``
  and, for ``segm``, replaces polygons by RLE inside the annotations).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from lucidyolo.atomic_write import atomic_open
from lucidyolo.metrics.coco_backend import coco_classes, resolve_backend
from lucidyolo.metrics.mapping import unletterbox
from lucidyolo.metrics.matches import Matches

BOX_STAT_NAMES: tuple[str, ...] = (
    "AP", "AP50", "AP75", "APs", "APm", "APl",
    "AR1", "AR10", "AR100", "ARs", "ARm", "ARl",
)  # fmt: skip
"""Names of COCOeval's 12 ``stats`` for ``bbox`` and ``segm``, in order."""

KEYPOINT_STAT_NAMES: tuple[str, ...] = (
    "AP", "AP50", "AP75", "APm", "APl",
    "AR", "AR50", "AR75", "ARm", "ARl",
)  # fmt: skip
"""Names of COCOeval's 10 ``stats`` for ``keypoints`` (OKS), in order."""

_STAT_NAMES = {"bbox": BOX_STAT_NAMES, "segm": BOX_STAT_NAMES, "keypoints": KEYPOINT_STAT_NAMES}


@dataclass(frozen=True)
class ClassAP:
    """AP of one category (area ``all``, the largest ``maxDets``).

    ``ap`` / ``ap50`` are -1.0 when the category has no non-crowd ground truth
    (pycocotools' marker for "undefined"; such classes are left out of the mean).
    """

    category_id: int
    name: str
    ap: float
    ap50: float
    num_gt: int


@dataclass
class CocoResult:
    """Outcome of one COCOeval run.

    Attributes:
        iou_type: ``"bbox"``, ``"segm"`` or ``"keypoints"``.
        stats: COCOeval's summary stats by name (:data:`BOX_STAT_NAMES` or
            :data:`KEYPOINT_STAT_NAMES`); -1.0 means no ground truth in that
            area range (pycocotools' convention, kept for parity).
        per_class: one :class:`ClassAP` per ground-truth category, by id order.
        timings: seconds spent in ``index``, ``load_results``, ``evaluate``,
            ``accumulate``, ``summarize`` and ``total``.
        log: everything pycocotools printed.
        num_images: images in the ground truth.
        num_detections: detections scored.
        backend: the library that scored them (``pycocotools`` or ``faster_coco_eval``).
        matches: what was matched at IoU 0.5 (:mod:`lucidyolo.metrics.coco_matches`),
            when :func:`evaluate_coco` was asked for it; not part of :meth:`to_dict`.
    """

    iou_type: str
    stats: dict[str, float]
    per_class: list[ClassAP]
    timings: dict[str, float]
    log: str = ""
    num_images: int = 0
    num_detections: int = 0
    backend: str = "pycocotools"
    extra: dict[str, Any] = field(default_factory=dict)
    matches: Matches | None = field(default=None, repr=False)

    def stats_array(self) -> np.ndarray:
        """The stats as pycocotools' ``COCOeval.stats`` array, ``(12,)`` or ``(10,)``."""
        return np.array([self.stats[k] for k in _STAT_NAMES[self.iou_type]], dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view for reports."""
        out = asdict(replace(self, matches=None))
        out.pop("matches")
        out["per_class"] = [asdict(c) for c in self.per_class]
        return out


def _index_gt(gt: dict[str, Any], coco_class: Any = COCO) -> COCO:
    """Build a ``COCO`` index (pycocotools' or a compatible class) from a dict without touching the caller's objects."""
    if not isinstance(gt, dict) or "images" not in gt or "categories" not in gt:
        raise ValueError("ground truth must be a COCO dict with 'images' and 'categories'")
    dataset = dict(gt)
    # COCOeval writes into annotation dicts ("ignore", RLE for segm): copy each one
    # (shallow: the fields are replaced, never edited in place).
    dataset["annotations"] = [dict(a) for a in gt.get("annotations", [])]
    coco = coco_class()
    coco.dataset = dataset
    coco.createIndex()
    return coco


def _check_detections(coco_gt: COCO, detections: Sequence[dict[str, Any]]) -> None:
    img_ids = set(coco_gt.getImgIds())
    cat_ids = set(coco_gt.getCatIds())
    det_imgs = {d["image_id"] for d in detections}
    det_cats = {d["category_id"] for d in detections}
    unknown_imgs = det_imgs - img_ids
    if unknown_imgs:
        raise ValueError(
            f"{len(unknown_imgs)} detection image_id(s) are not in the ground truth, "
            f"e.g. {sorted(unknown_imgs)[:5]}"
        )
    unknown_cats = det_cats - cat_ids
    if unknown_cats:
        raise ValueError(
            f"detection category_id(s) {sorted(unknown_cats)[:10]} are not ground-truth "
            f"categories {sorted(cat_ids)[:10]}...; map contiguous labels to the dataset's "
            "own category ids first (pycocotools would silently drop them)"
        )


def _load_results(coco_gt: COCO, detections: Sequence[dict[str, Any]], coco_class: Any = COCO) -> COCO:
    if detections:
        # loadRes writes id/area/iscrowd/segmentation into each dict: give it copies.
        return coco_gt.loadRes([dict(d) for d in detections])
    # loadRes cannot take an empty list (it reads anns[0]); build the same
    # structure it would have built, with no annotations.
    res = coco_class()
    res.dataset["info"] = copy.deepcopy(coco_gt.dataset.get("info", {}))
    res.dataset["images"] = list(coco_gt.dataset["images"])
    res.dataset["categories"] = copy.deepcopy(coco_gt.dataset["categories"])
    res.dataset["annotations"] = []
    res.createIndex()
    return res


def _per_class(e: COCOeval, coco_gt: COCO) -> list[ClassAP]:
    # precision: (T iou thresholds, R recall points, K classes, A areas, M maxDets)
    precision = e.eval["precision"]
    iou_50 = int(np.argmin(np.abs(e.params.iouThrs - 0.5)))
    out = []
    for k, cat_id in enumerate(e.params.catIds):
        p_all = precision[:, :, k, 0, -1]  # (T, R) area "all", largest maxDets
        valid = p_all[p_all > -1]
        p_50 = p_all[iou_50]
        valid_50 = p_50[p_50 > -1]
        anns = coco_gt.loadAnns(coco_gt.getAnnIds(catIds=[cat_id], iscrowd=False))
        out.append(
            ClassAP(
                category_id=int(cat_id),
                name=str(coco_gt.cats[cat_id].get("name", cat_id)),
                ap=float(valid.mean()) if valid.size else -1.0,
                ap50=float(valid_50.mean()) if valid_50.size else -1.0,
                num_gt=len(anns),
            )
        )
    return out


def _keypoint_sigmas(
    gt: dict[str, Any],
    detections: Sequence[dict[str, Any]],
    iou_type: str,
    kpt_oks_sigmas: Sequence[float] | np.ndarray | None,
) -> np.ndarray | None:
    """The sigmas to set on COCOeval (``None``: leave its default), checked against the data's K."""
    if _STAT_NAMES.get(iou_type) is not KEYPOINT_STAT_NAMES:  # only OKS has sigmas
        if kpt_oks_sigmas is not None:
            raise ValueError(f"kpt_oks_sigmas only applies to iou_type='keypoints', got {iou_type!r}")
        return None
    # K of every keypoint list, results and ground truth alike: computeOks broadcasts
    # them against the sigmas and would fail (or silently misread) on a mismatch
    lengths = {len(d["keypoints"]) for d in detections if "keypoints" in d}
    lengths |= {len(a["keypoints"]) for a in gt.get("annotations", []) if "keypoints" in a}
    if any(n % 3 for n in lengths):
        raise ValueError(f"keypoints must be flat [x, y, v] triples, got list lengths {sorted(lengths)}")
    ks = sorted(n // 3 for n in lengths)
    if len(ks) > 1:
        raise ValueError(f"keypoint lists hold different numbers of points: K in {ks}")
    if kpt_oks_sigmas is None:
        if ks and ks[0] != 17:
            raise ValueError(
                f"the data has K={ks[0]} keypoints but no kpt_oks_sigmas were given; pycocotools' default "
                "sigmas are COCO's 17 person points: pass one sigma per keypoint"
            )
        return None
    sigmas = np.asarray(kpt_oks_sigmas, dtype=np.float64).reshape(-1)
    if ks and sigmas.size != ks[0]:
        raise ValueError(f"kpt_oks_sigmas has {sigmas.size} values but the keypoints have K={ks[0]}")
    if sigmas.size == 0 or not np.all(np.isfinite(sigmas)) or np.any(sigmas <= 0):
        raise ValueError("kpt_oks_sigmas must be positive and finite")
    return sigmas


def evaluate_coco(
    gt: dict[str, Any],
    detections: Sequence[dict[str, Any]],
    iou_type: str = "bbox",
    kpt_oks_sigmas: Sequence[float] | np.ndarray | None = None,
    backend: str | None = None,
    matches: bool = False,
) -> CocoResult:
    """Score detections against COCO ground truth with pycocotools (or faster-coco-eval, same protocol).

    Args:
        gt: COCO-format ground truth (``images``, ``annotations`` including
            ``iscrowd`` ones, ``categories``), e.g. ``json.load`` of an
            ``instances_*.json``. Not modified.
        detections: COCO results, one dict per detection: ``image_id``,
            ``category_id`` (the dataset's own id), ``bbox`` ``[x, y, w, h]`` in
            original pixels and ``score``; ``segm`` adds ``segmentation`` (RLE,
            ``counts`` as str); ``keypoints`` adds ``keypoints`` (``3K`` floats).
            Not modified.
        iou_type: ``"bbox"``, ``"segm"`` or ``"keypoints"``.
        kpt_oks_sigmas: ``keypoints`` only: the ``K`` per-point OKS sigmas
            (``COCOeval.params.kpt_oks_sigmas``); ``None`` keeps pycocotools'
            17 COCO person sigmas, which only fit ``K == 17``. Its length must
            be the ``K`` of the detections and ground truth.
        backend: ``auto``, ``pycocotools`` or ``faster_coco_eval``; ``None``
            takes the one set by :func:`lucidyolo.metrics.coco_backend.using_backend`
            (``auto`` outside one).
        matches: also read what was matched at IoU 0.5 into
            :attr:`CocoResult.matches` (pycocotools' own ``evalImgs``; with
            faster-coco-eval, one more pycocotools pass at IoU 0.5 only).

    Returns:
        The 12 (10 for keypoints) named stats, per-class AP, timings and the
        captured pycocotools log.

    Raises:
        ValueError: unknown ``iou_type``, malformed ground truth, detections
            on image / category ids the ground truth does not contain, or
            (keypoints) sigmas given for another IoU type, keypoint lists of
            mixed length, or sigmas whose count is not their ``K``.
    """
    if iou_type not in _STAT_NAMES:
        raise ValueError(f"iou_type must be one of {sorted(_STAT_NAMES)}, got {iou_type!r}")
    sigmas = _keypoint_sigmas(gt, detections, iou_type, kpt_oks_sigmas)
    backend = resolve_backend(backend)
    coco_class, eval_class = coco_classes(backend)
    timings: dict[str, float] = {}
    buf = io.StringIO()
    t_start = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        t = time.perf_counter()
        coco_gt = _index_gt(gt, coco_class)
        timings["index"] = time.perf_counter() - t
        _check_detections(coco_gt, detections)
        t = time.perf_counter()
        coco_dt = _load_results(coco_gt, detections, coco_class)
        timings["load_results"] = time.perf_counter() - t
        # faster-coco-eval logs its summary through `logging`; hand it `print` so
        # the table lands in the captured log as pycocotools' does
        extra = {"print_function": print} if backend == "faster_coco_eval" else {}
        e = eval_class(coco_gt, coco_dt, iouType=iou_type, **extra)
        if sigmas is not None:
            e.params.kpt_oks_sigmas = sigmas
        for step in ("evaluate", "accumulate", "summarize"):
            t = time.perf_counter()
            getattr(e, step)()
            timings[step] = time.perf_counter() - t
        found = _matches(e, coco_gt, gt, detections, iou_type, sigmas, backend) if matches else None
    timings["total"] = time.perf_counter() - t_start
    names = _STAT_NAMES[iou_type]
    # faster-coco-eval appends extra figures after the standard ones
    stats = {name: float(v) for name, v in zip(names, e.stats[: len(names)], strict=True)}
    return CocoResult(
        iou_type=iou_type,
        stats=stats,
        per_class=_per_class(e, coco_gt),
        timings=timings,
        log=buf.getvalue(),
        num_images=len(coco_gt.getImgIds()),
        num_detections=len(detections),
        backend=backend,
        matches=found,
    )


def _matches(e: Any, coco_gt: Any, gt: dict[str, Any], detections: Sequence[dict[str, Any]],
             iou_type: str, sigmas: np.ndarray | None, backend: str) -> Matches:
    """The matches behind AP50: ``e``'s own ``evalImgs``, or pycocotools' at IoU 0.5 where ``e`` keeps none."""
    from lucidyolo.metrics.coco_matches import matches_from_cocoeval, pycocotools_eval_at_50

    if backend == "pycocotools":
        return matches_from_cocoeval(e, coco_gt)
    py_gt = _index_gt(gt)
    py_dt = _load_results(py_gt, detections)
    e50 = pycocotools_eval_at_50(py_gt, py_dt, iou_type, sigmas, int(e.params.maxDets[-1]))
    return matches_from_cocoeval(e50, py_gt)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray | torch.Tensor):
        return obj.tolist()
    if isinstance(obj, bytes):  # RLE counts from pycocotools.mask.encode
        return obj.decode("ascii")
    raise TypeError(f"cannot write {type(obj).__name__} to a COCO results JSON")


def save_results_json(detections: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write detections as a COCO results JSON (temp file + rename, never half-written).

    Floats are written with Python's shortest round-trip repr, so
    ``COCO.loadRes(path)`` reads back exactly the values that were scored.

    Returns:
        The path written.
    """
    path = Path(path)
    with atomic_open(path, "w", encoding="utf-8") as f:
        json.dump(list(detections), f, default=_json_default)
    return path


def dets_to_coco_results(
    dets: torch.Tensor | np.ndarray,
    image_id: int,
    category_ids: Sequence[int],
    scale: float = 1.0,
    pad_x: float = 0.0,
    pad_y: float = 0.0,
    orig_hw: tuple[int, int] | None = None,
) -> list[dict[str, Any]]:
    """Turn one image's decoded detections into COCO results dicts.

    Rows with ``score <= 0`` are padding (the end-to-end decoder returns a fixed
    ``(300, 6)`` block) and are dropped. Boxes are mapped back through the
    inverse letterbox, clipped to the original image and written as
    ``[x, y, w, h]``; a box clipped to zero area is kept (it is the model's
    false positive, and dropping it would flatter precision).

    Args:
        dets: ``(N, 6)`` rows ``x1, y1, x2, y2, score, class`` in network-input
            pixels, ``class`` the contiguous label index.
        image_id: the ground truth's id of this image.
        category_ids: ``category_ids[label]`` is the dataset's own category id.
        scale: letterbox resize factor (``x_net = x_orig * scale + pad_x``).
        pad_x: letterbox left padding, network pixels.
        pad_y: letterbox top padding, network pixels.
        orig_hw: original ``(height, width)``; required for clipping (``None``
            skips clipping, only sensible when there was no letterbox).

    Returns:
        One dict per valid detection: ``image_id``, ``category_id``, ``bbox``,
        ``score`` with plain Python numbers (JSON-ready).
    """
    if isinstance(dets, torch.Tensor):
        arr = dets.detach().to("cpu", torch.float64).numpy()
    else:
        arr = np.asarray(dets, dtype=np.float64)
    arr = arr.reshape(-1, 6)
    arr = arr[arr[:, 4] > 0]  # (n, 6) valid rows only
    labels = arr[:, 5].astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= len(category_ids)):
        raise ValueError(
            f"class index out of range [0, {len(category_ids)}): "
            f"min {labels.min()}, max {labels.max()}"
        )
    boxes = unletterbox(arr[:, :4], scale, pad_x, pad_y, orig_hw)  # (n, 4), clipped when orig_hw is known
    xywh = np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1)  # (n, 4)
    cat_lookup = np.asarray(category_ids, dtype=np.int64)[labels]  # (n,)
    return [
        {"image_id": int(image_id), "category_id": int(c), "bbox": b, "score": float(s)}
        for c, b, s in zip(cat_lookup.tolist(), xywh.tolist(), arr[:, 4].tolist(), strict=True)
    ]
