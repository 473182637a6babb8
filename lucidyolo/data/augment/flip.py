"""Horizontal flip of an image and every target field.

The spec fixes the coordinate map ``x' = (W - 1) - x`` for every field. Rotated
boxes are mirrored and re-canonicalised (negating theta alone can leave the
canonical range), keypoints swap left/right through ``flip_idx`` together with
their visibility.
"""

from __future__ import annotations

import numpy as np

from lucidyolo.structures.geometry import hflip_rboxes
from lucidyolo.structures.targets import Targets

FLIP_OFFSET = 0.0
"""``x' = (W - FLIP_OFFSET) - x``. The spec's ``(W - 1) - x`` mirrors pixel *indices*; our
coordinates are continuous with pixel ``i`` spanning ``[i, i + 1)``, where the same mirror is
``W - x`` (an offset of 1 would put every flipped label one pixel off its pixels; see
docs/DECISIONS.md)."""


def draw_flip(rng: np.random.Generator, p: float) -> bool:
    """One uniform draw, always taken so the stream stays aligned whatever ``p`` is."""
    return bool(rng.random() < p)


def hflip(image: np.ndarray, targets: Targets, flip_idx: list[int] | np.ndarray | None = None) -> tuple[np.ndarray, Targets]:
    """Mirror left-right.

    Args:
        image: ``(H, W, 3)`` array.
        targets: instances in the image frame (not modified).
        flip_idx: ``(K,)`` keypoint permutation; required when keypoints are present.

    Returns:
        The mirrored image (contiguous copy) and mirrored targets.
    """
    w = image.shape[1]
    return np.ascontiguousarray(image[:, ::-1]), hflip_targets(targets, w, flip_idx)


def hflip_targets(targets: Targets, width: int, flip_idx: list[int] | np.ndarray | None = None) -> Targets:
    """Mirror every target field of an image ``width`` pixels wide (``targets`` is not modified)."""
    w = width
    t = targets.clone()
    right = w - FLIP_OFFSET
    b = t.boxes
    t.boxes = np.stack([right - b[:, 2], b[:, 1], right - b[:, 0], b[:, 3]], axis=1).astype(np.float32)
    if t.polygons is not None and t.polygons.points.size:
        t.polygons.points[:, 0] = right - t.polygons.points[:, 0]
    if t.rboxes is not None:
        t.rboxes = hflip_rboxes(t.rboxes, w)
    if t.keypoints is not None:
        if flip_idx is None:
            raise ValueError("keypoints cannot be flipped without flip_idx")
        idx = np.asarray(flip_idx, dtype=np.int64)
        kp = t.keypoints.copy()
        kp[..., 0] = right - kp[..., 0]
        t.keypoints = kp[:, idx]
        if t.visibility is not None:
            t.visibility = t.visibility[:, idx]
    return t
