"""The ``polygons`` field of the segmentation task: the rings of every instance's outline (its mask target).

Its geometry (affine map, flip), its batch tensors (ragged: points, ring lengths
and owners, never dense masks), its YOLO row (one ring, ``x1 y1 ... xk yk``
normalised), its COCO rule (polygon lists or an RLE mask traced to its outline;
an annotation without a ring is not an instance of this task), its DOTA rule
and its synthetic scene. Numpy only: the rules run in loader workers. Found
through the ``lucidyolo.fields`` entry point (importing it registers it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lucidyolo.structures.coco_rings import ann_rings, joined_polygons
from lucidyolo.structures.field_io import CocoRule, YoloRows, xy_scale
from lucidyolo.structures.fields import AttrSpec, FieldSpec, Values, register_field
from lucidyolo.structures.geometry import affine_points, corners_to_polygons, polygon_areas
from lucidyolo.structures.polygons import Polygons


# ------------------------------------------------------------------ geometry and batch tensors
def _polygons_affine(v: Values, m: np.ndarray) -> Values:
    p = v["polygons"].clone()
    if p.points.size:
        p.points = affine_points(p.points, m)
    return {"polygons": p}


def _polygons_cutout(v: Values) -> list[np.ndarray]:
    """Copy-paste cuts an instance out through its rings (those of 3 points or more: the others have no area)."""
    p = v["polygons"]
    if p is None:
        return []
    return [p.ring(r).astype(np.float64) for r in np.flatnonzero(p.ring_lengths() >= 3)]


def _polygons_flip(v: Values, right: float, meta: Mapping[str, Any]) -> Values:
    p = v["polygons"].clone()
    if p.points.size:
        p.points[:, 0] = right - p.points[:, 0]
    return {"polygons": p}


def _pack_polygons(values: Sequence[Values], counts: np.ndarray) -> dict[str, np.ndarray]:
    """Rings stay ragged: points, ring lengths and a batch-global owner index (never dense masks)."""
    shift = np.concatenate([[0], np.cumsum(counts)])[:-1]
    polys = [(v["polygons"], s) for v, s in zip(values, shift, strict=True) if v["polygons"] is not None]
    return {
        "poly_points": np.concatenate([p.points for p, _ in polys] or [np.zeros((0, 2), np.float32)]).astype(np.float32).reshape(-1, 2),
        "poly_ring_lengths": np.concatenate([p.ring_lengths() for p, _ in polys] or [np.zeros(0, np.int64)]).astype(np.int64),
        "poly_ring_owner": np.concatenate([p.ring_owner + s for p, s in polys] or [np.zeros(0, np.int64)]).astype(np.int64),
    }


def _unpack_polygons(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    owner = t["poly_ring_owner"]
    n = image_of.shape[0]
    return {
        "poly_points": t["poly_points"],
        "poly_ring_lengths": t["poly_ring_lengths"],
        "poly_ring_image": image_of[owner] if n else owner,
        "poly_ring_slot": slot[owner] if n else owner,
    }


# ------------------------------------------------------------------ YOLO row: one ring
def _row_read(rows: Sequence[np.ndarray], hw: tuple[int, int], meta: Mapping[str, Any], where: Sequence[str]) -> tuple[np.ndarray, dict[str, Any]]:
    scale = xy_scale(hw)
    rings = [np.clip(r.reshape(-1, 2) * scale, 0, scale) for r in rows]
    boxes = np.stack([np.concatenate([q.min(0), q.max(0)]) for q in rings]) if rings else np.zeros((0, 4))
    return boxes, {"polygons": Polygons.from_rings(rings, list(range(len(rings))))}


def _row_write(values: Mapping[str, Any], boxes: np.ndarray, hw: tuple[int, int], meta: Mapping[str, Any]) -> list[list[float]]:
    """One row per instance: its first ring (a YOLO row holds one outline)."""
    p: Polygons = values["polygons"]
    owner = p.ring_owner
    first = {int(o): r for r, o in reversed(list(enumerate(owner)))}
    scale = xy_scale(hw)
    return [(p.ring(first[i]) / scale).reshape(-1).tolist() for i in range(len(boxes))]


POLYGON_ROWS = YoloRows(
    kind="polygon",
    need=lambda meta: "1 + 2k fields with k >= 3 (c x1 y1 ... xk yk)",
    accepts=lambda count, meta: count >= 6 and count % 2 == 0,
    read=_row_read,
    write=_row_write,
)


# ------------------------------------------------------------------ COCO: segmentation rings
def _coco_read(ann: Mapping[str, Any], hw: tuple[int, int], meta: Mapping[str, Any], crowd: bool, bad: Any) -> list[np.ndarray] | None:
    if crowd:
        return []  # an ignore region: its box only
    rings = ann_rings(ann, hw, bad)
    return rings or None  # empty polygons or an empty RLE mask: no ring to train the mask on


def _coco_write(values: Mapping[str, Any], n: int, meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    p: Polygons | None = values.get("polygons")
    if p is None:
        return [{} for _ in range(n)]
    area = np.zeros(n)
    np.add.at(area, p.ring_owner, polygon_areas(p))
    segs: list[list[list[float]]] = [[] for _ in range(n)]
    for r in range(p.num_rings):
        segs[int(p.ring_owner[r])].append(p.ring(r).astype(np.float64).reshape(-1).tolist())
    return [{"segmentation": segs[j], "area": float(area[j])} for j in range(n)]


POLYGON_COCO = CocoRule(
    read=_coco_read,
    join=lambda values, boxes, meta: {"polygons": joined_polygons(values)},
    write=_coco_write,
)


FIELD = FieldSpec(
    name="polygons",
    attrs=(AttrSpec("polygons", ragged=True),),
    packed=("poly_points", "poly_ring_lengths", "poly_ring_owner"),
    pack=_pack_polygons, unpack=_unpack_polygons,
    affine=_polygons_affine, flip=_polygons_flip, cutout=_polygons_cutout,
    yolo=POLYGON_ROWS, coco=POLYGON_COCO, dota=lambda corners: {"polygons": corners_to_polygons(corners)},
    synth="lucidyolo.tasks.segment.synthetic:SCENE",
)
register_field(FIELD)
