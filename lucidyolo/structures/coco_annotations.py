"""The COCO rules of the built-in fields: polygons and rotated boxes from ``segmentation``, keypoints, crowd flags.

Polygon rings come from ``segmentation`` (polygon lists; a non-crowd RLE mask
is traced to its exact pixel outline). A polygon task drops an annotation
without a ring (nothing to train the mask on); a rotated-box task fits the
minimum-area rectangle to the rings and falls back to the axis-aligned box.
Keypoints are ``x, y, v`` triplets of the ``person_keypoints`` convention; K,
the left/right flip pairs and the skeleton come from the categories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.errors import DataError
from lucidyolo.structures.field_io import CocoRule
from lucidyolo.structures.geometry import (
    canonicalize_rboxes,
    min_area_rboxes_of_polygons,
    polygon_areas,
)
from lucidyolo.structures.polygons import Polygons
from lucidyolo.structures.rle_polygons import rle_to_rings


def ann_rings(ann: Mapping[str, Any], hw: tuple[int, int], bad: Any) -> list[np.ndarray]:
    """The rings ``(n, 2)`` float64 of an annotation's ``segmentation`` (polygon lists or an RLE mask)."""
    seg = ann.get("segmentation")
    rings: list[np.ndarray] = []
    if isinstance(seg, list):
        for ring in seg:
            arr = np.asarray(ring, dtype=np.float64)
            if arr.size >= 6 and arr.size % 2 == 0:
                if not np.all(np.isfinite(arr)):
                    raise bad("segmentation contains NaN or infinity.", "Fix or remove the annotation.")
                rings.append(arr.reshape(-1, 2))
    elif isinstance(seg, dict):
        # Non-crowd RLE (mask exports): masks travel as rings only, so trace its
        # exact pixel outlines (holes filled, see rle_polygons).
        try:
            rings = rle_to_rings(seg, hw[0], hw[1])
        except ValueError as exc:
            raise bad(f"segmentation RLE is malformed ({exc}).",
                      "Write the RLE as {'size': [height, width], 'counts': ...} of this image.") from None
    return rings


def _joined_polygons(values: Sequence[list[np.ndarray]]) -> Polygons:
    rings = [r for rs in values for r in rs]
    owners = [i for i, rs in enumerate(values) for _ in rs]
    return Polygons.from_rings(rings, owners)


# ------------------------------------------------------------------- polygons
def _polygon_read(ann: Mapping[str, Any], hw: tuple[int, int], meta: Mapping[str, Any], crowd: bool, bad: Any) -> list[np.ndarray] | None:
    if crowd:
        return []  # an ignore region: its box only
    rings = ann_rings(ann, hw, bad)
    return rings or None  # empty polygons or an empty RLE mask: no ring to train the mask on


def _polygon_write(values: Mapping[str, Any], n: int, meta: Mapping[str, Any]) -> list[dict[str, Any]]:
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
    read=_polygon_read,
    join=lambda values, boxes, meta: {"polygons": _joined_polygons(values)},
    write=_polygon_write,
)


# --------------------------------------------------------------------- rboxes
def _rbox_read(ann: Mapping[str, Any], hw: tuple[int, int], meta: Mapping[str, Any], crowd: bool, bad: Any) -> list[np.ndarray]:
    return [] if crowd else ann_rings(ann, hw, bad)


