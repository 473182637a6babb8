"""The ``crowd`` field of detection (also read by segmentation and keypoints): COCO ``iscrowd`` regions.

A crowd region is not an instance to learn: the assigners ignore it and the
epoch metric scores it as pycocotools does (a detection on it is neither a
true nor a false positive). Carried as a per-instance flag beside the boxes;
filled with False where a reader has no such notion (YOLO rows). Numpy only.
Found through the ``lucidyolo.fields`` entry point (importing it registers it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lucidyolo.structures.field_io import CocoRule
from lucidyolo.structures.fields import AttrSpec, FieldSpec, Values, pad_rows, register_field


def _pack_crowd(values: Sequence[Values], counts: np.ndarray) -> dict[str, np.ndarray]:
    rows = [np.zeros(int(c), bool) if v["crowd"] is None else v["crowd"] for v, c in zip(values, counts, strict=True)]
    return {"crowd": np.concatenate(rows or [np.zeros(0, bool)]).astype(bool)}


def _unpack_crowd(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {"crowd": pad_rows(t["crowd"], image_of, slot, batch, m, False)}


CROWD_COCO = CocoRule(
    read=lambda ann, hw, meta, crowd, bad: crowd,
    join=lambda values, boxes, meta: {"crowd": np.asarray(values, bool)},
)


FIELD = FieldSpec(
    name="crowd",  # COCO iscrowd regions: boxes to ignore, carried so the epoch metric scores like pycocotools
    attrs=(AttrSpec("crowd", np.bool_, (), fill=False, fill_missing=True, ignore_region=True),),
    packed=("crowd",),
    pack=_pack_crowd, unpack=_unpack_crowd,
    coco=CROWD_COCO,
)
register_field(FIELD)
