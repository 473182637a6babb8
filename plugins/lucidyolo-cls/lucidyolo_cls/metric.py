"""Top-1 and top-5 accuracy as one torchmetrics metric (counts summed across ranks)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric


class TopKAccuracy(Metric):
    """Fraction of images whose class is the top-1 / among the top-5 scores.

    ``update(scores (B, C), target (B,))``; targets < 0 (unknown) are ignored.
    ``compute() -> {"top1", "top5"}`` (top-5 is top-C when there are fewer classes).
    """

    full_state_update = False

    def __init__(self, num_classes: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.k = min(5, num_classes)
        self.add_state("correct1", default=torch.zeros((), dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("correct5", default=torch.zeros((), dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("total", default=torch.zeros((), dtype=torch.long), dist_reduce_fx="sum")

    def update(self, scores: Tensor, target: Tensor) -> None:
        known = target >= 0
        scores, target = scores[known], target[known]
        top = scores.topk(self.k, dim=-1).indices  # (B, k)
        hit = top == target[:, None]
        self.correct1 += hit[:, 0].sum()
        self.correct5 += hit.any(dim=-1).sum()
        self.total += target.numel()

    def compute(self) -> dict[str, Tensor]:
        total = self.total.clamp(min=1).float()
        nan = torch.tensor(float("nan"))
        if self.total == 0:
            return {"top1": nan, "top5": nan}
        return {"top1": self.correct1.float() / total, "top5": self.correct5.float() / total}
