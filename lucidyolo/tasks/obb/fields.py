"""The ``rboxes`` field of the oriented-box task: one rotated box ``(cx, cy, w, h, theta)`` per instance.

Its geometry (an affine map that is a similarity, mirrors included; the flip), its
batch tensors, its YOLO row (the four corners, normalised; corners cut by a tile
edge are clipped, not refused), its COCO rule (the minimum-area rectangle of the
``segmentation`` rings, else the axis-aligned box), its DOTA rule (from the four
corners) and its synthetic scene. Numpy only: the rules run in loader workers.
Found through the ``lucidyolo.fields`` entry point (importing it registers it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lucidyolo.structures.coco_rings import ann_rings, joined_polygons
from lucidyolo.structures.field_io import CocoRule, YoloRows, stack_rows, xy_scale
from lucidyolo.structures.fields import AttrSpec, FieldSpec, Values, pad_rows, register_field
from lucidyolo.structures.geometry import (
    affine_points,
    canonicalize_rboxes,
    corners_to_rbox,
    corners_to_xyxy,
    hflip_rboxes,
    min_area_rboxes_of_polygons,
    rbox_to_corners,
    similarity_of,
)


# ------------------------------------------------------------------ geometry and batch tensors
def _rboxes_affine(v: Values, m: np.ndarray) -> Values:
    m = np.asarray(m, np.float64)
    # A mirror is a similarity too: undo it (x -> -x) before reading scale and turn, and a box's axis at
    # theta mirrors to -theta (an axis, not a direction). The flip check compares the flip rule with this.
    mirrored = bool(np.linalg.det(m[:, :2]) < 0)
    unmirrored = m * np.array([-1.0, 1.0, 1.0]) if mirrored else m
    scale, turn = similarity_of(unmirrored)  # a rotated box stays one only under a similarity
    r = v["rboxes"].copy()
    r[:, :2] = affine_points(r[:, :2], m)
    r[:, 2:4] *= scale
    if turn or mirrored:
        r[:, 4] = (-r[:, 4] if mirrored else r[:, 4]) + turn
        return {"rboxes": canonicalize_rboxes(r)}
    return {"rboxes": r.astype(np.float32)}


def _rboxes_flip(v: Values, right: float, meta: Mapping[str, Any]) -> Values:
    return {"rboxes": hflip_rboxes(v["rboxes"], right)}


def _pack_rboxes(values: Sequence[Values], counts: np.ndarray) -> dict[str, np.ndarray]:
    rows = [np.zeros((int(c), 5), np.float32) if v["rboxes"] is None else v["rboxes"] for v, c in zip(values, counts, strict=True)]
    return {"rboxes": np.concatenate(rows or [np.zeros((0, 5), np.float32)]).astype(np.float32).reshape(-1, 5)}


def _unpack_rboxes(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {"rboxes": pad_rows(t["rboxes"], image_of, slot, batch, m)}


# ------------------------------------------------------------------ YOLO row: 4 corners
def _row_read(rows: Sequence[np.ndarray], hw: tuple[int, int], meta: Mapping[str, Any], where: Sequence[str]) -> tuple[np.ndarray, dict[str, Any]]:
    scale = xy_scale(hw)
    c = np.clip(stack_rows(rows, 8).reshape(-1, 4, 2) * scale, 0, scale)  # tile-cut corners: clip, do not reject
    return corners_to_xyxy(c), {"rboxes": corners_to_rbox(c)}


def _row_write(values: Mapping[str, Any], boxes: np.ndarray, hw: tuple[int, int], meta: Mapping[str, Any]) -> list[list[float]]:
    return (rbox_to_corners(values["rboxes"]) / xy_scale(hw)).reshape(-1, 8).tolist()


RBOX_ROWS = YoloRows(
    kind="rbox",
    need=lambda meta: "9 fields (c x1 y1 x2 y2 x3 y3 x4 y4)",
    accepts=lambda count, meta: count == 8,
    read=_row_read,
    write=_row_write,
)


# ------------------------------------------------------------------ COCO: min-area rectangle of the rings
def _coco_read(ann: Mapping[str, Any], hw: tuple[int, int], meta: Mapping[str, Any], crowd: bool, bad: Any) -> list[np.ndarray]:
    return [] if crowd else ann_rings(ann, hw, bad)


def _coco_join(values: Sequence[list[np.ndarray]], boxes: np.ndarray, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The minimum-area rectangle of each instance's rings; an instance without one keeps its axis-aligned box."""
    n = len(values)
    polys = joined_polygons(values)
    rboxes = min_area_rboxes_of_polygons(polys, n)
    no_ring = np.ones(n, bool)
    if polys.num_rings:
        no_ring[polys.ring_owner] = False
    if no_ring.any():
        b = np.asarray(boxes, np.float32).reshape(-1, 4)[no_ring]
        rboxes[no_ring] = canonicalize_rboxes(
            np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1], np.zeros(len(b))], 1)
        )
    return {"rboxes": rboxes}


def _coco_write(values: Mapping[str, Any], n: int, meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    r = values.get("rboxes")
    if r is None:
        return [{} for _ in range(n)]
    return [{"rbox": r[j].astype(np.float64).tolist(), "area": float(np.float64(r[j, 2] * r[j, 3]))} for j in range(n)]


RBOX_COCO = CocoRule(read=_coco_read, join=_coco_join, write=_coco_write)


FIELD = FieldSpec(
    name="rboxes",
    attrs=(AttrSpec("rboxes", np.float32, (5,)),),
    packed=("rboxes",),
    pack=_pack_rboxes, unpack=_unpack_rboxes,
    affine=_rboxes_affine, flip=_rboxes_flip,
    yolo=RBOX_ROWS, coco=RBOX_COCO, dota=lambda corners: {"rboxes": corners_to_rbox(corners)},
    synth="lucidyolo.tasks.obb.synthetic:SCENE",
    guess_priority=1,  # four corners (DOTA, 8-number YOLO rows) are oriented-box data before they are outlines
)
register_field(FIELD)
