"""Epoch box mAP for det/seg validation: a torchmetrics metric that syncs across ranks.

Each ``update`` turns one padded batch into dense rows and appends them to
three ``cat`` states, so Lightning/torchmetrics can gather them from every
rank; ``compute`` rebuilds COCO dicts from the rows and scores them with
pycocotools through :func:`lucidyolo.metrics.coco_eval.evaluate_coco`.

State layout (all 1-D float64, so every state has one dtype and one rank on
every process, including a rank that never received a batch, which
torchmetrics fills with an empty float tensor):

* ``img_rows``: ``(token, image_id)`` per image seen;
* ``det_rows``: ``(token, x1, y1, x2, y2, score, label)`` per valid detection;
* ``gt_rows``: ``(token, x1, y1, x2, y2, label, crowd)`` per ground truth.

``token`` is unique per image *record*: ``(local_count * world_size + rank)``.
When ``image_ids`` (dataset indices) are given, records of the same image seen
twice (DistributedSampler pads the last batch by repeating images on some
ranks) are de-duplicated, keeping the smallest token; without them every
record counts as its own image. Float64 holds integer ids exactly up to 2**53.

Boxes are scored in the frame they arrive in (the network input frame during
training): IoU is invariant to the letterbox's uniform scale and shift, so
mAP50-95 and mAP50 match original-pixel scoring except where the original-pixel
path clips boxes to the image. ``lucid eval`` is the reference number.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from lucidyolo.metrics.coco_eval import CocoResult, evaluate_coco
from lucidyolo.metrics.matches import Matches


def precision_recall(matches: Matches | None, prefix: str = "") -> dict[str, torch.Tensor]:
    """``{prefix + "precision", prefix + "recall"}``: class means at the best mean-F1 confidence (0 when undefined)."""
    from lucidyolo.metrics.curves import compute_curves

    p = r = 0.0
    if matches is not None and (matches.num_gt > 0).any():
        curves = compute_curves(matches)
        p, r = curves.mean_precision, curves.mean_recall
    return {f"{prefix}precision": torch.tensor(p, dtype=torch.float32),
            f"{prefix}recall": torch.tensor(r, dtype=torch.float32)}  # fmt: skip


def _rows_to_numpy(state: list[torch.Tensor] | torch.Tensor, width: int) -> np.ndarray:
    flat = dim_zero_cat(state) if isinstance(state, list) and state else state
    if isinstance(flat, list):  # never updated and not synced
        return np.zeros((0, width), dtype=np.float64)
    return flat.detach().to("cpu", torch.float64).numpy().reshape(-1, width)


def rows_to_coco(
    img_rows: np.ndarray,
    det_rows: np.ndarray,
    gt_rows: np.ndarray,
    num_classes: int | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Build COCO ground truth and results from the metric's rows (deduplicated).

    Args:
        img_rows: ``(I, 2)`` ``token, image_id``.
        det_rows: ``(D, 7)`` ``token, x1, y1, x2, y2, score, label``.
        gt_rows: ``(G, 7)`` ``token, x1, y1, x2, y2, label, crowd``.
        num_classes: categories ``0 .. num_classes - 1``; ``None`` uses the
            labels present.

    Returns:
        ``(gt, detections)``: a COCO ground-truth dict whose image ids are the
        image ids and whose category ids are the contiguous labels, and the
        detections in COCO results format.
    """
    if np.unique(img_rows[:, 0]).size != img_rows.shape[0]:
        # a token names one image record; a repeat would merge two images' rows
        raise RuntimeError("EpochMAP state holds duplicate image tokens")
    # keep one record per image id: the smallest token
    order = np.lexsort((img_rows[:, 0], img_rows[:, 1]))  # by image_id, then token
    sorted_rows = img_rows[order]
    _, first = np.unique(sorted_rows[:, 1], return_index=True)
    kept = sorted_rows[first]  # (I', 2)
    tok_order = np.argsort(kept[:, 0])
    kept_tokens, kept_ids = kept[tok_order, 0], kept[tok_order, 1]

    def _select(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(kept_tokens, rows[:, 0])
        pos = np.clip(pos, 0, max(len(kept_tokens) - 1, 0))
        keep = (kept_tokens[pos] == rows[:, 0]) if len(kept_tokens) else np.zeros(len(rows), bool)
        return rows[keep], kept_ids[pos[keep]].astype(np.int64)

    dets, det_img = _select(det_rows)
    gts, gt_img = _select(gt_rows)
    if num_classes is None:
        labels = np.concatenate([dets[:, 6], gts[:, 5]]).astype(np.int64)
        cat_ids = sorted(set(labels.tolist()))
    else:
        cat_ids = list(range(num_classes))

    gt_wh = gts[:, 3:5] - gts[:, 1:3]  # (G', 2)
    det_wh = dets[:, 3:5] - dets[:, 1:3]  # (D', 2)
    gt_dict = {
        "images": [{"id": int(i)} for i in kept_ids.astype(np.int64).tolist()],
        "categories": [{"id": int(c), "name": str(c)} for c in cat_ids],
        "annotations": [
            {
                "id": k + 1,  # pycocotools treats id 0 as "unmatched": start at 1
                "image_id": int(img),
                "category_id": int(lab),
                "bbox": [x, y, w, h],
                "area": w * h,
                "iscrowd": int(crowd),
            }
            for k, (img, lab, crowd, x, y, w, h) in enumerate(
                zip(
                    gt_img.tolist(),
                    gts[:, 5].tolist(),
                    gts[:, 6].tolist(),
                    gts[:, 1].tolist(),
                    gts[:, 2].tolist(),
                    gt_wh[:, 0].tolist(),
                    gt_wh[:, 1].tolist(),
                    strict=True,
                )
            )
        ],
    }
    det_list = [
        {"image_id": int(img), "category_id": int(lab), "bbox": [x, y, w, h], "score": s}
        for img, lab, s, x, y, w, h in zip(
            det_img.tolist(),
            dets[:, 6].tolist(),
            dets[:, 5].tolist(),
            dets[:, 1].tolist(),
            dets[:, 2].tolist(),
            det_wh[:, 0].tolist(),
            det_wh[:, 1].tolist(),
            strict=True,
        )
    ]
    return gt_dict, det_list


def top_per_class(rows: torch.Tensor, k: int) -> torch.Tensor:
    """Zero the score of every row beyond the ``k`` best of its class in its image.

    Args:
        rows: ``(B, K, 6)`` ``[x1, y1, x2, y2, score, class]``, score ``<= 0`` padding.
        k: rows kept per image and class (ties keep the earlier row, as
            COCOeval's stable sort does).

    Returns:
        ``(B, K, 6)`` rows, the dropped ones with score 0.
    """
    b, n = rows.shape[:2]
    if n <= k:
        return rows
    score, cls = rows[..., 4], rows[..., 5]
    # stable sort by score (descending), then stable by class: classes grouped, best first
    by_score = torch.sort(score, dim=1, descending=True, stable=True).indices  # (B, K)
    by_class = torch.sort(cls.gather(1, by_score), dim=1, stable=True).indices
    order = by_score.gather(1, by_class)  # (B, K) row index in the grouped order
    grouped = cls.gather(1, order)
    pos = torch.arange(n, device=rows.device).expand(b, n)
    start = torch.ones_like(grouped, dtype=torch.bool)
    start[:, 1:] = grouped[:, 1:] != grouped[:, :-1]
    first = torch.where(start, pos, torch.zeros_like(pos)).cummax(dim=1).values  # group start
    rank = torch.empty_like(pos).scatter_(1, order, pos - first)  # (B, K) rank in its class
    return torch.cat([rows[..., :4], torch.where(rank < k, score, 0.0)[..., None], rows[..., 5:]], dim=-1)


class EpochMAP(Metric):
    """Box mAP50-95 and mAP50 over a validation epoch, synchronised across ranks.

    Args:
        num_classes: number of contiguous classes (categories ``0..C-1``);
            ``None`` uses the labels seen.
        **kwargs: passed to :class:`torchmetrics.Metric` (e.g.
            ``compute_on_cpu=True``, ``process_group``).

    After ``compute()``, :attr:`last_result` holds the full
    :class:`~lucidyolo.metrics.coco_eval.CocoResult` (12 stats, per class,
    and its ``matches`` at IoU 0.5).
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    img_rows: list[torch.Tensor]
    det_rows: list[torch.Tensor]
    gt_rows: list[torch.Tensor]

    def __init__(self, num_classes: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.add_state("img_rows", default=[], dist_reduce_fx="cat")
        self.add_state("det_rows", default=[], dist_reduce_fx="cat")
        self.add_state("gt_rows", default=[], dist_reduce_fx="cat")
        # the empty placeholder torchmetrics sends for a rank without data uses
        # the metric dtype: make it match the float64 rows
        self.set_dtype(torch.float64)
        # never reset: torchmetrics' forward() resets and later merges states, and
        # tokens must stay unique across that merge
        self._seen = 0
        self.last_result: CocoResult | None = None

    def _rank_world(self) -> tuple[int, int]:
        if dist.is_available() and dist.is_initialized():
            group = self.process_group
            return dist.get_rank(group), dist.get_world_size(group)
        return 0, 1

    def update(
        self,
        dets: torch.Tensor,
        gt_boxes: torch.Tensor,
        gt_labels: torch.Tensor,
        gt_mask: torch.Tensor,
        image_ids: torch.Tensor | None = None,
        gt_crowd: torch.Tensor | None = None,
    ) -> None:
        """Add one batch.

        Args:
            dets: ``(B, K, 6)`` ``x1, y1, x2, y2, score, class``; rows with
                ``score <= 0`` are padding.
            gt_boxes: ``(B, M, 4)`` ``xyxy`` in the same frame as ``dets``.
            gt_labels: ``(B, M)`` contiguous class index.
            gt_mask: ``(B, M)`` bool, True for real ground truth (M may be 0).
            image_ids: ``(B,)`` integer id of each image in the split (dataset
                index); enables de-duplication of repeated images.
            gt_crowd: ``(B, M)`` bool, True where a real GT row is a COCO
                ``iscrowd`` region. Crowd rows are never positives; a detection
                that matches no non-crowd GT of its class but covers a crowd
                region with intersection-over-detection-area >= the IoU
                threshold is ignored (neither TP nor FP), as pycocotools does.
                ``None`` (default): no crowd regions (the packed training
                batches carry no crowd flag yet).
        """
        b = dets.shape[0]
        rank, world = self._rank_world()
        # rows are float64 (exact ids); MPS has no float64 and never runs multi-process,
        # so its rows are built on the CPU
        device = dets.device if dets.device.type != "mps" else torch.device("cpu")
        dets = dets.to(device)
        gt_boxes, gt_labels, gt_mask = gt_boxes.to(device), gt_labels.to(device), gt_mask.to(device)
        if gt_crowd is not None:
            gt_crowd = gt_crowd.to(device)
        local = torch.arange(self._seen, self._seen + b, device=device, dtype=torch.float64)
        tokens = local * world + rank  # (B,)
        self._seen += b
        ids = tokens if image_ids is None else image_ids.to(device, torch.float64).reshape(b)
        self.img_rows.append(torch.stack([tokens, ids], dim=1).reshape(-1))  # (B*2,)

        valid = dets[..., 4] > 0  # (B, K)
        det_b = valid.nonzero()[:, 0]  # (D,)
        d = dets[valid].to(torch.float64)  # (D, 6)
        self.det_rows.append(torch.cat([tokens[det_b, None], d], dim=1).reshape(-1))  # (D*7,)

        gmask = gt_mask.bool()  # (B, M)
        gt_b = gmask.nonzero()[:, 0]  # (G,)
        crowd = (
            gt_crowd.bool()[gmask]
            if gt_crowd is not None
            else torch.zeros_like(gt_b, dtype=torch.bool)
        )
        g = torch.cat(
            [
                tokens[gt_b, None],
                gt_boxes[gmask].to(torch.float64),  # (G, 4)
                gt_labels[gmask].to(torch.float64)[:, None],
                crowd.to(torch.float64)[:, None],
            ],
            dim=1,
        )  # (G, 7)
        self.gt_rows.append(g.reshape(-1))

    def compute(self) -> dict[str, torch.Tensor]:
        """Score everything seen (on every rank, after sync).

        Returns:
            ``{"mAP50-95": t, "mAP50": t, "precision": t, "recall": t}`` float
            tensors (precision and recall: class means at the best mean-F1
            confidence, :mod:`lucidyolo.metrics.curves`); 0.0 where COCOeval
            reports -1 (no ground truth at all: undefined, logged as 0 so a
            checkpoint monitor never prefers an empty epoch).
        """
        img_rows = _rows_to_numpy(self.img_rows, 2)
        gt, dets = rows_to_coco(
            img_rows,
            _rows_to_numpy(self.det_rows, 7),
            _rows_to_numpy(self.gt_rows, 7),
            self.num_classes,
        )
        if not gt["images"] or not gt["categories"]:
            self.last_result = None
            zero = torch.tensor(0.0, dtype=torch.float32)
            return {"mAP50-95": zero, "mAP50": zero.clone(), "precision": zero.clone(), "recall": zero.clone()}
        result = evaluate_coco(gt, dets, iou_type="bbox", matches=True)
        self.last_result = result
        return {
            "mAP50-95": torch.tensor(max(result.stats["AP"], 0.0), dtype=torch.float32),
            "mAP50": torch.tensor(max(result.stats["AP50"], 0.0), dtype=torch.float32),
            **precision_recall(result.matches),
        }
