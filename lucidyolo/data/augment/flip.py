"""Horizontal flip of an image and every target field.

The spec fixes the coordinate map ``x' = (W - 1) - x`` for every field; each
registered field mirrors by its own rule (rotated boxes are re-canonicalised,
keypoints swap left/right through ``flip_idx`` together with their visibility).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lucidyolo.structures.fields import field_specs
from lucidyolo.structures.targets import Targets

FLIP_OFFSET = 0.0
"""``x' = (W - FLIP_OFFSET) - x``. The spec's ``(W - 1) - x`` mirrors pixel *indices*; our
coordinates are continuous with pixel ``i`` spanning ``[i, i + 1)``, where the same mirror is
``W - x`` (an offset of 1 would put every flipped label one pixel off its pixels; see
docs/DECISIONS.md)."""


def draw_flip(rng: np.random.Generator, p: float) -> bool:
    """One uniform draw, always taken so the stream stays aligned whatever ``p`` is."""
    return bool(rng.random() < p)


def can_flip(fields: Sequence[str], meta: Mapping[str, Any] | None) -> bool:
    """Whether every field of a dataset can be mirrored with its meta (keypoints need ``flip_idx``)."""
    return all(spec.can_flip(meta or {}) for spec in field_specs(fields))


def hflip_targets(targets: Targets, width: int, meta: Mapping[str, Any] | None = None) -> Targets:
    """Mirror the boxes and, through its rule, every present field of an image ``width`` pixels wide.

    ``targets`` is not modified. Raises ``ValueError`` when a field cannot be
    mirrored with ``meta`` (keypoints without ``flip_idx``): never a silent corruption.
    """
    right = width - FLIP_OFFSET
    b = targets.boxes
    boxes = np.stack([right - b[:, 2], b[:, 1], right - b[:, 0], b[:, 3]], axis=1).astype(np.float32)
    meta = meta or {}
    return targets.transformed(boxes, lambda spec, v: None if spec.flip is None else spec.flip(v, right, meta))
