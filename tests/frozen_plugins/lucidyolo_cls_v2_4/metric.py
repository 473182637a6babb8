"""Top-1 and top-5 accuracy as one torchmetrics metric (counts summed across ranks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor
from torchmetrics import Metric


class TopKAccuracy(Metric):
    """Fraction of images whose class is the top-1 / among the top-5 scores.

    ``update(scores (B, C), target (B,))``; targets < 0 (unknown) are ignored.
    ``compute() -> {"top1", "top5"}`` (top-5 is top-C when there are fewer classes).

    It also keeps each image's top-1 ``(score, class, target)`` (``cat`` states,
    gathered across ranks) for :meth:`matches`: the curves and confusion matrix
    of the plugin come from the very predictions top-1 counts.
    """

    full_state_update = False

    def __init__(self, num_classes: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.k = min(5, num_classes)
        self.add_state("correct1", default=torch.zeros((), dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("correct5", default=torch.zeros((), dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("total", default=torch.zeros((), dtype=torch.long), dist_reduce_fx="sum")
        self.num_classes = num_classes
        self.add_state("top1_rows", default=[], dist_reduce_fx="cat")  # (3,) float per image: score, class, target
        self.last_rows: Tensor | None = None

    def update(self, scores: Tensor, target: Tensor) -> None:
        known = target >= 0
        scores, target = scores[known], target[known]
        top = scores.topk(self.k, dim=-1).indices  # (B, k)
        hit = top == target[:, None]
        self.correct1 += hit[:, 0].sum()
        self.correct5 += hit.any(dim=-1).sum()
        self.total += target.numel()
        best = scores.max(dim=-1)  # (B,) top-1 score and class
        self.top1_rows.append(torch.stack([best.values.float(), top[:, 0].float(), target.float()], dim=1).reshape(-1))

    def compute(self) -> dict[str, Tensor]:
        total = self.total.clamp(min=1).float()
        nan = torch.tensor(float("nan"))
        rows = self.top1_rows
        flat = torch.cat(rows) if isinstance(rows, list) and rows else rows
        self.last_rows = None if isinstance(flat, list) else flat.detach().cpu().reshape(-1, 3)
        if self.total == 0:
            return {"top1": nan, "top5": nan}
        return {"top1": self.correct1.float() / total, "top5": self.correct5.float() / total}


def top1_matches(rows: Tensor | None, num_classes: int, names: list[str] | None = None) -> Any:
    """Each image's top-1 prediction as a :class:`lucidyolo.metrics.matches.Matches` (one "detection" per image).

    ``rows (N, 3)``: score, predicted class, target. A prediction is a true
    positive when its class is the target; a wrong one is confused with the
    target's class; every image is one ground truth of its class.
    """
    from lucidyolo.metrics.matches import Matches

    r = np.zeros((0, 3)) if rows is None else rows.double().numpy()
    target = r[:, 2].astype(np.int64)
    pred = r[:, 1].astype(np.int64)
    return Matches.build(
        r[:, 0], pred, pred == target, np.bincount(target, minlength=num_classes),
        confused=np.where(pred == target, -1, target), names=names,
    )