def _rbox_join(values: Sequence[list[np.ndarray]], boxes: np.ndarray, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The minimum-area rectangle of each instance's rings; an instance without one keeps its axis-aligned box."""
    n = len(values)
    polys = _joined_polygons(values)
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


def _rbox_write(values: Mapping[str, Any], n: int, meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    r = values.get("rboxes")
    if r is None:
        return [{} for _ in range(n)]
    return [{"rbox": r[j].astype(np.float64).tolist(), "area": float(np.float64(r[j, 2] * r[j, 3]))} for j in range(n)]


RBOX_COCO = CocoRule(read=_rbox_read, join=_rbox_join, write=_rbox_write)


# ------------------------------------------------------------------ keypoints
def keypoint_flip_idx(names: list[str]) -> list[int]:
    """Horizontal-flip permutation from ``left_*`` / ``right_*`` keypoint names.

    ``left_eye`` <-> ``right_eye``; names without a partner map to themselves.
    """
    index = {n: i for i, n in enumerate(names)}
    flip = list(range(len(names)))
    for i, n in enumerate(names):
        for a, b in (("left_", "right_"), ("right_", "left_"), ("l_", "r_"), ("r_", "l_")):
            if n.startswith(a) and (b + n[len(a) :]) in index:
                flip[i] = index[b + n[len(a) :]]
                break
    return flip


def keypoint_skeleton(data: dict[str, Any], cat_ids: list[int], k: int | None) -> list[list[int]] | None:
    """The limbs of a pose file's first keypoint category as 0-based point pairs, or ``None`` when it declares none.

    COCO numbers the points of a ``skeleton`` pair from 1. A pair naming a point
    outside ``1..K`` is left out rather than refused: the skeleton is only drawn,
    and a schema's drawing is no reason to stop its training.
    """
    if not k or not cat_ids:
        return None
    cat = next((c for c in data["categories"] if int(c["id"]) == cat_ids[0]), {})
    pairs = cat.get("skeleton")
    if not isinstance(pairs, list):
        return None
    return [[int(p[0]) - 1, int(p[1]) - 1] for p in pairs
            if isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(v, int) and 1 <= v <= k for v in p)]


def _pose_categories(cats: list[dict[str, Any]], ann_file: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The categories that name keypoints (one schema), and K, flip pairs and skeleton of the lowest-id one."""
    cats = [c for c in cats if c.get("keypoints")]
    if not cats:
        raise DataError(
            f"{ann_file} declares no category with 'keypoints'.",
            why="pose training needs keypoint names (COCO person_keypoints_*.json).",
            fix="Use the person_keypoints_{split}.json file for pose, or another task.",
        )
    if len({tuple(c["keypoints"]) for c in cats}) != 1:
        raise DataError(f"{ann_file}: categories declare different keypoint lists.", fix="Use one keypoint schema per dataset.")
    first = min(cats, key=lambda c: int(c["id"]))
    names = list(first["keypoints"])
    k = len(names)
    return cats, {"num_keypoints": k, "flip_idx": keypoint_flip_idx(names),
                  "skeleton": keypoint_skeleton({"categories": [first]}, [int(first["id"])], k)}


def _pose_read(ann: Mapping[str, Any], hw: tuple[int, int], meta: Mapping[str, Any], crowd: bool, bad: Any) -> np.ndarray:
    k = int(meta["num_keypoints"])
    kp = np.asarray(ann.get("keypoints") or [0.0] * (3 * k), dtype=np.float32)
    if kp.size != 3 * k:
        raise bad(f"has {kp.size} keypoint numbers, expected {3 * k} (K={k} x 3).", "Write x, y, v for every keypoint.")
    return kp.reshape(k, 3)


def _pose_join(values: Sequence[np.ndarray], boxes: np.ndarray, meta: Mapping[str, Any]) -> dict[str, Any]:
    k = int(meta["num_keypoints"])
    kp3 = np.stack(values).astype(np.float32) if len(values) else np.zeros((0, k, 3), np.float32)
    return {"keypoints": kp3[..., :2].copy(), "visibility": kp3[..., 2].copy()}


def _pose_write(values: Mapping[str, Any], n: int, meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    kp, vis = values.get("keypoints"), values.get("visibility")
    if kp is None or vis is None:
        return [{} for _ in range(n)]
    out = []
    for j in range(n):
        flat = np.concatenate([kp[j], vis[j][:, None]], 1).astype(np.float64)
        out.append({"keypoints": flat.reshape(-1).tolist(), "num_keypoints": int((vis[j] > 0).sum())})
    return out


POSE_COCO = CocoRule(
    read=_pose_read,
    join=_pose_join,
    categories=_pose_categories,
    ann_prefix="person_keypoints",
    write=_pose_write,
    write_category=lambda meta: {"keypoints": [f"kp{i}" for i in range(int(meta["num_keypoints"]))], "skeleton": []}
    if meta.get("num_keypoints") else {},
)


# ---------------------------------------------------------------------- crowd
CROWD_COCO = CocoRule(
    read=lambda ann, hw, meta, crowd, bad: crowd,
    join=lambda values, boxes, meta: {"crowd": np.asarray(values, bool)},
)
