"""A small synthetic-shapes-like detection batch built directly as tensors (no files).

Mirrors the synthetic set's statistics that matter to the objective: 4 classes,
objects spanning 8-40 % of the image side, a few per image, padded GTs.
"""

from __future__ import annotations

import torch
from torch import Tensor


def synthetic_batch(
    batch: int = 2, size: int = 160, max_gt: int = 3, num_classes: int = 4, seed: int = 0
) -> tuple[Tensor, dict[str, Tensor]]:
    """Images ``(B, 3, size, size)`` in [0, 1] and padded GT ``boxes/labels/mask``; the last image has one padded GT."""
    g = torch.Generator().manual_seed(seed)
    side = (torch.rand(batch, max_gt, 2, generator=g) * 0.32 + 0.08) * size  # (B, M, 2)
    centre = side / 2 + torch.rand(batch, max_gt, 2, generator=g) * (size - side)
    boxes = torch.cat([centre - side / 2, centre + side / 2], -1)  # (B, M, 4)
    labels = torch.randint(0, num_classes, (batch, max_gt), generator=g)
    mask = torch.ones(batch, max_gt, dtype=torch.bool)
    mask[-1, -1] = False
    return torch.rand(batch, 3, size, size, generator=g), {
        "boxes": boxes,
        "labels": labels,
        "mask": mask,
    }
