"""The ``points`` field: one ``(x, y)`` pixel per instance, with its own YOLO row ``c x y`` and survival rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lucidyolo.structures.field_io import CocoRule, YoloRows
from lucidyolo.structures.fields import AttrSpec, FieldSpec, pad_rows, register_field
from lucidyolo.structures.geometry import affine_points

ATTR = "point"


def _read(rows: Sequence[np.ndarray], hw: tuple[int, int], meta: Mapping[str, Any], where: Sequence[str]) -> tuple[None, dict[str, Any]]:
    xy = np.stack(rows) if rows else np.zeros((0, 2))
    return None, {ATTR: xy * np.array([hw[1], hw[0]], np.float64)}  # no box: the row holds none


def _write(values: Mapping[str, Any], boxes: Any, hw: tuple[int, int], meta: Mapping[str, Any]) -> list[list[float]]:
    return (np.asarray(values[ATTR], np.float64) / np.array([hw[1], hw[0]])).tolist()


def _coco_read(ann: Mapping[str, Any], hw: tuple[int, int], meta: Mapping[str, Any], crowd: bool, bad: Any) -> Any:
    """A COCO annotation's ``point: [x, y]`` in pixels; an annotation without one is not a point (dropped)."""
    point = ann.get("point")
    if point is None:
        return None
    if not (isinstance(point, list | tuple) and len(point) == 2):
        raise bad(f"point {point!r} is not [x, y]", "Write point as two pixel coordinates.")
    return np.asarray(point, np.float64)


def _coco_join(values: Sequence[Any], boxes: np.ndarray, meta: Mapping[str, Any]) -> dict[str, Any]:
    return {ATTR: np.stack(values) if values else np.zeros((0, 2))}


def _affine(v: Mapping[str, Any], m: np.ndarray) -> dict[str, Any]:
    return {ATTR: affine_points(v[ATTR], m)}


def _flip(v: Mapping[str, Any], right: float, meta: Mapping[str, Any]) -> dict[str, Any]:
    p = v[ATTR].copy()
    p[:, 0] = right - p[:, 0]
    return {ATTR: p}


def _survive(v: Mapping[str, Any], region: tuple[float, float, float, float]) -> np.ndarray:
    """A point survives a crop when it is inside the visible region (``[x0, x1) x [y0, y1)``)."""
    p = v[ATTR]
    return (p[:, 0] >= region[0]) & (p[:, 0] < region[2]) & (p[:, 1] >= region[1]) & (p[:, 1] < region[3])


def _pack(values: Sequence[Mapping[str, Any]], counts: np.ndarray) -> dict[str, np.ndarray]:
    rows = [np.zeros((int(c), 2), np.float32) if v[ATTR] is None else v[ATTR] for v, c in zip(values, counts, strict=True)]
    return {ATTR: np.concatenate(rows or [np.zeros((0, 2), np.float32)]).astype(np.float32).reshape(-1, 2)}


def _unpack(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {ATTR: pad_rows(t[ATTR], image_of, slot, batch, m)}


SPEC = FieldSpec(
    name="points",
    attrs=(AttrSpec(ATTR, np.float32, (2,)),),
    packed=(ATTR,),
    pack=_pack,
    unpack=_unpack,
    affine=_affine,
    flip=_flip,
    survive=_survive,
    survive_alone=True,
    yolo=YoloRows(kind="point", need=lambda meta: "3 fields (c x y)", accepts=lambda count, meta: count == 2,
                  read=_read, write=_write),
    coco=CocoRule(read=_coco_read, join=_coco_join, box=False),  # a point annotation carries no bbox
)
register_field(SPEC)
