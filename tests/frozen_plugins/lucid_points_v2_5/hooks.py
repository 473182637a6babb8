"""Hooks of the ``points`` task: a heat map per class on the stride-8 map of lucidyolo's trunk.

``outputs = {"heat": (B, C, S/8, S/8) logits, "offset": (B, 2, S/8, S/8) logits}``;
a point ``p`` belongs to cell ``floor(p / 8)`` and its offset inside the cell
is ``sigmoid(offset) * 8``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torchmetrics import Metric
from torchvision.ops import sigmoid_focal_loss

from lucid_points_v2_5.field import ATTR
from lucidyolo.models import build_trunk

STRIDE = 8
TOP_K = 50
CONF = 0.25


class PointNet(nn.Module):
    def __init__(self, variant: str, num_classes: int) -> None:
        super().__init__()
        self.trunk = build_trunk(variant)
        c = self.trunk.out_channels[0]
        self.head = nn.Sequential(nn.Conv2d(c, 64, 3, padding=1), nn.SiLU(), nn.Conv2d(64, num_classes + 2, 1))
        nn.init.constant_(self.head[-1].bias[:num_classes], -4.0)  # rare positives: start near p = 0.02
        self.num_classes = num_classes

    def forward(self, images: Tensor) -> dict[str, Tensor]:
        out = self.head(self.trunk(images)[0])
        return {"heat": out[:, : self.num_classes], "offset": out[:, self.num_classes :]}


def build_model(cfg: Any, num_classes: int, **_: Any) -> nn.Module:
    return PointNet(cfg.variant, num_classes)


def _cells(gt: Mapping[str, Tensor], heat: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Batch, class, row and column of every labelled point's cell, and its offset in the cell in [0, 1]."""
    b, m = torch.nonzero(gt["mask"], as_tuple=True)
    p = gt[ATTR][b, m].float() / STRIDE  # (P, 2)
    h, w = heat.shape[-2:]
    col = p[:, 0].floor().long().clamp(0, w - 1)
    row = p[:, 1].floor().long().clamp(0, h - 1)
    frac = (p - torch.stack([col, row], 1).float()).clamp(0, 1)
    return b, gt["labels"][b, m].long(), row, col, frac


class PointLoss(nn.Module):
    """Focal loss on the heat map (normalised by the point count) + L1 on the in-cell offset of labelled cells."""

    def forward(self, outputs: Mapping[str, Tensor], gt: Mapping[str, Tensor], alpha: float = 0.0) -> tuple[Tensor, dict[str, Tensor]]:
        heat, offset = outputs["heat"].float(), outputs["offset"].float()
        b, c, row, col, frac = _cells(gt, heat)
        target = torch.zeros_like(heat)
        target[b, c, row, col] = 1.0
        n = max(int(b.numel()), 1)
        heat_loss = sigmoid_focal_loss(heat, target, reduction="sum") / n
        pred = offset.sigmoid()[b, :, row, col]  # (P, 2)
        offset_loss = (pred - frac).abs().sum() / n
        return heat_loss + offset_loss, {"heat": heat_loss.detach(), "offset": offset_loss.detach()}


def build_criterion(**_: Any) -> nn.Module:
    return PointLoss()


def decode(outputs: Mapping[str, Tensor], path: str = "peaks", **_: Any) -> Tensor:
    """``(B, TOP_K, 4)`` ``[x, y, score, class]`` in input pixels: the best local maxima of the heat maps."""
    heat = outputs["heat"].float().sigmoid()
    peaks = heat * (heat == nn.functional.max_pool2d(heat, 3, 1, 1))
    bsz, ncls, h, w = heat.shape
    score, idx = peaks.flatten(1).topk(min(TOP_K, ncls * h * w), dim=1)  # (B, K)
    cls, cell = idx // (h * w), idx % (h * w)
    row, col = cell // w, cell % w
    off = outputs["offset"].float().sigmoid().flatten(2)  # (B, 2, H*W)
    ox = off[:, 0].gather(1, cell)
    oy = off[:, 1].gather(1, cell)
    return torch.stack([(col + ox) * STRIDE, (row + oy) * STRIDE, score, cls.float()], -1)


class PointF1(Metric):
    """Precision, recall and F1 of points at score >= ``CONF``: a prediction is right when a labelled
    point of its class lies within ``radius`` px; a labelled point is found when such a prediction does."""

    full_state_update = False

    def __init__(self, radius: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.radius = radius
        for name in ("right", "predicted", "found", "labelled"):
            self.add_state(name, default=torch.zeros((), dtype=torch.long), dist_reduce_fx="sum")

    def update(self, decoded: Tensor, gt: Mapping[str, Tensor]) -> None:
        keep = decoded[..., 2] >= CONF  # (B, K)
        near = torch.cdist(decoded[..., :2].float(), gt[ATTR].float()) <= self.radius  # (B, K, M)
        same = decoded[..., 3, None].long() == gt["labels"][:, None, :].long()
        hit = near & same & keep[..., None] & gt["mask"][:, None, :]
        self.right += hit.any(-1).sum()
        self.predicted += keep.sum()
        self.found += hit.any(1).sum()
        self.labelled += gt["mask"].sum()

    def compute(self) -> dict[str, Tensor]:
        p = self.right.float() / self.predicted.clamp(min=1)
        r = self.found.float() / self.labelled.clamp(min=1)
        return {"f1": 2 * p * r / (p + r).clamp(min=1e-9), "precision": p, "recall": r}


def build_metric(cfg: Any = None, **_: Any) -> Metric:
    return PointF1(8.0 if cfg is None else cfg.radius)


def metric_update(metric: Any, decoded: Tensor, gt: Mapping[str, Tensor], **_: Any) -> None:
    metric.update(decoded, gt)
