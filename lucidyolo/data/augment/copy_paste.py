"""Copy-paste of outlined instances: paste the image's own instances, mirrored, where they do not cover others.

Every instance is mirrored left-right (exact pixel mirror ``x' = W - x``, so
the pasted pixels and the pasted outline coincide); those whose mirrored box
covers no existing box by more than :data:`MAX_IOA` of that box's area are
pasted, pixels through the union mask of the outline rings their field's
cut-out rule gives (``FieldSpec.cutout``; pycocotools rasteriser, one C call
for all rings). A task without such a field is never pasted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lucidyolo.data.augment.flip import hflip_targets
from lucidyolo.structures.fields import FieldSpec
from lucidyolo.structures.targets import Targets

MAX_IOA = 0.30
"""A pasted instance may cover at most 30% of any existing box."""


def box_ioa(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection over the area of ``b``: ``(N, 4), (M, 4) -> (N, M)``."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(-1)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    return inter / np.maximum(area_b[None, :], 1e-9)


def cutout_field(fields: Sequence[FieldSpec]) -> FieldSpec | None:
    """The first of ``fields`` with a cut-out rule (``FieldSpec.cutout``): copy-paste fires only for a task with one
    (the worker plan sizes its buffers by it)."""
    return next((f for f in fields if f.cutout is not None), None)


def copy_paste(
    image: np.ndarray, targets: Targets, apply: bool, meta: Mapping[str, Any] | None = None
) -> tuple[np.ndarray, Targets]:
    """Paste mirrored copies of instances, cut out through their field's outline (``FieldSpec.cutout``).

    Args:
        image: ``(3, H, W)`` uint8 or float32 planes; not modified.
        targets: instances with a field that has a cut-out rule (targets without one pass through
            unchanged, as do those with a field that cannot be mirrored).
        apply: the caller's Bernoulli draw.
        meta: dataset meta for the field rules (``flip_idx``).

    Returns:
        Image with pasted pixels and targets with the pasted instances appended.
    """
    cutter = cutout_field(targets.present_fields())
    if not apply or cutter is None or len(targets) == 0:
        return image, targets
    if not all(spec.can_flip(meta or {}) for spec in targets.present_fields()):
        return image, targets
    h, w = image.shape[1:]
    b = targets.boxes
    mirrored = np.stack([w - b[:, 2], b[:, 1], w - b[:, 0], b[:, 3]], axis=1)
    ioa = box_ioa(mirrored, b)  # (N, N)
    chosen = np.flatnonzero(ioa.max(1) < MAX_IOA)
    if chosen.size == 0:
        return image, targets
    pasted = hflip_targets(targets.filter(chosen), w, meta)  # every field mirrored by its own rule
    rings = [ring.ravel().tolist() for ring in cutter.cutout(pasted.values_of(cutter))]
    if not rings:
        return image, targets
    from pycocotools import mask as mask_utils

    # pycocotools samples pixel centres at integer + 0.5 in edge coordinates, like ours.
    rle = mask_utils.merge(mask_utils.frPyObjects(rings, h, w))
    mask = mask_utils.decode(rle).astype(bool)  # (H, W)
    out = image.copy()
    out[:, mask] = image[:, :, ::-1][:, mask]
    return out, Targets.concat([targets, pasted])
